package accounts_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/platform/accounts"
	"github.com/switchbridge/switchbridge/bridge/store/storetest"
)

func pair(access, refresh string) bridge.TokenPair {
	p := bridge.TokenPair{AccessHash: []byte(access), AccessExpiresAt: time.Now().Add(time.Hour)}
	if refresh != "" {
		p.RefreshHash, p.RefreshExpiresAt = []byte(refresh), time.Now().Add(time.Hour)
	}
	return p
}

func revoked(t *testing.T, db *accounts.Store, access string) bool {
	t.Helper()
	tok, err := db.Token(context.Background(), []byte(access))
	if err != nil {
		t.Fatalf("token %s: %v", access, err)
	}
	return tok.Revoked
}

// redeemed seeds an installation and exchanges a code for access token a0
// and refresh token r0.
func redeemed(t *testing.T, db *accounts.Store) *bridge.Installation {
	t.Helper()
	ctx := context.Background()
	_, _, in := seed(t, db)
	db.CreateCode(ctx, []byte("code"), bridge.AuthCode{ClientID: "c1", RedirectURI: "https://a/cb", InstallationID: in.ID, ExpiresAt: time.Now().Add(time.Hour)})
	if _, err := db.RedeemCode(ctx, []byte("code"), func(bridge.AuthCode) error { return nil }, pair("a0", "r0")); err != nil {
		t.Fatal(err)
	}
	return in
}

func TestRefreshRotatesAndDetectsReuse(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T) {
		ctx := context.Background()
		db := mustOpen(t, t.TempDir())
		in := redeemed(t, db)
		ok := func(bridge.RefreshToken) error { return nil }

		// Another client's check refuses it and leaves it unspent.
		refuse := errors.New("other client")
		var seen bridge.RefreshToken
		if _, err := db.Refresh(ctx, []byte("r0"), func(rt bridge.RefreshToken) error { seen = rt; return refuse }, pair("x", "y")); !errors.Is(err, refuse) {
			t.Fatalf("refused refresh: %v", err)
		}
		if seen.ClientID != "c1" || seen.InstallationID != in.ID {
			t.Errorf("check saw %+v", seen)
		}
		rt, err := db.Refresh(ctx, []byte("r0"), ok, pair("a1", "r1"))
		if err != nil || rt.InstallationID != in.ID {
			t.Fatalf("refresh: %+v %v", rt, err)
		}
		if revoked(t, db, "a0") || revoked(t, db, "a1") {
			t.Error("a refresh revoked an access token")
		}
		if _, err := db.Refresh(ctx, []byte("r1"), ok, pair("a2", "r2")); err != nil {
			t.Fatalf("second refresh: %v", err)
		}
		// r0 again: reuse, and the whole grant goes: every access token and
		// the newest refresh token.
		if _, err := db.Refresh(ctx, []byte("r0"), ok, pair("a3", "r3")); !errors.Is(err, bridge.ErrRefreshReused) {
			t.Fatalf("reuse: %v", err)
		}
		for _, a := range []string{"a0", "a1", "a2"} {
			if !revoked(t, db, a) {
				t.Errorf("%s not revoked by the reuse", a)
			}
		}
		if _, err := db.Token(ctx, []byte("a3")); !errors.Is(err, bridge.ErrTokenUnknown) {
			t.Errorf("the reuse issued a token: %v", err)
		}
		if _, err := db.Refresh(ctx, []byte("r2"), ok, pair("a4", "r4")); !errors.Is(err, bridge.ErrRefreshInvalid) {
			t.Errorf("newest refresh token after the reuse: %v", err)
		}
		if _, err := db.Refresh(ctx, []byte("nope"), ok, pair("a5", "r5")); !errors.Is(err, bridge.ErrRefreshInvalid) {
			t.Errorf("unknown refresh token: %v", err)
		}
	})
}

func TestRefreshTokenExpires(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T) {
		ctx := context.Background()
		db := mustOpen(t, t.TempDir())
		_, _, in := seed(t, db)
		db.CreateCode(ctx, []byte("code"), bridge.AuthCode{ClientID: "c1", RedirectURI: "x", InstallationID: in.ID, ExpiresAt: time.Now().Add(time.Hour)})
		p := pair("a0", "r0")
		p.RefreshExpiresAt = time.Now().Add(-time.Second)
		if _, err := db.RedeemCode(ctx, []byte("code"), func(bridge.AuthCode) error { return nil }, p); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Refresh(ctx, []byte("r0"), func(bridge.RefreshToken) error { return nil }, pair("a1", "r1")); !errors.Is(err, bridge.ErrRefreshInvalid) {
			t.Errorf("expired refresh token: %v", err)
		}
		// Pruned a day after it expired.
		if err := db.Prune(ctx, time.Now().Add(25*time.Hour)); err != nil {
			t.Fatal(err)
		}
		n, err := countRows(ctx, db, "refresh_tokens")
		if err != nil || n != 0 {
			t.Errorf("refresh tokens after prune = %d %v", n, err)
		}
	})
}

func TestRevokeToken(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T) {
		ctx := context.Background()
		db := mustOpen(t, t.TempDir())
		redeemed(t, db)
		ok := func(bridge.RefreshToken) error { return nil }
		if _, err := db.Refresh(ctx, []byte("r0"), ok, pair("a1", "r1")); err != nil {
			t.Fatal(err)
		}
		// Another client's token, or an unknown one: nothing.
		for _, h := range []string{"a1", "r1"} {
			if got, err := db.RevokeToken(ctx, []byte(h), "other-client"); got != bridge.RevokedNothing || err != nil {
				t.Errorf("%s of another client: %v %v", h, got, err)
			}
		}
		if got, err := db.RevokeToken(ctx, []byte("unknown"), "c1"); got != bridge.RevokedNothing || err != nil {
			t.Errorf("unknown token: %v %v", got, err)
		}
		if revoked(t, db, "a0") || revoked(t, db, "a1") {
			t.Fatal("a refused revocation revoked something")
		}
		// An access token: itself only.
		if got, err := db.RevokeToken(ctx, []byte("a0"), "c1"); got != bridge.RevokedAccessToken || err != nil {
			t.Errorf("access token: %v %v", got, err)
		}
		if !revoked(t, db, "a0") || revoked(t, db, "a1") {
			t.Error("revoking a0 did not revoke exactly a0")
		}
		if got, _ := db.RevokeToken(ctx, []byte("a0"), "c1"); got != bridge.RevokedAccessToken {
			t.Errorf("revoking again = %v", got)
		}
		// A refresh token: the whole grant.
		if got, err := db.RevokeToken(ctx, []byte("r1"), "c1"); got != bridge.RevokedGrant || err != nil {
			t.Errorf("refresh token: %v %v", got, err)
		}
		if !revoked(t, db, "a1") {
			t.Error("revoking the refresh token left its grant's access token")
		}
		if _, err := db.Refresh(ctx, []byte("r1"), ok, pair("a2", "r2")); !errors.Is(err, bridge.ErrRefreshInvalid) {
			t.Errorf("revoked refresh token: %v", err)
		}
	})
}

// TestTokenGrantSeesOtherProcesses: the token check reads what another
// process (the CLI) just wrote, with no window.
func TestTokenGrantSeesOtherProcesses(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T) {
		ctx := context.Background()
		dir := t.TempDir()
		db := mustOpen(t, dir)
		in := redeemed(t, db)
		g, err := db.TokenGrant(ctx, []byte("a0"))
		if err != nil {
			t.Fatal(err)
		}
		if g.Revoked || !g.Member || g.Legacy || g.Installation.ClientID != "c1" || g.Installation.LocationID != 1 ||
			len(g.Installation.SwitchIDs) != 2 || g.Installation.SwitchIDs[0] != "b" || g.Installation.ID != in.ID {
			t.Errorf("grant = %+v", g)
		}
		other := mustOpen(t, dir)
		if err := other.SetAppLegacy(ctx, "c1", true); err != nil {
			t.Fatal(err)
		}
		if got, _ := other.RevokeToken(ctx, []byte("a0"), "c1"); got != bridge.RevokedAccessToken {
			t.Fatalf("revoke = %v", got)
		}
		g, err = db.TokenGrant(ctx, []byte("a0"))
		if err != nil || !g.Revoked || !g.Legacy {
			t.Errorf("after another handle revoked it and made the app legacy: %+v %v", g, err)
		}
		if _, err := db.TokenGrant(ctx, []byte("nope")); !errors.Is(err, bridge.ErrTokenUnknown) {
			t.Errorf("unknown token: %v", err)
		}
	})
}

func TestAppLegacyAndLifetime(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T) {
		ctx := context.Background()
		db := mustOpen(t, t.TempDir())
		u, err := db.CreateUser(ctx, "dev", []byte("h"), nil)
		if err != nil {
			t.Fatal(err)
		}
		a := &bridge.App{ClientID: "c", Name: "A", SecretHash: []byte("s"), OwnerID: u.ID, Legacy: true, AccessTokenLifetime: time.Hour}
		if err := db.CreateApp(ctx, a); err != nil {
			t.Fatal(err)
		}
		got, err := db.App(ctx, "c")
		if err != nil || !got.Legacy || got.AccessTokenLifetime != time.Hour {
			t.Fatalf("app = %+v %v", got, err)
		}
		if err := db.SetAppLegacy(ctx, "c", false); err != nil {
			t.Fatal(err)
		}
		if err := db.SetAppAccessTokenLifetime(ctx, "c", 90*time.Second); err != nil {
			t.Fatal(err)
		}
		if got, _ := db.App(ctx, "c"); got.Legacy || got.AccessTokenLifetime != 90*time.Second {
			t.Errorf("after the changes: %+v", got)
		}
		if err := db.SetAppLegacy(ctx, "nope", true); bridge.ErrorCode(err) != bridge.ENOTFOUND {
			t.Errorf("legacy of a missing app: %v", err)
		}
		if err := db.SetAppAccessTokenLifetime(ctx, "nope", time.Hour); bridge.ErrorCode(err) != bridge.ENOTFOUND {
			t.Errorf("lifetime of a missing app: %v", err)
		}
	})
}

// TestCodeReplayRevokesRefreshTokens: a replayed code takes back the
// refresh token it issued, and what that was refreshed into.
func TestCodeReplayRevokesRefreshTokens(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T) {
		ctx := context.Background()
		db := mustOpen(t, t.TempDir())
		redeemed(t, db)
		ok := func(bridge.RefreshToken) error { return nil }
		if _, err := db.Refresh(ctx, []byte("r0"), ok, pair("a1", "r1")); err != nil {
			t.Fatal(err)
		}
		if _, err := db.RedeemCode(ctx, []byte("code"), func(bridge.AuthCode) error { return nil }, pair("a2", "r2")); !errors.Is(err, bridge.ErrCodeReused) {
			t.Fatalf("replay: %v", err)
		}
		if !revoked(t, db, "a0") || !revoked(t, db, "a1") {
			t.Error("the replay left an access token of the grant")
		}
		if _, err := db.Refresh(ctx, []byte("r1"), ok, pair("a3", "r3")); !errors.Is(err, bridge.ErrRefreshInvalid) {
			t.Errorf("refresh token after the replay: %v", err)
		}
	})
}

// A token for an installation removed in between is refused plainly, not
// with the engine's foreign-key message.
func TestCreateTokenForARemovedInstallation(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T) {
		db := mustOpen(t, t.TempDir())
		_, _, in := seed(t, db)
		ctx := context.Background()
		if err := db.Uninstall(ctx, in.ID); err != nil {
			t.Fatal(err)
		}
		err := db.CreateToken(ctx, []byte("t1"), in.ID, time.Now().Add(time.Hour))
		if bridge.ErrorCode(err) != bridge.ENOTFOUND {
			t.Errorf("token for a removed installation: %v", err)
		}
	})
}
