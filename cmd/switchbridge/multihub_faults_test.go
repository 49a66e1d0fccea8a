package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge/link"
	"github.com/switchbridge/switchbridge/bridge/link/linktest"
)

// The hub link under an operator's bad day, with real processes: dead
// connections, a platform restart, a rotated secret, a copied config.

// barnLocation is a hub's one location 20 with a virtual switch.
const barnLocation = `  - id: 20
    name: Barn
    switches:
      - {id: barn-light, name: Barn light, driver: virtual}`

// grantAt installs an app of a new user into location loc and returns its
// token and endpoint.
func (m *multiHub) grantAt(user, loc, sw string) (token, endpoint, installationID string) {
	t := m.t
	t.Helper()
	if r := runCLI(t, "pw-"+user+"\n", "user", "add", user, "--location", loc, "--config", m.platform.cfg); r.code != 0 {
		t.Fatalf("user add: %+v", r)
	}
	r := runCLI(t, "", "app", "create", "--name", "App of "+user, "--redirect-uri", "https://client.example/cb", "--owner", user, "--json", "--config", m.platform.cfg)
	var app map[string]string
	if err := json.Unmarshal([]byte(r.stdout), &app); err != nil {
		t.Fatalf("app create: %+v", r)
	}
	r = runCLI(t, "", "install", "--client-id", app["client_id"], "--user", user, "--location", loc, "--switch", sw, "--json", "--config", m.platform.cfg)
	var g struct{ Token, Endpoint, InstallationID string }
	if err := json.Unmarshal([]byte(r.stdout), &g); r.code != 0 || err != nil {
		t.Fatalf("install: %+v", r)
	}
	return g.Token, g.Endpoint, g.Endpoint[strings.LastIndex(g.Endpoint, "/")+1:]
}

// sighup sends SIGHUP to a node.
func (n *node) sighup(t *testing.T) {
	t.Helper()
	if err := n.proc.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
}

// TestHubLinkSurvivesDeadConnections: a network event silently kills the
// connections between a hub and its platform (new ones flow). The hub
// drops them within seconds and polls again on a fresh connection, and an
// uninstall made at that moment stops the token at the hub within 5 s.
func TestHubLinkSurvivesDeadConnections(t *testing.T) {
	m := startPlatform(t)
	proxy := linktest.StartFaultProxy(t, m.platform.addr)
	b := m.addHub("barn", barnLocation, "")
	cfg, err := os.ReadFile(b.cfg)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, b.cfg, strings.Replace(string(cfg), "url: "+m.platform.url, "url: "+proxy.URL(), 1))
	b.start(t)
	waitFor(t, 15*time.Second, "hub B's link is up", func() bool { return metric(b, "switchbridge_platform_link_up") == 1 })
	token, endpoint, id := m.grantAt("alice", "20", "barn-light")
	if c, body := call(t, "GET", endpoint+"/switches", token); c != 200 {
		t.Fatalf("the token at hub B: %d %s", c, body)
	}
	// The long poll waits and has heard a heartbeat.
	time.Sleep(link.HeartbeatInterval + 300*time.Millisecond)

	killed := proxy.Blackhole()
	start := time.Now()
	if r := runCLI(t, "", "installation", "delete", id, "--config", m.platform.cfg); r.code != 0 {
		t.Fatalf("installation delete: %+v", r)
	}
	took := waitFor(t, 30*time.Second, "the uninstall reaches hub B", func() bool { return status(t, "GET", endpoint+"/switches", token) == 401 })
	t.Logf("%d connections killed; the uninstall reached hub B %v after it was made", killed, time.Since(start).Round(time.Millisecond))
	if took > 5*time.Second {
		t.Errorf("the uninstall took %v to reach hub B after the connections died, want ≤ 5 s", took)
	}
	// New connections flow: the hub polls again on a fresh one, and its
	// link does not count as down.
	waitFor(t, 5*time.Second, "hub B says it polled again on a fresh connection", func() bool {
		return strings.Contains(b.proc.stderr.String(), "polling again on a fresh connection")
	})
	if strings.Contains(b.proc.stderr.String(), "platform link lost") {
		t.Errorf("hub B took its link for down though new connections flowed:\n%s", b.proc.stderr.String())
	}
}

// TestPlatformRestartWithHubs: SIGTERM to a platform with a linked hub
// ends the hub's long poll at once; the platform exits 0 well within its
// shutdown timeout, and the hub is linked to the restarted platform within
// about a second of it listening again.
func TestPlatformRestartWithHubs(t *testing.T) {
	m := startPlatform(t)
	b := m.addHub("barn", barnLocation, "")
	b.start(t)
	waitFor(t, 15*time.Second, "hub B's link is up", func() bool { return metric(b, "switchbridge_platform_link_up") == 1 })
	time.Sleep(300 * time.Millisecond) // the long poll waits

	start := time.Now()
	m.platform.proc.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.platform.proc.done:
	case <-time.After(15 * time.Second):
		t.Fatal("the platform did not exit")
	}
	took := time.Since(start)
	t.Logf("the platform exited %v after SIGTERM", took.Round(time.Millisecond))
	if err := m.platform.proc.err; err != nil {
		t.Errorf("the platform exited with %v, want 0:\n%s", err, m.platform.proc.stderr)
	}
	if took > 3*time.Second {
		t.Errorf("the platform took %v to exit with a hub linked, want ≤ 3 s", took)
	}
	waitFor(t, 5*time.Second, "hub B sees its link down", func() bool { return metric(b, "switchbridge_platform_link_up") == 0 })
	// A restart that takes a few seconds (a slow machine, an upgrade):
	// the hub must not have backed off meanwhile.
	time.Sleep(4 * time.Second)

	m.platform.start(t)
	back := waitFor(t, 30*time.Second, "hub B links to the restarted platform", func() bool { return metric(b, "switchbridge_platform_link_up") == 1 })
	t.Logf("hub B linked %v after the platform listened again", back.Round(time.Millisecond))
	if back > 1500*time.Millisecond {
		t.Errorf("hub B took %v to link to the restarted platform, want about a second", back)
	}
}

// TestHubSIGHUPReadsNewSecret: after hub rotate-secret, the new secret
// written into secret_file and SIGHUP, the hub links again without a
// restart.
func TestHubSIGHUPReadsNewSecret(t *testing.T) {
	m := startPlatform(t)
	b := m.addHub("barn", barnLocation, "")
	b.start(t)
	waitFor(t, 15*time.Second, "hub B's link is up", func() bool { return metric(b, "switchbridge_platform_link_up") == 1 })
	r := runCLI(t, "", "hub", "rotate-secret", b.hubID, "--json", "--config", m.platform.cfg)
	var out map[string]string
	if err := json.Unmarshal([]byte(r.stdout), &out); r.code != 0 || err != nil || out["secret"] == "" {
		t.Fatalf("rotate-secret: %+v", r)
	}
	waitFor(t, 10*time.Second, "hub B is refused", func() bool { return metric(b, "switchbridge_platform_link_refused") == 1 })
	writeFile(t, filepath.Join(m.dir, "barn.secret"), out["secret"]+"\n")
	b.sighup(t)
	took := waitFor(t, 10*time.Second, "hub B links with the new secret", func() bool {
		return metric(b, "switchbridge_platform_link_refused") == 0 && metric(b, "switchbridge_platform_link_up") == 1
	})
	t.Logf("hub B linked %v after SIGHUP", took.Round(time.Millisecond))
	if b.proc.cmd.ProcessState != nil {
		t.Fatal("hub B exited")
	}
}

// TestCopiedHubCredentials: a second process started with hub A's id and
// secret but another location is refused while A holds the link, and
// says so on both sides and in hub list; A keeps its location, its tokens
// and its revocations. When the copy holds the link instead (A was down),
// A, back, is refused and serves none of its former location's
// installations.
func TestCopiedHubCredentials(t *testing.T) {
	m := startPlatform(t)
	a := m.addHub("house", `  - id: 10
    name: House
    switches:
      - {id: hall, name: Hall light, driver: virtual}`, "")
	a.start(t)
	waitFor(t, 15*time.Second, "hub A's link is up", func() bool { return metric(a, "switchbridge_platform_link_up") == 1 })
	token, endpoint, id := m.grantAt("alice", "10", "hall")
	if c, body := call(t, "GET", endpoint+"/switches", token); c != 200 {
		t.Fatalf("the token at hub A: %d %s", c, body)
	}

	// The copy: A's id and secret file, location 30, its own database.
	c := &node{name: "copy", addr: freePort(t), metrics: freePort(t), hubID: a.hubID, secret: a.secret}
	c.url = "http://" + c.addr
	c.cfg = filepath.Join(m.dir, "copy.yaml")
	acfg, err := os.ReadFile(a.cfg)
	if err != nil {
		t.Fatal(err)
	}
	body := strings.NewReplacer(a.addr, c.addr, a.metrics, c.metrics, filepath.Join(m.dir, "house-data"), filepath.Join(m.dir, "copy-data"),
		"id: 10", "id: 30", "name: House", "name: Shed").Replace(string(acfg))
	writeFile(t, c.cfg, body)
	c.start(t)
	waitFor(t, 15*time.Second, "the copy is refused", func() bool { return metric(c, "switchbridge_platform_link_refused") == 1 })
	waitFor(t, 5*time.Second, "the platform logs the second process", func() bool {
		return strings.Contains(m.platform.proc.stderr.String(), "two processes call with the credentials of hub house")
	})
	// The log line may follow the metric by a moment on a loaded machine.
	waitFor(t, 5*time.Second, "the copy says why it is refused", func() bool {
		return strings.Contains(c.proc.stderr.String(), "another process with this hub's credentials")
	})
	l := m.hubList()["house"]
	if len(l.Locations) != 1 || l.Locations[0] != 10 || !strings.Contains(l.Conflict, "refused instance") || l.ConflictAt == "" {
		t.Errorf("hub list after the copy was refused: %+v", l)
	}
	if r := runCLI(t, "", "hub", "list", "--config", m.platform.cfg); !strings.Contains(r.stdout, "another process with this hub's credentials") {
		t.Errorf("hub list does not show the refused process:\n%s", r.stdout)
	}
	if c, body := call(t, "GET", endpoint+"/switches", token); c != 200 {
		t.Errorf("the token at hub A with the copy refused: %d %s", c, body)
	}
	if r := runCLI(t, "", "installation", "delete", id, "--config", m.platform.cfg); r.code != 0 {
		t.Fatalf("installation delete: %+v", r)
	}
	waitFor(t, 3*time.Second, "the uninstall reaches hub A", func() bool { return status(t, "GET", endpoint+"/switches", token) == 401 })

	// A stops; the copy takes the link and its location. A, back, is
	// refused and serves nothing of location 10.
	token2, endpoint2, _ := m.grantAt("bob", "10", "hall")
	waitFor(t, 5*time.Second, "the new token works at hub A", func() bool { return status(t, "GET", endpoint2+"/switches", token2) == 200 })
	a.proc.cmd.Process.Signal(syscall.SIGTERM)
	<-a.proc.done
	waitFor(t, 45*time.Second, "the copy takes the link", func() bool {
		l := m.hubList()["house"]
		return len(l.Locations) == 1 && l.Locations[0] == 30
	})
	a.start(t)
	waitFor(t, 15*time.Second, "hub A, back, is refused", func() bool { return metric(a, "switchbridge_platform_link_refused") == 1 })
	waitFor(t, 5*time.Second, "hub A stops serving location 10", func() bool {
		return status(t, "GET", endpoint2+"/switches", token2) != http.StatusOK
	})
}

// TestRestoreOlderThanAHubsSecret follows systemd/README.md's restore with
// a hub whose secret is newer than the backup: the restored platform tells
// the hub, which stops serving (a token issued after the backup no longer
// works there) and says it needs new credentials; rotate-secret, the
// secret written and SIGHUP bring it back, serving what the restored
// platform holds.
func TestRestoreOlderThanAHubsSecret(t *testing.T) {
	m := startPlatform(t)
	b := m.addHub("barn", barnLocation, "")
	b.start(t)
	waitFor(t, 15*time.Second, "hub B's link is up", func() bool { return metric(b, "switchbridge_platform_link_up") == 1 })
	kept, keptEP, _ := m.grantAt("alice", "20", "barn-light")
	backup := filepath.Join(m.dir, "platform-backup.db")
	if r := runCLI(t, "", "backup", backup, "--config", m.platform.cfg); r.code != 0 {
		t.Fatalf("backup: %+v", r)
	}
	rekey := func() {
		t.Helper()
		r := runCLI(t, "", "hub", "rotate-secret", b.hubID, "--json", "--config", m.platform.cfg)
		var out map[string]string
		if err := json.Unmarshal([]byte(r.stdout), &out); r.code != 0 || err != nil {
			t.Fatalf("rotate-secret: %+v", r)
		}
		writeFile(t, filepath.Join(m.dir, "barn.secret"), out["secret"]+"\n")
		b.sighup(t)
		waitFor(t, 10*time.Second, "hub B links with its new secret", func() bool {
			return metric(b, "switchbridge_platform_link_up") == 1 && metric(b, "switchbridge_platform_link_refused") == 0
		})
	}
	rekey() // after the backup
	later, laterEP, _ := m.grantAt("bob", "20", "barn-light")
	if c, body := call(t, "GET", laterEP+"/switches", later); c != 200 {
		t.Fatalf("a token issued after the backup at hub B: %d %s", c, body)
	}

	// The restore, as systemd/README.md says.
	m.platform.proc.cmd.Process.Signal(syscall.SIGTERM)
	<-m.platform.proc.done
	data := filepath.Join(m.dir, "platform-data")
	aside := filepath.Join(m.dir, "damaged")
	if err := os.Mkdir(aside, 0o700); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(data, "switchbridge.db*"))
	for _, f := range files {
		if err := os.Rename(f, filepath.Join(aside, filepath.Base(f))); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := os.ReadFile(backup)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(data, "switchbridge.db"), string(raw))
	m.platform.start(t)

	waitFor(t, 30*time.Second, "hub B says it needs new credentials", func() bool {
		return metric(b, "switchbridge_platform_link_refused") == 2 && strings.Contains(b.proc.stderr.String(), "this hub needs new credentials")
	})
	for name, g := range map[string][2]string{"issued after the backup": {later, laterEP}, "issued before": {kept, keptEP}} {
		if c, body := call(t, "GET", g[1]+"/switches", g[0]); c == 200 {
			t.Errorf("a token %s at a hub told to get new credentials: %d %s", name, c, body)
		}
	}
	rekey()
	waitFor(t, 5*time.Second, "hub B serves what the restored platform holds", func() bool { return status(t, "GET", keptEP+"/switches", kept) == 200 })
	if c, body := call(t, "GET", laterEP+"/switches", later); c != http.StatusUnauthorized {
		t.Errorf("a token issued after the backup, at the re-keyed hub: %d %s, want 401", c, body)
	}
}
