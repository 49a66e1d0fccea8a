package hubstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/hub/hubstore"
	"github.com/switchbridge/switchbridge/bridge/store/storetest"
)

// TestMQTTClientIDs: a client id is bound to the first login, read back
// through another connection, refused to another login unless taken, kept
// within a login's bound (its least recently used going first), listed
// and released.
func TestMQTTClientIDs(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T) {
		ctx := context.Background()
		dir := t.TempDir()
		one, other := open(t, dir), open(t, dir)
		t0 := time.UnixMilli(1_700_000_000_000)
		bind := func(db *hubstore.Store, id, login string, at time.Time, take bool) string {
			t.Helper()
			owner, err := db.BindMQTTClientID(ctx, id, login, at, take, 2)
			if err != nil {
				t.Fatal(err)
			}
			return owner
		}
		if got := bind(one, "x", "a", t0, false); got != "a" {
			t.Fatalf("a fresh client id is bound to %q", got)
		}
		if got, err := other.MQTTClientIDLogin(ctx, "x"); err != nil || got != "a" {
			t.Errorf("read through another connection: %q, %v", got, err)
		}
		if got, _ := other.MQTTClientIDLogin(ctx, "never"); got != "" {
			t.Errorf("an unbound client id reads as %q", got)
		}
		if got := bind(other, "x", "b", t0, false); got != "a" {
			t.Errorf("another login binding a's client id: bound to %q, want a", got)
		}
		if got := bind(one, "y", "b", t0, false); got != "b" {
			t.Fatal(got)
		}
		if got := bind(one, "y", "a", t0.Add(time.Second), true); got != "a" {
			t.Errorf("taken: bound to %q, want a", got)
		}
		// a holds x and y; a third, used last, unbinds the least recently
		// used: x was used again after y.
		bind(one, "x", "a", t0.Add(2*time.Second), false)
		bind(one, "z", "a", t0.Add(3*time.Second), false)
		ids, err := other.MQTTClientIDs(ctx)
		if err != nil || len(ids) != 2 || ids[0].ID != "x" || ids[1].ID != "z" || ids[0].Login != "a" ||
			!ids[0].Bound.Equal(t0) || !ids[0].LastUsed.Equal(t0.Add(2*time.Second)) {
			t.Fatalf("listed %+v, %v; want x and z of a", ids, err)
		}
		c, err := other.ReleaseMQTTClientID(ctx, "x")
		if err != nil || c.Login != "a" {
			t.Fatalf("release: %+v, %v", c, err)
		}
		if _, err := one.ReleaseMQTTClientID(ctx, "x"); bridge.ErrorCode(err) != bridge.ENOTFOUND {
			t.Errorf("released twice: %v", err)
		}
		if got := bind(one, "x", "b", t0, false); got != "b" {
			t.Errorf("a released client id is bound to %q, want the next login", got)
		}
	})
}
