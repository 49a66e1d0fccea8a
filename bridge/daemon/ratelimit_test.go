package daemon_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/bridge/daemon/daemontest"
)

// server.rate_limit through the running daemon, with tokens from the real
// authorization flow: every API answer carries the headers, past the limit
// it is 429 with Retry-After, discovery is not counted, and each
// installation has its own count.
func TestInstallationRateLimit(t *testing.T) {
	h := daemontest.StartWith(t, daemontest.Options{Config: hubConfig, Server: "  rate_limit: {requests: 4, per: 1h}\n"})
	owner := h.AddUser(t, "ann", "ann-pw", 1)
	app := h.AddApp(t, owner, true, "https://client.example/cb")
	other := h.AddApp(t, owner, true, "https://other.example/cb")
	g := h.Authorize(t, app, "ann", "ann-pw", 1, "kitchen")
	g2 := h.Authorize(t, other, "ann", "ann-pw", 1, "kitchen")

	for i, c := range []struct {
		method, path string
		status       int
	}{
		{http.MethodGet, "/switches", http.StatusOK},
		{http.MethodPut, "/switches/on", http.StatusNoContent},
		{http.MethodGet, "/switches/nope", http.StatusNotFound},
		{http.MethodPut, "/switches/dim", http.StatusBadRequest},
	} {
		p := h.Call(t, c.method, g.URI+c.path, g.Token.AccessToken)
		if p.StatusCode != c.status {
			t.Fatalf("%s %s = %d %s, want %d", c.method, c.path, p.StatusCode, p.Body, c.status)
		}
		if p.Header.Get("X-RateLimit-Limit") != "4" || p.Header.Get("X-RateLimit-Remaining") != strconv.Itoa(3-i) {
			t.Errorf("%s %s: X-RateLimit-Limit %q, Remaining %q; want 4 and %d", c.method, c.path,
				p.Header.Get("X-RateLimit-Limit"), p.Header.Get("X-RateLimit-Remaining"), 3-i)
		}
		if r, err := strconv.Atoi(p.Header.Get("X-RateLimit-Reset")); err != nil || r < 3000 || r > 3600 {
			t.Errorf("%s %s: X-RateLimit-Reset %q, want the seconds left of the hour", c.method, c.path, p.Header.Get("X-RateLimit-Reset"))
		}
	}
	// Discovery is the platform's, not the installation's: not counted.
	for range 5 {
		h.Endpoints(t, g.Token.AccessToken)
	}
	p := h.Call(t, http.MethodGet, g.URI+"/switches", g.Token.AccessToken)
	if p.StatusCode != http.StatusTooManyRequests || !strings.Contains(p.Body, `"type":"SmartAppException"`) || !strings.Contains(p.Body, `"status":429`) {
		t.Fatalf("fifth request = %d %s, want 429 with the SmartAppException body", p.StatusCode, p.Body)
	}
	if ra, err := strconv.Atoi(p.Header.Get("Retry-After")); err != nil || ra < 3000 || ra > 3600 || p.Header.Get("X-RateLimit-Remaining") != "0" {
		t.Errorf("Retry-After %q, Remaining %q; want the seconds left of the hour and 0", p.Header.Get("Retry-After"), p.Header.Get("X-RateLimit-Remaining"))
	}
	// A refused command switches nothing.
	if p := h.Command(t, g, "off"); p.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("command past the limit = %d", p.StatusCode)
	}
	if got := h.List(t, g2); len(got) != 1 || got[0].Value == nil || *got[0].Value != "on" {
		t.Errorf("the other installation lists %+v, want the kitchen light still on", got)
	}
	// The legacy path is the same installation.
	legacy := strings.Replace(g.URI, "/api/apps/", "/api/smartapps/", 1)
	if p := h.Call(t, http.MethodGet, legacy+"/switches", g.Token.AccessToken); p.StatusCode != http.StatusTooManyRequests {
		t.Errorf("legacy path = %d, want 429", p.StatusCode)
	}
	// Unauthorized requests carry no rate headers.
	if p := h.Call(t, http.MethodGet, g.URI+"/switches", "nope"); p.StatusCode != http.StatusUnauthorized || p.Header.Get("X-RateLimit-Limit") != "" {
		t.Errorf("bad token = %d with X-RateLimit-Limit %q, want 401 without it", p.StatusCode, p.Header.Get("X-RateLimit-Limit"))
	}
}

// rate_limit: off sends no headers and refuses nothing.
func TestInstallationRateLimitOff(t *testing.T) {
	h := daemontest.StartWith(t, daemontest.Options{Config: hubConfig, Server: "  rate_limit: off\n"})
	owner := h.AddUser(t, "ann", "ann-pw", 1)
	app := h.AddApp(t, owner, true, "https://client.example/cb")
	g := h.Authorize(t, app, "ann", "ann-pw", 1, "kitchen")
	for i := range 260 {
		p := h.Call(t, http.MethodGet, g.URI+"/switches", g.Token.AccessToken)
		if p.StatusCode != http.StatusOK || p.Header.Get("X-RateLimit-Limit") != "" {
			t.Fatalf("request %d = %d, X-RateLimit-Limit %q", i, p.StatusCode, p.Header.Get("X-RateLimit-Limit"))
		}
	}
}

// A reload applies a changed max_changes without reopening the driver,
// and the switch keeps what it used of its cap.
func TestReloadChangesMaxChanges(t *testing.T) {
	capped := strings.Replace(hubConfig, "{id: kitchen, name: Kitchen light, driver: virtual, initial: off}",
		"{id: kitchen, name: Kitchen light, driver: virtual, initial: off, max_changes: {burst: 1, per: 1h}}", 1)
	h := daemontest.Start(t, capped)
	owner := h.AddUser(t, "ann", "ann-pw", 1)
	app := h.AddApp(t, owner, true, "https://client.example/cb")
	g := h.Authorize(t, app, "ann", "ann-pw", 1, "kitchen")
	if p := h.Command(t, g, "on"); p.StatusCode != http.StatusNoContent {
		t.Fatalf("first command = %d %s", p.StatusCode, p.Body)
	}
	if p := h.Command(t, g, "off"); p.StatusCode != http.StatusTooManyRequests || !strings.Contains(p.Body, `"id":"kitchen"`) {
		t.Fatalf("second command = %d %s, want 429 naming the kitchen light", p.StatusCode, p.Body)
	}
	reload := func(body string) {
		t.Helper()
		cfg, err := config.Load("next.yaml", config.Text("server: {listen: 127.0.0.1:0, metrics_listen: \"off\"}\ndata_dir: "+h.DataDir+"\n"+body))
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Reload(context.Background(), cfg); err != nil {
			t.Fatalf("reload: %v", err)
		}
	}
	reload(strings.Replace(capped, "per: 1h}", "per: 2h}", 1))
	if p := h.Command(t, g, "off"); p.StatusCode != http.StatusTooManyRequests {
		t.Errorf("after a reload that kept a cap = %d, want 429 (a reload is no way around it)", p.StatusCode)
	}
	reload(strings.Replace(capped, "max_changes: {burst: 1, per: 1h}", "max_changes: off", 1))
	for _, cmd := range []string{"off", "on", "off"} {
		if p := h.Command(t, g, cmd); p.StatusCode != http.StatusNoContent {
			t.Fatalf("after max_changes: off, %s = %d %s", cmd, p.StatusCode, p.Body)
		}
	}
}
