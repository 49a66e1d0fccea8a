package hubstore_test

import (
	"context"
	"github.com/switchbridge/switchbridge/bridge/platform/accounts"
	"slices"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/hub/hubstore"
	"github.com/switchbridge/switchbridge/bridge/store"
	"github.com/switchbridge/switchbridge/bridge/store/storetest"
)

// A hub's replica is fed by its platform's change log: these tests run
// the platform's records (bridge/store) into a hub's (hubstore).

// feedFixture is a platform store with hub h1 holding locations 1 and 2,
// hub h2 holding 3, and alice (member of 1 and 3) with app c1 installed
// into 1 and 3, each with a token.
type feedFixture struct {
	db               *store.DB
	in1, in3         *bridge.Installation
	tok1, tok3       []byte
	userID           int64
	ctx              context.Context
	cursor1, cursor2 int64
}

func newFeedFixture(t testing.TB) *feedFixture {
	t.Helper()
	ctx := context.Background()
	db, err := storetest.Open(t, t.TempDir()), error(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	f := &feedFixture{db: db, ctx: ctx}
	for _, h := range []*bridge.RegisteredHub{{ID: "h1", Name: "house", BaseURL: "http://h1", SecretHash: []byte("x")}, {ID: "h2", Name: "barn", BaseURL: "http://h2", SecretHash: []byte("y")}} {
		if err := accounts.New(db).CreateHub(ctx, h); err != nil {
			t.Fatal(err)
		}
	}
	sw := []bridge.RemoteSwitch{{ID: "lamp", Name: "Lamp", Commands: []bridge.Command{bridge.CommandOn, bridge.CommandOff}}}
	if err := accounts.New(db).SetInventory(ctx, "h1", "v1", []bridge.RemoteLocation{{ID: 1, Name: "House", Switches: sw}, {ID: 2, Name: "Garage"}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := accounts.New(db).SetInventory(ctx, "h2", "v1", []bridge.RemoteLocation{{ID: 3, Name: "Barn"}}, nil); err != nil {
		t.Fatal(err)
	}
	snap1, err := accounts.New(db).Snapshot(ctx, "h1")
	if err != nil {
		t.Fatal(err)
	}
	snap2, err := accounts.New(db).Snapshot(ctx, "h2")
	if err != nil {
		t.Fatal(err)
	}
	f.cursor1, f.cursor2 = snap1.Cursor, snap2.Cursor
	u, err := accounts.New(db).CreateUser(ctx, "alice", []byte("x"), []int64{1, 3})
	if err != nil {
		t.Fatal(err)
	}
	f.userID = u.ID
	dev, err := accounts.New(db).CreateUser(ctx, "dev", []byte("x"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := accounts.New(db).CreateApp(ctx, &bridge.App{ClientID: "c1", Name: "A", SecretHash: []byte("s"), RedirectURIs: []string{"https://a/cb"}, OwnerID: dev.ID, Published: true}); err != nil {
		t.Fatal(err)
	}
	f.in1 = &bridge.Installation{ClientID: "c1", UserID: u.ID, LocationID: 1, SwitchIDs: []string{"lamp"}}
	f.in3 = &bridge.Installation{ClientID: "c1", UserID: u.ID, LocationID: 3, SwitchIDs: []string{"cow"}}
	f.tok1, f.tok3 = []byte("token-one-hash"), []byte("token-three-hash")
	for _, x := range []struct {
		in  *bridge.Installation
		tok []byte
	}{{f.in1, f.tok1}, {f.in3, f.tok3}} {
		if err := accounts.New(db).Install(ctx, x.in); err != nil {
			t.Fatal(err)
		}
		if err := accounts.New(db).CreateToken(ctx, x.tok, x.in.ID, time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func (f *feedFixture) changes(t *testing.T, hub string, cursor int64) *bridge.ChangeBatch {
	t.Helper()
	b, err := accounts.New(f.db).Changes(f.ctx, hub, cursor)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestReplicaApplyBatch: a batch and its cursor are stored together; the
// replica answers the token check's questions; a snapshot replaces all.
func TestReplicaApplyBatch(t *testing.T) {
	f := newFeedFixture(t)
	hubDB, err := store.Open(f.ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer hubDB.Close()
	hub := hubstore.New(hubDB)
	if st, _ := hub.ReplicaState(f.ctx); st.Synced {
		t.Errorf("a new replica is synced: %+v", st)
	}
	snap, _ := accounts.New(f.db).Snapshot(f.ctx, "h1")
	if err := hub.ApplyBatch(f.ctx, snap, time.Now()); err != nil {
		t.Fatal(err)
	}
	r := hub.Replica()
	tok, err := r.TokenGrant(f.ctx, f.tok1)
	if err != nil || tok.InstallationID != f.in1.ID || tok.Revoked || !tok.Member || tok.Installation.ID != f.in1.ID {
		t.Errorf("token = %+v %v", tok, err)
	}
	if _, err := r.TokenGrant(f.ctx, f.tok3); err != bridge.ErrTokenUnknown {
		t.Errorf("another hub's token: %v", err)
	}
	in, err := r.Installation(f.ctx, f.in1.ID)
	if err != nil || !slices.Equal(in.SwitchIDs, []string{"lamp"}) {
		t.Errorf("installation = %+v %v", in, err)
	}
	f.db.ExecContext(f.ctx, `DELETE FROM apps`)
	b := f.changes(t, "h1", snap.Cursor)
	if err := hub.ApplyBatch(f.ctx, b, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := r.TokenGrant(f.ctx, f.tok1); err != bridge.ErrTokenUnknown {
		t.Errorf("token of an uninstalled app: %v", err)
	}
	st, _ := hub.ReplicaState(f.ctx)
	if st.Cursor != b.Cursor || st.Applied != 2 {
		t.Errorf("state = %+v, want cursor %d and 2 batches", st, b.Cursor)
	}
}

// TestSeeOnlyFollowsTheGrant: a switch made see-only moves the access
// generation (cached grants are dropped), reaches the token check, and
// travels in the hubs' change log to a replica, which answers with it;
// made switchable again, all of it follows back.
func TestSeeOnlyFollowsTheGrant(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T) {
		f := newFeedFixture(t)
		hubDB, err := store.Open(f.ctx, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		defer hubDB.Close()
		hub := hubstore.New(hubDB)
		snap, err := accounts.New(f.db).Snapshot(f.ctx, "h1")
		if err != nil {
			t.Fatal(err)
		}
		if err := hub.ApplyBatch(f.ctx, snap, time.Now()); err != nil {
			t.Fatal(err)
		}
		cursor := snap.Cursor
		for _, seeOnly := range []bool{true, false} {
			gen, _ := f.db.AccessGeneration(f.ctx)
			if err := accounts.New(f.db).SetSeeOnly(f.ctx, f.in1.ID, "lamp", seeOnly); err != nil {
				t.Fatal(err)
			}
			var want []string
			if seeOnly {
				want = []string{"lamp"}
			}
			if g, _ := f.db.AccessGeneration(f.ctx); g == gen {
				t.Errorf("see-only %v: the access generation did not move", seeOnly)
			}
			if in, err := accounts.New(f.db).Installation(f.ctx, f.in1.ID); err != nil || !slices.Equal(in.SeeOnly, want) {
				t.Errorf("see-only %v: installation = %+v %v", seeOnly, in, err)
			}
			if g, err := accounts.New(f.db).TokenGrant(f.ctx, f.tok1); err != nil || !slices.Equal(g.Installation.SeeOnly, want) {
				t.Errorf("see-only %v: token grant = %+v %v", seeOnly, g, err)
			}
			b := f.changes(t, "h1", cursor)
			cursor = b.Cursor
			if len(b.Installations) != 1 || !slices.Equal(b.Installations[0].SeeOnly, want) {
				t.Fatalf("see-only %v: the feed carries %+v", seeOnly, b.Installations)
			}
			if err := hub.ApplyBatch(f.ctx, b, time.Now()); err != nil {
				t.Fatal(err)
			}
			r := hub.Replica()
			if g, err := r.TokenGrant(f.ctx, f.tok1); err != nil || !slices.Equal(g.Installation.SeeOnly, want) {
				t.Errorf("see-only %v: replica token grant = %+v %v", seeOnly, g, err)
			}
			if in, err := r.Installation(f.ctx, f.in1.ID); err != nil || !slices.Equal(in.SeeOnly, want) {
				t.Errorf("see-only %v: replica installation = %+v %v", seeOnly, in, err)
			}
		}
		if err := accounts.New(f.db).SetSeeOnly(f.ctx, f.in1.ID, "cow", true); bridge.ErrorCode(err) != bridge.ENOTFOUND {
			t.Errorf("a switch the installation does not hold: %v", err)
		}
		bad := &bridge.Installation{ClientID: "c1", UserID: f.userID, LocationID: 1, SwitchIDs: []string{"lamp"}, SeeOnly: []string{"fan"}}
		if err := accounts.New(f.db).Install(f.ctx, bad); bridge.ErrorCode(err) != bridge.EINVALID {
			t.Errorf("see-only a switch not installed: %v", err)
		}
		in := &bridge.Installation{ClientID: "c1", UserID: f.userID, LocationID: 1, SwitchIDs: []string{"lamp", "fan"}, SeeOnly: []string{"fan"}}
		if err := accounts.New(f.db).Install(f.ctx, in); err != nil {
			t.Fatal(err)
		}
		if got, _ := accounts.New(f.db).Installation(f.ctx, in.ID); !slices.Equal(got.SeeOnly, []string{"fan"}) {
			t.Errorf("installed see-only = %v", got.SeeOnly)
		}
	})
}
