package accounts_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/platform/accounts"
	"github.com/switchbridge/switchbridge/bridge/store/storetest"
)

// generation reads the access generation, failing the test on an error.
func generation(t *testing.T, db *accounts.Store) int64 {
	t.Helper()
	n, err := db.AccessGeneration(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// wantMoved runs change and checks that the access generation moved (or,
// with moved false, stayed), as another process sharing the file sees it.
func wantMoved(t *testing.T, other *accounts.Store, what string, moved bool, change func() error) {
	t.Helper()
	before := generation(t, other)
	if err := change(); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if after := generation(t, other); (after != before) != moved {
		t.Errorf("%s: access generation %d -> %d, want moved=%v", what, before, after, moved)
	}
}

// Every write that takes access away moves the access generation, also
// when the rows go by cascade, and a second connection to the same file
// (another process) sees it at once; writes that take nothing away leave
// it alone, so the grant cache keeps working.
func TestAccessGenerationMovesOnEveryRemoval(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T) {
		ctx := context.Background()
		dir := t.TempDir()
		db := mustOpen(t, dir)
		other := mustOpen(t, dir)
		u, _, in := seed(t, db)
		tokenFor := func(hash string, inst string) {
			t.Helper()
			if err := db.CreateToken(ctx, []byte(hash), inst, time.Now().Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
		}
		tokenFor("t1", in.ID)

		wantMoved(t, other, "a token issued", false, func() error { return db.CreateToken(ctx, []byte("t2"), in.ID, time.Now().Add(time.Hour)) })
		wantMoved(t, other, "last use recorded", false, func() error { return db.MarkUsed(ctx, map[string]time.Time{in.ID: time.Now()}) })
		wantMoved(t, other, "a membership added", false, func() error { return db.AddUserLocation(ctx, "alice", 3) })
		wantMoved(t, other, "a secret rotated", false, func() error { return db.SetAppSecret(ctx, "c1", []byte("new")) })
		wantMoved(t, other, "switches changed", true, func() error {
			return db.Install(ctx, &bridge.Installation{ClientID: "c1", UserID: u.ID, LocationID: 1, SwitchIDs: []string{"a"}})
		})
		// A code redeemed twice revokes the token it issued.
		code := []byte("code")
		if err := db.CreateCode(ctx, code, bridge.AuthCode{ClientID: "c1", RedirectURI: "https://a/cb", InstallationID: in.ID, ExpiresAt: time.Now().Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		accept := func(bridge.AuthCode) error { return nil }
		wantMoved(t, other, "a code redeemed", false, func() error {
			_, err := db.RedeemCode(ctx, code, accept, bridge.TokenPair{AccessHash: []byte("t-code"), AccessExpiresAt: time.Now().Add(time.Hour)})
			return err
		})
		wantMoved(t, other, "a code replayed, revoking its token", true, func() error {
			if _, err := db.RedeemCode(ctx, code, accept, bridge.TokenPair{AccessHash: []byte("t-again"), AccessExpiresAt: time.Now().Add(time.Hour)}); err != bridge.ErrCodeReused {
				return fmt.Errorf("replay: %v, want ErrCodeReused", err)
			}
			return nil
		})
		wantMoved(t, other, "an installation removed", true, func() error { return db.Uninstall(ctx, in.ID) })
		if _, err := db.Token(ctx, []byte("t1")); err != bridge.ErrTokenUnknown {
			t.Errorf("token of a removed installation: %v, want it gone", err)
		}

		// Cascades: the app's installations and tokens go with it.
		in2 := &bridge.Installation{ClientID: "c1", UserID: u.ID, LocationID: 2, SwitchIDs: []string{"x"}}
		if err := db.Install(ctx, in2); err != nil {
			t.Fatal(err)
		}
		tokenFor("t3", in2.ID)
		wantMoved(t, other, "an app deleted", true, func() error { return db.DeleteApp(ctx, "c1") })
		if _, err := db.Token(ctx, []byte("t3")); err != bridge.ErrTokenUnknown {
			t.Errorf("token of a deleted app: %v, want it gone", err)
		}
		if err := db.DeleteApp(ctx, "c1"); bridge.ErrorCode(err) != bridge.ENOTFOUND {
			t.Errorf("deleting it again: %v", err)
		}
	})
}

func TestDeleteUser(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T) {
		ctx := context.Background()
		db := mustOpen(t, t.TempDir())
		_, _, _ = seed(t, db) // alice owns app c1 and installed it
		bob, err := db.CreateUser(ctx, "bob", []byte("h"), []int64{1})
		if err != nil {
			t.Fatal(err)
		}
		bin := &bridge.Installation{ClientID: "c1", UserID: bob.ID, LocationID: 1, SwitchIDs: []string{"a"}}
		if err := db.Install(ctx, bin); err != nil {
			t.Fatal(err)
		}
		db.CreateToken(ctx, []byte("bob-token"), bin.ID, time.Now().Add(time.Hour))

		if err := db.DeleteUser(ctx, "alice"); bridge.ErrorCode(err) != bridge.ECONFLICT || !strings.Contains(err.Error(), "c1") {
			t.Errorf("deleting an app's owner: %v, want a conflict naming c1", err)
		}
		if _, err := db.UserByName(ctx, "alice"); err != nil {
			t.Errorf("the refused delete removed alice: %v", err)
		}
		before := generation(t, db)
		if err := db.DeleteUser(ctx, "bob"); err != nil {
			t.Fatal(err)
		}
		if generation(t, db) == before {
			t.Error("deleting a user did not move the access generation")
		}
		if _, err := db.Installation(ctx, bin.ID); bridge.ErrorCode(err) != bridge.ENOTFOUND {
			t.Errorf("bob's installation after his deletion: %v", err)
		}
		if _, err := db.Token(ctx, []byte("bob-token")); err != bridge.ErrTokenUnknown {
			t.Errorf("bob's token after his deletion: %v", err)
		}
		if err := db.DeleteUser(ctx, "bob"); bridge.ErrorCode(err) != bridge.ENOTFOUND {
			t.Errorf("deleting bob again: %v", err)
		}
	})
}

func TestUserLocationsAndFindInstallations(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T) {
		ctx := context.Background()
		db := mustOpen(t, t.TempDir())
		u, _, in := seed(t, db) // alice in 1 and 2, installed c1 into 1
		in2 := &bridge.Installation{ClientID: "c1", UserID: u.ID, LocationID: 2, SwitchIDs: []string{"x"}}
		if err := db.Install(ctx, in2); err != nil {
			t.Fatal(err)
		}
		bob, _ := db.CreateUser(ctx, "bob", []byte("h"), []int64{1})
		bin := &bridge.Installation{ClientID: "c1", UserID: bob.ID, LocationID: 1, SwitchIDs: []string{"a"}}
		db.Install(ctx, bin)

		ids := func(ins []*bridge.Installation, err error) string {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, in := range ins {
				out = append(out, in.ID)
			}
			return strings.Join(out, ",")
		}
		if got, want := ids(db.InstallationsOf(ctx, u.ID)), in.ID+","+in2.ID; got != want {
			t.Errorf("alice's installations %s, want %s", got, want)
		}
		if got := ids(db.FindInstallations(ctx, accounts.InstallationFilter{ClientID: "c1", UserID: bob.ID})); got != bin.ID {
			t.Errorf("bob's installations of c1: %s", got)
		}
		if got := ids(db.FindInstallations(ctx, accounts.InstallationFilter{ClientID: "other"})); got != "" {
			t.Errorf("installations of an unknown app: %s", got)
		}
		if got := ids(db.InstallationsOf(ctx, 0)); got != "" {
			t.Errorf("installations of user 0: %s, want none", got)
		}

		n, err := db.RemoveUserLocation(ctx, "alice", 1)
		if err != nil || n != 1 {
			t.Fatalf("removing alice from 1: %d %v", n, err)
		}
		if got := ids(db.InstallationsOf(ctx, u.ID)); got != in2.ID {
			t.Errorf("alice's installations after leaving 1: %s, want only %s", got, in2.ID)
		}
		if got := ids(db.InstallationsOf(ctx, bob.ID)); got != bin.ID {
			t.Errorf("bob's installation in 1 went too: %q", got)
		}
		if a, _ := db.UserByName(ctx, "alice"); len(a.Locations) != 1 || a.Locations[0] != 2 {
			t.Errorf("alice's locations %v, want [2]", a.Locations)
		}
		if _, err := db.RemoveUserLocation(ctx, "alice", 1); bridge.ErrorCode(err) != bridge.ENOTFOUND {
			t.Errorf("removing a membership she no longer has: %v", err)
		}
		if _, err := db.RemoveUserLocation(ctx, "nobody", 1); bridge.ErrorCode(err) != bridge.ENOTFOUND {
			t.Errorf("removing a membership of nobody: %v", err)
		}
		if err := db.AddUserLocation(ctx, "alice", 1); err != nil {
			t.Fatal(err)
		}
		if err := db.AddUserLocation(ctx, "alice", 1); err != nil {
			t.Errorf("adding a membership twice: %v", err)
		}
		if a, _ := db.UserByName(ctx, "alice"); len(a.Locations) != 2 {
			t.Errorf("alice's locations %v, want [1 2]", a.Locations)
		}
		if err := db.AddUserLocation(ctx, "nobody", 1); bridge.ErrorCode(err) != bridge.ENOTFOUND {
			t.Errorf("adding a membership to nobody: %v", err)
		}
	})
}

func TestMarkUsed(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T) {
		ctx := context.Background()
		db := mustOpen(t, t.TempDir())
		_, _, in := seed(t, db)
		if got, _ := db.Installation(ctx, in.ID); !got.LastUsedAt.IsZero() {
			t.Fatalf("a new installation was used at %v", got.LastUsedAt)
		}
		at := time.UnixMilli(time.Now().UnixMilli())
		if err := db.MarkUsed(ctx, map[string]time.Time{in.ID: at, "gone": at}); err != nil {
			t.Fatal(err)
		}
		// An older time, written late, does not move it back.
		if err := db.MarkUsed(ctx, map[string]time.Time{in.ID: at.Add(-time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if got, _ := db.Installation(ctx, in.ID); !got.LastUsedAt.Equal(at) {
			t.Errorf("last used %v, want %v", got.LastUsedAt, at)
		}
	})
}
