package accounts_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/store/storetest"
)

func TestUsersAppsInstallations(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T) {
		ctx := context.Background()
		db := mustOpen(t, t.TempDir())
		u, _, in := seed(t, db)

		if _, err := db.CreateUser(ctx, "alice", []byte("x"), nil); bridge.ErrorCode(err) != bridge.ECONFLICT {
			t.Errorf("duplicate user: %v", err)
		}
		got, err := db.UserByName(ctx, "alice")
		if err != nil || len(got.Locations) != 2 || got.Locations[0] != 1 {
			t.Errorf("user = %+v %v (locations deduplicated and sorted)", got, err)
		}
		if _, err := db.UserByName(ctx, "nobody"); bridge.ErrorCode(err) != bridge.ENOTFOUND {
			t.Errorf("missing user: %v", err)
		}
		if err := db.SetPassword(ctx, "nobody", []byte("x")); bridge.ErrorCode(err) != bridge.ENOTFOUND {
			t.Errorf("SetPassword on a missing user: %v", err)
		}
		if err := db.CreateApp(ctx, &bridge.App{ClientID: "c1", Name: "dup", SecretHash: []byte("s"), OwnerID: u.ID}); bridge.ErrorCode(err) != bridge.ECONFLICT {
			t.Errorf("duplicate app: %v", err)
		}
		if err := db.CreateApp(ctx, &bridge.App{ClientID: "c2", Name: "orphan", SecretHash: []byte("s"), OwnerID: 999}); bridge.ErrorCode(err) != bridge.ENOTFOUND {
			t.Errorf("app with a missing owner: %v", err)
		}
		a, err := db.App(ctx, "c1")
		if err != nil || len(a.RedirectURIs) != 2 || a.RedirectURIs[0] != "https://a/cb" || a.Published {
			t.Errorf("app = %+v %v", a, err)
		}
		if err := db.SetAppPublished(ctx, "c1", true); err != nil {
			t.Fatal(err)
		}
		if a, _ := db.App(ctx, "c1"); !a.Published {
			t.Error("publish did not stick")
		}
		if err := db.SetAppPublished(ctx, "nope", true); bridge.ErrorCode(err) != bridge.ENOTFOUND {
			t.Errorf("publishing a missing app: %v", err)
		}
		if err := db.SetAppPublished(ctx, "c1", false); err != nil {
			t.Fatal(err)
		}
		if a, _ := db.App(ctx, "c1"); a.Published {
			t.Error("unpublish did not stick")
		}
		if err := db.SetAppPublished(ctx, "c1", true); err != nil {
			t.Fatal(err)
		}

		// Installing again into the same location updates, keeping the id.
		again := &bridge.Installation{ClientID: "c1", UserID: u.ID, LocationID: 1, SwitchIDs: []string{"c"}}
		if err := db.Install(ctx, again); err != nil {
			t.Fatal(err)
		}
		if again.ID != in.ID {
			t.Errorf("reinstall made a new id %s (was %s)", again.ID, in.ID)
		}
		got2, _ := db.Installation(ctx, in.ID)
		if len(got2.SwitchIDs) != 1 || got2.SwitchIDs[0] != "c" {
			t.Errorf("switches after reinstall = %v", got2.SwitchIDs)
		}
		other := &bridge.Installation{ClientID: "c1", UserID: u.ID, LocationID: 2, SwitchIDs: []string{"x", "y"}}
		db.Install(ctx, other)
		if other.ID == in.ID || len(other.ID) != 36 {
			t.Errorf("second location id %q", other.ID)
		}
		if n, _ := db.CountInstallations(ctx); n != 2 {
			t.Errorf("count = %d", n)
		}
		o, _ := db.Installation(ctx, other.ID)
		if o.SwitchIDs[0] != "x" || o.SwitchIDs[1] != "y" {
			t.Errorf("switch order not kept: %v", o.SwitchIDs)
		}
	})
}

// TestOwner: a user is no owner until SetOwner makes them one, each
// read says so, and the change is the platform's alone: nothing in the
// change log hubs follow, no new access generation (no token's grant
// changes).
func TestOwner(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T) {
		ctx := context.Background()
		db := mustOpen(t, t.TempDir())
		u, _, _ := seed(t, db)
		if u.Owner {
			t.Error("a user created is an owner")
		}
		bob, err := db.CreateUser(ctx, "bob", []byte("x"), []int64{1})
		if err != nil {
			t.Fatal(err)
		}
		seq, err := db.ChangeSeq(ctx)
		if err != nil {
			t.Fatal(err)
		}
		gen, err := db.AccessGeneration(ctx)
		if err != nil {
			t.Fatal(err)
		}
		owners := func() map[string]bool {
			t.Helper()
			users, err := db.Users(ctx)
			if err != nil {
				t.Fatal(err)
			}
			out := map[string]bool{}
			for _, u := range users {
				out[u.Name] = u.Owner
			}
			return out
		}

		if err := db.SetOwner(ctx, "alice", true); err != nil {
			t.Fatal(err)
		}
		if got, err := db.UserByName(ctx, "alice"); err != nil || !got.Owner {
			t.Errorf("UserByName after SetOwner on = %+v, %v", got, err)
		}
		if got, err := db.UserByID(ctx, u.ID); err != nil || !got.Owner {
			t.Errorf("UserByID after SetOwner on = %+v, %v", got, err)
		}
		if got, err := db.UserByID(ctx, bob.ID); err != nil || got.Owner {
			t.Errorf("bob = %+v, %v (only alice was made an owner)", got, err)
		}
		if o := owners(); !o["alice"] || o["bob"] {
			t.Errorf("Users' owners = %v", o)
		}
		if err := db.SetOwner(ctx, "alice", true); err != nil {
			t.Errorf("SetOwner on an owner (no change): %v", err)
		}
		if err := db.SetOwner(ctx, "alice", false); err != nil {
			t.Fatal(err)
		}
		if o := owners(); o["alice"] || o["bob"] {
			t.Errorf("Users' owners after SetOwner off = %v", o)
		}
		if err := db.SetOwner(ctx, "nobody", true); bridge.ErrorCode(err) != bridge.ENOTFOUND {
			t.Errorf("SetOwner on a missing user: %v", err)
		}

		if now, err := db.ChangeSeq(ctx); err != nil || now != seq {
			t.Errorf("change log at %d after SetOwner, was %d (%v): hubs are not told of owners", now, seq, err)
		}
		if now, err := db.AccessGeneration(ctx); err != nil || now != gen {
			t.Errorf("access generation %d after SetOwner, was %d (%v)", now, gen, err)
		}
		// A user who is an owner is deleted as any other.
		if err := db.SetOwner(ctx, "bob", true); err != nil {
			t.Fatal(err)
		}
		if err := db.DeleteUser(ctx, "bob"); err != nil {
			t.Errorf("deleting an owner: %v", err)
		}
	})
}

func TestRedeemCode(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T) {
		ctx := context.Background()
		db := mustOpen(t, t.TempDir())
		_, _, in := seed(t, db)
		future := time.Now().Add(time.Hour)
		code := bridge.AuthCode{ClientID: "c1", RedirectURI: "https://a/cb", InstallationID: in.ID, ExpiresAt: future}
		if err := db.CreateCode(ctx, []byte("code1"), code); err != nil {
			t.Fatal(err)
		}
		ok := func(bridge.AuthCode) error { return nil }
		refuse := errors.New("wrong client")

		// A refusing check leaves the code usable.
		if _, err := db.RedeemCode(ctx, []byte("code1"), func(bridge.AuthCode) error { return refuse }, access([]byte("t0"), future)); !errors.Is(err, refuse) {
			t.Fatalf("refused check: %v", err)
		}
		c, err := db.RedeemCode(ctx, []byte("code1"), ok, access([]byte("t1"), future))
		if err != nil || c.InstallationID != in.ID {
			t.Fatalf("redeem: %+v %v", c, err)
		}
		if tok, err := db.Token(ctx, []byte("t1")); err != nil || tok.Revoked || tok.InstallationID != in.ID {
			t.Fatalf("token: %+v %v", tok, err)
		}
		if _, err := db.Token(ctx, []byte("t0")); !errors.Is(err, bridge.ErrTokenUnknown) {
			t.Errorf("a refused redemption stored a token: %v", err)
		}
		// Replay: refused, and the first token revoked.
		if _, err := db.RedeemCode(ctx, []byte("code1"), ok, access([]byte("t2"), future)); !errors.Is(err, bridge.ErrCodeReused) {
			t.Errorf("replay: %v", err)
		}
		if tok, _ := db.Token(ctx, []byte("t1")); !tok.Revoked {
			t.Error("replay did not revoke the token")
		}
		if _, err := db.RedeemCode(ctx, []byte("nope"), ok, access([]byte("t3"), future)); !errors.Is(err, bridge.ErrCodeInvalid) {
			t.Errorf("unknown code: %v", err)
		}
		// Expired.
		code.ExpiresAt = time.Now().Add(-time.Second)
		db.CreateCode(ctx, []byte("old"), code)
		if _, err := db.RedeemCode(ctx, []byte("old"), ok, access([]byte("t4"), future)); !errors.Is(err, bridge.ErrCodeInvalid) {
			t.Errorf("expired code: %v", err)
		}
	})
}

func TestConcurrentRedeemOneWinner(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T) {
		ctx := context.Background()
		db := mustOpen(t, t.TempDir())
		_, _, in := seed(t, db)
		future := time.Now().Add(time.Hour)
		db.CreateCode(ctx, []byte("c"), bridge.AuthCode{ClientID: "c1", RedirectURI: "https://a/cb", InstallationID: in.ID, ExpiresAt: future})
		var wg sync.WaitGroup
		var mu sync.Mutex
		wins, reused := 0, 0
		for i := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := db.RedeemCode(ctx, []byte("c"), func(bridge.AuthCode) error { return nil }, access([]byte{byte(i)}, future))
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					wins++
				case errors.Is(err, bridge.ErrCodeReused):
					reused++
				default:
					t.Errorf("redeem: %v", err)
				}
			}()
		}
		wg.Wait()
		if wins != 1 || reused != 15 {
			t.Errorf("wins %d reused %d, want 1 and 15", wins, reused)
		}
	})
}

func TestPrune(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T) {
		ctx := context.Background()
		db := mustOpen(t, t.TempDir())
		_, _, in := seed(t, db)
		old := time.Now().Add(-48 * time.Hour)
		db.CreateCode(ctx, []byte("old"), bridge.AuthCode{ClientID: "c1", RedirectURI: "x", InstallationID: in.ID, ExpiresAt: old})
		db.CreateCode(ctx, []byte("new"), bridge.AuthCode{ClientID: "c1", RedirectURI: "x", InstallationID: in.ID, ExpiresAt: time.Now().Add(time.Minute)})
		db.CreateToken(ctx, []byte("oldtok"), in.ID, old)
		db.CreateToken(ctx, []byte("newtok"), in.ID, time.Now().Add(time.Hour))
		if err := db.Prune(ctx, time.Now()); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Token(ctx, []byte("oldtok")); !errors.Is(err, bridge.ErrTokenUnknown) {
			t.Errorf("old token kept: %v", err)
		}
		if _, err := db.Token(ctx, []byte("newtok")); err != nil {
			t.Errorf("live token pruned: %v", err)
		}
		ok := func(bridge.AuthCode) error { return nil }
		if _, err := db.RedeemCode(ctx, []byte("old"), ok, access([]byte("t"), time.Now())); !errors.Is(err, bridge.ErrCodeInvalid) {
			t.Errorf("old code: %v", err)
		}
		if _, err := db.RedeemCode(ctx, []byte("new"), ok, access([]byte("t"), time.Now().Add(time.Hour))); err != nil {
			t.Errorf("live code pruned: %v", err)
		}
	})
}

// access is an access token alone, as the store keeps it.
func access(hash []byte, expires time.Time) bridge.TokenPair {
	return bridge.TokenPair{AccessHash: hash, AccessExpiresAt: expires}
}
