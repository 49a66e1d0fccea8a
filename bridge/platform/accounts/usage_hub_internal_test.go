package accounts

import (
	"testing"
	"time"
)

// TestMarkUsedAtHub: a hub's usage report records the installations of
// its own locations only, and recording a use is no change for the hubs.
func TestMarkUsedAtHub(t *testing.T) {
	ForEachDialect(t, func(t *testing.T) {
		f := newFeedFixture(t)
		before, err := f.db.ChangeSeq(f.ctx)
		if err != nil {
			t.Fatal(err)
		}
		at := time.Now().Add(-time.Minute).Truncate(time.Second)
		n, err := f.db.MarkUsedAtHub(f.ctx, "h1", map[string]time.Time{f.in1.ID: at, f.in3.ID: at, "no-such": at})
		if err != nil || n != 1 {
			t.Fatalf("h1's report recorded %d, want 1 (%v)", n, err)
		}
		in1, err := f.db.Installation(f.ctx, f.in1.ID)
		if err != nil || !in1.LastUsedAt.Equal(at) {
			t.Errorf("h1's installation last used %v, want %v (%v)", in1.LastUsedAt, at, err)
		}
		in3, err := f.db.Installation(f.ctx, f.in3.ID)
		if err != nil || !in3.LastUsedAt.IsZero() {
			t.Errorf("h2's installation recorded from h1's report: %v (%v)", in3.LastUsedAt, err)
		}
		// An older report does not move the time back.
		if _, err := f.db.MarkUsedAtHub(f.ctx, "h1", map[string]time.Time{f.in1.ID: at.Add(-time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if in1, _ := f.db.Installation(f.ctx, f.in1.ID); !in1.LastUsedAt.Equal(at) {
			t.Errorf("an older report moved the last use to %v", in1.LastUsedAt)
		}
		if err := f.db.MarkUsed(f.ctx, map[string]time.Time{f.in3.ID: at}); err != nil {
			t.Fatal(err)
		}
		if after, _ := f.db.ChangeSeq(f.ctx); after != before {
			t.Errorf("recording uses added %d entries to the change log", after-before)
		}
	})
}
