package replica_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/access"
	"github.com/switchbridge/switchbridge/bridge/hub/hubstore"
	"github.com/switchbridge/switchbridge/bridge/hub/replica"
	"github.com/switchbridge/switchbridge/bridge/store"
)

// arrivingReplica is a hub's replica into which the long poll applies a
// batch just after the token check read a token the replica did not hold
// yet: the interleaving of a token used within milliseconds of its issue
// at a platform whose long polls are woken at once (PostgreSQL's NOTIFY).
type arrivingReplica struct {
	*hubstore.Replica
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
// hub checks it is served, not refused 401: a read that did not find it
// is a miss, never a refusal, whatever a later read of the replica finds.
// A token the replica holds revoked is refused without a sync.
func TestTokenArrivingDuringTheCheck(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	hub := hubstore.New(db)
	in := bridge.ReplicaInstallation{ID: "inst-1", ClientID: "c", UserID: 1, LocationID: 10, SwitchIDs: []string{"s10"}, Member: true, UpdatedAt: time.Now()}
	expires := time.Now().Add(time.Hour)
	if err := hub.ApplyBatch(ctx, &bridge.ChangeBatch{Cursor: 1, Snapshot: true, Installations: []bridge.ReplicaInstallation{in},
		Tokens: []bridge.ReplicaToken{{Hash: access.Hash("revoked-token"), InstallationID: in.ID, ExpiresAt: expires, Revoked: true}}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	src := &arrivingReplica{Replica: hub.Replica()}
	src.arrive = func() {
		// The long poll's batch with the token just issued.
		if err := hub.ApplyBatch(ctx, &bridge.ChangeBatch{Cursor: 2,
			Tokens: []bridge.ReplicaToken{{Hash: access.Hash("fresh-token"), InstallationID: in.ID, ExpiresAt: expires}}}, time.Now()); err != nil {
			t.Error(err)
		}
	}
	syncs := 0
	auth := replica.NewAuthorizer(src, replica.AuthorizerOptions{Sync: func(context.Context) bool {
		syncs++
		return true // the replica holds all there is: the batch above came
	}})

	g, err := auth.Authorize(ctx, "fresh-token", in.ID)
	if err != nil {
		t.Fatalf("a token the replica took in while the hub checked it: %v, want it served", err)
	}
	// Served by the read after the one that missed it: at most one sync
	// (none when the check's first look at the token, which tells a
	// token of another installation at once, was that miss).
	if g.InstallationID != in.ID || syncs > 1 {
		t.Errorf("grant for %q after %d syncs, want installation %q after at most 1", g.InstallationID, syncs, in.ID)
	}

	syncs = 0
	if _, err := auth.Authorize(ctx, "revoked-token", in.ID); bridge.ErrorCode(err) != bridge.EUNAUTHORIZED || syncs != 0 {
		t.Errorf("a token the replica holds revoked: %v after %d syncs, want unauthorized without a sync", err, syncs)
	}
	if _, err := auth.Authorize(ctx, "unknown-token", in.ID); bridge.ErrorCode(err) != bridge.EUNAUTHORIZED || syncs != 1 {
		t.Errorf("a token unknown after a sync: %v after %d syncs, want unauthorized after 1", err, syncs)
	}
}

// TestTombstonesRefuseWithoutASync: what the platform deleted from the
// replica (an uninstall, a token deleted, a location handed to another
// hub) is refused 401 at once, without a sync, while the link is down,
// also after a restart; a token the hub never saw stays 503 with a
// Retry-After; a record the platform sends again is served again.
func TestTombstonesRefuseWithoutASync(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := store.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { db.Close() }()
	hub := hubstore.New(db)
	now := time.Now()
	inst := func(id string, loc int64) bridge.ReplicaInstallation {
		return bridge.ReplicaInstallation{ID: id, ClientID: "c", UserID: 1, LocationID: loc, SwitchIDs: []string{"s"}, Member: true, UpdatedAt: now}
	}
	tok := func(token, inst string) bridge.ReplicaToken {
		return bridge.ReplicaToken{Hash: access.Hash(token), InstallationID: inst, ExpiresAt: now.Add(time.Hour)}
	}
	uninstalled, kept, handed := inst("uninstalled", 10), inst("kept", 10), inst("handed-over", 20)
	if err := hub.ApplyBatch(ctx, &bridge.ChangeBatch{Cursor: 1, Snapshot: true,
		Installations: []bridge.ReplicaInstallation{uninstalled, kept, handed},
		Tokens:        []bridge.ReplicaToken{tok("token-u", "uninstalled"), tok("token-d", "kept"), tok("token-k", "kept"), tok("token-h", "handed-over")}}, now); err != nil {
		t.Fatal(err)
	}
	if err := hub.ApplyBatch(ctx, &bridge.ChangeBatch{Cursor: 2, DeletedInstallations: []string{"uninstalled"}, DeletedTokens: [][]byte{access.Hash("token-d")}}, now); err != nil {
		t.Fatal(err)
	}
	if _, err := hub.RetainReplicaLocations(ctx, []int64{10}); err != nil {
		t.Fatal(err)
	}

	syncs := 0
	check := func(hub *hubstore.Store) *replica.Authorizer {
		return replica.NewAuthorizer(hub.Replica(), replica.AuthorizerOptions{
			Sync: func(context.Context) bool { syncs++; return false }, // the link is down
		})
	}
	auth := check(hub)
	refused := func(auth *replica.Authorizer) {
		t.Helper()
		for token, in := range map[string]string{"token-u": "uninstalled", "token-d": "kept", "token-h": "handed-over"} {
			syncs = 0
			if _, err := auth.Authorize(ctx, token, in); bridge.ErrorCode(err) != bridge.EUNAUTHORIZED || syncs != 0 {
				t.Errorf("%s, deleted at the platform, with the link down: %v after %d syncs, want unauthorized without a sync", token, err, syncs)
			}
		}
	}
	refused(auth)
	if _, err := auth.Authorize(ctx, "token-k", "kept"); err != nil {
		t.Errorf("the kept token: %v", err)
	}
	syncs = 0
	var e *bridge.Error
	if _, err := auth.Authorize(ctx, "never-seen", "kept"); bridge.ErrorCode(err) != bridge.EUNAVAILABLE || !errors.As(err, &e) || e.RetryAfter <= 0 || syncs != 1 {
		t.Errorf("a token the hub never saw, with the link down: %v after %d syncs, want unavailable with a Retry-After after 1", err, syncs)
	}

	// Kept in the store: the same after a restart.
	db.Close()
	if db, err = store.Open(ctx, dir); err != nil {
		t.Fatal(err)
	}
	hub = hubstore.New(db)
	auth = check(hub)
	refused(auth)
	if n, err := hub.Tombstones(ctx); err != nil || n != 3 {
		t.Errorf("%d tombstones (%v), want 3", n, err)
	}

	// The location comes back with its whole state, and the token is
	// sent again: both are served again.
	if err := hub.ApplyBatch(ctx, &bridge.ChangeBatch{Cursor: 3, Locations: []int64{20},
		Installations: []bridge.ReplicaInstallation{handed}, Tokens: []bridge.ReplicaToken{tok("token-h", "handed-over"), tok("token-d", "kept")}}, now); err != nil {
		t.Fatal(err)
	}
	auth.Forget()
	for token, in := range map[string]string{"token-h": "handed-over", "token-d": "kept"} {
		if _, err := auth.Authorize(ctx, token, in); err != nil {
			t.Errorf("%s, sent again: %v", token, err)
		}
	}
	if n, err := hub.Tombstones(ctx); err != nil || n != 1 {
		t.Errorf("%d tombstones (%v), want 1 (the uninstalled installation)", n, err)
	}
}
