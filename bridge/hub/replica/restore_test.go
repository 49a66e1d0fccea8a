package replica_test

import (
	"context"
	"fmt"
	"github.com/switchbridge/switchbridge/bridge/platform/accounts"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/hub/hubstore"
	"github.com/switchbridge/switchbridge/bridge/store"
)

// TestHubAfterThePlatformIsRestored: the platform is restored from a
// backup while a hub is away, and has gone past the hub's change sequence
// by the time the hub is back. The hub must not resume from its cursor as
// if the log were the one it followed: it fetches a snapshot, so a token
// issued after the backup (unknown to the restored platform) stops working
// at the hub, and a token revoked on the restored platform too.
func TestHubAfterThePlatformIsRestored(t *testing.T) {
	ctx := context.Background()
	pl := newPlatform(t)
	hubDB, err := store.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hubDB.Close() })
	hub := runHub(t, pl, "h1", hubDB, 10)
	kept := pl.install(t, 10, "kept-token")
	revoked := pl.installApp(t, "c2", 10, "revoked-token")
	waitUntil(t, "the installations reach the hub", func() bool { return hub.has(kept.ID) && hub.has(revoked.ID) })

	backup := filepath.Join(t.TempDir(), "backup.db")
	if _, err := pl.db.Backup(ctx, pl.dir, backup); err != nil {
		t.Fatal(err)
	}
	later := pl.installApp(t, "c3", 10, "later-token")
	waitUntil(t, "the installation made after the backup reaches the hub", func() bool { return hub.has(later.ID) })
	st, err := hubstore.New(hubDB).ReplicaState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hub.stop()

	restored, err := store.OpenFile(ctx, backup)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { restored.Close() })
	pl2 := &platform{db: restored, dir: filepath.Dir(backup), hubs: pl.hubs, userID: pl.userID}
	pl2.serve(t)
	// On the restored platform one token is revoked and more apps are
	// installed, until its log is past the hub's cursor.
	if err := accounts.New(restored).Uninstall(ctx, revoked.ID); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		seq, err := accounts.New(restored).ChangeSeq(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if seq > st.Cursor {
			break
		}
		pl2.installApp(t, fmt.Sprint("n", i), 10, fmt.Sprint("new-token-", i))
	}
	last := pl2.installApp(t, "last", 10, "last-token")

	hub = runHub(t, pl2, "h1", hubDB, 10)
	waitUntil(t, "the hub catches up with the restored platform", func() bool { return hub.has(last.ID) })
	if _, err := hub.auth.Authorize(ctx, "kept-token", kept.ID); err != nil {
		t.Errorf("a token the restored platform holds: %v", err)
	}
	for _, gone := range []struct {
		token string
		in    *bridge.Installation
	}{{"later-token", later}, {"revoked-token", revoked}} {
		if _, err := hub.auth.Authorize(ctx, gone.token, gone.in.ID); bridge.ErrorCode(err) != bridge.EUNAUTHORIZED {
			t.Errorf("%s at the hub after the restore: %v, want unauthorized", gone.token, err)
		}
	}
	if !strings.Contains(hub.logs.String(), "fetching a snapshot") {
		t.Errorf("the hub did not say it fetched a snapshot:\n%s", hub.logs.String())
	}
}
