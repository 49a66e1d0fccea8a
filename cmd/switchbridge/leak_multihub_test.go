package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge/daemon/daemontest"
	"github.com/switchbridge/switchbridge/bridge/hub/hubstore"
	"github.com/switchbridge/switchbridge/bridge/store"
	"github.com/switchbridge/switchbridge/drivers/mqtt/mqtttest"
)

// TestNoLeakBeyondTheGrantAtAHub (issue 34, item 3) is
// bridge/daemon's TestNoLeakBeyondTheGrant with a platform and a hub, each
// a process of its own, on each side: the grants are made at the
// platform, discovery is asked there, and the hub answers the
// installation API from its replica. The answers of the two hubs must be
// the same, byte for byte but for what two processes cannot share.
func TestNoLeakBeyondTheGrantAtAHub(t *testing.T) {
	t.Parallel() // long: beside the package's other long tests, once the short ones are done
	if testing.Short() {
		t.Skip("-short: two platforms and two hubs, each a process, simulated plugs and a flood of 1100 changes (seconds)")
	}
	broker := mqtttest.StartMosquitto(t)
	bare := startLinkedLeakSide(t, broker.URL, "bare", false)
	extras := startLinkedLeakSide(t, broker.URL, "extras", true)
	a := daemontest.RunLeakScript(t, bare)
	b := daemontest.RunLeakScript(t, extras)
	daemontest.CompareLeakTranscripts(t, a, b)
}

// startLinkedLeakSide starts one side of the leak test as a platform and
// a hub holding daemontest.LeakLocations (locations 20 and 21), its plugs
// on broker.
func startLinkedLeakSide(t *testing.T, broker, name string, extras bool) daemontest.LeakSide {
	t.Helper()
	plugs := daemontest.StartLeakPlugs(t, broker, name, extras)
	m := startPlatform(t)
	hubName := "hub-" + name
	b := m.addHub(hubName, daemontest.LeakLocations(name, 20, 21, extras),
		"webhooks:\n  allow: [127.0.0.1] # the test's receiver\nmqtt:\n  broker: "+broker+"\n  client_id: leak-"+name+"\n")
	cfg, err := os.ReadFile(b.cfg)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, b.cfg, strings.Replace(string(cfg), "server:\n", "server:\n"+daemontest.LeakServer, 1))
	b.start(t)
	waitFor(t, 15*time.Second, "the hub's link is up", func() bool { return m.hubList()[hubName].Link == "up" })

	cliOK(t, "pw-alice\n", "user", "add", "alice", "--location", "20", "--config", m.platform.cfg)
	platform := daemontest.Remote(m.platform.url).Checked(t)
	hub := daemontest.Remote(b.url).Checked(t)
	apps := 0
	grant := func(user string, location int64, switches ...string) daemontest.Grant {
		apps++
		app := createApp(t, m.platform.cfg, fmt.Sprintf("Leak app %d", apps))
		g := platform.Authorize(t, app, user, "pw-"+user, location, switches...)
		if !strings.HasPrefix(g.URI, b.url) {
			t.Fatalf("discovery sent the client to %s, want the hub at %s", g.URI, b.url)
		}
		return g
	}
	hubDB, err := store.Open(context.Background(), filepath.Join(m.dir, hubName+"-data"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hubDB.Close() })
	side := daemontest.LeakSide{
		Name: name, Extras: extras, API: hub, Discovery: platform,
		G: grant("alice", 20, daemontest.LeakGranted...), S: grant("alice", 20, "kitchen", daemontest.SeeOnly("hall")),
		Other: daemontest.LeakMadeUpInstallation,
		Press: plugs.Press, Meter: plugs.Meter,
		Delivered: func(tb testing.TB, url string) bool {
			ws, err := hubstore.New(hubDB).Webhooks(context.Background(), "")
			if err != nil {
				tb.Fatal(err)
			}
			for _, w := range ws {
				if w.URL == url {
					return w.Pending == 0 && !w.LastSuccessAt.IsZero()
				}
			}
			return false
		},
		Disturb: func(testing.TB, string) {},
	}
	var e *daemontest.LeakExtras
	if extras {
		cliOK(t, "pw-bob\n", "user", "add", "bob", "--location", "21", "--config", m.platform.cfg)
		e = &daemontest.LeakExtras{Plugs: plugs, API: hub, X: grant("alice", 20, "attic", "porch", "cellar", "shed"), Y: grant("bob", 21, "garage")}
	}
	// W last: once the hub answers it, it holds every grant made before.
	side.W = grant("alice", 20, daemontest.LeakGranted...)
	heard := func(g daemontest.Grant, ids ...string) {
		waitFor(t, 15*time.Second, fmt.Sprintf("the hub heard from %v", ids), func() bool {
			code, body := call(t, http.MethodGet, g.URI+"/switches", g.Token.AccessToken)
			var list []struct {
				ID        string
				Value     *string
				Available bool
			}
			if code != http.StatusOK || json.Unmarshal([]byte(body), &list) != nil {
				return false
			}
			n := 0
			for _, s := range list {
				for _, id := range ids {
					if s.ID == id && s.Available && s.Value != nil && *s.Value == "off" {
						n++
					}
				}
			}
			return n == len(ids)
		})
	}
	heard(side.W, "lamp")
	if !extras {
		return side
	}
	heard(e.X, "attic", "porch", "shed")
	e.Changes = streamChanges(t, e.X)
	e.Settle(t)
	side.Other, side.Disturb = e.X.InstallationID(), e.Disturb
	return side
}

// streamChanges are the changes of g's switches as g's event stream at
// the hub has them.
func streamChanges(t *testing.T, g daemontest.Grant) <-chan daemontest.LeakChange {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, g.URI+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+g.Token.AccessToken)
	resp, err := (&http.Client{Transport: &http.Transport{}}).Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		cancel()
		t.Fatalf("GET /events of the other installation: %v %v", err, resp)
	}
	t.Cleanup(func() {
		cancel()
		resp.Body.Close()
	})
	out := make(chan daemontest.LeakChange)
	go func() {
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		kind := ""
		for sc.Scan() {
			line := sc.Text()
			if v, ok := strings.CutPrefix(line, "event: "); ok {
				kind = v
			}
			data, ok := strings.CutPrefix(line, "data: ")
			if !ok || kind != "switch" {
				continue
			}
			var c struct {
				ID        string
				Value     *string
				Available bool
			}
			if json.Unmarshal([]byte(data), &c) != nil {
				continue
			}
			change := daemontest.LeakChange{ID: c.ID, Available: c.Available}
			if c.Value != nil {
				change.Value = *c.Value
			}
			select {
			case out <- change:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}
