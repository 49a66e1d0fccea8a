package replica_test

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/switchbridge/switchbridge/bridge/platform/accounts"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/access"
	"github.com/switchbridge/switchbridge/bridge/infra/logtest"
	"github.com/switchbridge/switchbridge/bridge/link"
	"github.com/switchbridge/switchbridge/bridge/link/linktest"
	"github.com/switchbridge/switchbridge/bridge/platform/linkserver"
	"github.com/switchbridge/switchbridge/bridge/platform/oauth"
	"github.com/switchbridge/switchbridge/bridge/store"
)

// waitWithin polls cond every 10 ms for up to within and returns how long
// it took; it fails the test when cond never holds.
func waitWithin(t *testing.T, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < within {
		if cond() {
			return time.Since(start)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("after %v: %s", within, what)
	return 0
}

// TestDeadConnectionsAreDropped: a network event silently kills every
// connection between a hub and its platform (the long poll's and an idle
// one in the hub's pool) while new connections flow. The hub notices
// within seconds, drops the pooled one too and polls again on a fresh
// connection, which is answered: the link never counts as down, and a
// revocation made at that moment reaches it within 5 s.
func TestDeadConnectionsAreDropped(t *testing.T) {
	ctx := context.Background()
	pl := newPlatform(t)
	pl.p.PollTimeout = link.DefaultPollTimeout
	proxy := linktest.StartFaultProxy(t, pl.srv.Listener.Addr().String())
	db, err := store.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	hub := runHubAt(t, proxy.URL(), "h1", pl.hubs["h1"], db, 10)
	in := pl.install(t, 10, "revoke-me")
	waitUntil(t, "the installation reaches the hub", func() bool { return hub.has(in.ID) })
	// A sync on a miss leaves a second connection idle in the hub's pool.
	n := 0
	waitWithin(t, 20*time.Second, "two connections through the proxy", func() bool {
		n++
		if _, err := hub.auth.Authorize(ctx, fmt.Sprint("unknown-token-", n), in.ID); bridge.ErrorCode(err) != bridge.EUNAUTHORIZED {
			t.Fatalf("an unknown token: %v", err)
		}
		return proxy.Conns() >= 2
	})
	// The long poll waits and has heard a heartbeat.
	time.Sleep(link.HeartbeatInterval + 300*time.Millisecond)

	killed := proxy.Blackhole()
	start := time.Now()
	if _, err := accounts.New(pl.db).RevokeToken(ctx, access.Hash("revoke-me"), "c"); err != nil {
		t.Fatal(err)
	}
	took := waitWithin(t, 20*time.Second, "the revocation reaches the hub", func() bool {
		_, err := hub.auth.Authorize(ctx, "revoke-me", in.ID)
		return bridge.ErrorCode(err) == bridge.EUNAUTHORIZED
	})
	t.Logf("%d connections killed; the revocation reached the hub %v after", killed, time.Since(start).Round(time.Millisecond))
	if took > 5*time.Second {
		t.Errorf("the revocation took %v to reach the hub after the connections died, want ≤ 5 s", took)
	}
	if !strings.Contains(hub.logs.String(), "the connection is dead") || !strings.Contains(hub.logs.String(), "polling again on a fresh connection") {
		t.Errorf("the hub did not say its long poll's connection was dead and poll again:\n%s", hub.logs.String())
	}
	// New connections flowed: the poll on a fresh one was answered, and
	// the link never counted as down.
	if strings.Contains(hub.logs.String(), "platform link lost") || !hub.h.Up() {
		t.Errorf("one dead poll took the link down (up %v):\n%s", hub.h.Up(), hub.logs.String())
	}
}

// TestRefusedPollIsRefusedAtOnce: a 401 on a long poll (a rotated
// secret) shows as refused at once, not at the next inventory report.
func TestRefusedPollIsRefusedAtOnce(t *testing.T) {
	ctx := context.Background()
	pl := newPlatform(t)
	pl.p.PollTimeout = time.Minute
	hub := startHub(t, pl, "h1", 10)
	time.Sleep(200 * time.Millisecond) // the long poll waits
	if err := accounts.New(pl.db).SetHubSecret(ctx, "h1", access.Hash("rotated")); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the hub logs the refusal", func() bool {
		return strings.Contains(hub.logs.String(), "the platform refused this hub")
	})
	if hub.h.Refused() == "" {
		t.Error("the hub logged the refusal of its poll, but does not show itself refused")
	}
}

// TestRestoredPlatformRekeysItsHubs: the platform is restored from a
// backup older than the hub's secret. The hub, refused, is told that the
// platform never held its replica's cursor: it empties its replica (a
// token issued after the backup stops working) and says it needs new
// credentials; once it has them (hub rotate-secret, the secret written,
// a reload), it follows the restored platform.
func TestRestoredPlatformRekeysItsHubs(t *testing.T) {
	ctx := context.Background()
	pl := newPlatform(t)
	hubDB, err := store.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hubDB.Close() })
	hub := runHub(t, pl, "h1", hubDB, 10)
	kept := pl.install(t, 10, "kept-token")
	waitUntil(t, "the installation reaches the hub", func() bool { return hub.has(kept.ID) })

	backup := filepath.Join(t.TempDir(), "backup.db")
	if _, err := pl.db.Backup(ctx, pl.dir, backup); err != nil {
		t.Fatal(err)
	}
	// After the backup: a new secret for the hub, and a new installation.
	newSecret := oauth.NewSecret()
	if err := accounts.New(pl.db).SetHubSecret(ctx, "h1", access.Hash(newSecret)); err != nil {
		t.Fatal(err)
	}
	hub.h.SetSecret(newSecret)
	later := pl.installApp(t, "c3", 10, "later-token")
	waitUntil(t, "the later installation reaches the hub", func() bool { return hub.has(later.ID) && hub.h.Up() })
	hub.stop()

	restored, err := store.OpenFile(ctx, backup)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { restored.Close() })
	pl2 := &platform{db: restored, dir: filepath.Dir(backup), hubs: map[string]string{"h1": newSecret}, userID: pl.userID}
	pl2.serve(t)
	hub = launchHub(t, pl2.srv.URL, "h1", newSecret, hubDB, 10)
	waitUntil(t, "the hub empties its replica", func() bool { return hub.h.Settled() && !hub.has(kept.ID) })
	if hub.h.Up() || hub.h.Refused() == "" {
		t.Errorf("a hub told to get new credentials: up %v, refused %q", hub.h.Up(), hub.h.Refused())
	}
	waitLogged(t, hub.logs.String, "this hub needs new credentials")
	for token, in := range map[string]*bridge.Installation{"later-token": later, "kept-token": kept} {
		if _, err := hub.auth.Authorize(ctx, token, in.ID); bridge.ErrorCode(err) != bridge.EUNAUTHORIZED {
			t.Errorf("%s at the hub told to get new credentials: %v, want unauthorized", token, err)
		}
	}
	// A wrong secret without a cursor the platform never held stays a
	// plain 401: the hub keeps its replica (the operator rotated it).
	if c, _ := pl2.do(t, "GET", link.SnapshotPath, "h1", "wrong", ""); c != http.StatusUnauthorized {
		t.Errorf("a wrong secret: %d", c)
	}
	// The procedure: hub rotate-secret on the restored platform, the
	// secret into secret_file, a reload.
	rekeyed := oauth.NewSecret()
	if err := accounts.New(restored).SetHubSecret(ctx, "h1", access.Hash(rekeyed)); err != nil {
		t.Fatal(err)
	}
	hub.h.SetSecret(rekeyed)
	waitUntil(t, "the re-keyed hub follows the restored platform", func() bool { return hub.h.Up() && hub.has(kept.ID) })
	if _, err := hub.auth.Authorize(ctx, "kept-token", kept.ID); err != nil {
		t.Errorf("a token the restored platform holds, after re-keying: %v", err)
	}
	if hub.h.Settled() || hub.h.Refused() != "" {
		t.Errorf("after re-keying: settled %v, refused %q", hub.h.Settled(), hub.h.Refused())
	}
}

// TestBackoffResetsAfterAPoll: a second outage soon after the first costs
// about a second, not the back-off the first one grew.
func TestBackoffResetsAfterAPoll(t *testing.T) {
	ctx := context.Background()
	pl := newPlatform(t)
	proxy := linktest.StartFaultProxy(t, pl.srv.Listener.Addr().String())
	db, err := store.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	hub := runHubAt(t, proxy.URL(), "h1", pl.hubs["h1"], db, 10)
	// A first outage of 8 s: the back-off grows to 8 s or more.
	proxy.SetDown(true)
	waitUntil(t, "the link is down", func() bool { return !hub.h.Up() })
	time.Sleep(8 * time.Second)
	proxy.SetDown(false)
	waitWithin(t, 40*time.Second, "the link comes back", hub.h.Up)
	// One poll answered (the test platform's polls last 2 s).
	time.Sleep(2500 * time.Millisecond)
	proxy.SetDown(true)
	waitUntil(t, "the link is down again", func() bool { return !hub.h.Up() })
	proxy.SetDown(false)
	took := waitWithin(t, 40*time.Second, "the link comes back after the second outage", hub.h.Up)
	t.Logf("back %v after the second outage", took.Round(time.Millisecond))
	if took > 3*time.Second {
		t.Errorf("the link took %v to come back after a second, short outage, want ≤ 3 s", took)
	}
}

// TestUnconfirmedTokenIsRetryLater: a token issued a moment ago over a
// link too slow to sync within the limit is answered 503 with a
// Retry-After, not 404 or 401 (which a client reads as "gone").
func TestUnconfirmedTokenIsRetryLater(t *testing.T) {
	ctx := context.Background()
	pl := newPlatform(t)
	inner := pl.srv.Config.Handler
	pl.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == link.ChangesPath {
			if r.URL.Query().Get("wait") == "0" {
				time.Sleep(3 * time.Second) // past the hub's sync limit
			} else {
				// A long poll that brings nothing: heartbeats only.
				tick := time.NewTicker(link.HeartbeatInterval)
				defer tick.Stop()
				for {
					select {
					case <-r.Context().Done():
						return
					case <-tick.C:
						w.WriteHeader(http.StatusProcessing)
					}
				}
			}
		}
		inner.ServeHTTP(w, r)
	})
	// The first snapshot goes through the handler above untouched.
	hub := startHub(t, pl, "h1", 10)
	in := pl.install(t, 10, "fresh-token")
	_, err := hub.auth.Authorize(ctx, "fresh-token", in.ID)
	var e *bridge.Error
	if bridge.ErrorCode(err) != bridge.EUNAVAILABLE || !errorsAs(err, &e) || e.RetryAfter <= 0 {
		t.Fatalf("a new installation's token over a slow link: %v, want unavailable with a retry-after", err)
	}
}

func errorsAs(err error, e **bridge.Error) bool {
	be, ok := err.(*bridge.Error)
	if ok {
		*e = be
	}
	return ok
}

// TestHubGoneMidAuthenticationIsNoError: a hub that drops its request
// while the platform reads the registry is not an error in the log.
func TestHubGoneMidAuthenticationIsNoError(t *testing.T) {
	pl := newPlatform(t)
	var logs logtest.Buffer
	p := linkserver.NewPlatform(accounts.New(pl.db), slog.New(slog.NewTextHandler(&logs, nil)), linkserver.Options{})
	mux := http.NewServeMux()
	p.Register(mux)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := httptest.NewRequest("GET", link.SnapshotPath, nil).WithContext(ctx)
	r.SetBasicAuth("h1", pl.hubs["h1"])
	mux.ServeHTTP(httptest.NewRecorder(), r)
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("a request its hub dropped was logged as an error:\n%s", logs.String())
	}
}

// TestPollsPerHubAreBounded: one hub's credentials hold at most
// MaxPollsPerHub long polls; a newer one ends the oldest at once with no
// changes, as a poll that timed out.
func TestPollsPerHubAreBounded(t *testing.T) {
	pl := newPlatform(t)
	pl.p.PollTimeout = time.Minute
	code, body := pl.do(t, "GET", link.SnapshotPath, "h1", pl.hubs["h1"], "")
	var b bridge.ChangeBatch
	if err := json.Unmarshal([]byte(body), &b); code != 200 || err != nil {
		t.Fatalf("snapshot: %d %s", code, body)
	}
	const n = 30
	var wg sync.WaitGroup
	var mu sync.Mutex
	answered := 0
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); wg.Wait() }()
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("%s%s?cursor=%d&tag=%s", pl.srv.URL, link.ChangesPath, b.Cursor, b.CursorTag), nil)
			req.SetBasicAuth("h1", pl.hubs["h1"])
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				mu.Lock()
				answered++
				mu.Unlock()
			}
		}()
	}
	held := func() int { mu.Lock(); defer mu.Unlock(); return n - answered }
	waitWithin(t, 10*time.Second, fmt.Sprintf("at most %d of %d polls held", linkserver.MaxPollsPerHub, n), func() bool { return held() <= linkserver.MaxPollsPerHub })
	time.Sleep(300 * time.Millisecond)
	if h := held(); h > linkserver.MaxPollsPerHub || h == 0 {
		t.Errorf("%d polls held, want 1 to %d", h, linkserver.MaxPollsPerHub)
	}
}

// TestShutdownEndsLongPolls: the platform's Shutdown answers a waiting
// long poll at once with 503 and Retry-After, which the hub takes as
// "call again in a moment".
func TestShutdownEndsLongPolls(t *testing.T) {
	pl := newPlatform(t)
	pl.p.PollTimeout = time.Minute
	hub := startHub(t, pl, "h1", 10)
	time.Sleep(200 * time.Millisecond) // the long poll waits
	start := time.Now()
	pl.p.Shutdown()
	waitWithin(t, 2*time.Second, "the hub hears the platform is shutting down", func() bool {
		return strings.Contains(hub.logs.String(), "the platform is briefly unavailable") && strings.Contains(hub.logs.String(), "shutting down")
	})
	t.Logf("the long poll ended %v after Shutdown", time.Since(start).Round(time.Millisecond))
	if c, _ := pl.do(t, "GET", link.SnapshotPath, "h2", pl.hubs["h2"], ""); c != http.StatusServiceUnavailable {
		t.Errorf("a link request after Shutdown: %d, want 503", c)
	}
}

// TestSecondInstanceIsRefused: a second process with a hub's credentials
// (another instance) is refused while the first holds the link, and
// serves none of the hub's installations; the first keeps its locations
// and goes on following them.
func TestSecondInstanceIsRefused(t *testing.T) {
	ctx := context.Background()
	pl := newPlatform(t)
	a := startHub(t, pl, "h1", 10)
	in := pl.install(t, 10, "a-token")
	waitUntil(t, "the installation reaches hub A", func() bool { return a.has(in.ID) })

	db2, err := store.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db2.Close() })
	copycat := launchHub(t, pl.srv.URL, "h1", pl.hubs["h1"], db2, 30)
	waitUntil(t, "the copy is refused", func() bool {
		return strings.Contains(copycat.h.Refused(), "another process with this hub's credentials")
	})
	h, err := accounts.New(pl.db).Hub(ctx, "h1")
	if err != nil || len(h.Locations) != 1 || h.Locations[0].ID != 10 || !strings.Contains(h.Conflict, "refused instance") {
		t.Errorf("hub h1 on the platform: %+v %v", h, err)
	}
	if err := accounts.New(pl.db).Uninstall(ctx, in.ID); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the uninstall reaches hub A", func() bool { return !a.has(in.ID) })
}

// dropInterim is a reverse proxy's view of the platform that forwards no
// interim (1xx) answer.
type dropInterim struct{ http.ResponseWriter }

func (w dropInterim) WriteHeader(code int) {
	if code >= 200 {
		w.ResponseWriter.WriteHeader(code)
	}
}

// TestHeartbeatsSwallowedByAProxy: a reverse proxy in front of the
// platform that forwards no heartbeat does not make the hub take its
// healthy long polls for dead.
func TestHeartbeatsSwallowedByAProxy(t *testing.T) {
	pl := newPlatform(t)
	pl.p.PollTimeout = 5 * time.Second
	inner := pl.srv.Config.Handler
	pl.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inner.ServeHTTP(dropInterim{w}, r)
	})
	hub := startHub(t, pl, "h1", 10)
	time.Sleep(2*pl.p.PollTimeout + time.Second)
	if !hub.h.Up() || strings.Contains(hub.logs.String(), "the connection is dead") {
		t.Errorf("healthy polls without heartbeats were taken for dead (up %v):\n%s", hub.h.Up(), hub.logs.String())
	}
}
