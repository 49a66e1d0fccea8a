package main

// The command line: the usage text, dispatch to the commands, the exit
// codes and the flag helpers every command uses.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"strconv"
	"strings"

	"github.com/switchbridge/switchbridge/bridge/version"
)

// DefaultConfig is where a packaged install keeps its config.
const DefaultConfig = "/etc/switchbridge/config.yaml"

const usage = `usage: switchbridge COMMAND [flags]

commands:
  serve                       run the hub
  check-config                check a config; list every problem with its line
  user add NAME --location ID [--location ID...]
                              add a user (password from stdin, or prompted on a terminal)
  user list                   list users
  user passwd NAME            set a user's password
  user delete NAME            delete a user and uninstall everything they installed (refused while they own apps)
  user locations NAME [--add ID...] [--remove ID...]
                              change a user's locations; --remove uninstalls what they installed there
  app create --name NAME --redirect-uri URI [--redirect-uri URI...] --owner USER [--publish] [--require-pkce]
             [--legacy] [--access-token-lifetime DURATION] [--json]
                              register an app; prints its client_id and client_secret (shown only now);
                              --require-pkce refuses its authorizations without PKCE; --legacy accepts
                              its access tokens in the query string (see "Legacy apps" in bridge/oauth/README.md);
                              --access-token-lifetime (e.g. 1h) replaces oauth.token_lifetime for it
  app publish CLIENT_ID       let any user install the app
  app legacy CLIENT_ID on|off accept the app's access tokens in the query string, or stop
  app access-token-lifetime CLIENT_ID DURATION|default
                              set the lifetime of the app's access tokens issued from now on
  app list                    list apps
  app rotate-secret CLIENT_ID [--json]
                              give an app a new client_secret (shown only now); the old one stops working at once
  app delete CLIENT_ID        delete an app and uninstall it everywhere
  install --client-id ID --user NAME --location ID --switch SWITCH_ID [--switch ...] [--json]
                              install an app without the OAuth flow, for its developer; prints an API token
                              and the installation's endpoint URL
  installation list [--user NAME] [--app CLIENT_ID]
                              list installations: app, user, location, switches, when granted and last used
  installation delete ID      uninstall one installation
  version                     print the version, the commit and the Go release it was built with (also --version)
  backup FILE                 write a consistent copy of the hub's database (switch values included) to FILE,
                              also while the hub runs; see "Backups and restore" in systemd/README.md
` + hubUsage + `
every command takes --config FILE (default ` + DefaultConfig + `)
commands that take access away apply to a running hub at once: its tokens stop working at its next request
`

// errUsage marks a command line that is wrong: exit code 2.
var errUsage = errors.New("usage")

type cli struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	// hangup carries reload requests (SIGHUP) to serve; nil in-process,
	// where nothing asks for reloads.
	hangup *reloadRequests
}

// run runs the command in args and returns its exit code: 0, 1 for an
// error, 2 for a wrong command line. hangup carries reload requests
// (SIGHUP) to serve; nil in-process, where nothing asks for reloads.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, hangup *reloadRequests) int {
	c := &cli{stdin: stdin, stdout: stdout, stderr: stderr, hangup: hangup}
	err := c.dispatch(ctx, args)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errUsage):
		if msg := strings.TrimPrefix(err.Error(), errUsage.Error()); msg != "" {
			fmt.Fprintln(stderr, "switchbridge:"+strings.TrimPrefix(msg, ":"))
		}
		fmt.Fprint(stderr, usage)
		return 2
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintln(stderr, "switchbridge:", err)
		if args[0] != "serve" {
			if hint := permissionHint(err); hint != "" {
				fmt.Fprintln(stderr, "switchbridge:", hint)
			}
		}
		return 1
	}
}

// ServiceGroup is the group the packaged service runs as
// (systemd/switchbridge.sysusers); it owns the config.
const ServiceGroup = "switchbridge"

// permissionHint says what to do when an administration command was
// refused a file: on a packaged install the config is root:switchbridge
// 0640 and the data directory belongs to the service's user, so a user
// without sudo gets a bare "permission denied" (or, for the data
// directory, "operation not permitted" from its chmod). It returns "" for
// any other error.
func permissionHint(err error) string {
	if !errors.Is(err, fs.ErrPermission) {
		return ""
	}
	path := "a file"
	var pe *fs.PathError
	if errors.As(err, &pe) {
		path = pe.Path
	}
	if strings.HasPrefix(err.Error(), "reading config") {
		return fmt.Sprintf("permission denied: %s is readable only by root and the %s group. "+
			"Run the command with sudo; check-config also works for members of the group (sudo adduser $USER %s, then log in again)",
			path, ServiceGroup, ServiceGroup)
	}
	return fmt.Sprintf("permission denied: %s belongs to the service's user (the hub's data is private to it). "+
		"Run the command with sudo", path)
}

func usageErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, args...))
}

func (c *cli) dispatch(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errUsage
	}
	cmd, rest := args[0], args[1:]
	sub := ""
	if len(rest) > 0 && (cmd == "user" || cmd == "app" || cmd == "installation" || cmd == "hub") {
		sub, rest = rest[0], rest[1:]
	}
	switch cmd + " " + sub {
	case "serve ":
		return c.serve(ctx, rest)
	case "check-config ":
		return c.checkConfig(rest)
	case "user add":
		return c.userAdd(ctx, rest)
	case "user list":
		return c.userList(ctx, rest)
	case "user passwd":
		return c.userPasswd(ctx, rest)
	case "user delete":
		return c.userDelete(ctx, rest)
	case "user locations":
		return c.userLocations(ctx, rest)
	case "app create":
		return c.appCreate(ctx, rest)
	case "app publish":
		return c.appPublish(ctx, rest)
	case "app legacy":
		return c.appLegacy(ctx, rest)
	case "app access-token-lifetime":
		return c.appAccessTokenLifetime(ctx, rest)
	case "app list":
		return c.appList(ctx, rest)
	case "app rotate-secret":
		return c.appRotateSecret(ctx, rest)
	case "app delete":
		return c.appDelete(ctx, rest)
	case "installation list":
		return c.installationList(ctx, rest)
	case "installation delete":
		return c.installationDelete(ctx, rest)
	case "install ":
		return c.install(ctx, rest)
	case "hub add":
		return c.hubAdd(ctx, rest)
	case "hub list":
		return c.hubList(ctx, rest)
	case "hub rotate-secret":
		return c.hubRotateSecret(ctx, rest)
	case "hub remove":
		return c.hubRemove(ctx, rest)
	case "backup ":
		return c.backup(ctx, rest)
	case "version ", "--version ", "-version ":
		if len(rest) > 0 {
			return usageErr("version takes no arguments")
		}
		fmt.Fprintln(c.stdout, "switchbridge", version.Get())
		return nil
	case "help ", "-h ", "--help ":
		return flag.ErrHelp
	}
	return usageErr("unknown command %q", strings.TrimSpace(cmd+" "+sub))
}

// flags makes a FlagSet with --config; positional arguments may come before
// or after the flags.
type flags struct {
	*flag.FlagSet
	config *string
}

func newFlags(name string) *flags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return &flags{FlagSet: fs, config: fs.String("config", DefaultConfig, "config file")}
}

// parseOne parses args of a command that takes exactly one positional
// argument, described by what ("one NAME"), and returns it.
func (f *flags) parseOne(args []string, what string) (string, error) {
	pos, err := f.parse(args)
	if err != nil {
		return "", err
	}
	if len(pos) != 1 {
		return "", usageErr("%s takes %s", f.Name(), what)
	}
	return pos[0], nil
}

// parse parses args and returns the positional arguments, wherever they were.
func (f *flags) parse(args []string) ([]string, error) {
	var pos []string
	for {
		if err := f.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, flag.ErrHelp
			}
			return nil, usageErr("%s: %v", f.Name(), err)
		}
		args = f.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// stringList is a repeatable flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// locationIDs is a repeatable flag of location ids.
type locationIDs []int64

func (l *locationIDs) String() string { return fmt.Sprint(*l) }
func (l *locationIDs) Set(v string) error {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return fmt.Errorf("%q is not a location id (a positive number)", v)
	}
	*l = append(*l, n)
	return nil
}
