package accounts_test

import (
	"context"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/hub/hubstore"
	"github.com/switchbridge/switchbridge/bridge/store"
	"github.com/switchbridge/switchbridge/bridge/store/storetest"
)

// longPair is a token pair as the issuer makes it: an access token for an
// hour, a refresh token for a year.
func longPair(access, refresh string, now time.Time) bridge.TokenPair {
	return bridge.TokenPair{AccessHash: []byte(access), AccessExpiresAt: now.Add(time.Hour),
		RefreshHash: []byte(refresh), RefreshExpiresAt: now.Add(bridge.RefreshLifetime)}
}

func mustLive(t *testing.T, what string, live func(now time.Time) (bool, error), now time.Time, want bool) {
	t.Helper()
	got, err := live(now)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if got != want {
		t.Errorf("%s: live = %v, want %v", what, got, want)
	}
}

// A grant is held while any of its tokens is live: an access token neither
// revoked nor expired, or a refresh token neither spent, revoked nor
// expired. Reuse detection, revocation of the refresh token and expiry
// each end it; a new authorization brings it back.
func TestGrantLive(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T) {
		ctx := context.Background()
		db := mustOpen(t, t.TempDir())
		_, _, in := seed(t, db)
		live := func(now time.Time) (bool, error) { return db.GrantLive(ctx, in.ID, now) }
		now := time.Now()
		mustLive(t, "installed, no token yet", live, now, false)

		code := func(c string) {
			t.Helper()
			if err := db.CreateCode(ctx, []byte(c), bridge.AuthCode{ClientID: "c1", RedirectURI: "https://a/cb", InstallationID: in.ID, ExpiresAt: now.Add(time.Hour)}); err != nil {
				t.Fatal(err)
			}
		}
		code("code0")
		if _, err := db.RedeemCode(ctx, []byte("code0"), func(bridge.AuthCode) error { return nil }, longPair("a0", "r0", now)); err != nil {
			t.Fatal(err)
		}
		mustLive(t, "authorized", live, now, true)
		mustLive(t, "access token expired, refresh token live", live, now.Add(2*time.Hour), true)
		mustLive(t, "both expired", live, now.Add(bridge.RefreshLifetime+time.Minute), false)

		// The access token revoked alone: the refresh token still holds it.
		if got, err := db.RevokeToken(ctx, []byte("a0"), "c1"); got != bridge.RevokedAccessToken || err != nil {
			t.Fatalf("revoke a0: %v %v", got, err)
		}
		mustLive(t, "access token revoked, refresh token live", live, now, true)

		// A refresh spends r0 and issues r1: still held.
		ok := func(bridge.RefreshToken) error { return nil }
		if _, err := db.Refresh(ctx, []byte("r0"), ok, longPair("a1", "r1", now)); err != nil {
			t.Fatal(err)
		}
		mustLive(t, "refreshed", live, now.Add(2*time.Hour), true)

		// r0 again: reuse detection takes every token back.
		if _, err := db.Refresh(ctx, []byte("r0"), ok, longPair("a2", "r2", now)); err != bridge.ErrRefreshReused {
			t.Fatalf("reuse: %v", err)
		}
		mustLive(t, "after reuse detection", live, now, false)

		// A new authorization of the same app for the same installation.
		code("code1")
		if _, err := db.RedeemCode(ctx, []byte("code1"), func(bridge.AuthCode) error { return nil }, longPair("a3", "r3", now)); err != nil {
			t.Fatal(err)
		}
		mustLive(t, "authorized again", live, now, true)

		// /oauth/revoke of the refresh token takes the grant.
		if got, err := db.RevokeToken(ctx, []byte("r3"), "c1"); got != bridge.RevokedGrant || err != nil {
			t.Fatalf("revoke r3: %v %v", got, err)
		}
		mustLive(t, "refresh token revoked", live, now, false)

		if err := db.Uninstall(ctx, in.ID); err != nil {
			t.Fatal(err)
		}
		mustLive(t, "uninstalled", live, now, false)
	})
}

// A linked hub judges the grant from its replica: the access tokens it
// holds, and when the installation's last live refresh token expires,
// which the platform sends with the installation whenever a refresh token
// is issued, spent or revoked.
func TestReplicaGrantLive(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T) {
		ctx := context.Background()
		platform := mustOpen(t, t.TempDir())
		_, _, in := seed(t, platform) // location 1
		if err := platform.CreateHub(ctx, &bridge.RegisteredHub{ID: "h1", Name: "barn", BaseURL: "http://barn", SecretHash: []byte("x")}); err != nil {
			t.Fatal(err)
		}
		if err := platform.SetInventory(ctx, "h1", "v", []bridge.RemoteLocation{{ID: 1, Name: "House"}}, nil); err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		if err := platform.CreateCode(ctx, []byte("code0"), bridge.AuthCode{ClientID: "c1", RedirectURI: "https://a/cb", InstallationID: in.ID, ExpiresAt: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if _, err := platform.RedeemCode(ctx, []byte("code0"), func(bridge.AuthCode) error { return nil }, longPair("a0", "r0", now)); err != nil {
			t.Fatal(err)
		}

		hub, err := store.Open(ctx, t.TempDir()) // a hub keeps its SQLite
		if err != nil {
			t.Fatal(err)
		}
		defer hub.Close()
		live := func(at time.Time) (bool, error) { return hubstore.New(hub).Replica().GrantLive(ctx, in.ID, at) }
		mustLive(t, "not replicated", live, now, false)

		snap, err := platform.Snapshot(ctx, "h1")
		if err != nil {
			t.Fatal(err)
		}
		if len(snap.Installations) != 1 || snap.Installations[0].RefreshUntil == nil ||
			!snap.Installations[0].RefreshUntil.Equal(time.UnixMilli(now.Add(bridge.RefreshLifetime).UnixMilli())) {
			t.Fatalf("snapshot installations %+v, want one with the refresh token's expiry", snap.Installations)
		}
		if err := hubstore.New(hub).ApplyBatch(ctx, snap, now); err != nil {
			t.Fatal(err)
		}
		mustLive(t, "replicated", live, now, true)
		mustLive(t, "access token expired, refresh token live", live, now.Add(2*time.Hour), true)
		mustLive(t, "both expired", live, now.Add(bridge.RefreshLifetime+time.Minute), false)

		// Reuse detection at the platform reaches the hub through the
		// change log, access token and refresh token alike.
		ok := func(bridge.RefreshToken) error { return nil }
		if _, err := platform.Refresh(ctx, []byte("r0"), ok, longPair("a1", "r1", now)); err != nil {
			t.Fatal(err)
		}
		if _, err := platform.Refresh(ctx, []byte("r0"), ok, longPair("a2", "r2", now)); err != bridge.ErrRefreshReused {
			t.Fatalf("reuse: %v", err)
		}
		b, err := platform.Changes(ctx, "h1", snap.Cursor)
		if err != nil {
			t.Fatal(err)
		}
		if len(b.Installations) != 1 || b.Installations[0].RefreshUntil == nil || !b.Installations[0].RefreshUntil.IsZero() {
			t.Fatalf("changes after the reuse: installations %+v, want one with no live refresh token", b.Installations)
		}
		if err := hubstore.New(hub).ApplyBatch(ctx, b, now); err != nil {
			t.Fatal(err)
		}
		mustLive(t, "after reuse detection", live, now, false)
		mustLive(t, "after reuse detection, two hours on", live, now.Add(2*time.Hour), false)

		// An installation from a platform that does not say: held, as
		// before.
		older := b.Installations[0]
		older.RefreshUntil = nil
		if err := hubstore.New(hub).ApplyBatch(ctx, &bridge.ChangeBatch{Cursor: b.Cursor, CursorTag: b.CursorTag, Installations: []bridge.ReplicaInstallation{older}}, now); err != nil {
			t.Fatal(err)
		}
		mustLive(t, "from an older platform", live, now, true)
	})
}
