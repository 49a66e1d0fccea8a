package main

// The command table: every command's name, arguments, help and flags, and
// whether it opens the store. Dispatch, "switchbridge help", each
// command's --help, each group's listing and the command table of README.md here
// all come from it.

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/switchbridge/switchbridge/drivers/mqtt"
)

// storeUse says what a command opens before it runs.
type storeUse int

const (
	// noStore: the command reads the config itself, if at all.
	noStore storeUse = iota
	// anyStore: the config's store, on a platform or a hub.
	anyStore
	// platformStore: the store of a platform; refused on a hub's config,
	// whose database holds only a replica of the platform's records.
	platformStore
)

// command is one entry of the table.
type command struct {
	// Name is the words that call it: "serve", "app create".
	Name string
	// Args are its positional arguments, one word each ("CLIENT_ID
	// on|off"); a command takes exactly these.
	Args string
	// Short says what it does in a line; Long, when set, says more in
	// --help and in README.md here.
	Short, Long string
	Store       storeUse
	// Required are the flags it cannot run without.
	Required []string
	// Setup defines the command's flags (--config is there already) and
	// returns what runs it.
	Setup func(fs *flag.FlagSet) func(*invocation) error
}

// commands is the command line, in the order help lists it.
var commands = []command{
	{Name: "serve", Short: "runs the hub",
		Long:  "Refuses to start, with the reason, on an invalid config, a data dir it cannot write, a full disk, a damaged, missing or emptied database (see \"When storage goes wrong\" in systemd/README.md), or a port in use. Prints the demo URL when the config has a demo section.",
		Setup: func(*flag.FlagSet) func(*invocation) error { return serve }},
	{Name: "check-config", Short: "checks a config without serving it",
		Long:  "Checks every key, the drivers' included, without touching hardware, and lists every problem as file:line: message (exit 1), then the warnings. Also checks what serve checks before it binds its listeners: each listen address's syntax and that its host is an address of this machine, and that the TLS files load; and that no other program holds the port of server.listen, server.metrics_listen or mqtt.listen (a port the running daemon of this config's database holds is only a warning, so a check before a reload passes). Warns too, as serve does in its log, when a TLS key, platform.secret_file, storage.postgres.dsn_file or the MQTT client key can be read by users other than its owner and group, and when a listener the network reaches has no server.tls or no public_url clients can use.",
		Setup: func(*flag.FlagSet) func(*invocation) error { return checkConfig }},
	{Name: "user add", Args: "NAME", Short: "adds a user who may install apps into the given locations", Store: platformStore, Required: []string{"location"},
		Long:  "The password is read from stdin when it is not a terminal, else prompted for twice. --owner makes the user an owner, who may use the console too (see user owner).",
		Setup: userAdd},
	{Name: "user list", Short: "lists users, their locations and whether each is an owner", Store: platformStore,
		Setup: func(*flag.FlagSet) func(*invocation) error { return userList }},
	{Name: "user passwd", Args: "NAME", Short: "sets a user's password, read as for user add; ends their login sessions", Store: platformStore,
		Setup: func(*flag.FlagSet) func(*invocation) error { return userPasswd }},
	{Name: "user owner", Args: "NAME on|off", Short: "makes a user an owner, who may use the console (the owner's web pages), or takes that away", Store: platformStore,
		Long:  "A user who is not an owner only installs apps.",
		Setup: func(*flag.FlagSet) func(*invocation) error { return userOwner }},
	{Name: "user delete", Args: "NAME", Short: "deletes a user and uninstalls everything they installed", Store: platformStore,
		Long:  "Refused while the user owns apps: delete or hand over those first.",
		Setup: func(*flag.FlagSet) func(*invocation) error { return userDelete }},
	{Name: "user locations", Args: "NAME", Short: "changes the locations a user belongs to", Store: platformStore,
		Long:  "--remove uninstalls what the user installed in that location; removals come before additions.",
		Setup: userLocations},
	{Name: "app create", Short: "registers an app and prints its client_id and client_secret, the secret only this once", Store: platformStore,
		Required: []string{"name", "redirect-uri", "owner"},
		Long: "A redirect URI must be absolute, without fragment or user information, http, https or a reverse-domain private-use scheme (com.example.app:/cb), its query without code, state, error or iss. " +
			"--publish lets every user install it; --require-pkce makes its authorizations need an S256 code_challenge and its codes a code_verifier; " +
			"--legacy accepts its access tokens in the query string (see \"Legacy apps\" in bridge/platform/oauth/README.md); --access-token-lifetime (such as 1h) replaces oauth.token_lifetime for it; --json prints the id and secret as an object.",
		Setup: appCreate},
	{Name: "app list", Short: "lists apps: owner, published, PKCE, legacy, token lifetime, redirect URIs (never secrets)", Store: platformStore,
		Setup: func(*flag.FlagSet) func(*invocation) error { return appList }},
	{Name: "app publish", Args: "CLIENT_ID", Short: "lets every user install the app, not only its owner", Store: platformStore,
		Setup: func(*flag.FlagSet) func(*invocation) error { return appSetPublished(true) }},
	{Name: "app unpublish", Args: "CLIENT_ID", Short: "lets only the app's owner install it from now on", Store: platformStore,
		Long:  "Installations made while it was published keep working; remove them with installation delete.",
		Setup: func(*flag.FlagSet) func(*invocation) error { return appSetPublished(false) }},
	{Name: "app legacy", Args: "CLIENT_ID on|off", Short: "accepts the app's access tokens in the query string, or stops", Store: platformStore,
		Long:  "See \"Legacy apps\" in bridge/platform/oauth/README.md. A running hub applies it at the next request.",
		Setup: func(*flag.FlagSet) func(*invocation) error { return appLegacy }},
	{Name: "app access-token-lifetime", Args: "CLIENT_ID DURATION|default", Short: "sets the lifetime of the app's access tokens issued from now on", Store: platformStore,
		Long:  "DURATION is a whole number of seconds or more, such as 90s, 1h or 2160h; default returns to oauth.token_lifetime.",
		Setup: func(*flag.FlagSet) func(*invocation) error { return appAccessTokenLifetime }},
	{Name: "app rotate-secret", Args: "CLIENT_ID", Short: "gives the app a new client_secret, shown only now; the old one stops working at once", Store: platformStore,
		Long:  "Tokens already issued keep working.",
		Setup: appRotateSecret},
	{Name: "app delete", Args: "CLIENT_ID", Short: "deletes the app and uninstalls it everywhere", Store: platformStore,
		Setup: func(*flag.FlagSet) func(*invocation) error { return appDelete }},
	{Name: "install", Short: "installs an app without the OAuth flow, for its developer, and prints an API token and the endpoint URL", Store: platformStore,
		Required: []string{"client-id", "user", "location", "switch"},
		Long:     "The user must own the app; the consent page's rules apply. --see-only grants one of the switches to be seen but not switched.",
		Setup:    install},
	{Name: "installation list", Short: "lists installations: app, user, location, switches (see-only ones marked), when granted and last used, webhooks (active, failing, suspended, disabled)", Store: platformStore,
		Setup: installationList},
	{Name: "installation see-only", Args: "ID on|off", Short: "lets the installation's app see a switch but not switch it (on), or switch it again (off)", Store: platformStore,
		Required: []string{"switch"},
		Long:     "A command to a see-only switch is refused with 403, also on a running hub and on a hub of this platform.",
		Setup:    installationSeeOnly},
	{Name: "installation switches", Args: "ID", Short: "changes which switches of its location an installation grants, and which of them are see-only; its tokens keep working with the new grant", Store: platformStore,
		Required: []string{"switch"},
		Long:     "The consent page's rules apply, as when its user changes them on the connected apps page: switches of the installation's location the user may grant. The owner's console does the same.",
		Setup:    installationSwitches},
	{Name: "installation delete", Args: "ID", Short: "uninstalls one installation; its tokens stop working at once, also on a running hub", Store: platformStore,
		Setup: func(*flag.FlagSet) func(*invocation) error { return installationDelete }},
	{Name: "audit", Short: "lists the commands apps sent to this hub's switches, newest first: time, installation, app, user, switch, command, outcome, latency, request id", Store: anyStore,
		Long: "One record per switch of each command, kept for audit.max_age and at most audit.max_rows. Outcomes: ok; failed, timeout or unavailable (the device did not confirm); " +
			"see_only, unsupported or rate_limited for the switch a refusal names, and not_sent for the others of that command (nothing was sent). The request id is the answer's X-Request-Id. " +
			"Requests refused before any command (401, the installation's 429, 400, 404) are not recorded. --limit defaults to 100 (0: all). " +
			"Each hub keeps its own log: on a platform, run it on the hub (hub list names them).",
		Setup: auditList},
	{Name: "hub add", Args: "NAME", Short: "registers a hub with this platform and prints its hub_id and secret, the secret only this once", Store: platformStore,
		Required: []string{"base-url"},
		Setup:    hubAdd},
	{Name: "hub list", Short: "lists hubs: link state, last seen, version, locations, replica lag", Store: platformStore,
		Long:  "And, for a day, a second process with a hub's credentials that the platform refused (see \"Several hubs\" in bridge/link/README.md).",
		Setup: hubList},
	{Name: "hub rotate-secret", Args: "ID", Short: "gives a hub a new secret, shown only now; the old one stops working at once", Store: platformStore,
		Setup: hubRotateSecret},
	{Name: "hub remove", Args: "ID", Short: "unregisters a hub and uninstalls every installation in its locations", Store: platformStore,
		Setup: func(*flag.FlagSet) func(*invocation) error { return hubRemove }},
	{Name: "mqtt client-ids", Short: "lists the embedded MQTT broker's client ids and the plug login each belongs to", Store: anyStore,
		Long:  "A client id belongs to the first login that connected with it; another login is refused it (identifier rejected), while its plug is offline too. Client ids listed in mqtt.users.<login>.client_ids are that login's whatever this lists. See \"Broker logins and topic rules\" in drivers/mqtt/README.md.",
		Setup: mqttClientIDs},
	{Name: "mqtt release-client-id", Args: "ID", Short: "frees a client id of the embedded MQTT broker: the next login to connect with it keeps it", Store: anyStore,
		Long:  "For a plug moved to another login, or replaced by one reusing its client id. A running hub applies it at the next connection; a client connected with the id stays connected. Listing the id under the new login's client_ids does the same from the config.",
		Setup: mqttReleaseClientID},
	{Name: "devices", Short: "lists the devices the hub discovered on its MQTT broker: id, firmware, model, name, topics, online, the switch entry that would use each and the switch already using it", Store: anyStore,
		Long:  "The running hub keeps the list in its database; the switch using a device is looked up in the config file. --json prints it as an array. See \"Discovery\" in drivers/mqtt/README.md.",
		Setup: devicesList},
	{Name: "devices listen", Short: "opens the embedded MQTT broker's onboarding login for a while (--for, default 10m, at most 24h; --off closes it), so that a device not yet adopted can log in to announce itself", Store: anyStore,
		Long: "Prints the login (" + mqtt.OnboardingLogin + "), a new password shown only then, and what to type on a device. An onboarding client may publish only its announcement and its last will, never on a configured switch's topics, and receives no command; " +
			"the running hub reads the window at each onboarding login (no reload), and disconnects its clients within seconds of its end. With your own broker the hub only listens: nothing to open. See \"Discovery\" in drivers/mqtt/README.md.",
		Setup: devicesListen},
	{Name: "devices adopt", Args: "ID", Short: "adds a discovered device's switch entry to a location of the config file", Store: anyStore, Required: []string{"location"},
		Long: "Only that entry is inserted (and, with the embedded broker, the plug's login under mqtt.users, its password printed once): every other line and comment stays as it was. " +
			"The new file must pass check-config before it replaces the old one, which is kept as config.yaml.bak (of the previous adoption, the one before). " +
			"Refused, the file untouched, for an unknown device, a device a switch already uses, a location not in the config and a switch id taken. Then reload the hub (sudo systemctl reload switchbridge).",
		Setup: devicesAdopt},
	{Name: "devices setup", Args: "SWITCH_ID", Short: "prints what to set on a configured switch's device so it reaches this hub: host, port, login, topic", Store: noStore,
		Long:  "For its firmware (Tasmota console, Shelly settings or RPC, Zigbee2MQTT's configuration.yaml, ESPHome's mqtt: component). The password only with --show-password. See \"Setting up a device\" in drivers/mqtt/README.md.",
		Setup: devicesSetup},
	{Name: "version", Short: "prints the version, the commit and the Go release it was built with (also --version)",
		Long:  "For example switchbridge v1.2.3 (commit 2e0fa4e…, go1.26.8); -dirty after the commit marks a build with uncommitted changes. The start-up log line, the switchbridge_build_info metric and the version a hub reports to its platform (hub list) say the same.",
		Setup: func(*flag.FlagSet) func(*invocation) error { return printVersion }},
	{Name: "backup", Args: "FILE", Short: "writes a consistent copy of the database, switch values included, to a new FILE, also while the hub runs", Store: anyStore,
		Long:  "See \"Backups and restore\" in systemd/README.md.",
		Setup: func(*flag.FlagSet) func(*invocation) error { return backup }},
	{Name: "migrate-storage", Short: "moves a platform's records from SQLite into a new PostgreSQL database, once", Required: []string{"to"},
		Long: "Stop the platform first: refused while another process has the SQLite database open. --from sqlite:PATH names a data directory or its database (default: data_dir); " +
			"--to postgres the database of storage.postgres.dsn_file, or of --to-dsn-file FILE. Refused on a hub's config (a hub keeps its SQLite) and into a database holding any switchbridge record (it never merges). " +
			"One transaction: on any error the PostgreSQL database is left as it was. Prints the rows copied per table, checked against SQLite's; tokens stay valid and hubs resume without a snapshot. " +
			"Then leaves moved-to-postgresql beside the SQLite database, which serve and the other commands refuse from then on (remove the file to use it anyway). " +
			"See \"Moving a platform to PostgreSQL\" in systemd/README.md.",
		Setup: migrateStorage},
}

// flagSet is a new, silent FlagSet for c: errors are returned and printed
// once, by run.
func (c *command) flagSet() *flag.FlagSet {
	fs := flag.NewFlagSet(c.Name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// flags returns c's flags, --config included, as the command defines them.
func (c *command) flags() *flag.FlagSet {
	fs := c.flagSet()
	fs.String("config", DefaultConfig, "the config `FILE`")
	c.Setup(fs)
	return fs
}

// repeatable marks the flag.Values that may be given more than once.
type repeatable interface{ repeatable() }

func (*stringList) repeatable()  {}
func (*locationIDs) repeatable() {}

// flagSynopsis is "--name NAME", "--switch SWITCH…" for a repeatable flag.
func flagSynopsis(f *flag.Flag) string {
	name, _ := flag.UnquoteUsage(f)
	s := "--" + f.Name
	if name != "" {
		s += " " + name
	}
	if _, ok := f.Value.(repeatable); ok {
		s += "…"
	}
	return s
}

// line is the command's words, arguments and required flags: "app create
// --name NAME --redirect-uri URI… --owner USER"; with optional, its other
// flags too but --config, in brackets.
func (c *command) line(optional bool) string {
	fs := c.flags()
	parts := []string{c.Name}
	if c.Args != "" {
		parts = append(parts, c.Args)
	}
	required := map[string]bool{"config": true}
	for _, r := range c.Required {
		parts = append(parts, flagSynopsis(fs.Lookup(r)))
		required[r] = true
	}
	if optional {
		fs.VisitAll(func(f *flag.Flag) {
			if !required[f.Name] {
				parts = append(parts, "["+flagSynopsis(f)+"]")
			}
		})
	}
	return strings.Join(parts, " ")
}

func (c *command) synopsis() string {
	return "switchbridge " + c.line(false) + " [flags]"
}

// checkArgs checks the positional arguments and the required flags.
func (c *command) checkArgs(fs *flag.FlagSet, pos []string) error {
	want := strings.Fields(c.Args)
	if len(pos) != len(want) {
		if len(want) == 0 {
			return fmt.Errorf("%s takes no arguments, only flags; got %q", c.Name, strings.Join(pos, " "))
		}
		if len(want) == 1 {
			return fmt.Errorf("%s takes one %s; got %d arguments", c.Name, c.Args, len(pos))
		}
		// "CLIENT_ID on|off": "a CLIENT_ID and on or off".
		words := make([]string, len(want))
		for i, w := range want {
			words[i] = strings.ReplaceAll(w, "|", " or ")
		}
		return fmt.Errorf("%s takes a %s; got %d arguments", c.Name, strings.Join(words, " and "), len(pos))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, r := range c.Required {
		if set[r] {
			continue
		}
		f := fs.Lookup(r)
		if _, ok := f.Value.(repeatable); ok {
			return fmt.Errorf("%s needs at least one %s", c.Name, strings.TrimSuffix(flagSynopsis(f), "…"))
		}
		return fmt.Errorf("%s needs %s", c.Name, flagSynopsis(f))
	}
	return nil
}

// writeHelp writes the help h asks for: one command, a group, or all.
func writeHelp(w io.Writer, h helpRequest) {
	switch {
	case h.cmd != nil:
		writeCommandHelp(w, h.cmd)
	case h.group != "":
		fmt.Fprintf(w, "usage: switchbridge %s COMMAND [flags]\n\n%s commands:\n", h.group, h.group)
		writeCommandList(w, h.group)
		fmt.Fprintf(w, "\nRun 'switchbridge %s COMMAND --help' for a command's flags.\n", h.group)
	default:
		fmt.Fprint(w, "usage: switchbridge COMMAND [flags]\n\ncommands:\n")
		writeCommandList(w, "")
		fmt.Fprintf(w, "\nRun 'switchbridge COMMAND --help' for a command's flags, 'switchbridge GROUP --help' for a group's commands.\n"+
			"Every command takes --config FILE (default %s).\n"+
			"Commands that take access away apply to a running hub at once: its tokens stop working at its next request.\n", DefaultConfig)
	}
}

func writeCommandList(w io.Writer, group string) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for i := range commands {
		c := &commands[i]
		if group != "" && !strings.HasPrefix(c.Name, group+" ") {
			continue
		}
		args := c.Name
		if c.Args != "" {
			args += " " + c.Args
		}
		fmt.Fprintf(tw, "  %s\t%s\n", args, c.Short)
	}
	tw.Flush()
}

func writeCommandHelp(w io.Writer, c *command) {
	fmt.Fprintf(w, "usage: %s\n\n%s\n", c.synopsis(), wrap(upperFirst(c.Short)+". "+c.Long, 78))
	switch c.Store {
	case platformStore:
		fmt.Fprint(w, "\nA platform's command: it opens the platform's database and is refused on a\nhub's config.\n")
	case anyStore:
		fmt.Fprint(w, "\nIt opens the database of the config's daemon, which may be running.\n")
	}
	fmt.Fprint(w, "\nflags:\n")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	required := map[string]bool{}
	for _, r := range c.Required {
		required[r] = true
	}
	c.flags().VisitAll(func(f *flag.Flag) {
		_, usage := flag.UnquoteUsage(f)
		switch {
		case required[f.Name]:
			usage += " (required)"
		case !slices.Contains([]string{"", "false", "0", "0s", "[]"}, f.DefValue):
			usage += " (default " + f.DefValue + ")"
		}
		fmt.Fprintf(tw, "  %s\t%s\n", flagSynopsis(f), usage)
	})
	tw.Flush()
}

// wrap breaks text into lines of at most width columns, between words.
func wrap(text string, width int) string {
	var b strings.Builder
	n := 0
	for _, word := range strings.Fields(text) {
		if n > 0 && n+1+len([]rune(word)) > width {
			b.WriteByte('\n')
			n = 0
		} else if n > 0 {
			b.WriteByte(' ')
			n++
		}
		b.WriteString(word)
		n += len([]rune(word))
	}
	return b.String()
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// markdownTable is README.md's command table (this folder's), from the table.
func markdownTable() string {
	var b strings.Builder
	b.WriteString("| command | does |\n| --- | --- |\n")
	for i := range commands {
		c := &commands[i]
		does := c.Short
		if c.Long != "" {
			does += ". " + c.Long
		}
		fmt.Fprintf(&b, "| `%s` | %s |\n", strings.ReplaceAll(c.line(true), "|", `\|`), strings.ReplaceAll(does, "|", `\|`))
	}
	return b.String()
}
