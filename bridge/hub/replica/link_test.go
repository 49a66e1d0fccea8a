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
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/access"
	"github.com/switchbridge/switchbridge/bridge/hub/hubstore"
	"github.com/switchbridge/switchbridge/bridge/hub/replica"
	"github.com/switchbridge/switchbridge/bridge/infra/logtest"
	"github.com/switchbridge/switchbridge/bridge/link"
	"github.com/switchbridge/switchbridge/bridge/platform/linkserver"
	"github.com/switchbridge/switchbridge/bridge/platform/oauth"
	"github.com/switchbridge/switchbridge/bridge/store"
)

// platform is a platform store with two hubs behind the link's handler.
type platform struct {
	db     *store.DB
	dir    string
	srv    *httptest.Server
	p      *linkserver.Platform
	hubs   map[string]string // id -> secret
	userID int64
}

func newPlatform(t *testing.T) *platform {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	db, err := store.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	pl := &platform{db: db, dir: dir, hubs: map[string]string{}}
	for _, id := range []string{"h1", "h2"} {
		secret := oauth.NewSecret()
		if err := accounts.New(db).CreateHub(ctx, &bridge.RegisteredHub{ID: id, Name: "hub " + id, BaseURL: "http://" + id, SecretHash: access.Hash(secret)}); err != nil {
			t.Fatal(err)
		}
		pl.hubs[id] = secret
	}
	pl.serve(t)
	u, err := accounts.New(db).CreateUser(ctx, "alice", []byte("x"), []int64{10, 20})
	if err != nil {
		t.Fatal(err)
	}
	pl.userID = u.ID
	if err := accounts.New(db).CreateApp(ctx, &bridge.App{ClientID: "c", Name: "C", SecretHash: []byte("s"), RedirectURIs: []string{"https://c/cb"}, OwnerID: u.ID, Published: true}); err != nil {
		t.Fatal(err)
	}
	return pl
}

// serve runs the link's handler over pl.db, with the clients behind
// proxies named by their forwarding headers.
func (pl *platform) serve(t *testing.T, proxies ...netip.Prefix) {
	if pl.srv != nil {
		pl.srv.Close()
	}
	pl.p = linkserver.NewPlatform(accounts.New(pl.db), nil, linkserver.Options{Own: func(id int64) bool { return id == 1 }, TrustedProxies: proxies})
	pl.p.PollTimeout = 2 * time.Second
	pl.p.WakeInterval = 20 * time.Millisecond
	mux := http.NewServeMux()
	pl.p.Register(mux)
	pl.srv = httptest.NewServer(mux)
	t.Cleanup(pl.srv.Close)
}

func (pl *platform) do(t *testing.T, method, path, hub, secret, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, pl.srv.URL+path, strings.NewReader(body))
	if hub != "" {
		req.SetBasicAuth(hub, secret)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func inventory(locs ...int64) string {
	var parts []string
	for _, l := range locs {
		parts = append(parts, fmt.Sprintf(`{"id":%d,"name":"L%d","switches":[{"id":"s%d","name":"S","commands":["on","off"]}]}`, l, l, l))
	}
	return `{"version":"test","locations":[` + strings.Join(parts, ",") + `]}`
}

// TestInventoryIsCheckedAndStrict: hostile or mistaken inventories are
// refused with a reason and change nothing; fields a newer hub may add are
// ignored.
func TestInventoryIsCheckedAndStrict(t *testing.T) {
	pl := newPlatform(t)
	h1 := pl.hubs["h1"]
	if c, body := pl.do(t, "PUT", link.InventoryPath, "h1", h1, inventory(10)); c != http.StatusNoContent {
		t.Fatalf("inventory: %d %s", c, body)
	}
	big := `{"version":"x","locations":[` + strings.Repeat(`{"id":1,"name":"`+strings.Repeat("n", 1000)+`"},`, 1100) + `{"id":2}]}`
	many := make([]int64, link.MaxLocations+1)
	for i := range many {
		many[i] = int64(100 + i)
	}
	for _, c := range []struct{ name, body, want string }{
		{"trailing data", inventory(10) + `{}`, "data after"},
		{"not JSON", `<xml/>`, "unreadable"},
		{"too large", big, "unreadable"},
		{"too many locations", inventory(many...), "at most"},
		{"bad switch id", `{"version":"x","locations":[{"id":10,"name":"L","switches":[{"id":"../x","name":"S","commands":[]}]}]}`, "not a valid id"},
		{"unknown command", `{"version":"x","locations":[{"id":10,"name":"L","switches":[{"id":"s","name":"S","commands":["explode"]}]}]}`, "unknown command"},
		{"duplicate location", inventory(10, 10), "listed twice"},
		{"negative id", inventory(-1), "positive"},
	} {
		code, body := pl.do(t, "PUT", link.InventoryPath, "h1", h1, c.body)
		if code != http.StatusBadRequest || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %.200s, want 400 with %q", c.name, code, body, c.want)
		}
	}
	// A field this platform does not know (a newer hub's) is ignored.
	if c, body := pl.do(t, "PUT", link.InventoryPath, "h1", h1, `{"version":"x","admin":true,"locations":[{"id":10,"name":"L10","future":1,"switches":[{"id":"s10","name":"S","commands":["on","off"]}]}]}`); c != http.StatusNoContent {
		t.Errorf("an inventory with fields the platform does not know: %d %s", c, body)
	}
	// Another hub's location, or the platform's own: 409 with the reason.
	if c, body := pl.do(t, "PUT", link.InventoryPath, "h2", pl.hubs["h2"], inventory(20, 10)); c != http.StatusConflict || !strings.Contains(body, "location 10 is held by another hub") || strings.Contains(body, "h1") {
		t.Errorf("claiming h1's location: %d %s", c, body)
	}
	if c, body := pl.do(t, "PUT", link.InventoryPath, "h2", pl.hubs["h2"], inventory(1)); c != http.StatusConflict || !strings.Contains(body, "platform's own") {
		t.Errorf("claiming the platform's location: %d %s", c, body)
	}
	h, _ := accounts.New(pl.db).Hub(context.Background(), "h1")
	if len(h.Locations) != 1 || h.Locations[0].ID != 10 || h.Locations[0].Switches[0].ID != "s10" {
		t.Errorf("h1 after refused inventories: %+v", h.Locations)
	}
}

// TestCredentialsReachOnlyTheirHub: no, wrong or another hub's
// credentials are refused; a hub's snapshot holds its own locations only,
// hashes only.
func TestCredentialsReachOnlyTheirHub(t *testing.T) {
	pl := newPlatform(t)
	ctx := context.Background()
	pl.do(t, "PUT", link.InventoryPath, "h1", pl.hubs["h1"], inventory(10))
	pl.do(t, "PUT", link.InventoryPath, "h2", pl.hubs["h2"], inventory(20))
	for _, loc := range []int64{10, 20} {
		in := &bridge.Installation{ClientID: "c", UserID: pl.userID, LocationID: loc, SwitchIDs: []string{fmt.Sprint("s", loc)}}
		if err := accounts.New(pl.db).Install(ctx, in); err != nil {
			t.Fatal(err)
		}
		if err := accounts.New(pl.db).CreateToken(ctx, access.Hash(fmt.Sprint("token-", loc)), in.ID, time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ hub, secret string }{{"", ""}, {"h1", "wrong"}, {"h1", pl.hubs["h2"]}, {"nohub", pl.hubs["h1"]}} {
		if code, _ := pl.do(t, "GET", link.SnapshotPath, c.hub, c.secret, ""); code != http.StatusUnauthorized {
			t.Errorf("snapshot with %q/%q: %d, want 401", c.hub, c.secret, code)
		}
	}
	code, body := pl.do(t, "GET", link.SnapshotPath, "h1", pl.hubs["h1"], "")
	var b bridge.ChangeBatch
	if err := json.Unmarshal([]byte(body), &b); code != 200 || err != nil {
		t.Fatalf("snapshot: %d %s", code, body)
	}
	if len(b.Installations) != 1 || b.Installations[0].LocationID != 10 || len(b.Tokens) != 1 ||
		string(b.Tokens[0].Hash) != string(access.Hash("token-10")) || strings.Contains(body, "token-10") {
		t.Errorf("h1's snapshot: %s", body)
	}
	if code, _ := pl.do(t, "GET", link.ChangesPath+"?cursor=abc", "h1", pl.hubs["h1"], ""); code != http.StatusBadRequest {
		t.Errorf("bad cursor: %d", code)
	}
	if code, _ := pl.do(t, "GET", link.ChangesPath+fmt.Sprintf("?cursor=%d", b.Cursor+1000), "h1", pl.hubs["h1"], ""); code != http.StatusGone {
		t.Errorf("cursor from the future: %d, want 410", code)
	}
}

// TestLoginFailuresAreThrottled: past a few wrong secrets an address waits.
func TestLoginFailuresAreThrottled(t *testing.T) {
	pl := newPlatform(t)
	var last int
	for range 8 {
		last, _ = pl.do(t, "GET", link.SnapshotPath, "h1", "wrong", "")
	}
	if last != http.StatusTooManyRequests {
		t.Errorf("after 8 wrong secrets: %d, want 429", last)
	}
}

// TestLongPollWakesOnAnotherWriter: a poll waiting at the newest cursor
// returns as soon as a change for its hub is committed, by whichever
// connection; a change of another hub's location does not wake it with
// records.
func TestLongPollWakesOnAnotherWriter(t *testing.T) {
	pl := newPlatform(t)
	ctx := context.Background()
	pl.do(t, "PUT", link.InventoryPath, "h1", pl.hubs["h1"], inventory(10))
	pl.do(t, "PUT", link.InventoryPath, "h2", pl.hubs["h2"], inventory(20))
	snap, err := accounts.New(pl.db).Snapshot(ctx, "h1")
	if err != nil {
		t.Fatal(err)
	}
	type res struct {
		b   *bridge.ChangeBatch
		err error
		at  time.Time
	}
	done := make(chan res, 1)
	go func() {
		b, err := pl.p.Poll(ctx, "h1", snap.Cursor)
		done <- res{b, err, time.Now()}
	}()
	time.Sleep(100 * time.Millisecond)
	// Another hub's change first: the poll keeps waiting.
	if err := accounts.New(pl.db).Install(ctx, &bridge.Installation{ClientID: "c", UserID: pl.userID, LocationID: 20, SwitchIDs: []string{"s20"}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	select {
	case r := <-done:
		t.Fatalf("the poll returned for another hub's change: %+v %v", r.b, r.err)
	default:
	}
	// Written by another connection to the same file, as the CLI would.
	other, err := store.OpenFile(ctx, filepath.Join(pl.dir, store.FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	in := &bridge.Installation{ClientID: "c", UserID: pl.userID, LocationID: 10, SwitchIDs: []string{"s10"}}
	wrote := time.Now()
	if err := accounts.New(other).Install(ctx, in); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.err != nil || len(r.b.Installations) != 1 || r.b.Installations[0].ID != in.ID {
			t.Errorf("poll = %+v %v", r.b, r.err)
		}
		if d := r.at.Sub(wrote); d > time.Second {
			t.Errorf("the poll woke %v after the write", d)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the poll did not return")
	}
	// Nothing new: the poll times out with no records and the newest cursor.
	b, err := pl.p.Poll(ctx, "h1", snap.Cursor+100)
	if err == nil {
		t.Errorf("a cursor past the log: %+v", b)
	}
}

// TestHubFollowsAndResnapshots: a hub's link takes a snapshot, follows
// changes, and after its cursor was compacted away (410) takes a snapshot
// again; a rotated secret stops it, and it says why.
func TestHubFollowsAndResnapshots(t *testing.T) {
	pl := newPlatform(t)
	ctx := context.Background()
	var cancel context.CancelFunc
	hubDB, err := store.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer hubDB.Close()
	hub := hubstore.New(hubDB)
	var logs logtest.Buffer
	var h *replica.Follower
	var done chan struct{}
	start := func() {
		var err error
		h, err = replica.NewFollower(pl.srv.URL, "h1", pl.hubs["h1"], hub, slog.New(slog.NewTextHandler(&logs, nil)), replica.FollowerOptions{
			Inventory: func() []bridge.RemoteLocation {
				return []bridge.RemoteLocation{{ID: 10, Name: "L10", Switches: []bridge.RemoteSwitch{{ID: "s10", Name: "S", Commands: bridge.Commands}}}}
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		done = make(chan struct{})
		runCtx, c := context.WithCancel(context.Background())
		cancel = c
		go func() { h.Run(runCtx); close(done) }()
	}
	start()
	defer func() { cancel(); <-done }()

	install := func(client string) *bridge.Installation {
		in := &bridge.Installation{ClientID: client, UserID: pl.userID, LocationID: 10, SwitchIDs: []string{"s10"}}
		if err := accounts.New(pl.db).Install(ctx, in); err != nil {
			t.Fatal(err)
		}
		return in
	}
	has := func(id string) bool {
		_, err := hub.Replica().Installation(ctx, id)
		return err == nil
	}
	wait := func(what string, cond func() bool) {
		t.Helper()
		for range 250 {
			if cond() {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatal(what)
	}
	if err := accounts.New(pl.db).CreateApp(ctx, &bridge.App{ClientID: "c2", Name: "C2", SecretHash: []byte("s"), RedirectURIs: []string{"https://c/cb"}, OwnerID: pl.userID, Published: true}); err != nil {
		t.Fatal(err)
	}
	in := install("c")
	wait("the first installation reaches the replica", func() bool { return has(in.ID) })
	if !h.Up() || h.ReplicaAge() < 0 {
		t.Errorf("up = %v, replica age %v", h.Up(), h.ReplicaAge())
	}
	// The hub's cursor is compacted away while it is down: 410, a snapshot.
	cancel()
	<-done
	before, _ := hub.ReplicaState(context.Background())
	accounts.New(pl.db).CreateUser(ctx, "filler", []byte("x"), []int64{99}) // a change that is not the hub's
	if _, err := accounts.New(pl.db).CompactChanges(ctx, time.Now().Add(time.Hour), 0); err != nil {
		t.Fatal(err)
	}
	in2 := install("c2")
	start()
	wait("an installation after compaction reaches the replica", func() bool { return has(in2.ID) })
	after, _ := hub.ReplicaState(ctx)
	if after.Cursor <= before.Cursor || !strings.Contains(logs.String(), "fetching a snapshot") {
		t.Errorf("cursor %d -> %d; log:\n%s", before.Cursor, after.Cursor, logs.String())
	}
	// A rotated secret: the link stops, and the hub says why.
	if err := accounts.New(pl.db).SetHubSecret(ctx, "h1", access.Hash("new")); err != nil {
		t.Fatal(err)
	}
	h.InventoryChanged() // cut the poll short, as a reload does
	wait("the hub notices the refusal", func() bool { return strings.Contains(h.Refused(), "credentials were refused") })
	if h.Up() {
		t.Error("link up with a refused secret")
	}
	if has(in.ID) != true {
		t.Error("the replica was lost when the link was refused")
	}
}
