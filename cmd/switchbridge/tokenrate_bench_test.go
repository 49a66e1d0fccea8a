package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"github.com/switchbridge/switchbridge/bridge/platform/accounts"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/daemon/daemontest"
	"github.com/switchbridge/switchbridge/bridge/link"
	"github.com/switchbridge/switchbridge/bridge/platform/oauth"
)

var (
	tokenRateRequests = flag.Int("tokenrate.requests", 4000, "BenchmarkTokenRate: requests of each kind per run")
	tokenRateClients  = flag.Int("tokenrate.clients", 16, "BenchmarkTokenRate: concurrent clients")
)

// BenchmarkTokenRate measures the platform's token endpoint and discovery
// in requests per second, on SQLite (one process) and on PostgreSQL with one
// and with two processes on one database. Each run is bounded:
// -tokenrate.requests refresh-token grants (each a write: the spent refresh
// token marked, a new pair stored) by -tokenrate.clients concurrent
// clients, then as many discovery GETs (reads) by the same clients. Every
// client holds a grant of its own (an installation in a location of its
// own, authorized through the whole OAuth flow) and sends each request to
// the next process in turn, as a round-robin balancer without sticky
// sessions would: a refresh token issued by one process is spent at the
// other. Any answer but 200 fails the run, so the second process is shown
// to cost nothing in correctness; on a 2-core machine that also runs
// PostgreSQL and the clients it cannot add throughput.
//
//	go test -run '^$' -bench TokenRate -benchtime 1x ./cmd/switchbridge [-tokenrate.requests=4000 -tokenrate.clients=16]
func BenchmarkTokenRate(b *testing.B) {
	for _, c := range []struct {
		engine string
		procs  int
	}{{engineSQLite, 1}, {enginePostgres, 1}, {enginePostgres, 2}} {
		b.Run(fmt.Sprintf("%s-%dproc", c.engine, c.procs), func(b *testing.B) {
			benchTokenRate(b, c.engine, c.procs)
		})
	}
}

func benchTokenRate(b *testing.B, engine string, procs int) {
	ctx := context.Background()
	clients, requests := *tokenRateClients, *tokenRateRequests
	rig := startPlatforms(b, engine, procs, 1024)
	db := rig.db

	// One hub reports a location per client (switch ids are unique on a
	// hub), so the platform can show them on the consent page.
	locs := make([]int64, clients)
	var inv strings.Builder
	inv.WriteString(`{"version":"bench","locations":[`)
	for i := range locs {
		locs[i] = int64(2000 + i)
		if i > 0 {
			inv.WriteString(",")
		}
		fmt.Fprintf(&inv, `{"id":%d,"name":"L%d","switches":[{"id":"s%d","name":"S","commands":["on","off"]}]}`, locs[i], i, i)
	}
	inv.WriteString("]}")
	pw, _ := bcrypt.GenerateFromPassword([]byte("pw-alice"), bcrypt.MinCost)
	user, err := accounts.New(db).CreateUser(ctx, "alice", pw, locs)
	if err != nil {
		b.Fatal(err)
	}
	hubSecret := oauth.NewSecret()
	if err := accounts.New(db).CreateHub(ctx, &bridge.RegisteredHub{ID: "bench-hub", Name: "bench-hub", BaseURL: "http://127.0.0.1:1", SecretHash: oauth.Hash(hubSecret)}); err != nil {
		b.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPut, rig.urls[0]+link.InventoryPath, strings.NewReader(inv.String()))
	req.SetBasicAuth("bench-hub", hubSecret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		b.Fatalf("inventory: %d %s", resp.StatusCode, body)
	}
	appSecret := oauth.NewSecret()
	app := daemontest.App{ClientID: "bench-app", Secret: appSecret, RedirectURIs: []string{"https://client.example/cb"}}
	if err := accounts.New(db).CreateApp(ctx, &bridge.App{ClientID: app.ClientID, Name: "Bench", SecretHash: oauth.Hash(appSecret), RedirectURIs: app.RedirectURIs, OwnerID: user.ID, Published: true}); err != nil {
		b.Fatal(err)
	}

	// A grant per client, authorized through the processes in turn.
	type chain struct{ access, refresh string }
	chains := make([]*chain, clients)
	for i := range chains {
		g := daemontest.Remote(rig.urls[i%procs]).Authorize(b, app, "alice", "pw-alice", locs[i], fmt.Sprintf("s%d", i))
		chains[i] = &chain{g.Token.AccessToken, g.Token.RefreshToken}
	}

	transport := &http.Transport{MaxIdleConnsPerHost: clients}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, Timeout: 30 * time.Second}
	tokenURLs, discoveryURLs := make([]string, procs), make([]string, procs)
	for i, u := range rig.urls {
		tokenURLs[i], discoveryURLs[i] = u+"/oauth/token", u+"/api/apps/endpoints"
	}
	refresh := func(i, n int) error {
		c := chains[i]
		form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {c.refresh}}
		req, _ := http.NewRequest(http.MethodPost, tokenURLs[n%procs], strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.SetBasicAuth(app.ClientID, appSecret)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			body, _ := io.ReadAll(resp.Body)
			return fmt.Errorf("refresh at process %d: %d %s", n%procs, resp.StatusCode, body)
		}
		var t struct {
			AccessToken  string `json:"access_token"`
			RefreshToken string `json:"refresh_token"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&t); err != nil || t.AccessToken == "" || t.RefreshToken == "" {
			return fmt.Errorf("refresh at process %d: no token pair (%v)", n%procs, err)
		}
		c.access, c.refresh = t.AccessToken, t.RefreshToken
		return nil
	}
	discover := func(i, n int) error {
		req, _ := http.NewRequest(http.MethodGet, discoveryURLs[n%procs], nil)
		req.Header.Set("Authorization", "Bearer "+chains[i].access)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("discovery at process %d: %d %s", n%procs, resp.StatusCode, body)
		}
		var eps []oauth.Endpoint
		if err := json.Unmarshal(body, &eps); err != nil || len(eps) != 1 || eps[0].Location.ID != locs[i] {
			return fmt.Errorf("discovery at process %d: %s", n%procs, body)
		}
		return nil
	}

	// Warm up each process's connections and caches, then the timed runs.
	for i := range clients {
		for n := range procs {
			if err := discover(i, i+n); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ResetTimer()
	refreshRate := burst(b, clients, requests, refresh)
	discoveryRate := burst(b, clients, requests, discover)
	b.StopTimer()
	b.Logf("%s: %d refresh grants by %d clients: %.0f req/s; %d discovery GETs: %.0f req/s",
		rig.name(), requests, clients, refreshRate, requests, discoveryRate)
	b.ReportMetric(refreshRate, "refresh-req/s")
	b.ReportMetric(discoveryRate, "discovery-req/s")
}

// burst runs requests calls of f split among clients goroutines (client i
// makes its share in order: f(i, n) for its n-th request) and returns the
// rate in requests per second. It fails the benchmark at the first error.
func burst(b *testing.B, clients, requests int, f func(i, n int) error) float64 {
	b.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	start := time.Now()
	for i := range clients {
		share := requests / clients
		if i < requests%clients {
			share++
		}
		wg.Go(func() {
			for n := range share {
				// Client i starts at process i, then takes the next in
				// turn: consecutive requests of one client land on
				// different processes.
				if err := f(i, i+n); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	return float64(requests) / elapsed.Seconds()
}
