package main

// The command line's machinery: dispatch through the command table
// (commands.go), help and usage from the same table, the exit codes, and
// how an error is printed.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/bridge/daemon"
	"github.com/switchbridge/switchbridge/bridge/hub/hubstore"
	"github.com/switchbridge/switchbridge/bridge/infra/version"
	"github.com/switchbridge/switchbridge/bridge/platform/accounts"
	"github.com/switchbridge/switchbridge/bridge/platform/admin"
	"github.com/switchbridge/switchbridge/bridge/platform/linkserver"
	"github.com/switchbridge/switchbridge/bridge/platform/oauth"
	"github.com/switchbridge/switchbridge/bridge/store"
	"github.com/switchbridge/switchbridge/drivers/mqtt"
)

// DefaultConfig is where a packaged install keeps its config.
const DefaultConfig = "/etc/switchbridge/config.yaml"

// errUsage marks a command line that is wrong: exit code 2.
var errUsage = errors.New("usage")

// usageError is a wrong command line of one command (nil: of none in
// particular), with what is wrong.
type usageError struct {
	cmd   *command
	group string // when cmd is nil: the group the command line named
	msg   string
}

func (e *usageError) Error() string        { return e.msg }
func (e *usageError) Is(target error) bool { return target == errUsage }

func usageErr(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// helpRequest asks for help on a command, a group or (both nil) everything.
type helpRequest struct {
	cmd   *command
	group string
}

func (helpRequest) Error() string { return "help requested" }

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
	var help helpRequest
	var ue *usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &help):
		writeHelp(stdout, help)
		return 0
	case errors.As(err, &ue):
		if ue.msg != "" {
			fmt.Fprintln(stderr, "switchbridge: "+ue.msg)
		}
		switch {
		case ue.cmd != nil:
			fmt.Fprintf(stderr, "usage: %s\nRun 'switchbridge %s --help' for its flags.\n", ue.cmd.synopsis(), ue.cmd.Name)
		case ue.group != "":
			fmt.Fprintf(stderr, "Run 'switchbridge %s --help' for what each does.\n", ue.group)
		default:
			fmt.Fprintln(stderr, "Run 'switchbridge help' for the commands.")
		}
		return 2
	case errors.Is(err, errUsage):
		// Only the overview: the command line named no command.
		writeHelp(stderr, helpRequest{})
		return 2
	default:
		printError(stderr, err, len(args) > 0 && args[0] == "serve")
		return 1
	}
}

// printError prints a failed command's error: every problem of a config
// on a line of its own, as check-config lists them; a domain error by its
// message; anything else with its whole chain, so that the cause (a locked
// database, a full disk, a permission) shows.
// serving: serve runs as the service, so no hint about sudo.
func printError(w io.Writer, err error, serving bool) {
	var ps *config.Problems
	if errors.As(err, &ps) {
		fmt.Fprintln(w, ps.Error())
		return
	}
	fmt.Fprintln(w, "switchbridge: "+errorText(err))
	if hint := permissionHint(err); hint != "" && !serving {
		fmt.Fprintln(w, "switchbridge: "+hint)
	}
}

// errorText is err's message with every domain error shown by its message
// alone: "user "alice" exists already", not "conflict: user ...".
func errorText(err error) string {
	msg := err.Error()
	var be *bridge.Error
	if errors.As(err, &be) {
		msg = strings.Replace(msg, be.Error(), be.Message, 1)
	}
	return msg
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

func (c *cli) dispatch(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errUsage
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		return helpFor(args[1:])
	case "--version", "-version":
		args = append([]string{"version"}, args[1:]...)
	}
	cmd, rest, group := findCommand(args)
	if cmd == nil {
		if group != "" {
			if len(rest) > 0 && isHelpFlag(rest[0]) {
				return helpRequest{group: group}
			}
			if len(rest) == 0 {
				return &usageError{group: group, msg: group + " needs a command: " + strings.Join(groupCommands(group), ", ")}
			}
			return &usageError{group: group, msg: fmt.Sprintf("unknown command %q; the %s commands are %s", group+" "+rest[0], group, strings.Join(groupCommands(group), ", "))}
		}
		return usageErr("unknown command %q", args[0])
	}
	return c.runCommand(ctx, cmd, rest)
}

// helpFor answers "switchbridge help [COMMAND...]".
func helpFor(words []string) error {
	if len(words) == 0 {
		return helpRequest{}
	}
	cmd, rest, group := findCommand(words)
	switch {
	case cmd != nil && len(rest) == 0:
		return helpRequest{cmd: cmd}
	case cmd == nil && group != "" && len(rest) == 0:
		return helpRequest{group: group}
	}
	return usageErr("help: unknown command %q", strings.Join(words, " "))
}

func isHelpFlag(s string) bool {
	return s == "-h" || s == "-help" || s == "--help"
}

// findCommand finds the command args start with. When args name only a
// group (or a group and an unknown word), cmd is nil and group is set.
// The longest name wins: "devices adopt" over "devices".
func findCommand(args []string) (cmd *command, rest []string, group string) {
	for i := range commands {
		c := &commands[i]
		words := strings.Fields(c.Name)
		if len(args) >= len(words) && strings.Join(args[:len(words)], " ") == c.Name &&
			(cmd == nil || len(words) > len(strings.Fields(cmd.Name))) {
			cmd, rest = c, args[len(words):]
		}
		if len(words) > 1 && words[0] == args[0] {
			group = words[0]
		}
	}
	if cmd != nil {
		return cmd, rest, ""
	}
	return nil, args[1:], group
}

func groupCommands(group string) []string {
	var names []string
	for _, c := range commands {
		if first, sub, ok := strings.Cut(c.Name, " "); ok && first == group {
			names = append(names, sub)
		}
	}
	return names
}

// runCommand parses cmd's flags and arguments, opens what the table says
// it needs, and runs it.
func (c *cli) runCommand(ctx context.Context, cmd *command, args []string) error {
	fs := cmd.flagSet()
	configPath := fs.String("config", DefaultConfig, "the config `FILE`")
	exec := cmd.Setup(fs)
	pos, err := parseFlags(fs, args)
	if err != nil {
		var ue *usageError
		if errors.As(err, &ue) {
			ue.cmd = cmd
		}
		if errors.Is(err, flag.ErrHelp) {
			return helpRequest{cmd: cmd}
		}
		return err
	}
	if err := cmd.checkArgs(fs, pos); err != nil {
		return &usageError{cmd: cmd, msg: err.Error()}
	}
	inv := &invocation{cli: c, ctx: ctx, cmd: cmd, args: pos, configPath: *configPath}
	if cmd.Store != noStore {
		if err := inv.open(); err != nil {
			return err
		}
		defer inv.store.Close()
	}
	err = exec(inv)
	var ue *usageError
	if errors.As(err, &ue) && ue.cmd == nil {
		ue.cmd = cmd
	}
	return err
}

// invocation is one run of a command: its arguments and, when the table says
// it opens the store, the config, the storage and the services over it.
type invocation struct {
	*cli
	ctx        context.Context
	cmd        *command
	args       []string // the positional arguments
	configPath string
	cfg        *config.Config
	store      storage
	admin      *admin.Service
	// locations are the config's own and those the platform's hubs hold.
	locations *linkserver.Directory
}

// storage is what the commands reach storage through, the same interfaces
// the server uses: the owner's records (admin), installs (oauth's Issuer),
// the hubs (link) and the embedded broker's client ids (mqtt). open chooses the engine, in this one place.
type storage interface {
	admin.Store
	admin.AuditLog
	oauth.IssuerStore
	linkserver.PlatformStore
	mqtt.ClientIDAdmin
	mqtt.ClientIDs
	onboardingAdmin
	discoveredStore
	Close() error
}

// stores is the database a command opened: the platform's records and
// the hub's (a single box keeps both in one database), over the engine,
// which backs the whole of it up and closes it.
type stores struct {
	*platformRecords
	*hubRecords
	engine *store.DB
}

// Backup writes a copy of the whole database (store.DB.Backup).
func (s stores) Backup(ctx context.Context, dataDir, dst string) (int, error) {
	return s.engine.Backup(ctx, dataDir, dst)
}

// Close closes the database.
func (s stores) Close() error { return s.engine.Close() }

// platformRecords and hubRecords name the two for stores' fields.
type (
	platformRecords = accounts.Store
	hubRecords      = hubstore.Store
)

func (c *invocation) open() error {
	cfg, err := loadConfig(c.configPath)
	if err != nil {
		return err
	}
	if c.cmd.Store == platformStore {
		if err := cfg.RefusePlatformCommand(c.cmd.Name); err != nil {
			return err
		}
	}
	own, err := bridge.NewSwitchboard(cfg.BridgeLocations(), nil, bridge.SwitchboardOptions{})
	if err != nil {
		return err
	}
	db, err := daemon.OpenStore(c.ctx, cfg)
	if err != nil {
		return err
	}
	platform, hub := accounts.New(db), hubstore.New(db)
	c.cfg, c.store = cfg, stores{platform, hub, db}
	c.locations = linkserver.NewDirectory(platform, own)
	c.admin = &admin.Service{Store: platform, Locations: c.locations, AuditLog: hub, Installer: oauth.NewIssuer(platform, c.locations)}
	return nil
}

// parseFlags parses args and returns the positional arguments, wherever
// they were among the flags.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, flag.ErrHelp
			}
			return nil, usageErr("%s", flagError(err))
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// flagError is a flag package error with the flag named as the README and
// the help name it: --name, not -name.
func flagError(err error) string {
	msg := err.Error()
	for _, p := range []string{"not defined: -", "flag -", "for -", "argument: -"} {
		msg = strings.Replace(msg, p, p+"-", 1)
	}
	return msg
}

// stringList is a repeatable flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// locationID is a flag of one location id.
type locationID int64

func (l *locationID) String() string { return fmt.Sprint(int64(*l)) }
func (l *locationID) Set(v string) error {
	n, err := parseLocationID(v)
	*l = locationID(n)
	return err
}

// locationIDs is a repeatable flag of location ids.
type locationIDs []int64

func (l *locationIDs) String() string { return fmt.Sprint(*l) }
func (l *locationIDs) Set(v string) error {
	n, err := parseLocationID(v)
	if err != nil {
		return err
	}
	*l = append(*l, n)
	return nil
}

func parseLocationID(v string) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q is not a location id (a positive number)", v)
	}
	return n, nil
}

func printVersion(c *invocation) error {
	_, err := fmt.Fprintln(c.stdout, "switchbridge", version.Get())
	return err
}

// runningDaemon is the process that has a config's database open: its
// pid, 0 for none, -1 when that cannot be told.
type runningDaemon struct{ pid int }

// runningHub tells whether a daemon runs with cfg's database (its SQLite
// file in data_dir) open. Unknown (the data_dir unreadable, as it is for
// the switchbridge group, or a platform on PostgreSQL) counts as
// running: a port it may hold is then only a warning, as before.
func runningHub(cfg *config.Config) runningDaemon {
	if cfg.Storage.Postgres != nil {
		return runningDaemon{pid: -1}
	}
	pid, inUse, err := store.InUse(filepath.Join(cfg.DataDir, store.FileName))
	switch {
	case err != nil:
		return runningDaemon{pid: -1}
	case inUse:
		return runningDaemon{pid: pid}
	}
	return runningDaemon{}
}
