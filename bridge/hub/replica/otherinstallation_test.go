package replica_test

import (
	"context"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/access"
	"github.com/switchbridge/switchbridge/bridge/hub/hubstore"
	"github.com/switchbridge/switchbridge/bridge/hub/replica"
	"github.com/switchbridge/switchbridge/bridge/store"
)

// TestTokenOfAnotherInstallationTellsNothing: a token of one installation
// used at another's URI is 403 at once, whether that installation is in
// the replica or was never heard of: the hub neither syncs for the one it
// does not hold (which would take a round trip, or answer 503 with the
// link down) nor answers differently, so a client cannot learn which
// installations a hub serves.
func TestTokenOfAnotherInstallationTellsNothing(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	hub := hubstore.New(db)
	now := time.Now()
	inst := func(id string) bridge.ReplicaInstallation {
		return bridge.ReplicaInstallation{ID: id, ClientID: "c", UserID: 1, LocationID: 10, SwitchIDs: []string{"s"}, Member: true, UpdatedAt: now}
	}
	if err := hub.ApplyBatch(ctx, &bridge.ChangeBatch{Cursor: 1, Snapshot: true,
		Installations: []bridge.ReplicaInstallation{inst("mine"), inst("other")},
		Tokens:        []bridge.ReplicaToken{{Hash: access.Hash("my-token"), InstallationID: "mine", ExpiresAt: now.Add(time.Hour)}}}, now); err != nil {
		t.Fatal(err)
	}
	syncs := 0
	auth := replica.NewAuthorizer(hub.Replica(), replica.AuthorizerOptions{
		Sync: func(context.Context) bool { syncs++; return false }, // the link is down
	})
	var answers []string
	for _, id := range []string{"other", "never-installed"} {
		_, err := auth.Authorize(ctx, "my-token", id)
		if bridge.ErrorCode(err) != bridge.EFORBIDDEN {
			t.Errorf("my token at %s: %v, want forbidden", id, err)
		}
		answers = append(answers, bridge.ErrorMessage(err))
	}
	if syncs != 0 {
		t.Errorf("%d syncs for a token of another installation, want none", syncs)
	}
	if answers[0] != answers[1] {
		t.Errorf("the answers tell the installations apart: %q and %q", answers[0], answers[1])
	}
	if _, err := auth.Authorize(ctx, "my-token", "mine"); err != nil {
		t.Errorf("my token at my installation: %v", err)
	}
}
