package replica_test

import (
	"context"
	"errors"
	"github.com/switchbridge/switchbridge/bridge/platform/accounts"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/access"
	"github.com/switchbridge/switchbridge/bridge/hub/hubstore"
	"github.com/switchbridge/switchbridge/bridge/link"
	"github.com/switchbridge/switchbridge/bridge/store"
)

// TestSnapshotOlderThanTheReplicaIsNotApplied: a long poll answered 410
// (its cursor compacted away) while a sync on a miss had already moved
// the replica to a cursor the platform still holds; the platform computes
// the snapshot, a token is issued after it, and a sync brings that token
// into the replica before the snapshot arrives. The snapshot is older
// than the replica: applied over it, it would drop the token (and move
// the cursor back) until the next poll, and a request in between would
// be refused. The replica must keep the token and its cursor. A snapshot
// computed after all the replica holds is applied as ever, though the
// replica moved while the hub waited for it.
//
// The platform's handler holds each long poll on arrival and the
// snapshot once computed, so every step happens in the order written.
func TestSnapshotOlderThanTheReplicaIsNotApplied(t *testing.T) {
	t.Run("token_after_the_snapshot", func(t *testing.T) { snapshotAfterSync(t, true) })
	t.Run("nothing_after_the_snapshot", func(t *testing.T) { snapshotAfterSync(t, false) })
}

// snapshotAfterSync runs the story of TestSnapshotOlderThanTheReplicaIsNotApplied,
// with a token issued and synced between the snapshot and its arrival,
// or with nothing then (and an uninstall before the snapshot, so that
// applying it shows).
func snapshotAfterSync(t *testing.T, tokenAfter bool) {
	pl := newPlatform(t)
	ctx := context.Background()
	polls := make(chan url.Values)     // a long poll arrived, with its query
	releasePoll := make(chan struct{}) // one send lets one held poll on
	computed := make(chan struct{})    // a held snapshot is computed
	releaseSnapshot := make(chan struct{})
	var holdSnapshot atomic.Bool
	inner := pl.srv.Config.Handler
	pl.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == link.ChangesPath && r.URL.Query().Get("wait") != "0":
			select {
			case polls <- r.URL.Query():
			case <-r.Context().Done():
				return
			}
			select {
			case <-releasePoll:
			case <-r.Context().Done():
				return
			}
		case r.URL.Path == link.SnapshotPath && holdSnapshot.Load():
			rec := httptest.NewRecorder()
			inner.ServeHTTP(rec, r)
			select {
			case computed <- struct{}{}:
			case <-r.Context().Done():
				return
			}
			select {
			case <-releaseSnapshot:
			case <-r.Context().Done():
				return
			}
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			w.Write(rec.Body.Bytes())
			return
		}
		inner.ServeHTTP(w, r)
	})
	defer close(releasePoll) // polls held at the end go on, to be cancelled
	db, err := store.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	// Bounds on each step, so that a step that never comes fails the test
	// rather than hanging it.
	send := func(what string, ch chan<- struct{}) {
		t.Helper()
		select {
		case ch <- struct{}{}:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: nothing waits for it", what)
		}
	}
	nextPoll := func() url.Values {
		t.Helper()
		select {
		case q := <-polls:
			return q
		case <-time.After(10 * time.Second):
			t.Fatal("no long poll within 10 s")
			return nil
		}
	}
	state := func() bridge.ReplicaState {
		t.Helper()
		st, err := hubstore.New(db).ReplicaState(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	holds := func(token string) bool {
		t.Helper()
		_, err := hubstore.New(db).Replica().TokenGrant(ctx, access.Hash(token))
		if err != nil && !errors.Is(err, bridge.ErrTokenUnknown) {
			t.Fatal(err)
		}
		return err == nil
	}

	first := pl.installApp(t, "c0", 10, "token-0") // an installation of its own
	rh := launchHub(t, pl.srv.URL, "h1", pl.hubs["h1"], db, 10)
	// The first snapshot is in; the poll from its cursor waits.
	nextPoll()
	before := state()

	// A token issued now, synced on a miss while the poll waits.
	pl.install(t, 10, "token-1")
	if !rh.h.SyncNow(ctx) {
		t.Fatal("the sync on a miss failed")
	}
	synced := state()
	if synced.Cursor <= before.Cursor || !holds("token-1") {
		t.Fatalf("after the sync: cursor %d (was %d), token-1 held: %v", synced.Cursor, before.Cursor, holds("token-1"))
	}
	// Compaction drops the poll's cursor, not the sync's.
	if _, err := accounts.New(pl.db).CompactChanges(ctx, time.Now().Add(time.Hour), 0); err != nil {
		t.Fatal(err)
	}
	if err := pl.db.CheckCursor(ctx, before.Cursor, before.CursorTag); !errors.Is(err, bridge.ErrCursorGone) {
		t.Fatalf("the poll's cursor after compaction: %v, want it gone", err)
	}
	if err := pl.db.CheckCursor(ctx, synced.Cursor, synced.CursorTag); err != nil {
		t.Fatalf("the sync's cursor after compaction: %v, want it held", err)
	}
	if !tokenAfter {
		// Uninstalled before the snapshot is computed: the snapshot
		// lacks it, and is newer than the replica.
		if err := accounts.New(pl.db).Uninstall(ctx, first.ID); err != nil {
			t.Fatal(err)
		}
	}

	// The poll is answered 410; the snapshot is computed, then held.
	holdSnapshot.Store(true)
	send("the held poll", releasePoll)
	select {
	case <-computed:
	case <-time.After(10 * time.Second):
		t.Fatalf("no snapshot asked for within 10 s:\n%s", rh.logs)
	}
	if tokenAfter {
		// A token issued after the snapshot, synced on a miss before it
		// arrives.
		pl.install(t, 10, "token-2")
		if !rh.h.SyncNow(ctx) {
			t.Fatal("the sync on a miss during the snapshot failed")
		}
		if !holds("token-2") {
			t.Fatalf("the sync did not bring token-2 (cursor %d)", state().Cursor)
		}
	}
	moved := state()
	send("the held snapshot", releaseSnapshot)
	// The session polls again once it is done with the snapshot.
	q := nextPoll()
	after := state()
	if q.Get("cursor") != strconv.FormatInt(after.Cursor, 10) {
		t.Errorf("polling from %s, the replica is at %d", q.Get("cursor"), after.Cursor)
	}

	if tokenAfter {
		for _, tok := range []string{"token-0", "token-1", "token-2"} {
			if !holds(tok) {
				t.Errorf("%s is not in the replica after the older snapshot", tok)
			}
		}
		if after.Cursor != moved.Cursor {
			t.Errorf("replica at cursor %d after the older snapshot, want %d, where the sync left it", after.Cursor, moved.Cursor)
		}
		return
	}
	newest, err := accounts.New(pl.db).ChangeSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.Cursor != newest || after.Cursor <= moved.Cursor || holds("token-0") || !holds("token-1") {
		t.Errorf("after the newer snapshot: cursor %d (the platform's %d, the replica's before %d), token-0 held %v (uninstalled), token-1 held %v",
			after.Cursor, newest, moved.Cursor, holds("token-0"), holds("token-1"))
	}
}
