package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestHubServesEventsAndWebhooks: with a platform and a hub, the hub that
// holds the installation's location serves its event stream and delivers
// its webhooks at its own base_url, and a removal at the platform ends the
// hub's stream within 2 s of reaching it.
func TestHubServesEventsAndWebhooks(t *testing.T) {
	m := startPlatform(t)
	b := m.addHub("barn", `  - id: 20
    name: Barn
    switches:
      - {id: barn-light, name: Barn light, driver: virtual}`, "webhooks:\n  allow: [127.0.0.1] # the test's receiver\n")
	b.start(t)
	waitFor(t, 15*time.Second, "the hub reports its inventory", func() bool { return m.hubList()["barn"].Link == "up" })
	if r := runCLI(t, "pw-alice\n", "user", "add", "alice", "--location", "20", "--config", m.platform.cfg); r.code != 0 {
		t.Fatalf("user add: %+v", r)
	}
	r := runCLI(t, "", "app", "create", "--name", "Events", "--redirect-uri", "https://client.example/cb", "--owner", "alice", "--json", "--config", m.platform.cfg)
	var app map[string]string
	if err := json.Unmarshal([]byte(r.stdout), &app); err != nil {
		t.Fatalf("app create: %+v", r)
	}
	r = runCLI(t, "", "install", "--client-id", app["client_id"], "--user", "alice", "--location", "20", "--switch", "barn-light", "--json", "--config", m.platform.cfg)
	var g struct{ Token, Endpoint string }
	if err := json.Unmarshal([]byte(r.stdout), &g); r.code != 0 || err != nil || !strings.HasPrefix(g.Endpoint, b.url) {
		t.Fatalf("install into the hub: %+v", r)
	}

	// A webhook at the hub, with a receiver that confirms and records.
	hook := startHookReceiver(t)
	hook.register(t, g.Endpoint, g.Token)

	// The stream at the hub.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sreq, _ := http.NewRequestWithContext(ctx, http.MethodGet, g.Endpoint+"/events", nil)
	sreq.Header.Set("Authorization", "Bearer "+g.Token)
	sresp, err := (&http.Client{Transport: &http.Transport{}}).Do(sreq)
	if err != nil || sresp.StatusCode != http.StatusOK {
		t.Fatalf("GET /events at the hub: %v %v", err, sresp)
	}
	defer sresp.Body.Close()
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(sresp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	next := func(prefix string) string {
		t.Helper()
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("the stream ended waiting for %q", prefix)
				}
				if strings.HasPrefix(l, prefix) {
					return l
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("no %q within 10 s", prefix)
			}
		}
	}
	next("event: snapshot")
	if c, body := call(t, http.MethodPut, g.Endpoint+"/switches/barn-light/on", g.Token); c != http.StatusNoContent {
		t.Fatalf("PUT at the hub = %d %s", c, body)
	}
	next("event: switch")
	if d := next("data: "); !strings.Contains(d, `"id":"barn-light"`) || !strings.Contains(d, `"cause":"api"`) {
		t.Errorf("the hub's event %s", d)
	}
	waitFor(t, 15*time.Second, "the hub's webhook delivery", func() bool {
		d := hook.deliveries()
		return len(d) == 1 && strings.Contains(d[0], `"value":"on"`)
	})

	// Removed at the platform: the hub's stream ends.
	id := g.Endpoint[strings.LastIndex(g.Endpoint, "/")+1:]
	if r := runCLI(t, "", "installation", "delete", id, "--config", m.platform.cfg); r.code != 0 {
		t.Fatalf("installation delete: %+v", r)
	}
	removed := time.Now()
	// The removal reaches the hub over its link first (well under a
	// second), then the stream ends within 2 s.
	limit := time.After(4 * time.Second)
	for ended := false; !ended; {
		select {
		case _, ok := <-lines:
			ended = !ok
		case <-limit:
			t.Fatal("the hub's stream was still open 4 s after the removal at the platform")
		}
	}
	t.Logf("the hub's stream ended %s after the removal at the platform", time.Since(removed).Round(time.Millisecond))
}
