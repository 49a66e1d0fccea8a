package daemon_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/oauth2"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/bridge/daemon"
	"github.com/switchbridge/switchbridge/bridge/daemon/daemontest"
	"github.com/switchbridge/switchbridge/drivers"
	"github.com/switchbridge/switchbridge/drivers/builtin"
	"github.com/switchbridge/switchbridge/drivers/virtual"
)

func scrape(t *testing.T, h *daemontest.Harness) string {
	t.Helper()
	resp, err := http.Get("http://" + h.MetricsAddr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape = %d", resp.StatusCode)
	}
	return string(b)
}

// sample returns the value of the sample whose line starts with series, or
// -1 when there is none.
func sample(text, series string) float64 {
	re := regexp.MustCompile("(?m)^" + regexp.QuoteMeta(series) + ` (\S+)$`)
	m := re.FindStringSubmatch(text)
	if m == nil {
		return -1
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// TestMetricsAfterAScriptedFlow runs the OAuth flow and some commands, then
// scrapes the metrics listener over HTTP and checks every count moved as
// the flow says it must.
func TestMetricsAfterAScriptedFlow(t *testing.T) {
	h := daemontest.StartWith(t, daemontest.Options{Config: hubConfig, Metrics: true})
	alice := h.AddUser(t, "alice", "alice-pw", 1, 2)
	app := h.AddApp(t, alice, true, redirect)

	g := h.Authorize(t, app, "alice", "alice-pw", 1, "kitchen", "doorbell", "broken")
	h.Command(t, g, "on")  // kitchen, doorbell ok; broken fails
	h.Command(t, g, "off") // refused: doorbell lacks off
	h.List(t, g)
	h.Call(t, http.MethodGet, g.URI+"/switches", "bogus")
	h.Call(t, http.MethodGet, g.URI+"/switches", "")
	cfg := h.OAuthConfig(app)
	cfg.ClientSecret = "wrong"
	cfg.Endpoint.AuthStyle = oauth2.AuthStyleInHeader // auto-detect would try twice
	cfg.Exchange(context.Background(), "whatever")

	text := scrape(t, h)
	want := map[string]float64{
		`switchbridge_oauth_authorizations_granted_total`:                                                          1,
		`switchbridge_oauth_tokens_issued_total`:                                                                   1,
		`switchbridge_installations`:                                                                               1,
		`switchbridge_switch_commands_total{outcome="ok",switch="kitchen"}`:                                        1,
		`switchbridge_switch_commands_total{outcome="ok",switch="doorbell"}`:                                       1,
		`switchbridge_switch_commands_total{outcome="failed",switch="broken"}`:                                     1,
		`switchbridge_switch_commands_total{outcome="unsupported",switch="doorbell"}`:                              1,
		`switchbridge_switch_info{driver="virtual",location="1",name="Kitchen light",profile="",switch="kitchen"}`: 1,
		`switchbridge_switch_state{location="1",switch="kitchen"}`:                                                 1,
		`switchbridge_switch_state{location="2",switch="garage-light"}`:                                            0,
		`switchbridge_switch_available{location="1",switch="kitchen"}`:                                             1,
		`switchbridge_location_info{location="1",name="Home"}`:                                                     1,
		`switchbridge_api_token_failures_total{reason="invalid"}`:                                                  1,
		`switchbridge_api_token_failures_total{reason="missing"}`:                                                  1,
		`switchbridge_http_requests_total{code="204",method="PUT",route="/api/apps/installations/{id}/{path...}"}`: 0,
		`switchbridge_http_requests_total{code="502",method="PUT",route="/api/apps/installations/{id}/{path...}"}`: 1,
		`switchbridge_http_requests_total{code="501",method="PUT",route="/api/apps/installations/{id}/{path...}"}`: 1,
		`switchbridge_http_requests_total{code="200",method="GET",route="/api/apps/endpoints"}`:                    1,
		`switchbridge_http_requests_total{code="303",method="POST",route="/oauth/login"}`:                          1,
	}
	for series, v := range want {
		got := sample(text, series)
		if v == 0 {
			if got > 0 {
				t.Errorf("%s = %v, want none or 0", series, got)
			}
			continue
		}
		if got != v {
			t.Errorf("%s = %v, want %v", series, got, v)
		}
	}
	if got := sample(text, `switchbridge_oauth_client_auth_failures_total{reason="bad_credentials"}`); got != 1 {
		t.Errorf("client auth failures = %v, want 1", got)
	}
	// No label carries a token, a user or a raw installation path.
	for _, secret := range []string{g.Token.AccessToken, "alice", strings.TrimPrefix(g.URI, h.URL)} {
		if strings.Contains(text, secret) {
			t.Errorf("metrics leak %q", secret)
		}
	}
	for _, family := range []string{"go_goroutines", "process_resident_memory_bytes"} {
		if !strings.Contains(text, family) {
			t.Errorf("standard collector %s missing", family)
		}
	}
}

func TestOpenRefusesBadStarts(t *testing.T) {
	occupied, err := (&net0{}).listen()
	if err != nil {
		t.Fatal(err)
	}
	defer occupied.Close()
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o600)
	cases := map[string]struct {
		yaml string
		msg  string
	}{
		"port taken":            {"server: {listen: " + occupied.Addr().String() + ", metrics_listen: \"off\"}\ndata_dir: " + t.TempDir() + "\n" + hubConfig, "address already in use"},
		"metrics port taken":    {"server: {listen: 127.0.0.1:0, metrics_listen: " + occupied.Addr().String() + "}\ndata_dir: " + t.TempDir() + "\n" + hubConfig, "server.metrics_listen"},
		"data dir not writable": {"server: {listen: 127.0.0.1:0, metrics_listen: \"off\"}\ndata_dir: " + filepath.Join(file, "data") + "\n" + hubConfig, "data dir"},
	}
	for name, c := range cases {
		cfg, err := config.Load("x.yaml", config.Text(c.yaml))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		d, err := daemon.Open(context.Background(), cfg, builtin.Registry(), nil)
		if err == nil {
			d.Close()
			t.Errorf("%s: started", name)
			continue
		}
		if !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: %v, want it to mention %q", name, err, c.msg)
		}
	}
}

func TestReload(t *testing.T) {
	h := daemontest.Start(t, hubConfig)
	alice := h.AddUser(t, "alice", "alice-pw", 1, 2)
	app := h.AddApp(t, alice, true, redirect)
	g := h.Authorize(t, app, "alice", "alice-pw", 1, "kitchen", "hall")
	h.Command(t, g, "on")

	// A new config: hall is gone, a porch light is added.
	next := strings.Replace(hubConfig, "      - {id: hall, name: Hall lamp, driver: virtual, initial: on}\n",
		"      - {id: porch, name: Porch light, driver: virtual}\n", 1)
	cfg, err := config.Load("next.yaml", config.Text("server: {listen: 127.0.0.1:0, metrics_listen: \"off\"}\ndata_dir: "+h.DataDir+"\n"+next))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Reload(context.Background(), cfg); err != nil {
		t.Fatalf("reload: %v", err)
	}
	if _, ok := h.Switchboard.Switch("porch"); !ok {
		t.Error("porch not there after reload")
	}
	// kitchen keeps its state (restored from the store by the new driver).
	if st := mustSwitch(t, h, "kitchen").Device.State(); st.Value != bridge.On {
		t.Errorf("kitchen = %s after reload, want on", st.Value)
	}
	// The installation still names hall, which is gone: a clear 404.
	p := h.Call(t, http.MethodGet, g.URI+"/switches", g.Token.AccessToken)
	if p.StatusCode != http.StatusNotFound || !strings.Contains(p.Body, "hall") {
		t.Errorf("list with a removed switch = %d %s", p.StatusCode, p.Body)
	}

	// A config whose drivers fail to open leaves the running switches alone.
	bad := strings.Replace(next, "driver: virtual}", "driver: mqtt, profile: tasmota, topic: t}", 1)
	bad = "mqtt: {broker: embedded, listen: \"" + occupiedAddr(t) + "\"}\n" + bad
	cfg, err = config.Load("bad.yaml", config.Text("server: {listen: 127.0.0.1:0, metrics_listen: \"off\"}\ndata_dir: "+h.DataDir+"\n"+bad))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Reload(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "kept the previous switches") {
		t.Errorf("reload with a failing driver: %v", err)
	}
	if _, ok := h.Switchboard.Switch("porch"); !ok {
		t.Error("failed reload lost the working switches")
	}
	if sw, _ := h.Switchboard.Switch("kitchen"); sw.Driver != "virtual" {
		t.Errorf("kitchen driver = %s after a failed reload", sw.Driver)
	}
}

// flakyDriver is the virtual driver on hardware that can vanish: while
// gone is set, Open fails as a relay board unplugged from the bus would.
type flakyDriver struct {
	drivers.Driver
	gone *atomic.Bool
}

func (d flakyDriver) Open(ctx context.Context) (map[string]bridge.Device, error) {
	if d.gone.Load() {
		return nil, errors.New("relay board not found")
	}
	return d.Driver.Open(ctx)
}

// TestReloadWhenRollbackFails: a reload whose new drivers fail to open, at
// a moment when the previous ones cannot be reopened either, leaves the hub
// serving no switches (commands answer 404 naming them, nothing reaches a
// closed device) and says so; the next reload that opens brings them back.
func TestReloadWhenRollbackFails(t *testing.T) {
	gone := &atomic.Bool{}
	reg := append(builtin.Registry(), drivers.Registration{Name: "flaky", New: func(env drivers.Env) (drivers.Driver, error) {
		d, err := virtual.New(env)
		return flakyDriver{Driver: d, gone: gone}, err
	}})
	body := func(fanName string) string {
		return `
locations:
  - id: 1
    name: Home
    switches:
      - {id: kitchen, name: Kitchen light, driver: virtual}
      - {id: fan, name: ` + fanName + `, driver: flaky}
`
	}
	h := daemontest.StartWith(t, daemontest.Options{Config: body("Fan"), DataDir: t.TempDir(), Registry: reg})
	alice := h.AddUser(t, "alice", "alice-pw", 1)
	app := h.AddApp(t, alice, true, redirect)
	g := h.Authorize(t, app, "alice", "alice-pw", 1, "kitchen", "fan")
	if p := h.Command(t, g, "on"); p.StatusCode != http.StatusNoContent {
		t.Fatalf("on = %d %s", p.StatusCode, p.Body)
	}
	reload := func(name string) error {
		cfg, err := config.Load("next.yaml", config.Text("server: {listen: 127.0.0.1:0, metrics_listen: \"off\"}\ndata_dir: "+h.DataDir+"\n"+body(name)))
		if err != nil {
			t.Fatal(err)
		}
		return h.Reload(context.Background(), cfg)
	}

	// The fan's driver changed (a new name), so it is reopened, and its
	// board is gone: both the new config and the old one fail to open.
	gone.Store(true)
	err := reload("Ceiling fan")
	if err == nil || !strings.Contains(err.Error(), "previous switches could not be reopened") || !strings.Contains(err.Error(), "relay board not found") {
		t.Fatalf("reload with the board gone: %v", err)
	}
	for _, id := range []string{"kitchen", "fan"} {
		if _, ok := h.Switchboard.Switch(id); ok {
			t.Errorf("%s still served after both configs failed to open", id)
		}
	}
	p := h.Command(t, g, "off")
	if p.StatusCode != http.StatusNotFound || !strings.Contains(p.Body, "kitchen") || !strings.Contains(p.Body, "fan") {
		t.Errorf("command with no switches served = %d %s, want 404 naming both", p.StatusCode, p.Body)
	}

	// The board is back: the next reload opens, values restored.
	gone.Store(false)
	if err := reload("Ceiling fan"); err != nil {
		t.Fatalf("reload with the board back: %v", err)
	}
	for _, s := range h.List(t, g) {
		if s.Value == nil || *s.Value != "on" {
			t.Errorf("%s after recovery = %v, want on", s.Name, s.Value)
		}
	}
	if p := h.Command(t, g, "off"); p.StatusCode != http.StatusNoContent {
		t.Errorf("off after recovery = %d %s", p.StatusCode, p.Body)
	}
}
