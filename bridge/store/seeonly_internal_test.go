package store

import (
	"slices"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
)

// TestSeeOnlyFollowsTheGrant: a switch made see-only moves the access
// generation (cached grants are dropped), reaches the token check, and
// travels in the hubs' change log to a replica, which answers with it;
// made switchable again, all of it follows back.
func TestSeeOnlyFollowsTheGrant(t *testing.T) {
	ForEachDialect(t, func(t *testing.T) {
		f := newFeedFixture(t)
		hubDB, err := Open(f.ctx, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		defer hubDB.Close()
		snap, err := f.db.Snapshot(f.ctx, "h1")
		if err != nil {
			t.Fatal(err)
		}
		if err := hubDB.ApplyBatch(f.ctx, snap, time.Now()); err != nil {
			t.Fatal(err)
		}
		cursor := snap.Cursor
		for _, seeOnly := range []bool{true, false} {
			gen, _ := f.db.AccessGeneration(f.ctx)
			if err := f.db.SetSeeOnly(f.ctx, f.in1.ID, "lamp", seeOnly); err != nil {
				t.Fatal(err)
			}
			var want []string
			if seeOnly {
				want = []string{"lamp"}
			}
			if g, _ := f.db.AccessGeneration(f.ctx); g == gen {
				t.Errorf("see-only %v: the access generation did not move", seeOnly)
			}
			if in, err := f.db.Installation(f.ctx, f.in1.ID); err != nil || !slices.Equal(in.SeeOnly, want) {
				t.Errorf("see-only %v: installation = %+v %v", seeOnly, in, err)
			}
			if g, err := f.db.TokenGrant(f.ctx, f.tok1); err != nil || !slices.Equal(g.Installation.SeeOnly, want) {
				t.Errorf("see-only %v: token grant = %+v %v", seeOnly, g, err)
			}
			b := f.changes(t, "h1", cursor)
			cursor = b.Cursor
			if len(b.Installations) != 1 || !slices.Equal(b.Installations[0].SeeOnly, want) {
				t.Fatalf("see-only %v: the feed carries %+v", seeOnly, b.Installations)
			}
			if err := hubDB.ApplyBatch(f.ctx, b, time.Now()); err != nil {
				t.Fatal(err)
			}
			r := hubDB.Replica()
			if g, err := r.TokenGrant(f.ctx, f.tok1); err != nil || !slices.Equal(g.Installation.SeeOnly, want) {
				t.Errorf("see-only %v: replica token grant = %+v %v", seeOnly, g, err)
			}
			if in, err := r.Installation(f.ctx, f.in1.ID); err != nil || !slices.Equal(in.SeeOnly, want) {
				t.Errorf("see-only %v: replica installation = %+v %v", seeOnly, in, err)
			}
		}
		if err := f.db.SetSeeOnly(f.ctx, f.in1.ID, "cow", true); bridge.ErrorCode(err) != bridge.ENOTFOUND {
			t.Errorf("a switch the installation does not hold: %v", err)
		}
		bad := &bridge.Installation{ClientID: "c1", UserID: f.userID, LocationID: 1, SwitchIDs: []string{"lamp"}, SeeOnly: []string{"fan"}}
		if err := f.db.Install(f.ctx, bad); bridge.ErrorCode(err) != bridge.EINVALID {
			t.Errorf("see-only a switch not installed: %v", err)
		}
		in := &bridge.Installation{ClientID: "c1", UserID: f.userID, LocationID: 1, SwitchIDs: []string{"lamp", "fan"}, SeeOnly: []string{"fan"}}
		if err := f.db.Install(f.ctx, in); err != nil {
			t.Fatal(err)
		}
		if got, _ := f.db.Installation(f.ctx, in.ID); !slices.Equal(got.SeeOnly, []string{"fan"}) {
			t.Errorf("installed see-only = %v", got.SeeOnly)
		}
	})
}
