package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
	"golang.org/x/oauth2"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/daemon/daemontest"
	"github.com/switchbridge/switchbridge/bridge/link"
	"github.com/switchbridge/switchbridge/bridge/oauth"
	"github.com/switchbridge/switchbridge/bridge/store"
)

// BenchmarkHubLinks500 runs one platform (a real process) with 500
// simulated hub links, each a real HTTP long-poll connection on loopback
// that reports an inventory of one location, takes its snapshot and then
// follows the changes as a hub does. One user has an installation with a
// token in every location. It measures:
//
//   - the time for one revocation that concerns every hub (all of the
//     app's tokens revoked in one transaction) to reach each hub's link
//     (p50, p99, max), which includes the platform's WakeInterval (200 ms);
//   - the platform's RSS with the links up, per link beyond the idle RSS;
//   - the platform's CPU while the 500 links idle (long polls that answer
//     empty every 25 s), per link;
//   - a full consent + token + discovery flow (login, consent, code
//     exchange with x/oauth2, discovery) while the links are up.
//
// It is not a timed test and not part of the unit run (about 25 s):
//
//	go test -run '^$' -bench HubLinks500 -benchtime 1x ./cmd/switchbridge
//
// Measured on the 2-core development machine (AMD EPYC, shared with other
// work), 500 links, the benchmark's client side in the same machine, on
// 2026-11-25 (the links do not ask for the platform's heartbeats):
//
//	revocation to every hub   p50 0.38 s, p99 1.02 s, max 1.26 s (every hub's
//	                          feed query at once on the platform's 4 SQLite
//	                          connections makes the tail)
//	platform RSS              24 MB idle, 68 MB with 500 links: 90 kB per link
//	platform CPU, links idle  10 ms in 10 s: 0.12 ms of CPU per link per minute
//	consent+token+discovery   26 ms with the 500 links up
func BenchmarkHubLinks500(b *testing.B) {
	skipIfEmulated(b)
	const links = 500
	ctx := context.Background()
	dir := b.TempDir()
	addr := freePort(b)
	cfgPath := filepath.Join(dir, "platform.yaml")
	dataDir := filepath.Join(dir, "data")
	if err := os.WriteFile(cfgPath, []byte(fmt.Sprintf(`server:
  listen: %s
  metrics_listen: "off"
  max_connections: 2048
  rate_limit: off
data_dir: %s
locations:
  - id: 1
    name: Office
    switches:
      - {id: desk, name: Desk, driver: virtual}
`, addr, dataDir)), 0o600); err != nil {
		b.Fatal(err)
	}
	platformURL := "http://" + addr
	proc := startDaemon(b, cfgPath, addr)
	pid := proc.cmd.Process.Pid
	time.Sleep(time.Second)
	idleRSS := rssBytes(b, pid)

	// The registry, the user and the installations, written as the CLI
	// would (another process's connection to the same database).
	db, err := store.Open(ctx, dataDir)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	pw, _ := bcrypt.GenerateFromPassword([]byte("pw-alice"), bcrypt.MinCost)
	locs := make([]int64, links)
	for i := range locs {
		locs[i] = int64(1000 + i)
	}
	user, err := db.CreateUser(ctx, "alice", pw, append(locs, 1))
	if err != nil {
		b.Fatal(err)
	}
	appSecret := oauth.NewSecret()
	app := &bridge.App{ClientID: "bench-app", Name: "Bench", SecretHash: oauth.Hash(appSecret), RedirectURIs: []string{"https://client.example/cb"}, OwnerID: user.ID, Published: true}
	if err := db.CreateApp(ctx, app); err != nil {
		b.Fatal(err)
	}
	type hubLink struct {
		id, secret string
		loc        int64
		revokedAt  time.Time
	}
	hubs := make([]*hubLink, links)
	for i := range hubs {
		h := &hubLink{id: fmt.Sprintf("bench-%03d", i), secret: oauth.NewSecret(), loc: locs[i]}
		if err := db.CreateHub(ctx, &bridge.RegisteredHub{ID: h.id, Name: h.id, BaseURL: "http://127.0.0.1:1", SecretHash: oauth.Hash(h.secret)}); err != nil {
			b.Fatal(err)
		}
		hubs[i] = h
	}

	// The links: inventory, snapshot, then long polls.
	var revokedMu sync.Mutex
	revoked := make(chan struct{})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	ready := make(chan error, links)
	for _, h := range hubs {
		wg.Go(func() {
			client := &http.Client{Transport: &http.Transport{MaxIdleConns: 1}} // a connection of its own
			do := func(method, path, body string, out any) (int, error) {
				req, _ := http.NewRequest(method, platformURL+path, strings.NewReader(body))
				req.SetBasicAuth(h.id, h.secret)
				resp, err := client.Do(req)
				if err != nil {
					return 0, err
				}
				defer resp.Body.Close()
				if out != nil && resp.StatusCode == 200 {
					return resp.StatusCode, json.NewDecoder(resp.Body).Decode(out)
				}
				var buf bytes.Buffer
				buf.ReadFrom(resp.Body)
				return resp.StatusCode, nil
			}
			inv := fmt.Sprintf(`{"version":"bench","locations":[{"id":%d,"name":"L","switches":[{"id":"s","name":"S","commands":["on","off"]}]}]}`, h.loc)
			if c, err := do("PUT", link.InventoryPath, inv, nil); c != 204 {
				ready <- fmt.Errorf("inventory %s: %d %v", h.id, c, err)
				return
			}
			var snap bridge.ChangeBatch
			if c, err := do("GET", link.SnapshotPath, "", &snap); c != 200 {
				ready <- fmt.Errorf("snapshot %s: %d %v", h.id, c, err)
				return
			}
			ready <- nil
			cursor, tag := snap.Cursor, snap.CursorTag
			for {
				select {
				case <-stop:
					return
				default:
				}
				var batch bridge.ChangeBatch
				q := url.Values{"cursor": {strconv.FormatInt(cursor, 10)}, "tag": {tag}}
				c, err := do("GET", link.ChangesPath+"?"+q.Encode(), "", &batch)
				if c != 200 || err != nil {
					select {
					case <-stop:
						return
					case <-time.After(time.Second):
					}
					continue
				}
				cursor, tag = batch.Cursor, batch.CursorTag
				for _, t := range batch.Tokens {
					if t.Revoked {
						select {
						case <-revoked:
							revokedMu.Lock()
							if h.revokedAt.IsZero() {
								h.revokedAt = time.Now()
							}
							revokedMu.Unlock()
						default:
						}
					}
				}
			}
		})
	}
	for range links {
		if err := <-ready; err != nil {
			b.Fatal(err)
		}
	}
	// One installation and token per location, then let the links settle.
	for _, h := range hubs {
		in := &bridge.Installation{ClientID: app.ClientID, UserID: user.ID, LocationID: h.loc, SwitchIDs: []string{"s"}}
		if err := db.Install(ctx, in); err != nil {
			b.Fatal(err)
		}
		if err := db.CreateToken(ctx, oauth.Hash("tok-"+h.id), in.ID, time.Now().Add(time.Hour)); err != nil {
			b.Fatal(err)
		}
	}
	time.Sleep(3 * time.Second)
	linkedRSS := rssBytes(b, pid)

	// CPU while the links idle.
	cpu0 := cpuTime(b, pid)
	idleFor := 10 * time.Second
	time.Sleep(idleFor)
	idleCPU := cpuTime(b, pid) - cpu0

	// A full flow while the links are up.
	ph := &daemontest.Harness{URL: platformURL, Client: &http.Client{Timeout: 30 * time.Second}}
	ocfg := ph.OAuthConfig(daemontest.App{ClientID: app.ClientID, Secret: appSecret, RedirectURIs: app.RedirectURIs})
	flowStart := time.Now()
	authURL := ocfg.AuthCodeURL("s")
	br := ph.NewBrowser()
	consent := br.Login(b, authURL, "alice", "pw-alice")
	p := br.Consent(b, consent, authURL, hubs[7].loc, "s")
	cb, _ := url.Parse(p.Header.Get("Location"))
	tok, err := ocfg.Exchange(context.WithValue(ctx, oauth2.HTTPClient, ph.Client), cb.Query().Get("code"))
	if err != nil {
		b.Fatal(err)
	}
	eps := ph.Endpoints(b, tok.AccessToken)
	flow := time.Since(flowStart)
	if len(eps) != 1 || eps[0].Location.ID != hubs[7].loc {
		b.Fatalf("discovery: %+v", eps)
	}

	// One revocation that concerns every hub.
	time.Sleep(time.Second)
	close(revoked)
	start := time.Now()
	// Every token of the app revoked in one transaction, written as SQL on
	// a connection of its own: the store has no command that revokes an
	// app's tokens and keeps its installations.
	raw, err := sql.Open("sqlite", filepath.Join(dataDir, store.FileName)+"?_pragma=busy_timeout(10000)")
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Exec(`UPDATE tokens SET revoked_at = ? WHERE installation_id IN (SELECT id FROM installations WHERE client_id = ?)`,
		time.Now().UnixMilli(), app.ClientID); err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	var lat []time.Duration
	for time.Now().Before(deadline) {
		lat = lat[:0]
		revokedMu.Lock()
		for _, h := range hubs {
			if !h.revokedAt.IsZero() {
				lat = append(lat, h.revokedAt.Sub(start))
			}
		}
		revokedMu.Unlock()
		if len(lat) == links {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	close(stop)
	proc.cmd.Process.Kill()
	wg.Wait()
	if len(lat) != links {
		b.Fatalf("the revocation reached %d of %d hubs", len(lat), links)
	}
	slices.Sort(lat)
	pct := func(p float64) time.Duration { return lat[int(p*float64(len(lat)-1))] }
	b.Logf("revocation to every hub: p50 %v, p99 %v, max %v", pct(0.5), pct(0.99), lat[len(lat)-1])
	b.Logf("RSS idle %.1f MB, with %d links %.1f MB (%.1f kB per link)", float64(idleRSS)/(1<<20), links, float64(linkedRSS)/(1<<20),
		float64(linkedRSS-idleRSS)/links/1024)
	b.Logf("CPU with the links idle: %v in %v (%.2f ms per link per minute)", idleCPU, idleFor,
		float64(idleCPU.Microseconds())/1000/links*(float64(time.Minute)/float64(idleFor)))
	b.Logf("consent + token + discovery with the links up: %v", flow)
	b.ReportMetric(pct(0.5).Seconds(), "revoke-p50-s")
	b.ReportMetric(pct(0.99).Seconds(), "revoke-p99-s")
	b.ReportMetric(float64(linkedRSS-idleRSS)/links/1024, "kB/link")
	b.ReportMetric(flow.Seconds()*1000, "flow-ms")
}

// cpuTime reads a process's user+system CPU time from /proc.
func cpuTime(tb testing.TB, pid int) time.Duration {
	tb.Helper()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		tb.Fatal(err)
	}
	// Fields after the command name in parentheses; utime and stime are
	// the 14th and 15th fields of the whole line.
	rest := string(stat[bytes.LastIndexByte(stat, ')')+2:])
	f := strings.Fields(rest)
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * (time.Second / 100) // USER_HZ
}
