package accounts

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
)

// feedFixture is a platform store with hub h1 holding locations 1 and 2,
// hub h2 holding 3, and alice (member of 1 and 3) with app c1 installed
// into 1 and 3, each with a token.
type feedFixture struct {
	db               *Store
	in1, in3         *bridge.Installation
	tok1, tok3       []byte
	userID           int64
	ctx              context.Context
	cursor1, cursor2 int64
}

func newFeedFixture(t testing.TB) *feedFixture {
	t.Helper()
	ctx := context.Background()
	db, err := OpenTest(t, t.TempDir()), error(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.DB().Close() })
	f := &feedFixture{db: db, ctx: ctx}
	for _, h := range []*bridge.RegisteredHub{{ID: "h1", Name: "house", BaseURL: "http://h1", SecretHash: []byte("x")}, {ID: "h2", Name: "barn", BaseURL: "http://h2", SecretHash: []byte("y")}} {
		if err := db.CreateHub(ctx, h); err != nil {
			t.Fatal(err)
		}
	}
	sw := []bridge.RemoteSwitch{{ID: "lamp", Name: "Lamp", Commands: []bridge.Command{bridge.CommandOn, bridge.CommandOff}}}
	if err := db.SetInventory(ctx, "h1", "v1", []bridge.RemoteLocation{{ID: 1, Name: "House", Switches: sw}, {ID: 2, Name: "Garage"}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := db.SetInventory(ctx, "h2", "v1", []bridge.RemoteLocation{{ID: 3, Name: "Barn"}}, nil); err != nil {
		t.Fatal(err)
	}
	snap1, err := db.Snapshot(ctx, "h1")
	if err != nil {
		t.Fatal(err)
	}
	snap2, err := db.Snapshot(ctx, "h2")
	if err != nil {
		t.Fatal(err)
	}
	f.cursor1, f.cursor2 = snap1.Cursor, snap2.Cursor
	u, err := db.CreateUser(ctx, "alice", []byte("x"), []int64{1, 3})
	if err != nil {
		t.Fatal(err)
	}
	f.userID = u.ID
	dev, err := db.CreateUser(ctx, "dev", []byte("x"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.CreateApp(ctx, &bridge.App{ClientID: "c1", Name: "A", SecretHash: []byte("s"), RedirectURIs: []string{"https://a/cb"}, OwnerID: dev.ID, Published: true}); err != nil {
		t.Fatal(err)
	}
	f.in1 = &bridge.Installation{ClientID: "c1", UserID: u.ID, LocationID: 1, SwitchIDs: []string{"lamp"}}
	f.in3 = &bridge.Installation{ClientID: "c1", UserID: u.ID, LocationID: 3, SwitchIDs: []string{"cow"}}
	f.tok1, f.tok3 = []byte("token-one-hash"), []byte("token-three-hash")
	for _, x := range []struct {
		in  *bridge.Installation
		tok []byte
	}{{f.in1, f.tok1}, {f.in3, f.tok3}} {
		if err := db.Install(ctx, x.in); err != nil {
			t.Fatal(err)
		}
		if err := db.CreateToken(ctx, x.tok, x.in.ID, time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func (f *feedFixture) changes(t *testing.T, hub string, cursor int64) *bridge.ChangeBatch {
	t.Helper()
	b, err := f.db.Changes(f.ctx, hub, cursor)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestFeedSeesOnlyTheHubsLocations: each hub receives the installations
// and token hashes of its own locations, never another hub's.
func TestFeedSeesOnlyTheHubsLocations(t *testing.T) {
	ForEachDialect(t, func(t *testing.T) {
		f := newFeedFixture(t)
		b := f.changes(t, "h1", f.cursor1)
		if len(b.Installations) != 1 || b.Installations[0].ID != f.in1.ID || !b.Installations[0].Member ||
			!slices.Equal(b.Installations[0].SwitchIDs, []string{"lamp"}) {
			t.Errorf("h1 installations = %+v", b.Installations)
		}
		if len(b.Tokens) != 1 || string(b.Tokens[0].Hash) != string(f.tok1) {
			t.Errorf("h1 tokens = %+v", b.Tokens)
		}
		b2 := f.changes(t, "h2", f.cursor2)
		if len(b2.Installations) != 1 || b2.Installations[0].ID != f.in3.ID || len(b2.Tokens) != 1 || string(b2.Tokens[0].Hash) != string(f.tok3) {
			t.Errorf("h2 batch = %+v", b2)
		}
		snap, err := f.db.Snapshot(f.ctx, "h2")
		if err != nil || len(snap.Installations) != 1 || snap.Installations[0].ID != f.in3.ID || len(snap.Tokens) != 1 || snap.Cursor != b2.Cursor {
			t.Errorf("h2 snapshot = %+v %v", snap, err)
		}
		// Nothing new past the cursor: an empty batch at the same cursor.
		if again := f.changes(t, "h1", b.Cursor); !again.Empty() || again.Cursor != b.Cursor {
			t.Errorf("no changes: %+v", again)
		}
	})
}

// TestFeedFollowsEveryWriter: a revocation by code replay, the removal of
// a membership, of a user, and of an app (cascading through the schema,
// not through store code) all reach the hub's feed.
func TestFeedFollowsEveryWriter(t *testing.T) {
	ForEachDialect(t, func(t *testing.T) {
		f := newFeedFixture(t)
		cur := f.changes(t, "h1", f.cursor1).Cursor

		if _, err := f.db.db.ExecContext(context.Background(), `UPDATE tokens SET revoked_at = 1 WHERE hash = ?`, f.tok1); err != nil {
			t.Fatal(err)
		}
		b := f.changes(t, "h1", cur)
		if len(b.Tokens) != 1 || !b.Tokens[0].Revoked {
			t.Errorf("revocation: %+v", b)
		}
		cur = b.Cursor

		if _, err := f.db.db.ExecContext(context.Background(), `DELETE FROM user_locations WHERE user_id = ? AND location_id = 1`, f.userID); err != nil {
			t.Fatal(err)
		}
		b = f.changes(t, "h1", cur)
		if len(b.Installations) != 1 || b.Installations[0].Member {
			t.Errorf("membership removed: %+v", b)
		}
		if b2 := f.changes(t, "h2", f.cursor2); len(b2.Installations) != 1 || !b2.Installations[0].Member {
			t.Errorf("h2 is not concerned by location 1: %+v", b2)
		}
		cur = b.Cursor

		if _, err := f.db.db.ExecContext(context.Background(), `DELETE FROM apps WHERE client_id = 'c1'`); err != nil {
			t.Fatal(err)
		}
		b = f.changes(t, "h1", cur)
		if !slices.Contains(b.DeletedInstallations, f.in1.ID) || len(b.Installations) != 0 {
			t.Errorf("app removed: %+v", b)
		}
		if b2 := f.changes(t, "h2", f.cursor2); !slices.Contains(b2.DeletedInstallations, f.in3.ID) {
			t.Errorf("app removed, h2: %+v", b2)
		}
	})
}

// TestFeedUserRemovalAndCursorGone: removing a user uninstalls at every
// hub; a compacted or unknown cursor is ErrCursorGone.
func TestFeedUserRemovalAndCursorGone(t *testing.T) {
	ForEachDialect(t, func(t *testing.T) {
		f := newFeedFixture(t)
		cur := f.changes(t, "h2", f.cursor2).Cursor
		if _, err := f.db.db.ExecContext(context.Background(), `DELETE FROM users WHERE id = ?`, f.userID); err != nil {
			t.Fatal(err)
		}
		b := f.changes(t, "h2", cur)
		if !slices.Contains(b.DeletedInstallations, f.in3.ID) {
			t.Errorf("user removed: %+v", b)
		}
		if _, err := f.db.Changes(f.ctx, "h2", b.Cursor+1); err != bridge.ErrCursorGone {
			t.Errorf("cursor from the future: %v", err)
		}
		if _, err := f.db.CompactChanges(f.ctx, time.Now().Add(time.Hour), 0); err != nil {
			t.Fatal(err)
		}
		if _, err := f.db.Changes(f.ctx, "h2", cur); err != bridge.ErrCursorGone {
			t.Errorf("compacted cursor: %v", err)
		}
		if nb, err := f.db.Changes(f.ctx, "h2", b.Cursor); err != nil || nb.Cursor != b.Cursor || !nb.Empty() {
			t.Errorf("the newest cursor survives compaction: %+v %v", nb, err)
		}
	})
}

// TestInventoryConflicts: a location another hub holds, or the platform's
// own, is refused and changes nothing; a new location enters the feed.
func TestInventoryConflicts(t *testing.T) {
	ForEachDialect(t, func(t *testing.T) {
		f := newFeedFixture(t)
		err := f.db.SetInventory(f.ctx, "h2", "v2", []bridge.RemoteLocation{{ID: 3, Name: "Barn"}, {ID: 1, Name: "Mine"}}, nil)
		// The refused hub is not told which hub holds it; the platform's log is.
		var held *bridge.LocationHeldError
		if bridge.ErrorCode(err) != bridge.ECONFLICT || bridge.ErrorMessage(err) != "location 1 is held by another hub" ||
			!errors.As(err, &held) || !strings.Contains(held.Holder, "house") {
			t.Errorf("claiming h1's location: %v", err)
		}
		err = f.db.SetInventory(f.ctx, "h2", "v2", []bridge.RemoteLocation{{ID: 9, Name: "Own"}}, func(id int64) bool { return id == 9 })
		if bridge.ErrorCode(err) != bridge.ECONFLICT {
			t.Errorf("claiming the platform's location: %v", err)
		}
		h, err := f.db.Hub(f.ctx, "h2")
		if err != nil || len(h.Locations) != 1 || h.Locations[0].ID != 3 || h.Version != "v1" {
			t.Errorf("after refusals: %+v %v", h, err)
		}
		// h1 gives location 2 up, h2 takes it: h2 receives what is installed there.
		cur := f.changes(t, "h2", f.cursor2).Cursor
		in2 := &bridge.Installation{ClientID: "c1", UserID: f.userID, LocationID: 2, SwitchIDs: []string{"door"}}
		if err := f.db.Install(f.ctx, in2); err != nil {
			t.Fatal(err)
		}
		if err := f.db.SetInventory(f.ctx, "h1", "v2", []bridge.RemoteLocation{{ID: 1, Name: "House"}}, nil); err != nil {
			t.Fatal(err)
		}
		if err := f.db.SetInventory(f.ctx, "h2", "v2", []bridge.RemoteLocation{{ID: 3, Name: "Barn"}, {ID: 2, Name: "Garage"}}, nil); err != nil {
			t.Fatal(err)
		}
		b := f.changes(t, "h2", cur)
		if len(b.Installations) != 1 || b.Installations[0].ID != in2.ID {
			t.Errorf("location taken over: %+v", b)
		}
		n, err := f.db.RemoveHub(f.ctx, "h2")
		if err != nil || n != 2 {
			t.Errorf("RemoveHub = %d %v, want its 2 installations uninstalled", n, err)
		}
		if _, err := f.db.Installation(f.ctx, f.in3.ID); bridge.ErrorCode(err) != bridge.ENOTFOUND {
			t.Errorf("installation of a removed hub: %v", err)
		}
	})
}
