package hubstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/store"
)

// TestTombstonesAreBounded: a hub keeps at most tombstoneBound tombstones
// of each kind, dropping those due to go first; an expired token the
// platform pruned leaves none; tombstones past their time are pruned.
func TestTombstonesAreBounded(t *testing.T) {
	ctx := context.Background()
	eng, err := store.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	db := New(eng)
	t.Cleanup(func() { eng.Close() })
	defer func(n int) { tombstoneBound = n }(tombstoneBound)
	tombstoneBound = 10
	clock := time.Now()
	db.now = func() time.Time { return clock }

	var ins []bridge.ReplicaInstallation
	for i := range 25 {
		ins = append(ins, bridge.ReplicaInstallation{ID: fmt.Sprint("inst-", i), ClientID: "c", UserID: 1, LocationID: 10, SwitchIDs: []string{"s"}, Member: true, UpdatedAt: clock})
	}
	expired := bridge.ReplicaToken{Hash: []byte("expired"), InstallationID: "inst-0", ExpiresAt: clock.Add(-2 * expiredKept)}
	live := bridge.ReplicaToken{Hash: []byte("live"), InstallationID: "inst-0", ExpiresAt: clock.Add(time.Hour)}
	if err := db.ApplyBatch(ctx, &bridge.ChangeBatch{Cursor: 1, Snapshot: true, Installations: ins, Tokens: []bridge.ReplicaToken{expired, live}}, clock); err != nil {
		t.Fatal(err)
	}
	if err := db.ApplyBatch(ctx, &bridge.ChangeBatch{Cursor: 2, DeletedTokens: [][]byte{expired.Hash, live.Hash}}, clock); err != nil {
		t.Fatal(err)
	}
	r := db.Replica()
	if g, _ := r.TokenGone(ctx, expired.Hash); g {
		t.Error("an expired token the platform pruned left a tombstone")
	}
	if g, _ := r.TokenGone(ctx, live.Hash); !g {
		t.Error("a live token the platform deleted left no tombstone")
	}
	// One deletion a minute: the latest are kept longest.
	for i, in := range ins {
		clock = clock.Add(time.Minute)
		if err := db.ApplyBatch(ctx, &bridge.ChangeBatch{Cursor: int64(3 + i), DeletedInstallations: []string{in.ID}}, clock); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := db.Tombstones(ctx); err != nil || n != tombstoneBound+1 {
		t.Errorf("%d tombstones (%v), want %d installations and 1 token", n, err, tombstoneBound)
	}
	for i, in := range ins {
		g, err := r.InstallationGone(ctx, in.ID)
		if want := i >= len(ins)-tombstoneBound; g != want || err != nil {
			t.Errorf("%s gone %v (%v), want %v", in.ID, g, err, want)
		}
	}
	// Past a token's whole life, they go.
	if err := db.PruneReplica(ctx, clock.Add(bridge.RefreshLifetime+time.Hour)); err != nil {
		t.Fatal(err)
	}
	if n, err := db.Tombstones(ctx); err != nil || n != 0 {
		t.Errorf("%d tombstones after a token's lifetime (%v)", n, err)
	}
}
