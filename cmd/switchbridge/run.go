package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	sdnotify "github.com/coreos/go-systemd/v22/daemon"

	"golang.org/x/crypto/bcrypt"
	"golang.org/x/term"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/bridge/daemon"
	"github.com/switchbridge/switchbridge/bridge/oauth"
	"github.com/switchbridge/switchbridge/bridge/store"
	"github.com/switchbridge/switchbridge/drivers"
	"github.com/switchbridge/switchbridge/drivers/builtin"
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
  app create --name NAME --redirect-uri URI [--redirect-uri URI...] --owner USER [--publish] [--json]
                              register an app; prints its client_id and client_secret (shown only now)
  app publish CLIENT_ID       let any user install the app
  app list                    list apps
  install --client-id ID --user NAME --location ID --switch SWITCH_ID [--switch ...] [--json]
                              install an app without the OAuth flow, for its developer; prints an API token
                              and the installation's endpoint URL

every command takes --config FILE (default ` + DefaultConfig + `)
`

// errUsage marks a command line that is wrong: exit code 2.
var errUsage = errors.New("usage")

type cli struct {
	stdin          io.Reader
	stdout, stderr io.Writer
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := &cli{stdin: stdin, stdout: stdout, stderr: stderr}
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
		return 1
	}
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
	if len(rest) > 0 && (cmd == "user" || cmd == "app") {
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
	case "app create":
		return c.appCreate(ctx, rest)
	case "app publish":
		return c.appPublish(ctx, rest)
	case "app list":
		return c.appList(ctx, rest)
	case "install ":
		return c.install(ctx, rest)
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

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

type idList []int64

func (l *idList) String() string { return fmt.Sprint(*l) }
func (l *idList) Set(v string) error {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return fmt.Errorf("%q is not a location id (a positive number)", v)
	}
	*l = append(*l, n)
	return nil
}

// openStore loads the config at path and opens the store it names.
func openStore(ctx context.Context, path string) (*store.DB, error) {
	cfg, err := config.Load(path)
	if err != nil {
		return nil, err
	}
	return store.Open(ctx, cfg.DataDir)
}

// ---- serve and check-config

func (c *cli) serve(ctx context.Context, args []string) error {
	f := newFlags("serve")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErr("serve takes no arguments")
	}
	cfg, err := config.Load(*f.config)
	if err != nil {
		return err
	}
	logger := newLogger(cfg, c.stderr)
	d, err := daemon.Open(ctx, cfg, builtin.Registry(), logger)
	if err != nil {
		return err
	}
	defer d.Close()
	metricsAddr := "off"
	if a := d.MetricsAddr(); a != nil {
		metricsAddr = a.String()
	}
	logger.Info("switchbridge ready", "listen", d.Addr().String(), "public_url", d.PublicURL(),
		"metrics_listen", metricsAddr, "switches", len(d.Hub.Switches()))
	if d.DemoURL != "" {
		fmt.Fprintf(c.stdout, "\nswitchbridge demo hub is running. Open %s and log in as %s / %s.\n\n", d.DemoURL, cfg.Demo.User, cfg.Demo.Password)
	}
	// Listeners are bound and drivers open: tell systemd (a no-op outside it).
	if _, err := sdnotify.SdNotify(false, sdnotify.SdNotifyReady); err != nil {
		logger.Warn("telling systemd we are ready", "err", err)
	}
	bg, stopBg := context.WithCancel(ctx)
	var helpers sync.WaitGroup
	helpers.Go(func() { watchdog(bg, d, logger) })
	helpers.Go(func() { reloadOnHangup(bg, d, *f.config, logger) })
	// Before the deferred Close: a reload in progress must end before the
	// drivers it is opening are closed.
	defer helpers.Wait()
	defer stopBg()

	err = d.Serve(ctx)
	sdnotify.SdNotify(false, sdnotify.SdNotifyStopping)
	if err != nil {
		return err
	}
	logger.Info("switchbridge stopped")
	return nil
}

// watchdog pings systemd's watchdog at half its interval, but only while
// the daemon is healthy: a hub whose store no longer answers stops pinging
// and systemd restarts it.
func watchdog(ctx context.Context, d *daemon.Daemon, logger *slog.Logger) {
	interval, err := sdnotify.SdWatchdogEnabled(false)
	if err != nil || interval <= 0 {
		return
	}
	t := time.NewTicker(interval / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := d.Healthy(ctx); err != nil {
			logger.Error("unhealthy: not pinging the watchdog", "err", err)
			continue
		}
		sdnotify.SdNotify(false, sdnotify.SdNotifyWatchdog)
	}
}

// reloadOnHangup re-reads the config on SIGHUP and applies its switches and
// locations. A config with problems is reported and changes nothing.
func reloadOnHangup(ctx context.Context, d *daemon.Daemon, path string, logger *slog.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
		}
		sdnotify.SdNotify(false, sdnotify.SdNotifyReloading)
		cfg, err := config.Load(path)
		if err == nil {
			err = d.Reload(ctx, cfg)
		}
		if err != nil {
			logger.Error("reload refused; still running the previous config", "err", err)
		}
		sdnotify.SdNotify(false, sdnotify.SdNotifyReady)
	}
}

func newLogger(cfg *config.Config, w io.Writer) *slog.Logger {
	var level slog.Level
	level.UnmarshalText([]byte(cfg.Log.Level)) // checked by config
	opts := &slog.HandlerOptions{Level: level}
	if cfg.Log.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func (c *cli) checkConfig(args []string) error {
	f := newFlags("check-config")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErr("check-config takes no arguments; use --config FILE")
	}
	cfg, ps, err := config.LoadAll(*f.config)
	if err != nil {
		return err
	}
	// The drivers' own keys are checked even when the rest has problems, so
	// one run lists everything there is to fix.
	if cfg != nil {
		_, derr := drivers.Build(cfg, builtin.Registry(), drivers.Env{})
		ps.Merge(derr, 0)
	}
	if err := ps.Err(); err != nil {
		return err
	}
	n := 0
	for _, l := range cfg.Locations {
		n += len(l.Switches)
	}
	fmt.Fprintf(c.stdout, "%s: ok (%d locations, %d switches)\n", *f.config, len(cfg.Locations), n)
	return nil
}

// ---- users

func (c *cli) userAdd(ctx context.Context, args []string) error {
	f := newFlags("user add")
	var locs idList
	f.Var(&locs, "location", "location id the user belongs to (repeatable)")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErr("user add takes one NAME")
	}
	if len(locs) == 0 {
		return usageErr("user add needs at least one --location ID")
	}
	name := pos[0]
	if err := validName(name); err != nil {
		return err
	}
	cfg, err := config.Load(*f.config)
	if err != nil {
		return err
	}
	for _, l := range locs {
		if !hasLocation(cfg, l) {
			return fmt.Errorf("location %d is not in %s", l, cfg.File)
		}
	}
	pw, err := c.password("Password for " + name)
	if err != nil {
		return err
	}
	db, err := store.Open(ctx, cfg.DataDir)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.CreateUser(ctx, name, pw, locs); err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "user %s added\n", name)
	return nil
}

func validName(name string) error {
	if name == "" || len(name) > 64 || strings.ContainsAny(name, " \t\r\n") {
		return usageErr("user name %q must be 1-64 characters without spaces", name)
	}
	return nil
}

func hasLocation(cfg *config.Config, id int64) bool {
	for _, l := range cfg.Locations {
		if l.ID == id {
			return true
		}
	}
	return false
}

// password reads a new password: prompted twice without echo on a terminal,
// else the first line of stdin. It returns the bcrypt hash.
func (c *cli) password(prompt string) ([]byte, error) {
	var pw string
	if f, ok := c.stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprint(c.stderr, prompt+": ")
		a, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(c.stderr)
		if err != nil {
			return nil, err
		}
		fmt.Fprint(c.stderr, "Again: ")
		b, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(c.stderr)
		if err != nil {
			return nil, err
		}
		if string(a) != string(b) {
			return nil, errors.New("the passwords differ")
		}
		pw = string(a)
	} else {
		line, err := bufio.NewReader(io.LimitReader(c.stdin, 4096)).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("reading the password from stdin: %w", err)
		}
		pw = strings.TrimRight(line, "\r\n")
	}
	switch {
	case len(pw) < 4:
		return nil, errors.New("the password must be at least 4 characters")
	case len(pw) > 72:
		return nil, errors.New("the password must be at most 72 bytes (a bcrypt limit)")
	}
	return bcrypt.GenerateFromPassword([]byte(pw), bcrypt.DefaultCost)
}

func (c *cli) userList(ctx context.Context, args []string) error {
	f := newFlags("user list")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErr("user list takes no arguments")
	}
	db, err := openStore(ctx, *f.config)
	if err != nil {
		return err
	}
	defer db.Close()
	users, err := db.Users(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tLOCATIONS")
	for _, u := range users {
		fmt.Fprintf(tw, "%s\t%s\n", u.Name, joinIDs(u.Locations))
	}
	return tw.Flush()
}

func joinIDs(ids []int64) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(parts, ",")
}

func (c *cli) userPasswd(ctx context.Context, args []string) error {
	f := newFlags("user passwd")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErr("user passwd takes one NAME")
	}
	db, err := openStore(ctx, *f.config)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.UserByName(ctx, pos[0]); err != nil {
		return errors.New(bridge.ErrorMessage(err))
	}
	pw, err := c.password("New password for " + pos[0])
	if err != nil {
		return err
	}
	if err := db.SetPassword(ctx, pos[0], pw); err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "password of %s changed\n", pos[0])
	return nil
}

// ---- apps

func (c *cli) appCreate(ctx context.Context, args []string) error {
	f := newFlags("app create")
	name := f.String("name", "", "the app's display name")
	owner := f.String("owner", "", "the developer's user name")
	publish := f.Bool("publish", false, "let any user install it")
	asJSON := f.Bool("json", false, "print JSON")
	var uris stringList
	f.Var(&uris, "redirect-uri", "a redirect URI (repeatable)")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) > 0:
		return usageErr("app create takes no arguments")
	case strings.TrimSpace(*name) == "":
		return usageErr("app create needs --name")
	case len(uris) == 0:
		return usageErr("app create needs at least one --redirect-uri")
	case *owner == "":
		return usageErr("app create needs --owner USER")
	}
	for _, u := range uris {
		if err := oauth.ValidRedirectURI(u); err != nil {
			return usageErr("%v", err)
		}
	}
	db, err := openStore(ctx, *f.config)
	if err != nil {
		return err
	}
	defer db.Close()
	u, err := db.UserByName(ctx, *owner)
	if err != nil {
		return fmt.Errorf("owner: %s", bridge.ErrorMessage(err))
	}
	id, secret := oauth.NewClientID(), oauth.NewSecret()
	app := &bridge.App{ClientID: id, Name: *name, SecretHash: oauth.Hash(secret), RedirectURIs: uris, OwnerID: u.ID, Published: *publish}
	if err := db.CreateApp(ctx, app); err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(c.stdout).Encode(map[string]string{"client_id": id, "client_secret": secret})
	}
	fmt.Fprintf(c.stdout, "client_id:     %s\nclient_secret: %s\n(the secret is shown only now; it is stored hashed)\n", id, secret)
	return nil
}

func (c *cli) appPublish(ctx context.Context, args []string) error {
	f := newFlags("app publish")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErr("app publish takes one CLIENT_ID")
	}
	db, err := openStore(ctx, *f.config)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := db.PublishApp(ctx, pos[0]); err != nil {
		return errors.New(bridge.ErrorMessage(err))
	}
	fmt.Fprintf(c.stdout, "app %s published\n", pos[0])
	return nil
}

func (c *cli) appList(ctx context.Context, args []string) error {
	f := newFlags("app list")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErr("app list takes no arguments")
	}
	db, err := openStore(ctx, *f.config)
	if err != nil {
		return err
	}
	defer db.Close()
	apps, err := db.Apps(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CLIENT_ID\tNAME\tOWNER\tPUBLISHED\tREDIRECT_URIS")
	for _, a := range apps {
		owner := strconv.FormatInt(a.OwnerID, 10)
		if u, err := db.UserByID(ctx, a.OwnerID); err == nil {
			owner = u.Name
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%s\n", a.ClientID, a.Name, owner, a.Published, strings.Join(a.RedirectURIs, " "))
	}
	return tw.Flush()
}

// ---- install

func (c *cli) install(ctx context.Context, args []string) error {
	f := newFlags("install")
	clientID := f.String("client-id", "", "the app's client id")
	userName := f.String("user", "", "the developer's user name (the app's owner)")
	loc := f.Int64("location", 0, "location id")
	asJSON := f.Bool("json", false, "print JSON")
	var switches stringList
	f.Var(&switches, "switch", "a switch id (repeatable)")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) > 0:
		return usageErr("install takes no arguments")
	case *clientID == "" || *userName == "" || *loc <= 0:
		return usageErr("install needs --client-id, --user and --location")
	case len(switches) == 0:
		return usageErr("install needs at least one --switch")
	}
	cfg, err := config.Load(*f.config)
	if err != nil {
		return err
	}
	var location *config.Location
	for i := range cfg.Locations {
		if cfg.Locations[i].ID == *loc {
			location = &cfg.Locations[i]
		}
	}
	if location == nil {
		return fmt.Errorf("location %d is not in %s", *loc, cfg.File)
	}
	inLoc := map[string]bool{}
	for _, s := range location.Switches {
		inLoc[s.ID] = true
	}
	seen := map[string]bool{}
	var ids []string
	for _, s := range switches {
		if !inLoc[s] {
			return fmt.Errorf("switch %q is not in location %d (%s)", s, location.ID, location.Name)
		}
		if !seen[s] {
			seen[s] = true
			ids = append(ids, s)
		}
	}
	db, err := store.Open(ctx, cfg.DataDir)
	if err != nil {
		return err
	}
	defer db.Close()
	app, err := db.App(ctx, *clientID)
	if err != nil {
		return errors.New(bridge.ErrorMessage(err))
	}
	user, err := db.UserByName(ctx, *userName)
	if err != nil {
		return errors.New(bridge.ErrorMessage(err))
	}
	if app.OwnerID != user.ID {
		return fmt.Errorf("install is for an app's developer: %s does not own app %s (others install it through the OAuth flow)", user.Name, app.ClientID)
	}
	if !user.MemberOf(*loc) {
		return fmt.Errorf("user %s does not belong to location %d", user.Name, *loc)
	}
	in := &bridge.Installation{ClientID: app.ClientID, UserID: user.ID, LocationID: *loc, SwitchIDs: ids}
	if err := db.Install(ctx, in); err != nil {
		return err
	}
	token := oauth.NewSecret()
	expires := in.UpdatedAt.Add(cfg.OAuth.TokenLifetime.Std())
	if err := db.CreateToken(ctx, oauth.Hash(token), in.ID, expires); err != nil {
		return err
	}
	endpoint := cfg.AdvertisedURL("") + oauth.InstallationPath(in.ID)
	if *asJSON {
		return json.NewEncoder(c.stdout).Encode(map[string]string{"token": token, "endpoint": endpoint})
	}
	fmt.Fprintf(c.stdout, "API token:    %s\nAPI endpoint: %s\n(expires %s)\n", token, endpoint, expires.Format("2006-01-02 15:04 MST"))
	return nil
}
