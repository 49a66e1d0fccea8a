package link_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/link"
	"github.com/switchbridge/switchbridge/bridge/oauth"
	"github.com/switchbridge/switchbridge/bridge/store"
)

// arrivingReplica is a hub's replica into which the long poll applies a
// batch just after the token check read a token the replica did not hold
// yet: the interleaving of a token used within milliseconds of its issue
// at a platform whose long polls are woken at once (PostgreSQL's NOTIFY).
type arrivingReplica struct {
	*store.Replica
	once   sync.Once
	arrive func()
}

func (r *arrivingReplica) TokenGrant(ctx context.Context, hash []byte) (*bridge.TokenGrant, error) {
	g, err := r.Replica.TokenGrant(ctx, hash)
	if errors.Is(err, bridge.ErrTokenUnknown) {
		r.once.Do(r.arrive)
	}
	return g, err
}

// TestTokenArrivingDuringTheCheck: a token the long poll brings while the
// hub checks it is served, not refused 401; the refusal of a token the
// replica did not hold is a miss, which syncs, whatever a later read of
// the replica finds. A token the replica holds revoked is refused without
// a sync.
func TestTokenArrivingDuringTheCheck(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	in := bridge.ReplicaInstallation{ID: "inst-1", ClientID: "c", UserID: 1, LocationID: 10, SwitchIDs: []string{"s10"}, Member: true, UpdatedAt: time.Now()}
	expires := time.Now().Add(time.Hour)
	if err := db.ApplyBatch(ctx, &bridge.ChangeBatch{Cursor: 1, Snapshot: true, Installations: []bridge.ReplicaInstallation{in},
		Tokens: []bridge.ReplicaToken{{Hash: oauth.Hash("revoked-token"), InstallationID: in.ID, ExpiresAt: expires, Revoked: true}}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	src := &arrivingReplica{Replica: db.Replica()}
	src.arrive = func() {
		// The long poll's batch with the token just issued.
		if err := db.ApplyBatch(ctx, &bridge.ChangeBatch{Cursor: 2,
			Tokens: []bridge.ReplicaToken{{Hash: oauth.Hash("fresh-token"), InstallationID: in.ID, ExpiresAt: expires}}}, time.Now()); err != nil {
			t.Error(err)
		}
	}
	auth := link.NewAuthorizer(src, nil)
	syncs := 0
	auth.Sync = func(context.Context) bool {
		syncs++
		return true // the replica holds all there is: the batch above came
	}

	g, err := auth.Authorize(ctx, "fresh-token", in.ID)
	if err != nil {
		t.Fatalf("a token the replica took in while the hub checked it: %v, want it served", err)
	}
	if g.InstallationID != in.ID || syncs != 1 {
		t.Errorf("grant for %q after %d syncs, want installation %q after 1", g.InstallationID, syncs, in.ID)
	}

	syncs = 0
	if _, err := auth.Authorize(ctx, "revoked-token", in.ID); bridge.ErrorCode(err) != bridge.EUNAUTHORIZED || syncs != 0 {
		t.Errorf("a token the replica holds revoked: %v after %d syncs, want unauthorized without a sync", err, syncs)
	}
	if _, err := auth.Authorize(ctx, "unknown-token", in.ID); bridge.ErrorCode(err) != bridge.EUNAUTHORIZED || syncs != 1 {
		t.Errorf("a token unknown after a sync: %v after %d syncs, want unauthorized after 1", err, syncs)
	}
}
