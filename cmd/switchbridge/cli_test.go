package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/switchbridge/switchbridge/bridge/store"
)

var update = flag.Bool("update", false, "rewrite the command table of cmd/switchbridge/README.md from the command table")

// The command reference's table (cmd/switchbridge/README.md) is the command table's: a command added,
// renamed or re-described shows in both or the test fails (go test
// ./cmd/switchbridge -run TestREADMECommandTable -update rewrites it).
func TestREADMECommandTable(t *testing.T) {
	const begin, end = "<!-- commands: generated from cmd/switchbridge/commands.go -->\n", "<!-- end of commands -->\n"
	path := "README.md" // this folder's: the command reference
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	i, j := strings.Index(readme, begin), strings.Index(readme, end)
	if i < 0 || j < i {
		t.Fatalf("README.md has no command table between %q and %q", begin, end)
	}
	got, want := readme[i+len(begin):j], markdownTable()
	if got == want {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(readme[:i+len(begin)]+want+readme[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("README.md's command table differs from the command table (run with -update):\n--- README\n%s--- commands.go\n%s", got, want)
}

func TestHelp(t *testing.T) {
	// The overview lists every command, from the table.
	r := runCLI(t, "", "help")
	if r.code != 0 {
		t.Fatalf("help: %+v", r)
	}
	for _, c := range commands {
		if !strings.Contains(r.stdout, "  "+c.Name) {
			t.Errorf("help does not list %q:\n%s", c.Name, r.stdout)
		}
	}
	if r2 := runCLI(t, "", "--help"); r2.stdout != r.stdout {
		t.Errorf("--help differs from help: %q", r2.stdout)
	}

	// A command's help: its usage and flags only.
	for _, args := range [][]string{{"app", "create", "--help"}, {"help", "app", "create"}, {"app", "create", "-h"}} {
		r := runCLI(t, "", args...)
		if r.code != 0 || r.stderr != "" {
			t.Errorf("%v: %+v", args, r)
		}
		for _, want := range []string{
			"usage: switchbridge app create --name NAME --redirect-uri URI… --owner USER [flags]",
			"--access-token-lifetime DURATION", "--require-pkce", "--config FILE", "(required)",
			"(default " + DefaultConfig + ")", "refused on a\nhub's config",
		} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("%v lacks %q:\n%s", args, want, r.stdout)
			}
		}
		if strings.Contains(r.stdout, "user add") || strings.Contains(r.stdout, "hub list") {
			t.Errorf("%v shows other commands:\n%s", args, r.stdout)
		}
	}

	// A group's help lists its commands and no others.
	for _, args := range [][]string{{"user", "--help"}, {"help", "user"}} {
		r := runCLI(t, "", args...)
		if r.code != 0 {
			t.Errorf("%v: %+v", args, r)
		}
		for _, want := range []string{"user add NAME", "user list", "user passwd NAME", "user owner NAME on|off", "user delete NAME", "user locations NAME"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("%v lacks %q:\n%s", args, want, r.stdout)
			}
		}
		if strings.Contains(r.stdout, "app create") {
			t.Errorf("%v lists another group:\n%s", args, r.stdout)
		}
	}
	// A group alone is a command line that is not finished: it says which
	// commands there are, briefly.
	r = runCLI(t, "", "app")
	if r.code != 2 || !strings.Contains(r.stderr, "app needs a command: create, list, publish, unpublish") {
		t.Errorf("app: %+v", r)
	}
	if r := runCLI(t, "", "app", "frobnicate"); r.code != 2 || !strings.Contains(r.stderr, `unknown command "app frobnicate"`) {
		t.Errorf("app frobnicate: %+v", r)
	}
	if r := runCLI(t, "", "help", "nothing"); r.code != 2 || !strings.Contains(r.stderr, `unknown command "nothing"`) {
		t.Errorf("help nothing: %+v", r)
	}
}

// A wrong command line says what is wrong and that command's usage, not
// the whole command list, and names flags as the help does.
func TestUsageErrors(t *testing.T) {
	dir := t.TempDir()
	cfg, _ := writeConfig(t, dir)
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"app", "create", "--owner", "alice", "--redirect-uri", "https://x/cb"},
			[]string{"switchbridge: app create needs --name NAME", "usage: switchbridge app create --name NAME", "Run 'switchbridge app create --help'"}},
		{[]string{"app", "create", "--access-token-lifetime", "soon"},
			[]string{`invalid value "soon" for flag --access-token-lifetime`}},
		{[]string{"app", "create", "--colour", "red"},
			[]string{"flag provided but not defined: --colour"}},
		{[]string{"app", "create", "--name"},
			[]string{"flag needs an argument: --name"}},
		{[]string{"app", "publish"}, []string{"app publish takes one CLIENT_ID; got 0 arguments"}},
		{[]string{"app", "legacy", "x", "maybe"}, []string{`app legacy takes on or off, not "maybe"`, "usage: switchbridge app legacy CLIENT_ID on|off"}},
		{[]string{"user", "list", "extra"}, []string{`user list takes no arguments, only flags; got "extra"`}},
		{[]string{"user", "owner", "alice", "maybe"}, []string{`user owner takes on or off, not "maybe"`, "usage: switchbridge user owner NAME on|off"}},
		{[]string{"user", "owner", "alice"}, []string{"user owner takes a NAME and on or off; got 1 arguments"}},
		{[]string{"install", "--client-id", "c", "--user", "u", "--location", "1"}, []string{"install needs at least one --switch ID"}},
		{[]string{"hub", "add", "barn", "--base-url", "not-a-url"}, []string{`"not-a-url" is not a valid URL for a hub`}},
		{[]string{"hub", "add", "barn", "--base-url", "https://hub.example/path"}, []string{"must have no path"}},
	} {
		// --config right after the command's words: a flag that lacks its
		// value must be the last word.
		cmd, rest, _ := findCommand(c.args)
		args := append(strings.Fields(cmd.Name), "--config", cfg)
		r := runCLI(t, "", append(args, rest...)...)
		if r.code != 2 {
			t.Errorf("%v: exit %d, want 2: %+v", c.args, r.code, r)
		}
		for _, w := range c.want {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("%v: stderr lacks %q:\n%s", c.args, w, r.stderr)
			}
		}
		if strings.Contains(r.stderr, "user passwd") || strings.Contains(r.stderr, " -name") || strings.Contains(r.stderr, " -access-token") {
			t.Errorf("%v: stderr has more than the command's usage, or a single-dash flag:\n%s", c.args, r.stderr)
		}
	}
}

// A command that fails prints the cause, not "internal error", and a
// domain error by its message alone.
func TestErrorsKeepTheirCause(t *testing.T) {
	dir := t.TempDir()
	cfg, _ := writeConfig(t, dir)
	if r := runCLI(t, "pw-alice\n", "user", "add", "alice", "--location", "1", "--config", cfg); r.code != 0 {
		t.Fatalf("user add: %+v", r)
	}
	r := runCLI(t, "pw-alice\n", "user", "add", "alice", "--location", "1", "--config", cfg)
	if r.code != 1 || r.stderr != "switchbridge: user \"alice\" exists already\n" {
		t.Errorf("duplicate user: %+v", r)
	}
	r = runCLI(t, "", "app", "create", "--name", "A", "--redirect-uri", "https://x/cb", "--owner", "alice", "--json", "--config", cfg)
	if r.code != 0 {
		t.Fatalf("app create: %+v", r)
	}
	var created struct {
		ID string `json:"client_id"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &created); err != nil || created.ID == "" {
		t.Fatalf("app create --json: %q %v", r.stdout, err)
	}
	id := created.ID

	// The database refuses the write with a cause of its own: the command
	// must show it.
	db, err := sql.Open("sqlite", filepath.Join(dir, "data", store.FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TRIGGER refuse BEFORE UPDATE ON apps BEGIN SELECT RAISE(ABORT, 'the disk is on fire'); END`); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, "", "app", "publish", id, "--config", cfg)
	if r.code != 1 || !strings.Contains(r.stderr, "the disk is on fire") || strings.Contains(r.stderr, "internal error") {
		t.Errorf("app publish on a refusing database: %+v", r)
	}
}

// user add --owner, user owner on and off, and user list's OWNER column;
// an unknown user is refused by name.
func TestUserOwner(t *testing.T) {
	dir := t.TempDir()
	cfg, _ := writeConfig(t, dir)
	if r := runCLI(t, "pw-ann\n", "user", "add", "ann", "--location", "1", "--owner", "--config", cfg); r.code != 0 || r.stdout != "user ann added as an owner\n" {
		t.Fatalf("user add --owner: %+v", r)
	}
	if r := runCLI(t, "pw-bob\n", "user", "add", "bob", "--location", "2", "--config", cfg); r.code != 0 || r.stdout != "user bob added\n" {
		t.Fatalf("user add: %+v", r)
	}
	// owners reads user list: each user's OWNER column.
	owners := func() map[string]string {
		t.Helper()
		r := runCLI(t, "", "user", "list", "--config", cfg)
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if r.code != 0 || strings.Join(strings.Fields(lines[0]), " ") != "NAME LOCATIONS OWNER" {
			t.Fatalf("user list: %+v", r)
		}
		out := map[string]string{}
		for _, l := range lines[1:] {
			f := strings.Fields(l)
			out[f[0]] = f[len(f)-1]
		}
		return out
	}
	if o := owners(); o["ann"] != "true" || o["bob"] != "false" {
		t.Errorf("user list's owners = %v", o)
	}
	if r := runCLI(t, "", "user", "owner", "bob", "on", "--config", cfg); r.code != 0 || !strings.Contains(r.stdout, "user bob is an owner") {
		t.Errorf("user owner bob on: %+v", r)
	}
	if r := runCLI(t, "", "user", "owner", "ann", "off", "--config", cfg); r.code != 0 || !strings.Contains(r.stdout, "user ann is no owner") {
		t.Errorf("user owner ann off: %+v", r)
	}
	if o := owners(); o["ann"] != "false" || o["bob"] != "true" {
		t.Errorf("user list's owners after on and off = %v", o)
	}
	if r := runCLI(t, "", "user", "owner", "nobody", "on", "--config", cfg); r.code != 1 || r.stderr != "switchbridge: no user \"nobody\"\n" {
		t.Errorf("user owner nobody on: %+v", r)
	}
	// An owner needs a location as any user does, and a refused add makes
	// no owner.
	if r := runCLI(t, "pw-carol\n", "user", "add", "carol", "--owner", "--config", cfg); r.code != 2 || !strings.Contains(r.stderr, "needs at least one --location") {
		t.Errorf("user add --owner without a location: %+v", r)
	}
	if _, ok := owners()["carol"]; ok {
		t.Error("a refused user add --owner stored the user")
	}
}

func TestAppUnpublish(t *testing.T) {
	dir := t.TempDir()
	cfg, _ := writeConfig(t, dir)
	runCLI(t, "pw-alice\n", "user", "add", "alice", "--location", "1", "--config", cfg)
	r := runCLI(t, "", "app", "create", "--name", "A", "--redirect-uri", "https://x/cb", "--owner", "alice", "--publish", "--config", cfg)
	id := strings.TrimSpace(strings.TrimPrefix(strings.Split(r.stdout, "\n")[0], "client_id:"))
	if r.code != 0 || id == "" {
		t.Fatalf("app create: %+v", r)
	}
	published := func() string {
		r := runCLI(t, "", "app", "list", "--config", cfg)
		f := strings.Fields(strings.Split(r.stdout, "\n")[1])
		return f[3]
	}
	if p := published(); p != "true" {
		t.Fatalf("published = %s", p)
	}
	if r := runCLI(t, "", "app", "unpublish", id, "--config", cfg); r.code != 0 || !strings.Contains(r.stdout, "only its owner may install it") {
		t.Errorf("app unpublish: %+v", r)
	}
	if p := published(); p != "false" {
		t.Errorf("after unpublish, published = %s", p)
	}
	if r := runCLI(t, "", "app", "unpublish", "nope", "--config", cfg); r.code != 1 || !strings.Contains(r.stderr, `no app with client id "nope"`) {
		t.Errorf("app unpublish nope: %+v", r)
	}
}

// On a hub's config the platform's commands are refused with the reason:
// the hub's database is a replica that the platform overwrites, and what
// they would write there no client would ever see.
func TestPlatformCommandsRefusedOnAHub(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "hub.secret")
	os.WriteFile(secret, []byte("s3cret-s3cret-s3cret-s3cret\n"), 0o600)
	cfg := filepath.Join(dir, "hub.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`server: {listen: %s, metrics_listen: "off"}
data_dir: %s
platform:
  url: http://127.0.0.1:1
  hub_id: hub-1
  secret_file: %s
locations:
  - {id: 1, name: Home, switches: [{id: a, name: A, driver: virtual}]}
`, freePort(t), filepath.Join(dir, "data"), secret)), 0o600)
	for _, args := range [][]string{
		{"user", "add", "alice", "--location", "1"},
		{"user", "list"},
		{"user", "owner", "alice", "on"},
		{"app", "create", "--name", "A", "--redirect-uri", "https://x/cb", "--owner", "alice"},
		{"app", "unpublish", "x"},
		{"install", "--client-id", "x", "--user", "alice", "--location", "1", "--switch", "a"},
		{"installation", "list"},
		{"hub", "list"},
	} {
		r := runCLI(t, "pw-alice\n", append(args, "--config", cfg)...)
		if r.code != 1 || !strings.Contains(r.stderr, "is the config of a hub of http://127.0.0.1:1") || !strings.Contains(r.stderr, "belongs to the platform") {
			t.Errorf("%v on a hub: %+v", args, r)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "data", store.FileName)); err == nil {
		t.Error("a refused command created the hub's database")
	}
	// A backup is the hub's own business.
	if r := runCLI(t, "", "backup", filepath.Join(dir, "copy.db"), "--config", cfg); r.code != 0 {
		t.Errorf("backup on a hub: %+v", r)
	}
}

// An error that comes from a permission says how to get it, except to
// serve, which runs as the service (TestPermissionHint has the wording).
func TestPermissionErrorNamesTheFix(t *testing.T) {
	denied := fmt.Errorf("opening the database: %w", &fs.PathError{Op: "open", Path: "/var/lib/switchbridge/switchbridge.db", Err: syscall.EACCES})
	var b bytes.Buffer
	printError(&b, denied, false)
	for _, want := range []string{"permission denied", "/var/lib/switchbridge/switchbridge.db", "sudo"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("lacks %q: %s", want, b.String())
		}
	}
	b.Reset()
	printError(&b, denied, true)
	if strings.Contains(b.String(), "sudo") {
		t.Errorf("serve is told to use sudo: %s", b.String())
	}
	b.Reset()
	printError(&b, context.Canceled, false)
	if strings.Contains(b.String(), "sudo") {
		t.Errorf("a hint on an error that is not about permissions: %s", b.String())
	}
}

// check-config fails, naming the key and its line, on a port another
// program holds (serve would not start); a port the running daemon of
// this config holds (its database open) is only a warning, so a check
// before a reload passes. mqtt.listen, the embedded broker's, likewise.
func TestCheckConfigPortsInUse(t *testing.T) {
	dir := t.TempDir()
	cfg, addr := writeConfig(t, dir)
	if r := runCLI(t, "", "check-config", "--config", cfg); r.code != 0 || strings.Contains(r.stderr, "in use") {
		t.Fatalf("free port: %+v", r)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, "", "check-config", "--config", cfg)
	if want := cfg + ":2: server.listen " + addr + ": the port is in use by another program"; r.code == 0 || !strings.Contains(r.stderr, want) {
		t.Errorf("port held by another program: %+v, want a failure with %q", r, want)
	}
	ln.Close()

	broker := freePort(t)
	body, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The embedded broker runs only for a switch of the mqtt driver.
	body = bytes.Replace(body, []byte("      - {id: shed, name: Shed light, driver: virtual}\n"),
		[]byte("      - {id: shed, name: Shed light, driver: virtual}\n      - {id: plug, name: Plug, driver: mqtt, profile: tasmota, topic: plug}\n"), 1)
	body = append(body, fmt.Sprintf("mqtt:\n  broker: embedded\n  listen: %s\n", broker)...)
	if err := os.WriteFile(cfg, body, 0o600); err != nil {
		t.Fatal(err)
	}
	line := strings.Count(string(body), "\n")
	ln, err = net.Listen("tcp", broker)
	if err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, "", "check-config", "--config", cfg)
	if want := fmt.Sprintf("%s:%d: mqtt.listen %s: the port is in use by another program", cfg, line, broker); r.code == 0 || !strings.Contains(r.stderr, want) {
		t.Errorf("mqtt.listen held by another program: %+v, want a failure with %q", r, want)
	}
	// serve's own bind error names the key too.
	if r := runCLI(t, "", "serve", "--config", cfg); r.code == 0 || !strings.Contains(r.stderr, "mqtt.listen "+broker+": ") {
		t.Errorf("serve with mqtt.listen held by another program: %+v, want an error naming mqtt.listen", r)
	}
	ln.Close()

	if os.Getenv("SWITCHBRIDGE_TEST_EMULATED") != "" {
		return // the daemon below runs the test binary as a process
	}
	startDaemon(t, cfg)
	r = runCLI(t, "", "check-config", "--config", cfg)
	for _, want := range []string{
		cfg + ":2: warning: server.listen " + addr + ": the port is in use, by the running switchbridge",
		fmt.Sprintf("%s:%d: warning: mqtt.listen %s: the port is in use, by the running switchbridge", cfg, line, broker),
	} {
		if r.code != 0 || !strings.Contains(r.stderr, want) {
			t.Errorf("ports held by the daemon of this config: %+v, want ok with %q", r, want)
		}
	}
}

// check-config warns of a listener the network reaches over plain HTTP,
// at server.listen's line, and still says ok; on loopback it says nothing.
func TestCheckConfigWarnsOfPlainHTTPOnTheNetwork(t *testing.T) {
	dir := t.TempDir()
	cfg, addr := writeConfig(t, dir)
	if r := runCLI(t, "", "check-config", "--config", cfg); r.code != 0 || strings.Contains(r.stderr, "plain HTTP") {
		t.Fatalf("loopback: %+v", r)
	}
	// Port 0 (any free one): a port picked free on loopback may be held
	// on another address, which check-config would rightly call taken.
	body, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte(strings.Replace(string(body), addr, "0.0.0.0:0", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, "", "check-config", "--config", cfg)
	if want := cfg + ":2: warning: server.listen 0.0.0.0:0 reaches the network over plain HTTP"; r.code != 0 || !strings.Contains(r.stderr, want) || !strings.Contains(r.stdout, "ok") {
		t.Errorf("0.0.0.0 without tls: %+v, want %q", r, want)
	}
}
