package main

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/switchbridge/switchbridge/bridge/platform/accounts"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/switchbridge/switchbridge/bridge/daemon/daemontest"
	"github.com/switchbridge/switchbridge/bridge/hub/hubstore"
	"github.com/switchbridge/switchbridge/bridge/infra/version"
	"github.com/switchbridge/switchbridge/bridge/link"
	"github.com/switchbridge/switchbridge/bridge/store"
	"github.com/switchbridge/switchbridge/drivers/mqtt/mqtttest"
)

// multiHub is one platform and its hubs, each a real process on a loopback
// port, and what the tests need to drive them.
type multiHub struct {
	t        *testing.T
	dir      string
	platform *node
	hubs     map[string]*node
}

// node is one daemon: its config, address and process.
type node struct {
	name, cfg, addr, url, metrics string
	hubID, secret                 string
	proc                          *daemonProcess
	// platformCfg is the config of the platform a hub was registered
	// with (hub add, under its url), secretFile where its secret is.
	platformCfg, secretFile string
	// retarget, when set, points what stands in front of the node (a
	// proxy) at a new address.
	retarget func(addr string)
}

// start runs the node's daemon and notes where it listens. A listener
// the harness moves to a new port before the first start (startServe)
// takes what knew the old address with it: a hub is registered anew under
// its new URL, a proxy in front of it retargeted.
func (n *node) start(t *testing.T) {
	t.Helper()
	n.proc = startServe(t, n.cfg, serveOptions{moved: func(key, _, to string) {
		switch key {
		case "server.listen":
			n.addr, n.url = to, "http://"+to
			if n.platformCfg != "" {
				n.registerAnew(t)
			}
			if n.retarget != nil {
				n.retarget(to)
			}
		case "server.metrics_listen":
			n.metrics = to
		}
	}})
	n.addr, n.url = n.proc.addr, "http://"+n.proc.addr
	if n.metrics != "" {
		n.metrics = n.proc.metrics
	}
}

// register registers hub n with the platform (hub add) under its URL and
// writes its secret file.
func (n *node) register(t *testing.T) {
	t.Helper()
	r := runCLI(t, "", "hub", "add", n.name, "--base-url", n.url, "--json", "--config", n.platformCfg)
	var raw map[string]string
	if err := json.Unmarshal([]byte(r.stdout), &raw); r.code != 0 || err != nil {
		t.Fatalf("hub add %s: %+v", n.name, r)
	}
	n.hubID, n.secret = raw["hub_id"], raw["secret"]
	writeFile(t, n.secretFile, n.secret+"\n")
}

// registerAnew replaces hub n's registration, made under an address it
// could not listen on, with one under its URL now, and points its config
// at the new hub id. The hub never ran under the old one.
func (n *node) registerAnew(t *testing.T) {
	t.Helper()
	old := n.hubID
	if r := runCLI(t, "", "hub", "remove", old, "--config", n.platformCfg); r.code != 0 {
		t.Fatalf("hub remove %s: %+v", old, r)
	}
	n.register(t)
	body, err := os.ReadFile(n.cfg)
	if err != nil {
		t.Fatal(err)
	}
	from := "\n  hub_id: " + old + "\n"
	if !strings.Contains(string(body), from) {
		t.Fatalf("%s does not name hub %s", n.cfg, old)
	}
	writeFile(t, n.cfg, strings.Replace(string(body), from, "\n  hub_id: "+n.hubID+"\n", 1))
	t.Logf("hub %s registered anew as %s under %s", n.name, n.hubID, n.url)
}

// kill9 stops the daemon with SIGKILL and waits for it to be gone.
func (n *node) kill9(t *testing.T) {
	t.Helper()
	n.proc.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-n.proc.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not die", n.name)
	}
}

func startPlatform(t *testing.T) *multiHub {
	skipIfEmulated(t)
	m := &multiHub{t: t, dir: t.TempDir(), hubs: map[string]*node{}}
	p := &node{name: "platform", addr: freePort(t)}
	p.url = "http://" + p.addr
	p.cfg = filepath.Join(m.dir, "platform.yaml")
	writeFile(t, p.cfg, fmt.Sprintf(`server:
  listen: %s
  metrics_listen: "off"
data_dir: %s
locations:
  - id: 1
    name: Office
    switches:
      - {id: desk, name: Desk lamp, driver: virtual}
`, p.addr, filepath.Join(m.dir, "platform-data")))
	p.start(t)
	m.platform = p
	return m
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

// addHub registers a hub on the platform (hub add) and writes its config
// with locations (YAML list items) and extra top-level keys.
func (m *multiHub) addHub(name, locations, extra string) *node {
	t := m.t
	t.Helper()
	n := &node{name: name, addr: freePort(t), metrics: freePort(t), platformCfg: m.platform.cfg, secretFile: filepath.Join(m.dir, name+".secret")}
	n.url = "http://" + n.addr
	n.register(t)
	n.cfg = filepath.Join(m.dir, name+".yaml")
	writeFile(t, n.cfg, fmt.Sprintf(`server:
  listen: %s
  metrics_listen: %s
data_dir: %s
platform:
  url: %s
  hub_id: %s
  secret_file: %s
locations:
%s
%s`, n.addr, n.metrics, filepath.Join(m.dir, name+"-data"), m.platform.url, n.hubID, n.secretFile, locations, extra))
	m.hubs[name] = n
	return n
}

// hubList runs hub list --json on the platform.
func (m *multiHub) hubList() map[string]hubListEntry {
	t := m.t
	t.Helper()
	r := runCLI(t, "", "hub", "list", "--json", "--config", m.platform.cfg)
	var list []hubListEntry
	if err := json.Unmarshal([]byte(r.stdout), &list); r.code != 0 || err != nil {
		t.Fatalf("hub list: %+v %v", r, err)
	}
	out := map[string]hubListEntry{}
	for _, e := range list {
		out[e.Name] = e
	}
	return out
}

// waitFor polls cond every 20 ms until it holds or within passes.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < within {
		if cond() {
			return time.Since(start)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("after %s: %s", within, what)
	return 0
}

// metric reads one unlabelled sample of a hub's /metrics; -2 when absent.
func metric(n *node, name string) float64 {
	resp, err := http.Get("http://" + n.metrics + "/metrics")
	if err != nil {
		return -2
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			var f float64
			fmt.Sscan(v, &f)
			return f
		}
	}
	return -2
}

func status(t *testing.T, method, u, token string) int {
	t.Helper()
	code, _ := call(t, method, u, token)
	return code
}

// TestPlatformWithTwoHubs is issue 14 end to end: one platform and two
// hubs (B also with an MQTT plug on a test Mosquitto), a third-party
// client authorizing at the platform into a location of hub B.
func TestPlatformWithTwoHubs(t *testing.T) {
	t.Parallel() // long: beside the package's other long tests, once the short ones are done
	broker := mqtttest.StartMosquitto(t)
	plug := mqtttest.NewTasmota(t, broker.URL, mqtttest.TasmotaOptions{Topic: "barnplug"})
	m := startPlatform(t)
	a := m.addHub("house", `  - id: 10
    name: House
    switches:
      - {id: hall, name: Hall light, driver: virtual}`, "")
	b := m.addHub("barn", `  - id: 20
    name: Barn
    switches:
      - {id: barn-light, name: Barn light, driver: virtual}
      - {id: pump, name: Pump, driver: mqtt, profile: tasmota, topic: barnplug}
      - {id: chime, name: Chime, driver: virtual, commands: [on]}
      - {id: dud, name: Dud, driver: virtual, fail: true}`, fmt.Sprintf("mqtt:\n  broker: %s\n", broker.URL))
	a.start(t)
	b.start(t)
	waitFor(t, 15*time.Second, "both hubs report their inventory", func() bool {
		l := m.hubList()
		return l["house"].Link == "up" && l["barn"].Link == "up" && len(l["barn"].Locations) == 1 && l["barn"].Locations[0] == 20
	})

	// A user of the barn and the house, and a published app.
	if r := runCLI(t, "pw-alice\n", "user", "add", "alice", "--location", "20", "--location", "10", "--config", m.platform.cfg); r.code != 0 {
		t.Fatalf("user add with hub locations: %+v", r)
	}
	if r := runCLI(t, "pw-alice\n", "user", "add", "mallory", "--location", "99", "--config", m.platform.cfg); r.code == 0 {
		t.Errorf("user add into a location nobody holds succeeded: %+v", r)
	}
	// user locations --add takes a hub's location too, as user add does.
	if r := runCLI(t, "pw-bob\n", "user", "add", "bob", "--location", "10", "--config", m.platform.cfg); r.code != 0 {
		t.Fatalf("user add bob: %+v", r)
	}
	if r := runCLI(t, "", "user", "locations", "bob", "--add", "20", "--config", m.platform.cfg); r.code != 0 || !strings.Contains(r.stdout, "added to location 20 (Barn)") {
		t.Errorf("user locations --add with a hub location: %+v", r)
	}
	if r := runCLI(t, "", "user", "locations", "bob", "--add", "99", "--config", m.platform.cfg); r.code == 0 {
		t.Errorf("user locations --add with a location nobody holds succeeded: %+v", r)
	}
	r := runCLI(t, "", "app", "create", "--name", "Third party", "--redirect-uri", "https://client.example/cb", "--owner", "alice", "--publish", "--json", "--config", m.platform.cfg)
	var app struct{ ClientID, ClientSecret string }
	var raw map[string]string
	if err := json.Unmarshal([]byte(r.stdout), &raw); err != nil {
		t.Fatalf("app create: %+v", r)
	}
	app.ClientID, app.ClientSecret = raw["client_id"], raw["client_secret"]

	// The flow at the platform: login, consent lists the hubs' locations.
	ph := (&daemontest.Harness{URL: m.platform.url, Client: &http.Client{Timeout: 30 * time.Second}}).Checked(t)
	cfg := ph.OAuthConfig(daemontest.App{ClientID: app.ClientID, Secret: app.ClientSecret, RedirectURIs: []string{"https://client.example/cb"}})
	authURL := cfg.AuthCodeURL("state-1")
	br := ph.NewBrowser()
	consent := br.Login(t, authURL, "alice", "pw-alice")
	for _, want := range []string{"Install into Barn", "Barn light", "Pump", "Install into House", "Hall light"} {
		if !strings.Contains(consent.Body, want) {
			t.Errorf("consent page lacks %q", want)
		}
	}
	p := br.Consent(t, consent, authURL, 20, "barn-light", "pump")
	if p.StatusCode != http.StatusSeeOther {
		t.Fatalf("consent answered %d: %s", p.StatusCode, p.Body)
	}
	cb, _ := url.Parse(p.Header.Get("Location"))
	code := cb.Query().Get("code")
	tok, err := cfg.Exchange(context.WithValue(context.Background(), oauth2.HTTPClient, ph.Client), code)
	if err != nil {
		t.Fatal(err)
	}
	token := tok.AccessToken
	eps := ph.Endpoints(t, token)
	if len(eps) != 1 || eps[0].BaseURL != b.url || !strings.HasPrefix(eps[0].URI, b.url+"/api/apps/installations/") || eps[0].Location.Name != "Barn" {
		t.Fatalf("discovery = %+v, want hub barn's base_url %s", eps, b.url)
	}
	uri := eps[0].URI

	// Hub B serves it on the first request after discovery (a replica
	// miss syncs at once), hub A does not know it.
	if c, body := call(t, "GET", uri+"/switches", token); c != 200 {
		t.Fatalf("hub B on the first request after the code exchange: %d %s", c, body)
	}
	// An automatic refresh by x/oauth2, then at once a request at hub B.
	if tok.RefreshToken == "" {
		t.Fatal("no refresh token issued")
	}
	stale := &oauth2.Token{AccessToken: token, RefreshToken: tok.RefreshToken, Expiry: time.Now().Add(-time.Minute)}
	refreshed, err := cfg.TokenSource(context.WithValue(context.Background(), oauth2.HTTPClient, ph.Client), stale).Token()
	if err != nil || refreshed.AccessToken == token {
		t.Fatalf("refresh: %v", err)
	}
	if c, body := call(t, "GET", uri+"/switches", refreshed.AccessToken); c != 200 {
		t.Fatalf("hub B on the first request with a refreshed token: %d %s", c, body)
	}
	if c, body := call(t, "PUT", uri+"/switches/on", token); c != http.StatusNoContent {
		t.Fatalf("PUT on at hub B: %d %s", c, body)
	}
	if c, body := call(t, "GET", uri+"/switches", token); c != 200 || strings.Count(body, `"on"`) != 2 {
		t.Errorf("GET after on: %d %s", c, body)
	}
	if !plug.On() {
		t.Errorf("the MQTT plug on hub B was not switched on")
	}
	// The platform lists when the installation was last used: hub B
	// reports the uses of its tokens.
	instID := uri[strings.LastIndex(uri, "/")+1:]
	waitFor(t, 30*time.Second, "the platform records hub B's use of the installation", func() bool {
		r := runCLI(t, "", "installation", "list", "--config", m.platform.cfg)
		for _, line := range strings.Split(r.stdout, "\n") {
			if strings.HasPrefix(line, instID+" ") {
				return !strings.HasSuffix(strings.TrimSpace(line), "never")
			}
		}
		return false
	})
	// The error answers at hub B are those of a single daemon: 501 when a
	// selected switch lacks the command (nothing is switched), 502 naming
	// the switch that failed.
	r2 := runCLI(t, "", "app", "create", "--name", "Second", "--redirect-uri", "https://second.example/cb", "--owner", "alice", "--publish", "--json", "--config", m.platform.cfg)
	var app2 map[string]string
	if err := json.Unmarshal([]byte(r2.stdout), &app2); err != nil {
		t.Fatalf("app create: %+v", r2)
	}
	r3 := runCLI(t, "", "install", "--client-id", app2["client_id"], "--user", "alice", "--location", "20", "--switch", "chime", "--switch", "dud", "--json", "--config", m.platform.cfg)
	var g2 struct{ Token, Endpoint string }
	if err := json.Unmarshal([]byte(r3.stdout), &g2); r3.code != 0 || err != nil || !strings.HasPrefix(g2.Endpoint, b.url) {
		t.Fatalf("install into hub B: %+v", r3)
	}
	if c, body := call(t, "PUT", g2.Endpoint+"/switches/off", g2.Token); c != http.StatusNotImplemented || !strings.Contains(body, `"id":"chime"`) {
		t.Errorf("PUT off at hub B with a switch lacking off: %d %s, want 501 naming chime", c, body)
	}
	if c, body := call(t, "PUT", g2.Endpoint+"/switches/on", g2.Token); c != http.StatusBadGateway || !strings.Contains(body, `"dud"`) {
		t.Errorf("PUT on at hub B with a failing switch: %d %s, want 502 naming dud", c, body)
	}
	if c, body := call(t, "PUT", g2.Endpoint+"/switches/toggle", g2.Token); c != http.StatusBadRequest {
		t.Errorf("PUT toggle at hub B: %d %s, want 400", c, body)
	}
	// Hub A does not know hub B's token: 401, as a single daemon answers
	// a token it does not know.
	if c, body := call(t, "GET", strings.Replace(uri, b.url, a.url, 1)+"/switches", token); c != http.StatusUnauthorized {
		t.Errorf("hub A answered %d %s for hub B's installation, want 401", c, body)
	}
	if c, body := call(t, "GET", b.url+"/api/apps/endpoints", token); c != http.StatusNotFound || !strings.Contains(body, m.platform.url) {
		t.Errorf("discovery at a hub: %d %s, want 404 pointing at the platform", c, body)
	}

	// The platform is killed: hub B keeps serving the token, and says so.
	m.platform.kill9(t)
	if c, body := call(t, "GET", uri+"/switches", token); c != 200 {
		t.Errorf("hub B without its platform: %d %s", c, body)
	}
	waitFor(t, 40*time.Second, "hub B reports its link down", func() bool { return metric(b, "switchbridge_platform_link_up") == 0 })
	// Hub B restarted while the platform is down serves from its stored replica.
	b.proc.cmd.Process.Signal(syscall.SIGTERM)
	<-b.proc.done
	b.start(t)
	if c, body := call(t, "GET", uri+"/switches", token); c != 200 {
		t.Errorf("hub B restarted without its platform: %d %s", c, body)
	}
	if age := metric(b, "switchbridge_platform_replica_age_seconds"); age < 0 {
		t.Errorf("replica age of a hub with a stored replica = %v", age)
	}

	// The platform is back; a revocation (the code replayed revokes its
	// token) reaches hub B within 2 s.
	m.platform.start(t)
	waitFor(t, 45*time.Second, "hub B's link comes back", func() bool { return metric(b, "switchbridge_platform_link_up") == 1 })
	time.Sleep(300 * time.Millisecond) // the hub's long poll is waiting again
	revoked := time.Now()
	if _, err := cfg.Exchange(context.WithValue(context.Background(), oauth2.HTTPClient, ph.Client), code); err == nil {
		t.Fatal("a replayed code was exchanged")
	}
	took := waitFor(t, 5*time.Second, "the revocation reaches hub B", func() bool { return status(t, "GET", uri+"/switches", token) == 401 })
	t.Logf("revocation reached hub B %v after the replay", time.Since(revoked).Round(time.Millisecond))
	if took > 2*time.Second {
		t.Errorf("the revocation took %v to reach hub B, want ≤ 2s", took)
	}

	// /oauth/revoke and installation delete reach hub B within 2 s too.
	cliGrant := func() (string, string) {
		r := runCLI(t, "", "install", "--client-id", app.ClientID, "--user", "alice", "--location", "20", "--switch", "barn-light", "--json", "--config", m.platform.cfg)
		var g struct{ Token, Endpoint, InstallationID string }
		if err := json.Unmarshal([]byte(r.stdout), &g); r.code != 0 || err != nil {
			t.Fatalf("install: %+v", r)
		}
		if c, body := call(t, "GET", g.Endpoint+"/switches", g.Token); c != 200 {
			t.Fatalf("a CLI-issued token at hub B at once: %d %s", c, body)
		}
		return g.Token, g.Endpoint
	}
	measure := func(what, tok, endpoint string, act func()) {
		t.Helper()
		time.Sleep(300 * time.Millisecond) // the hub's long poll is waiting again
		start := time.Now()
		act()
		took := waitFor(t, 5*time.Second, what+" reaches hub B", func() bool {
			c := status(t, "GET", endpoint+"/switches", tok)
			return c == 401 || c == 404
		})
		t.Logf("%s reached hub B %v after it was made", what, time.Since(start).Round(time.Millisecond))
		if took > 2*time.Second {
			t.Errorf("%s took %v to reach hub B, want ≤ 2s", what, took)
		}
	}
	if r := runCLI(t, "", "installation", "list", "--config", m.platform.cfg); r.code != 0 || !strings.Contains(r.stdout, "20 (Barn)") {
		t.Errorf("installation list does not name hub B's location: %+v", r)
	}
	tok2, ep2 := cliGrant()
	measure("/oauth/revoke", tok2, ep2, func() {
		form := url.Values{"token": {tok2}}
		req, _ := http.NewRequest("POST", m.platform.url+"/oauth/revoke", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.SetBasicAuth(app.ClientID, app.ClientSecret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("/oauth/revoke: %d", resp.StatusCode)
		}
	})
	tok3, ep3 := cliGrant()
	measure("installation delete", tok3, ep3, func() {
		id := ep3[strings.LastIndex(ep3, "/")+1:]
		if r := runCLI(t, "", "installation", "delete", id, "--config", m.platform.cfg); r.code != 0 {
			t.Fatalf("installation delete: %+v", r)
		}
	})

	// Credentials: a wrong secret and a rotated one are refused.
	put := func(id, secret string) int {
		req, _ := http.NewRequest("PUT", m.platform.url+link.InventoryPath, strings.NewReader(`{"version":"x","locations":[]}`))
		req.SetBasicAuth(id, secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if c := put(a.hubID, "wrong"); c != http.StatusUnauthorized {
		t.Errorf("wrong secret: %d", c)
	}
	if r := runCLI(t, "", "hub", "rotate-secret", a.hubID, "--config", m.platform.cfg); r.code != 0 || !strings.Contains(r.stdout, "secret:") {
		t.Fatalf("rotate-secret: %+v", r)
	}
	if c := put(a.hubID, a.secret); c != http.StatusUnauthorized {
		t.Errorf("rotated secret: %d", c)
	}

	// A hub claiming another hub's location is refused, on both sides.
	c := m.addHub("copycat", `  - id: 20
    name: Barn too
    switches:
      - {id: x, name: X, driver: virtual}`, "")
	c.start(t)
	waitFor(t, 10*time.Second, "the copycat hub logs the refusal", func() bool {
		return strings.Contains(c.proc.stderr.String(), "the platform refused this hub") && strings.Contains(c.proc.stderr.String(), "location 20 is held by another hub")
	})
	if strings.Contains(c.proc.stderr.String(), "barn") || strings.Contains(c.proc.stderr.String(), b.hubID) {
		t.Errorf("the copycat hub learnt which hub holds location 20:\n%s", c.proc.stderr.String())
	}
	waitFor(t, 5*time.Second, "the platform logs the refusal, naming the holder", func() bool {
		return strings.Contains(m.platform.proc.stderr.String(), "refused the inventory of hub copycat") &&
			strings.Contains(m.platform.proc.stderr.String(), "hub barn ("+b.hubID+")")
	})
	l := m.hubList()
	if len(l["copycat"].Locations) != 0 || len(l["barn"].Locations) != 1 || l["barn"].Lag < 0 {
		t.Errorf("after the refusal: %+v", l)
	}
	// The hub reports the version its binary (this one) names itself by,
	// never "(devel)".
	if v := l["barn"].Version; v != version.Version() || strings.Contains(v, "devel") {
		t.Errorf("hub list: barn runs version %q, want %q", v, version.Version())
	}
	if r := runCLI(t, "", "hub", "list", "--config", m.platform.cfg); r.code != 0 || !strings.Contains(r.stdout, "REPLICA_LAG") || !strings.Contains(r.stdout, "barn") {
		t.Errorf("hub list: %+v", r)
	}

	// Removing hub B uninstalls what is installed in its locations, and
	// hub B stops serving them within seconds.
	tok4, ep4 := cliGrant()
	if r := runCLI(t, "", "hub", "remove", b.hubID, "--config", m.platform.cfg); r.code != 0 || !strings.Contains(r.stdout, "2 installations in its locations uninstalled") {
		t.Errorf("hub remove: %+v", r)
	}
	waitFor(t, 5*time.Second, "the removed hub stops serving", func() bool {
		c := status(t, "GET", ep4+"/switches", tok4)
		return c == 401 || c == 404
	})
	waitFor(t, 5*time.Second, "the removed hub logs why", func() bool {
		return strings.Contains(b.proc.stderr.String(), "the platform removed this hub")
	})
	if _, ok := m.hubList()["barn"]; ok {
		t.Error("hub B still listed after hub remove")
	}
	if c, body := call(t, "GET", m.platform.url+"/api/apps/endpoints", token); c != http.StatusUnauthorized {
		t.Errorf("discovery after hub remove: %d %s", c, body)
	}
}

// TestKill9MidSync: installs keep coming at the platform while hub B and
// then the platform are killed with SIGKILL and started again; in the end
// every token works at hub B and its replica is exactly the platform's
// records for it: nothing lost, nothing doubled.
func TestKill9MidSync(t *testing.T) {
	m := startPlatform(t)
	b := m.addHub("barn", `  - id: 20
    name: Barn
    switches:
      - {id: s1, name: S1, driver: virtual}
      - {id: s2, name: S2, driver: virtual}`, "")
	b.start(t)
	waitFor(t, 15*time.Second, "hub B reports its inventory", func() bool { return len(m.hubList()["barn"].Locations) == 1 })
	if r := runCLI(t, "pw-alice\n", "user", "add", "alice", "--location", "20", "--config", m.platform.cfg); r.code != 0 {
		t.Fatalf("user add: %+v", r)
	}
	var apps, secrets []string
	for i := range 3 {
		r := runCLI(t, "", "app", "create", "--name", fmt.Sprint("A", i), "--redirect-uri", "https://x/cb", "--owner", "alice", "--json", "--config", m.platform.cfg)
		var raw map[string]string
		if err := json.Unmarshal([]byte(r.stdout), &raw); err != nil {
			t.Fatalf("app create: %+v", r)
		}
		apps = append(apps, raw["client_id"])
		secrets = append(secrets, raw["client_secret"])
	}
	type grant struct{ token, endpoint string }
	var grants []grant
	install := func(i int) {
		sw := []string{"s1", "s2"}[i%2]
		r := runCLI(t, "", "install", "--client-id", apps[i%3], "--user", "alice", "--location", "20", "--switch", sw, "--json", "--config", m.platform.cfg)
		var g struct{ Token, Endpoint string }
		if err := json.Unmarshal([]byte(r.stdout), &g); r.code != 0 || err != nil {
			t.Fatalf("install %d: %+v", i, r)
		}
		if !strings.HasPrefix(g.Endpoint, b.url+"/") {
			t.Fatalf("install into a hub's location gave endpoint %s, want hub B's %s", g.Endpoint, b.url)
		}
		grants = append(grants, grant{g.Token, g.Endpoint})
	}
	// A revocation while hub B is down and one just before the platform
	// dies: each must hold at hub B in the end, exactly once.
	revoke := func(i int) {
		form := url.Values{"token": {grants[i].token}}
		req, _ := http.NewRequest("POST", m.platform.url+"/oauth/revoke", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.SetBasicAuth(apps[i%3], secrets[i%3])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("revoking token %d: %d", i, resp.StatusCode)
		}
	}
	revoked := map[int]bool{5: true, 30: true}
	for i := range 60 {
		install(i)
		switch i {
		case 20:
			revoke(5)
		case 34:
			revoke(30)
		case 15:
			b.kill9(t)
		case 25:
			b.start(t)
		case 35:
			m.platform.kill9(t)
		case 45:
			m.platform.start(t)
		}
		time.Sleep(10 * time.Millisecond)
	}
	last := grants[len(grants)-1]
	waitFor(t, 45*time.Second, "hub B catches up", func() bool { return status(t, "GET", last.endpoint+"/switches", last.token) == 200 })
	for i, g := range grants {
		want := 200
		if revoked[i] {
			want = 401
		}
		if c, body := call(t, "GET", g.endpoint+"/switches", g.token); c != want {
			t.Errorf("token %d at hub B: %d %s, want %d", i, c, body, want)
		}
	}

	// The replica is exactly the platform's records for hub B.
	ctx := context.Background()
	b.proc.cmd.Process.Signal(syscall.SIGTERM)
	<-b.proc.done
	pdb, err := store.Open(ctx, filepath.Join(m.dir, "platform-data"))
	if err != nil {
		t.Fatal(err)
	}
	defer pdb.Close()
	want, err := accounts.New(pdb).Snapshot(ctx, b.hubID)
	if err != nil {
		t.Fatal(err)
	}
	hdb, err := store.Open(ctx, filepath.Join(m.dir, "barn-data"))
	if err != nil {
		t.Fatal(err)
	}
	defer hdb.Close()
	st, err := hubstore.New(hdb).ReplicaState(ctx)
	if err != nil || st.Cursor != want.Cursor {
		t.Errorf("hub B's cursor = %+v %v, platform at %d", st, err, want.Cursor)
	}
	ins, toks, err := hubstore.New(hdb).ReplicaCounts(ctx)
	if err != nil || ins != len(want.Installations) || toks != len(want.Tokens) || ins != 3 || toks != 60 {
		t.Errorf("replica holds %d installations and %d tokens (%v); the platform has %d and %d for hub B (want 3 and 60)",
			ins, toks, err, len(want.Installations), len(want.Tokens))
	}
	r := hubstore.New(hdb).Replica()
	for _, in := range want.Installations {
		got, err := r.Installation(ctx, in.ID)
		if err != nil || strings.Join(got.SwitchIDs, ",") != strings.Join(in.SwitchIDs, ",") || got.ClientID != in.ClientID ||
			got.UserID != in.UserID || got.LocationID != in.LocationID || !got.UpdatedAt.Equal(in.UpdatedAt) {
			t.Errorf("installation %s: replica %+v %v, platform %+v", in.ID, got, err, in)
		}
	}
	nRevoked := 0
	for _, tk := range want.Tokens {
		got, err := r.TokenGrant(ctx, tk.Hash)
		if err != nil || got.InstallationID != tk.InstallationID || !got.ExpiresAt.Equal(tk.ExpiresAt) || got.Revoked != tk.Revoked ||
			got.Member != true || got.Legacy || got.Installation.LocationID != 20 {
			t.Errorf("token of %s: replica %+v %v, platform %+v", tk.InstallationID, got, err, tk)
		}
		if tk.Revoked {
			nRevoked++
		}
	}
	if nRevoked != len(revoked) {
		t.Errorf("the platform holds %d revoked tokens for hub B, want %d", nRevoked, len(revoked))
	}
}
