package main

import (
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge/infra/porttest"
)

// TestServeMovesOffATakenPort: both ports picked for a daemon are taken
// before it binds them. It starts anyway, on other ports its config now
// names, says so, and is the daemon there. A restart keeps its API port;
// a metrics port taken meanwhile moves.
func TestServeMovesOffATakenPort(t *testing.T) {
	dir := t.TempDir()
	cfg, addr := writeConfig(t, dir)
	metrics := freePort(t)
	body, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, cfg, strings.Replace(string(body), `metrics_listen: "off"`, "metrics_listen: "+metrics, 1))
	porttest.Squat(t, addr)
	porttest.Squat(t, metrics)

	rec := &porttest.LogRecorder{TB: t}
	var moved []string
	p := startServe(rec, cfg, serveOptions{moved: func(key, from, to string) { moved = append(moved, key+" "+from+" "+to) }})
	if p.addr == addr || p.metrics == metrics {
		t.Fatalf("the daemon listens on %s, metrics on %s; %s and %s were taken", p.addr, p.metrics, addr, metrics)
	}
	want := []string{"server.listen " + addr + " " + p.addr, "server.metrics_listen " + metrics + " " + p.metrics}
	if strings.Join(moved, "\n") != strings.Join(want, "\n") {
		t.Errorf("moved %q, want %q", moved, want)
	}
	for _, a := range []string{addr, metrics} {
		if w := "serve could not listen on " + a; !strings.Contains(rec.Text(), w) {
			t.Errorf("the test log does not say %q:\n%s", w, rec.Text())
		}
	}
	body, _ = os.ReadFile(cfg)
	if !strings.Contains(string(body), "  listen: "+p.addr+"\n") || !strings.Contains(string(body), "  metrics_listen: "+p.metrics+"\n") {
		t.Errorf("the config does not name the ports the daemon listens on:\n%s", body)
	}
	// The daemon answers there: the API refuses an unknown token with a
	// JSON error, the metrics are switchbridge's.
	get := func(url string) (int, string) {
		t.Helper()
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("http://" + p.addr + "/api/apps/installations/nope/switches"); code != http.StatusUnauthorized || !strings.Contains(body, `"error"`) {
		t.Errorf("the API on %s: %d %s, want 401 with a JSON error", p.addr, code, body)
	}
	if code, body := get("http://" + p.metrics + "/metrics"); code != http.StatusOK || !strings.Contains(body, "switchbridge_build_info") {
		t.Errorf("the metrics on %s: %d, want switchbridge's:\n%.300s", p.metrics, code, body)
	}

	p.cmd.Process.Kill()
	<-p.done
	porttest.Squat(t, p.metrics)
	again := startServe(rec, cfg, serveOptions{})
	if again.addr != p.addr || again.metrics == p.metrics {
		t.Errorf("after the restart: API on %s, metrics on %s; want the API on %s still and the metrics off %s, taken", again.addr, again.metrics, p.addr, p.metrics)
	}
}

// TestHubMovesOffATakenPort: the ports picked for a hub are taken before
// it binds them (the metrics port is what CI once lost). The hub starts on
// others, registered anew with the platform under its new URL: its link
// comes up and a token installed at the platform works at the endpoint
// the platform gives.
func TestHubMovesOffATakenPort(t *testing.T) {
	m := startPlatform(t)
	b := m.addHub("barn", barnLocation, "")
	registered, addr, metrics := b.hubID, b.addr, b.metrics
	porttest.Squat(t, addr)
	porttest.Squat(t, metrics)
	b.start(t)
	if b.addr == addr || b.metrics == metrics || b.hubID == registered {
		t.Fatalf("hub %s on %s, metrics on %s; want it off %s and %s, registered anew (not as %s)", b.hubID, b.addr, b.metrics, addr, metrics, registered)
	}
	waitFor(t, 15*time.Second, "barn's link is up", func() bool { return metric(b, "switchbridge_platform_link_up") == 1 })
	if l := m.hubList()["barn"]; l.BaseURL != b.url {
		t.Errorf("the platform has barn at %s, want %s", l.BaseURL, b.url)
	}
	token, endpoint, _ := m.grantAt("alice", "20", "barn-light")
	if !strings.HasPrefix(endpoint, b.url+"/") {
		t.Fatalf("install gave endpoint %s, want one at %s", endpoint, b.url)
	}
	if code, body := call(t, http.MethodGet, endpoint+"/switches", token); code != http.StatusOK {
		t.Errorf("the token at the hub: %d %s", code, body)
	}
}
