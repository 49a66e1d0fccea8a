package replica_test

import (
	"context"
	"fmt"
	"github.com/switchbridge/switchbridge/bridge/platform/accounts"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/access"
	"github.com/switchbridge/switchbridge/bridge/hub/hubstore"
	"github.com/switchbridge/switchbridge/bridge/hub/replica"
	"github.com/switchbridge/switchbridge/bridge/infra/logtest"
	"github.com/switchbridge/switchbridge/bridge/link"
	"github.com/switchbridge/switchbridge/bridge/store"
)

// runningHub is hub h1's side of the link, running against pl, with an
// inventory the test changes as a reload would.
type runningHub struct {
	h    *replica.Follower
	db   *store.DB
	auth *replica.Authorizer
	logs *logtest.Buffer
	mu   sync.Mutex
	locs []int64
	stop func() // ends Run; more calls do nothing
}

func startHub(t *testing.T, pl *platform, id string, locs ...int64) *runningHub {
	t.Helper()
	db, err := store.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return runHub(t, pl, id, db, locs...)
}

// runHub runs hub id on db, a hub's store with or without a replica yet,
// until stop or the end of the test.
func runHub(t *testing.T, pl *platform, id string, db *store.DB, locs ...int64) *runningHub {
	t.Helper()
	return runHubAt(t, pl.srv.URL, id, pl.hubs[id], db, locs...)
}

// runHubAt runs hub id with secret against the platform at url (a fault
// proxy, say).
func runHubAt(t *testing.T, url, id, secret string, db *store.DB, locs ...int64) *runningHub {
	t.Helper()
	rh := launchHub(t, url, id, secret, db, locs...)
	waitUntil(t, "the hub's link comes up", rh.h.Up)
	return rh
}

// launchHub runs hub id until stop or the end of the test, without
// waiting for its link.
func launchHub(t *testing.T, url, id, secret string, db *store.DB, locs ...int64) *runningHub {
	t.Helper()
	var err error
	rh := &runningHub{db: db, logs: &logtest.Buffer{}, locs: locs}
	hub := hubstore.New(db)
	l, err := replica.Open(replica.Options{PlatformURL: url, HubID: id, Secret: secret, Store: hub, Source: hub.Replica(),
		Logger: slog.New(slog.NewTextHandler(rh.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Inventory: func() []bridge.RemoteLocation {
			rh.mu.Lock()
			defer rh.mu.Unlock()
			var out []bridge.RemoteLocation
			for _, l := range rh.locs {
				out = append(out, bridge.RemoteLocation{ID: l, Name: fmt.Sprint("L", l), Switches: []bridge.RemoteSwitch{{ID: fmt.Sprint("s", l), Name: "S", Commands: bridge.Commands}}})
			}
			return out
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	rh.h, rh.auth = l.Follower, l.Authorizer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { l.Run(ctx); close(done) }()
	rh.stop = sync.OnceFunc(func() { cancel(); <-done; l.Close() })
	t.Cleanup(rh.stop)
	return rh
}

// setLocations changes the hub's locations and reports them, as a reload.
func (rh *runningHub) setLocations(locs ...int64) {
	rh.mu.Lock()
	rh.locs = locs
	rh.mu.Unlock()
	rh.h.InventoryChanged()
}

func (rh *runningHub) has(id string) bool {
	_, err := hubstore.New(rh.db).Replica().Installation(context.Background(), id)
	return err == nil
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for range 500 {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("timed out: " + what)
}

// waitLogged waits, at most 10 s, for the hub's log to hold text: a hub
// logs that it emptied its replica a moment after the test can see it
// empty.
func waitLogged(t *testing.T, logs func() string, text string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(logs(), text); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Errorf("the hub did not log %q; its log:\n%s", text, logs())
			return
		}
	}
}

func (pl *platform) install(t *testing.T, loc int64, token string) *bridge.Installation {
	return pl.installApp(t, "c", loc, token)
}

func (pl *platform) installApp(t *testing.T, client string, loc int64, token string) *bridge.Installation {
	t.Helper()
	ctx := context.Background()
	if _, err := accounts.New(pl.db).App(ctx, client); err != nil {
		if err := accounts.New(pl.db).CreateApp(ctx, &bridge.App{ClientID: client, Name: client, SecretHash: []byte("s"), RedirectURIs: []string{"https://c/cb"}, OwnerID: pl.userID, Published: true}); err != nil {
			t.Fatal(err)
		}
	}
	in := &bridge.Installation{ClientID: client, UserID: pl.userID, LocationID: loc, SwitchIDs: []string{fmt.Sprint("s", loc)}}
	if err := accounts.New(pl.db).Install(ctx, in); err != nil {
		t.Fatal(err)
	}
	if err := accounts.New(pl.db).CreateToken(ctx, access.Hash(token), in.ID, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	return in
}

// TestReplicaHoldsExactlyTheHubsLocations: a location given up (a reload)
// or moved to another hub and back loses what was uninstalled meanwhile;
// the hub's replica holds exactly the installations of the locations it
// holds.
func TestReplicaHoldsExactlyTheHubsLocations(t *testing.T) {
	for _, moved := range []bool{false, true} {
		t.Run(map[bool]string{false: "reload", true: "A to B to A"}[moved], func(t *testing.T) {
			pl := newPlatform(t)
			ctx := context.Background()
			a := startHub(t, pl, "h1", 10)
			gone := pl.install(t, 10, "gone-token")
			kept := pl.installApp(t, "c2", 10, "kept-token")
			waitUntil(t, "the installations reach hub A", func() bool { return a.has(gone.ID) && a.has(kept.ID) })

			a.setLocations() // location 10 given up
			waitUntil(t, "hub A drops the location it gave up", func() bool { return !a.has(gone.ID) && !a.has(kept.ID) })
			if moved {
				// Hub A's new inventory reaches the platform on its own link:
				// until it has, the location is still A's.
				waitUntil(t, "hub B takes location 10", func() bool {
					c, _ := pl.do(t, "PUT", link.InventoryPath, "h2", pl.hubs["h2"], inventory(10))
					return c == http.StatusNoContent
				})
			}
			if err := accounts.New(pl.db).Uninstall(ctx, gone.ID); err != nil {
				t.Fatal(err)
			}
			if moved {
				pl.do(t, "PUT", link.InventoryPath, "h2", pl.hubs["h2"], inventory())
			}
			a.setLocations(10) // back
			waitUntil(t, "hub A has location 10's installations again", func() bool { return a.has(kept.ID) })
			if a.has(gone.ID) {
				t.Error("an installation uninstalled while the location was away is back in the replica")
			}
			if _, err := a.auth.Authorize(ctx, "gone-token", gone.ID); bridge.ErrorCode(err) != bridge.EUNAUTHORIZED {
				t.Errorf("the uninstalled token at hub A: %v, want unauthorized, as on a single daemon", err)
			}
			if _, err := a.auth.Authorize(ctx, "kept-token", kept.ID); err != nil {
				t.Errorf("the kept token at hub A: %v", err)
			}
		})
	}
}

// TestNewTokenWorksAtOnce: a token issued (or refreshed) a moment ago works
// at the hub on its first request, long before the long poll would bring
// it; a flood of unknown tokens costs a bounded number of syncs, one at a
// time, shared by the requests that arrive while one is in flight.
//
// Causality, not the clock: the flood's first sync is held at the
// platform until every other request waits on it. Each of those missed
// after it started, so one more sync settles them all: two at most,
// however slowly a loaded machine runs the 40 requests.
func TestNewTokenWorksAtOnce(t *testing.T) {
	pl := newPlatform(t)
	var (
		syncs, inFlight, maxInFlight atomic.Int64
		hold, allWaited              atomic.Bool
		hub                          atomic.Pointer[replica.Follower]
	)
	const flood = 40
	inner := pl.srv.Config.Handler
	pl.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("wait") == "0" {
			syncs.Add(1)
			n := inFlight.Add(1)
			defer inFlight.Add(-1)
			for m := maxInFlight.Load(); n > m && !maxInFlight.CompareAndSwap(m, n); m = maxInFlight.Load() {
			}
			if hold.CompareAndSwap(true, false) {
				// Bounded: the test fails below if they never all wait.
				for i := 0; i < 3000 && !allWaited.Load(); i++ {
					allWaited.Store(replica.SyncWaiters(hub.Load()) == flood-1)
					time.Sleep(10 * time.Millisecond)
				}
			}
		}
		inner.ServeHTTP(w, r)
	})
	pl.p.WakeInterval = time.Hour // long polls see nothing new
	a := startHub(t, pl, "h1", 10)
	hub.Store(a.h)
	ctx := context.Background()
	// The replica holds its first snapshot: a miss can be synced.
	waitUntil(t, "the hub's first snapshot", func() bool {
		st, err := hubstore.New(a.db).ReplicaState(ctx)
		return err == nil && st.Synced
	})
	in := pl.install(t, 10, "fresh-token")
	if _, err := a.auth.Authorize(ctx, "fresh-token", in.ID); err != nil {
		t.Fatalf("a new installation's token on its first request: %v", err)
	}
	// A refresh: a new token for the known installation.
	if err := accounts.New(pl.db).CreateToken(ctx, access.Hash("refreshed-token"), in.ID, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := a.auth.Authorize(ctx, "refreshed-token", in.ID); err != nil {
		t.Fatalf("a refreshed token on its first request: %v", err)
	}
	// Bogus tokens from many clients at once.
	before := syncs.Load()
	hold.Store(true)
	var wg sync.WaitGroup
	for i := range flood {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := a.auth.Authorize(ctx, fmt.Sprint("bogus-", i), in.ID); bridge.ErrorCode(err) != bridge.EUNAUTHORIZED {
				t.Errorf("bogus token: %v", err)
			}
		}()
	}
	wg.Wait()
	if !allWaited.Load() {
		t.Fatalf("the other %d requests never all waited on the first sync", flood-1)
	}
	n := syncs.Load() - before
	if n == 0 || n > 2 {
		t.Errorf("%d syncs for %d bogus tokens whose first sync all the others waited on, want 1 or 2", n, flood)
	}
	if m := maxInFlight.Load(); m != 1 {
		t.Errorf("%d syncs in flight at once, want one at a time", m)
	}
}

// TestRemovedHubEmptiesItsReplica: a removed hub is told so (410) at once,
// even mid long poll, and stops serving; a rotated secret is a plain 401
// and the hub keeps serving what it knows.
func TestRemovedHubEmptiesItsReplica(t *testing.T) {
	pl := newPlatform(t)
	pl.p.PollTimeout = time.Minute
	ctx := context.Background()
	a := startHub(t, pl, "h1", 10)
	b := startHub(t, pl, "h2", 20)
	inA := pl.install(t, 10, "token-a")
	inB := pl.install(t, 20, "token-b")
	waitUntil(t, "the installations reach the hubs", func() bool { return a.has(inA.ID) && b.has(inB.ID) })
	time.Sleep(100 * time.Millisecond) // both long polls wait

	if err := accounts.New(pl.db).SetHubSecret(ctx, "h2", access.Hash("new secret")); err != nil {
		t.Fatal(err)
	}
	if _, err := accounts.New(pl.db).RemoveHub(ctx, "h1"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the removed hub empties its replica", func() bool { return !a.has(inA.ID) })
	if _, err := a.auth.Authorize(ctx, "token-a", inA.ID); bridge.ErrorCode(err) != bridge.EUNAUTHORIZED {
		t.Errorf("the removed hub's token: %v", err)
	}
	waitLogged(t, a.logs.String, "the platform removed this hub")
	if c, body := pl.do(t, "GET", link.SnapshotPath, "h1", pl.hubs["h1"], ""); c != http.StatusGone || !strings.Contains(body, "removed") {
		t.Errorf("a removed hub's call: %d %s", c, body)
	}
	if c, _ := pl.do(t, "GET", link.SnapshotPath, "h1", "wrong", ""); c != http.StatusUnauthorized {
		t.Errorf("a removed hub's id with a wrong secret: %d", c)
	}
	waitUntil(t, "the rotated hub notices the refusal", func() bool { return strings.Contains(b.h.Refused(), "credentials were refused") })
	if _, err := b.auth.Authorize(ctx, "token-b", inB.ID); err != nil {
		t.Errorf("a hub with a rotated secret stopped serving: %v", err)
	}
}

// TestLegacyAppsAtAHub: the app's legacy flag reaches the hub with each
// installation, and a change of the flag reaches it too.
func TestLegacyAppsAtAHub(t *testing.T) {
	pl := newPlatform(t)
	ctx := context.Background()
	a := startHub(t, pl, "h1", 10)
	in := pl.install(t, 10, "legacy-token")
	// The install reaches the hub first (TestNewTokenWorksAtOnce covers
	// how soon); what is tested here is the legacy flag.
	waitUntil(t, "the installation reaches the hub", func() bool {
		_, err := a.auth.Authorize(ctx, "legacy-token", in.ID)
		return err == nil
	})
	if g, err := a.auth.Authorize(ctx, "legacy-token", in.ID); err != nil || g.Legacy {
		t.Fatalf("before legacy: %+v %v", g, err)
	}
	if err := accounts.New(pl.db).SetAppLegacy(ctx, "c", true); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the legacy flag reaches the hub", func() bool {
		g, err := a.auth.Authorize(ctx, "legacy-token", in.ID)
		return err == nil && g.Legacy
	})
	if err := accounts.New(pl.db).SetAppLegacy(ctx, "c", false); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "legacy off reaches the hub", func() bool {
		g, err := a.auth.Authorize(ctx, "legacy-token", in.ID)
		return err == nil && !g.Legacy
	})
}

func mustPrefixes(ps ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range ps {
		out = append(out, netip.MustParsePrefix(p))
	}
	return out
}

// TestHubLoginThrottle: wrong secrets throttle the (hub, address) pair,
// not the other hubs behind the same address; behind a trusted proxy the
// client's address counts, not the proxy's.
func TestHubLoginThrottle(t *testing.T) {
	pl := newPlatform(t)
	get := func(hub, secret, xff string) int {
		req, _ := http.NewRequest("GET", pl.srv.URL+link.SnapshotPath, nil)
		req.SetBasicAuth(hub, secret)
		if xff != "" {
			req.Header.Set("X-Forwarded-For", xff)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for range 8 {
		get("h1", "wrong", "")
	}
	if c := get("h1", pl.hubs["h1"], ""); c != http.StatusTooManyRequests {
		t.Errorf("h1 after 8 wrong secrets: %d, want 429", c)
	}
	if c := get("h2", pl.hubs["h2"], ""); c != http.StatusOK {
		t.Errorf("h2 behind the same address after h1's failures: %d, want 200", c)
	}
	// Behind a trusted proxy: the attacker's client address is throttled,
	// the hub's own is not.
	pl2 := newPlatform(t)
	pl2.serve(t, mustPrefixes("127.0.0.0/8", "::1/128")...)
	pl = pl2
	for range 8 {
		get("h1", "wrong", "203.0.113.9")
	}
	if c := get("h1", "wrong", "203.0.113.9"); c != http.StatusTooManyRequests {
		t.Errorf("the attacker behind the proxy: %d, want 429", c)
	}
	if c := get("h1", pl.hubs["h1"], "198.51.100.7"); c != http.StatusOK {
		t.Errorf("h1 behind the proxy after another client's failures: %d, want 200", c)
	}
}
