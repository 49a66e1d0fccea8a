package main

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge/link/linktest"
)

// TestHubOnASlowLink: a hub behind an uplink of round trips from 0 to 6 s
// (a proxy delaying every chunk), with and without loss (every 100th chunk
// cuts its connection). At each, with real processes:
//   - a new token is served within two round trips (plus 2 s), answered
//     503 with Retry-After meanwhile, never 401;
//   - an uninstalled installation's token is refused 401 within one round
//     trip plus 2 s of the uninstall reaching the hub's replica (seen by
//     its tombstone metric);
//   - the link never flaps (link_up stays 1, no "platform link lost");
//   - usage is still reported.
//
// The round trips run in parallel (each its own platform, hub and proxy);
// -short runs the 2 s one alone, the first that failed before.
func TestHubOnASlowLink(t *testing.T) {
	rtts := []time.Duration{0, time.Second, 2 * time.Second, 4 * time.Second, 6 * time.Second}
	losses := []bool{false, true}
	if testing.Short() {
		rtts, losses = []time.Duration{2 * time.Second}, []bool{false}
	}
	for _, loss := range losses {
		for _, rtt := range rtts {
			name := fmt.Sprintf("rtt=%v", rtt)
			if loss {
				name += "_loss"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				slowLink(t, rtt, loss)
			})
		}
	}
}

func slowLink(t *testing.T, rtt time.Duration, loss bool) {
	m := startPlatform(t)
	proxy := linktest.StartFaultProxy(t, m.platform.addr)
	proxy.SetDelay(rtt / 2)
	b := m.addHub("barn", barnLocation, "")
	cfg, err := os.ReadFile(b.cfg)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, b.cfg, strings.Replace(string(cfg), "url: "+m.platform.url, "url: "+proxy.URL(), 1))
	b.start(t)
	waitFor(t, 30*time.Second+4*rtt, "the hub's link is up", func() bool { return metric(b, "switchbridge_platform_link_up") == 1 })
	if loss {
		proxy.DropEvery(100)
	}
	// The link must stay up from here on: sampled, and from the log.
	var flapped atomic.Bool
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if metric(b, "switchbridge_platform_link_up") == 0 {
				flapped.Store(true)
			}
		}
	}()
	defer func() {
		close(stop)
		<-watched
		if flapped.Load() || strings.Contains(b.proc.stderr.String(), "platform link lost") {
			t.Errorf("the link went down over a %v round trip (loss %v):\n%s", rtt, loss, b.proc.stderr.String())
		}
	}()

	// A new token: 503 with Retry-After meanwhile, never 401, served
	// within two round trips of its issue.
	token, endpoint, id := m.grantAt("alice", "20", "barn-light")
	issued := time.Now()
	served := false
	for time.Since(issued) < 2*rtt+2*time.Second+30*time.Second && !served {
		req, _ := http.NewRequest("GET", endpoint+"/switches", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		switch {
		case resp.StatusCode == 200:
			served = true
		case resp.StatusCode == 503 && resp.Header.Get("Retry-After") != "":
			time.Sleep(100 * time.Millisecond)
		default:
			t.Fatalf("a new token at the hub: %d (Retry-After %q), want 200, or 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}
	took := time.Since(issued)
	t.Logf("rtt %v: a new token served %v after its issue", rtt, took.Round(time.Millisecond))
	if !served || took > 2*rtt+2*time.Second {
		t.Errorf("a new token served after %v (served %v), want within two round trips (%v) plus 2 s", took, served, 2*rtt)
	}

	// Usage: the use above reaches the platform.
	usedToken, usedEndpoint, usedID := m.grantAt("bob", "20", "barn-light")
	waitFor(t, 30*time.Second+2*rtt, "the second token at the hub", func() bool { return status(t, "GET", usedEndpoint+"/switches", usedToken) == 200 })

	// The uninstall: refused within one round trip plus 2 s of reaching
	// the replica, which its tombstone shows.
	tombstones := metric(b, "switchbridge_platform_replica_tombstones")
	if r := runCLI(t, "", "installation", "delete", id, "--config", m.platform.cfg); r.code != 0 {
		t.Fatalf("installation delete: %+v", r)
	}
	waitFor(t, 30*time.Second+4*rtt, "the uninstall reaches the hub's replica", func() bool {
		return metric(b, "switchbridge_platform_replica_tombstones") > tombstones
	})
	refused := waitFor(t, 30*time.Second+4*rtt, "the uninstalled token is refused", func() bool {
		c := status(t, "GET", endpoint+"/switches", token)
		if c != 200 && c != 401 {
			t.Errorf("the uninstalled token: %d, want 401", c)
		}
		return c == 401
	})
	t.Logf("rtt %v: the uninstalled token refused %v after the uninstall reached the replica", rtt, refused.Round(time.Millisecond))
	if refused > rtt+2*time.Second {
		t.Errorf("the uninstalled token was refused %v after the uninstall reached the replica, want within a round trip (%v) plus 2 s", refused, rtt)
	}

	waitFor(t, 30*time.Second+4*rtt, "the hub reports the use to the platform", func() bool {
		list := cliOK(t, "", "installation", "list", "--config", m.platform.cfg)
		for _, l := range strings.Split(list, "\n") {
			if strings.HasPrefix(l, usedID) {
				return !strings.Contains(l, "never")
			}
		}
		return false
	})
	if rtt > 0 {
		if est := metric(b, "switchbridge_platform_link_rtt_seconds"); est < rtt.Seconds()/2 {
			t.Errorf("the hub estimates its round trip at %v s, the proxy makes it %v", est, rtt)
		}
	}
	if loss {
		t.Logf("rtt %v: %d connections cut", rtt, proxy.Dropped())
		if proxy.Dropped() == 0 {
			t.Error("no connection was cut: the loss proved nothing")
		}
	}
}
