package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/bridge/config/configtest"
	"github.com/switchbridge/switchbridge/bridge/daemon/daemontest"
	"github.com/switchbridge/switchbridge/bridge/infra/logtest"
	"github.com/switchbridge/switchbridge/bridge/platform/oauth"
	"github.com/switchbridge/switchbridge/bridge/store/pgtest"
)

// TestMain lets the test binary play the daemon: with SWITCHBRIDGE_RUN_MAIN
// set it runs main with its arguments, so tests can start, signal and kill
// a real process.
func TestMain(m *testing.M) {
	if os.Getenv("SWITCHBRIDGE_RUN_MAIN") == "1" {
		main()
		return
	}
	if serveBareHTTPIfAsked() || serveHubVariantIfAsked() {
		return
	}
	// No test may ask the network's name servers about a listen host.
	config.Resolver = configtest.Hosts{}
	// Every secret the tests send to a daemon or get from one (or from an
	// admin command, runCLI) is looked for in the daemons' logs when each
	// test ends (logtest.Watch in runServe and daemontest).
	daemontest.RecordSecrets()
	code := m.Run()
	pgtest.StopShared()
	if testing.Verbose() {
		fmt.Printf("secret scan: %d secrets looked for in %d logs (%d bytes)\n",
			logtest.SecretsNoted(), logtest.Scanned.Logs.Load(), logtest.Scanned.Bytes.Load())
	}
	os.Exit(code)
}

// cliSecret finds the secrets the admin commands print: an app's client
// secret, a hub's secret, an installation's API token.
var cliSecret = regexp.MustCompile(`(?m)^(?:client_secret|secret|API token):\s+(\S+)$`)

// noteCLISecrets notes the secrets an admin command was given (a
// password on stdin) or printed, as text or as --json.
func noteCLISecrets(stdin, stdout string) {
	for line := range strings.Lines(stdin) {
		logtest.NoteSecret(strings.TrimRight(line, "\r\n"))
	}
	for _, m := range cliSecret.FindAllStringSubmatch(stdout, -1) {
		logtest.NoteSecret(m[1])
	}
	daemontest.NoteJSONSecrets([]byte(stdout))
}

// dsnPassword finds the password of a DSN URL, parseable or not.
var dsnPassword = regexp.MustCompile(`^postgres(?:ql)?://[^:/@]*:([^@]+)@`)

// withPassword is dsn with a password, noted as a secret no log may hold:
// its own, or when it has none a new one (the tests' PostgreSQL trusts
// loopback and ignores it).
func withPassword(dsn string) string {
	if m := dsnPassword.FindStringSubmatch(dsn); m != nil {
		logtest.NoteSecret(m[1])
		return dsn
	}
	u, err := url.Parse(dsn)
	if err != nil || u.User == nil {
		return dsn
	}
	pw := "pg-" + oauth.NewSecret()
	u.User = url.UserPassword(u.User.Username(), pw)
	logtest.NoteSecret(pw)
	return u.String()
}

// skipIfEmulated skips a test that runs this test binary as a real
// process. make test sets SWITCHBRIDGE_TEST_EMULATED (to qemu-arm or
// qemu-aarch64) when it runs the unit tests of the Pi targets under
// qemu-user: there the binary is foreign to the kernel, which cannot
// execute it again without a binfmt_misc entry for qemu.
func skipIfEmulated(t testing.TB) {
	t.Helper()
	if e := os.Getenv("SWITCHBRIDGE_TEST_EMULATED"); e != "" {
		t.Skipf("runs the test binary as a process, which cannot be done under %s", e)
	}
}

// writeConfig writes a config with virtual switches on a free port.
func writeConfig(t testing.TB, dir string) (path, addr string) {
	t.Helper()
	addr = freePort(t)
	path = filepath.Join(dir, "config.yaml")
	cfg := fmt.Sprintf(`server:
  listen: %s
  metrics_listen: "off"
data_dir: %s
webhooks:
  allow: [127.0.0.1] # the tests' receivers
locations:
  - id: 1
    name: Home
    switches:
      - {id: lamp, name: Lamp, driver: virtual}
      - {id: fan, name: Fan, driver: virtual}
  - id: 2
    name: Shed
    switches:
      - {id: shed, name: Shed light, driver: virtual}
`, addr, filepath.Join(dir, "data"))
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, addr
}

type result struct {
	code           int
	stdout, stderr string
}

func runCLI(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(stdin), &out, &errb, nil)
	noteCLISecrets(stdin, out.String())
	return result{code, out.String(), errb.String()}
}

func TestAdministrationCommands(t *testing.T) {
	dir := t.TempDir()
	cfg, _ := writeConfig(t, dir)

	steps := []struct {
		name   string
		stdin  string
		args   []string
		code   int
		output string // expected in stdout (code 0) or stderr
	}{
		{"add user", "secret-pw\n", []string{"user", "add", "alice", "--location", "1", "--location", "2", "--config", cfg}, 0, "user alice added"},
		{"flags before name", "secret-pw\n", []string{"user", "add", "--config", cfg, "--location", "2", "bob"}, 0, "user bob added"},
		{"duplicate user", "secret-pw\n", []string{"user", "add", "alice", "--location", "1", "--config", cfg}, 1, `user "alice" exists already`},
		{"unknown location", "secret-pw\n", []string{"user", "add", "carol", "--location", "9", "--config", cfg}, 1, "location 9 is neither in the config nor held by a hub"},
		{"short password", "pw\n", []string{"user", "add", "carol", "--location", "1", "--config", cfg}, 1, "at least 4 characters"},
		{"no location", "secret-pw\n", []string{"user", "add", "carol", "--config", cfg}, 2, "needs at least one --location"},
		{"bad location flag", "", []string{"user", "add", "carol", "--location", "x", "--config", cfg}, 2, "not a location id"},
		{"user list", "", []string{"user", "list", "--config", cfg}, 0, "alice  1,2"},
		{"passwd", "new-secret\n", []string{"user", "passwd", "bob", "--config", cfg}, 0, "password of bob changed"},
		{"passwd unknown", "new-secret\n", []string{"user", "passwd", "nobody", "--config", cfg}, 1, `no user "nobody"`},
		{"app bad redirect", "", []string{"app", "create", "--name", "X", "--redirect-uri", "/relative", "--owner", "alice", "--config", cfg}, 2, "not absolute"},
		{"app unknown owner", "", []string{"app", "create", "--name", "X", "--redirect-uri", "https://x/cb", "--owner", "zed", "--config", cfg}, 1, "owner"},
		{"app missing name", "", []string{"app", "create", "--redirect-uri", "https://x/cb", "--owner", "alice", "--config", cfg}, 2, "needs --name"},
		{"app redirect with userinfo", "", []string{"app", "create", "--name", "X", "--redirect-uri", "https://x@evil.example/cb", "--owner", "alice", "--config", cfg}, 2, "user information"},
		{"unknown command", "", []string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{"no command", "", nil, 2, "usage: switchbridge"},
		{"missing config", "", []string{"user", "list", "--config", filepath.Join(dir, "nope.yaml")}, 1, "reading config"},
	}
	for _, s := range steps {
		r := runCLI(t, s.stdin, s.args...)
		where := r.stdout
		if s.code != 0 {
			where = r.stderr
		}
		if r.code != s.code || !strings.Contains(where, s.output) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit %d with %q", s.name, r.code, r.stdout, r.stderr, s.code, s.output)
		}
	}

	// app create --json prints the id and the secret once.
	r := runCLI(t, "", "app", "create", "--name", "My app", "--redirect-uri", "https://x/cb", "--redirect-uri", "https://y/cb", "--owner", "alice", "--json", "--config", cfg)
	var app struct{ ClientID, ClientSecret string }
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &struct {
		ClientID     *string `json:"client_id"`
		ClientSecret *string `json:"client_secret"`
	}{&app.ClientID, &app.ClientSecret}) != nil || app.ClientID == "" || len(app.ClientSecret) < 40 {
		t.Fatalf("app create --json: %+v %q", r, app)
	}
	if r := runCLI(t, "", "app", "list", "--config", cfg); !strings.Contains(r.stdout, app.ClientID) || !strings.Contains(r.stdout, "alice") || strings.Contains(r.stdout, app.ClientSecret) {
		t.Errorf("app list = %q (must list the app and its owner, never the secret)", r.stdout)
	}
	if r := runCLI(t, "", "app", "list", "--config", cfg); !strings.Contains(r.stdout, "PKCE") || !strings.Contains(r.stdout, "optional") || strings.Contains(r.stdout, "required") {
		t.Errorf("app list without a PKCE-only app = %q", r.stdout)
	}
	if r := runCLI(t, "", "app", "create", "--name", "Strict", "--redirect-uri", "https://x/cb", "--owner", "alice", "--require-pkce", "--config", cfg); r.code != 0 {
		t.Errorf("app create --require-pkce: %+v", r)
	}
	if r := runCLI(t, "", "app", "list", "--config", cfg); !strings.Contains(r.stdout, "required") {
		t.Errorf("app list does not show the PKCE-only app: %q", r.stdout)
	}
	if r := runCLI(t, "", "app", "publish", app.ClientID, "--config", cfg); r.code != 0 {
		t.Errorf("app publish: %+v", r)
	}
	if r := runCLI(t, "", "app", "publish", "nope", "--config", cfg); r.code != 1 {
		t.Errorf("publishing a missing app: %+v", r)
	}

	// install: only the owner, only their locations, only switches there.
	for _, bad := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--user", "bob", "--location", "2", "--switch", "shed"}, "does not own"},
		{[]string{"--user", "alice", "--location", "1", "--switch", "shed"}, `switch "shed" is not in location 1`},
		{[]string{"--user", "alice", "--location", "7", "--switch", "lamp"}, "location 7 is not in"},
	} {
		args := append([]string{"install", "--client-id", app.ClientID, "--config", cfg}, bad.args...)
		if r := runCLI(t, "", args...); r.code != 1 || !strings.Contains(r.stderr, bad.msg) {
			t.Errorf("install %v: %+v, want %q", bad.args, r, bad.msg)
		}
	}
	r = runCLI(t, "", "install", "--client-id", app.ClientID, "--user", "alice", "--location", "1", "--switch", "lamp", "--switch", "fan", "--json", "--config", cfg)
	var inst struct {
		Token    string `json:"token"`
		Endpoint string `json:"endpoint"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &inst) != nil || inst.Token == "" || !strings.Contains(inst.Endpoint, "/api/apps/installations/") {
		t.Fatalf("install --json: %+v", r)
	}
}

func TestCheckConfig(t *testing.T) {
	dir := t.TempDir()
	good, _ := writeConfig(t, dir)
	if r := runCLI(t, "", "check-config", "--config", good); r.code != 0 || !strings.Contains(r.stdout, "ok (2 locations, 3 switches)") {
		t.Errorf("good config: %+v", r)
	}
	// One file with a problem at every stage: an unknown key, a value of
	// the wrong type, a broken rule and a bad driver key. All are listed.
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte(`serer:
  listen: x
oauth:
  code_lifetime: soon
locations:
  - id: 1
    name: Home
    switches:
      - {id: a, name: A, driver: virtual, initial: maybe}
      - {id: b, name: B, driver: warp}
      - {id: a, name: Again, driver: virtual}
`), 0o600)
	r := runCLI(t, "", "check-config", "--config", bad)
	if r.code != 1 {
		t.Fatalf("bad config exit %d", r.code)
	}
	for _, w := range []string{
		bad + `:1: unknown key "serer"`,
		bad + `:4: "soon" is not a duration`,
		bad + `:9: switch "a": initial must be on or off`,
		bad + `:10: switch "b": unknown driver "warp"`,
		bad + `:11: locations[0].switches[2]: switch id "a" is already used at line 9`,
	} {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("missing %q in:\n%s", w, r.stderr)
		}
	}
}

// Commands that read the config without building drivers still refuse a
// top-level key that no driver claims: a misspelt data_dir must not send
// "user add" to the default data directory.
func TestCommandsRefuseUnknownSections(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "hub.yaml")
	os.WriteFile(cfg, []byte("data_dri: "+dir+"\nlocations:\n  - {id: 1, name: Home, switches: [{id: a, name: A, driver: virtual}]}\n"), 0o600)
	for _, args := range [][]string{
		{"user", "add", "alice", "--location", "1"},
		{"backup", filepath.Join(dir, "backup.db")},
	} {
		r := runCLI(t, "pw-alice\n", append(args, "--config", cfg)...)
		if r.code == 0 || !strings.Contains(r.stderr, cfg+`:1: unknown key "data_dri"`) {
			t.Errorf("%s: %+v", strings.Join(args, " "), r)
		}
	}
}

// A broker login tied to no switch works, with a warning on stderr.
func TestCheckConfigWarnsOfLooseLogins(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "hub.yaml")
	// Free ports, not the defaults: check-config fails on a port another
	// program holds (a Mosquitto of the machine's on 1883).
	os.WriteFile(cfg, []byte(`data_dir: `+dir+`
mqtt:
  broker: embedded
  users:
    plug: secret
  listen: `+freePort(t)+`
server: {listen: "`+freePort(t)+`", metrics_listen: "off"}
locations:
  - id: 1
    name: Home
    switches:
      - {id: a, name: A, driver: mqtt, profile: tasmota, topic: t}
`), 0o600)
	r := runCLI(t, "", "check-config", "--config", cfg)
	if r.code != 0 || !strings.Contains(r.stdout, "ok (1 locations, 1 switches)") {
		t.Fatalf("check-config: %+v", r)
	}
	if want := cfg + ":5: warning: mqtt.users: login(s) plug list no switches"; !strings.Contains(r.stderr, want) {
		t.Errorf("stderr %q, want %q", r.stderr, want)
	}
}

// developerApp is an app of user alice, made with the CLI.
type developerApp struct{ ID string }

// addDeveloperApp adds user alice in a location and an app she owns.
func addDeveloperApp(t *testing.T, cfg, location string) developerApp {
	t.Helper()
	if r := runCLI(t, "pw-alice\n", "user", "add", "alice", "--location", location, "--config", cfg); r.code != 0 {
		t.Fatalf("user add: %+v", r)
	}
	r := runCLI(t, "", "app", "create", "--name", "A", "--redirect-uri", "https://x/cb", "--owner", "alice", "--json", "--config", cfg)
	var app struct {
		ID string `json:"client_id"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &app); err != nil || app.ID == "" {
		t.Fatalf("app create: %+v", r)
	}
	return developerApp{ID: app.ID}
}

func call(t *testing.T, method, url, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}

// TestSurvivesKill9 installs an app, switches a lamp on, kills the daemon
// with SIGKILL and checks that the token, the installation and the lamp's
// state are all there after a restart.
func TestSurvivesKill9(t *testing.T) {
	dir := t.TempDir()
	cfg, _ := writeConfig(t, dir)
	app := addDeveloperApp(t, cfg, "1")

	p := startDaemon(t, cfg)
	// install runs while the daemon holds the database: SQLite in WAL mode
	// lets the two processes share it.
	r := runCLI(t, "", "install", "--client-id", app.ID, "--user", "alice", "--location", "1", "--switch", "lamp", "--json", "--config", cfg)
	var inst struct{ Token, Endpoint string }
	if err := json.Unmarshal([]byte(r.stdout), &inst); err != nil {
		t.Fatalf("install: %+v", r)
	}
	if code, body := call(t, http.MethodPut, inst.Endpoint+"/switches/on", inst.Token); code != http.StatusNoContent {
		t.Fatalf("PUT on = %d %s", code, body)
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done

	startDaemon(t, cfg)
	code, body := call(t, http.MethodGet, inst.Endpoint+"/switches", inst.Token)
	if stripped, n := lastSeenStripped(body); code != http.StatusOK || n != 1 || stripped != `[{"id":"lamp","name":"Lamp","value":"on","available":true}]`+"\n" {
		t.Errorf("after kill -9: %d %s, want the token to work and the lamp on", code, body)
	}
}

// TestSIGTERMFinishesRequestsInFlight starts the real binary, sends SIGTERM
// while a command is running, and checks that the command was answered and
// the process exited 0.
func TestSIGTERMFinishesRequestsInFlight(t *testing.T) {
	dir := t.TempDir()
	cfg, _ := writeConfig(t, dir)
	// The fan takes a while to confirm, so the command is still running when
	// the signal arrives.
	body, _ := os.ReadFile(cfg)
	os.WriteFile(cfg, []byte(strings.Replace(string(body), "{id: fan, name: Fan, driver: virtual}", "{id: fan, name: Fan, driver: virtual, delay: 1500ms}", 1)), 0o600)
	app := addDeveloperApp(t, cfg, "1")
	// Installed once the daemon runs: the endpoint names the port it
	// listens on.
	p := startDaemon(t, cfg)
	r := runCLI(t, "", "install", "--client-id", app.ID, "--user", "alice", "--location", "1", "--switch", "fan", "--json", "--config", cfg)
	var inst struct{ Token, Endpoint string }
	json.Unmarshal([]byte(r.stdout), &inst)
	type answer struct {
		code int
		err  error
	}
	answered := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPut, inst.Endpoint+"/switches/on", nil)
		req.Header.Set("Authorization", "Bearer "+inst.Token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			answered <- answer{err: err}
			return
		}
		resp.Body.Close()
		answered <- answer{code: resp.StatusCode}
	}()
	time.Sleep(300 * time.Millisecond) // the command is now waiting on the fan
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	a := <-answered
	if a.err != nil || a.code != http.StatusNoContent {
		t.Errorf("request in flight during SIGTERM: %d %v, want 204", a.code, a.err)
	}
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		t.Fatal("daemon did not exit after SIGTERM")
	}
	if p.err != nil {
		t.Errorf("exit after SIGTERM: %v, want status 0\n%s", p.err, p.stderr)
	}
	for _, want := range []string{"shutting down", "switchbridge stopped"} {
		if !strings.Contains(p.stderr.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, p.stderr)
		}
	}
	// One log line per request and per device command, with the
	// installation id, and never the token.
	log := p.stderr.String()
	found := false
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, `msg=command`) && strings.Contains(line, "installation=") && strings.Contains(line, "fan") {
			found = true
		}
	}
	if !found {
		t.Errorf("no command line with the installation id:\n%s", log)
	}
	if strings.Contains(log, inst.Token) {
		t.Error("the log holds the access token")
	}
}

// TestSIGHUPReloadsSwitches adds a switch to the config of a running
// daemon, sends SIGHUP, and checks the new switch works without a restart.
func TestSIGHUPReloadsSwitches(t *testing.T) {
	dir := t.TempDir()
	cfg, _ := writeConfig(t, dir)
	app := addDeveloperApp(t, cfg, "2")
	p := startDaemon(t, cfg)

	body, _ := os.ReadFile(cfg)
	os.WriteFile(cfg, []byte(strings.Replace(string(body), "{id: shed, name: Shed light, driver: virtual}",
		"{id: shed, name: Shed light, driver: virtual}\n      - {id: pump, name: Pump, driver: virtual}", 1)), 0o600)
	r := runCLI(t, "", "install", "--client-id", app.ID, "--user", "alice", "--location", "2", "--switch", "pump", "--json", "--config", cfg)
	var inst struct{ Token, Endpoint string }
	if err := json.Unmarshal([]byte(r.stdout), &inst); err != nil {
		t.Fatalf("install: %+v", r)
	}
	if code, _ := call(t, http.MethodGet, inst.Endpoint+"/switches", inst.Token); code != http.StatusNotFound {
		t.Fatalf("pump before reload = %d, want 404 (not configured yet)", code)
	}
	p.cmd.Process.Signal(syscall.SIGHUP)
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, body := call(t, http.MethodGet, inst.Endpoint+"/switches", inst.Token)
		if code == http.StatusOK && strings.Contains(body, "Pump") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pump not served 10 s after SIGHUP: %d %s\n%s", code, body, p.stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case <-p.done:
		t.Fatalf("SIGHUP stopped the daemon: %v", p.err)
	default:
	}
}

func TestServeRefusesToStart(t *testing.T) {
	dir := t.TempDir()
	cfg, addr := writeConfig(t, dir)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	r := runCLI(t, "", "serve", "--config", cfg)
	if r.code != 1 || !strings.Contains(r.stderr, "server.listen "+addr) || !strings.Contains(r.stderr, "address already in use") {
		t.Errorf("port taken: %+v", r)
	}
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("locations: nope\n"), 0o600)
	if r := runCLI(t, "", "serve", "--config", bad); r.code != 1 || !strings.Contains(r.stderr, bad+":1:") {
		t.Errorf("invalid config: %+v", r)
	}
}

// TestShippedConfigsCheck runs check-config on every example config, so the
// examples in configs/ stay valid, driver keys included.
func TestShippedConfigsCheck(t *testing.T) {
	files, _ := filepath.Glob("../../configs/*.yaml")
	if len(files) < 2 {
		t.Fatalf("configs: %v", files)
	}
	for _, f := range files {
		if r := runCLI(t, "", "check-config", "--config", f); r.code != 0 {
			t.Errorf("%s: %+v", f, r)
		}
	}
}

// TestSystemdNotifications runs the binary as systemd would, with a
// notification socket and a watchdog: READY=1 must come only once the API
// accepts connections, WATCHDOG=1 pings must follow at half the interval,
// and STOPPING=1 on SIGTERM.
func TestSystemdNotifications(t *testing.T) {
	skipIfEmulated(t)
	dir := t.TempDir()
	cfg, _ := writeConfig(t, dir)
	sockPath := filepath.Join(dir, "notify.sock")
	sock, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sockPath, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()

	// A start that could not bind a port notified nothing: it failed
	// before READY.
	p := startServe(t, cfg, serveOptions{env: []string{"NOTIFY_SOCKET=" + sockPath, "WATCHDOG_USEC=400000"}})
	cmd := p.cmd

	next := func(within time.Duration) string {
		t.Helper()
		sock.SetReadDeadline(time.Now().Add(within))
		buf := make([]byte, 512)
		n, err := sock.Read(buf)
		if err != nil {
			t.Fatalf("no notification within %s: %v\n%s", within, err, p.stderr)
		}
		return string(buf[:n])
	}
	if msg := next(20 * time.Second); msg != "READY=1" {
		t.Fatalf("first notification %q, want READY=1", msg)
	}
	// READY means the API is already up.
	c, err := net.Dial("tcp", p.addr)
	if err != nil {
		t.Fatalf("READY=1 sent before the API listens: %v", err)
	}
	c.Close()
	for i := 0; i < 2; i++ {
		if msg := next(2 * time.Second); msg != "WATCHDOG=1" {
			t.Fatalf("notification %q, want WATCHDOG=1 pings", msg)
		}
	}
	cmd.Process.Signal(syscall.SIGTERM)
	for {
		msg := next(10 * time.Second)
		if msg == "STOPPING=1" {
			break
		}
		if msg != "WATCHDOG=1" {
			t.Fatalf("notification %q while stopping", msg)
		}
	}
}

// TestCheckConfigMatchesServe checks that check-config refuses what serve
// refuses before it binds, with the same file:line message: ports out of
// range (net.Listen alone would be the first to notice) and listen
// addresses this machine cannot have.
func TestCheckConfigMatchesServe(t *testing.T) {
	dir := t.TempDir()
	good, addr := writeConfig(t, dir)
	body, _ := os.ReadFile(good)
	for _, c := range []struct {
		name, from, to, want string
	}{
		{"port out of range", "listen: " + addr, "listen: 127.0.0.1:99999",
			`:2: server.listen "127.0.0.1:99999" port 99999 is out of range (0 to 65535)`},
		{"unresolvable host", "listen: " + addr, "listen: no-such-host.invalid:8080",
			`:2: server.listen "no-such-host.invalid:8080": host "no-such-host.invalid" does not resolve`},
		{"not this machine", `metrics_listen: "off"`, "metrics_listen: 192.0.2.1:9180",
			`:3: server.metrics_listen "192.0.2.1:9180": 192.0.2.1 is not an address of this machine`},
		{"embedded broker host", "driver: virtual}\n  - id: 2", "driver: virtual}\n      - {id: plug, name: Plug, driver: mqtt, profile: esphome, prefix: p, object_id: o}\n  - id: 2",
			`:1: mqtt.listen "192.0.2.1:1883": 192.0.2.1 is not an address of this machine`},
		{"embedded broker port", "driver: virtual}\n  - id: 2", "driver: virtual}\n      - {id: plug, name: Plug, driver: mqtt, profile: esphome, prefix: p, object_id: o}\n  - id: 2",
			`:1: mqtt.listen "127.0.0.1:188300" port 188300 is out of range (0 to 65535)`},
	} {
		path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".yaml")
		if !bytes.Contains(body, []byte(c.from)) {
			t.Fatalf("%s: %q not in the config", c.name, c.from)
		}
		cfg := bytes.Replace(body, []byte(c.from), []byte(c.to), 1)
		switch c.name {
		case "embedded broker port":
			cfg = append([]byte("mqtt: {broker: embedded, listen: 127.0.0.1:188300}\n"), cfg...)
		case "embedded broker host":
			cfg = append([]byte("mqtt: {broker: embedded, listen: 192.0.2.1:1883, users: {plug: pw}}\n"), cfg...)
		}
		os.WriteFile(path, cfg, 0o600)
		for _, cmd := range []string{"check-config", "serve"} {
			// A serve that wrongly starts stops again after a while.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			var out, errb bytes.Buffer
			code := run(ctx, []string{cmd, "--config", path}, strings.NewReader(""), &out, &errb, nil)
			cancel()
			r := result{code, out.String(), errb.String()}
			if r.code != 1 || !strings.Contains(r.stderr, path+c.want) {
				t.Errorf("%s: %s: exit %d, stderr %q; want exit 1 with %q", c.name, cmd, r.code, r.stderr, path+c.want)
			}
		}
	}
}

// lastSeenStripped is a JSON answer with each switch's last_seen taken
// out (its time differs from run to run), and how many there were.
func lastSeenStripped(body string) (string, int) {
	re := regexp.MustCompile(`,"last_seen":"[^"]+"`)
	return re.ReplaceAllString(body, ""), len(re.FindAllString(body, -1))
}
