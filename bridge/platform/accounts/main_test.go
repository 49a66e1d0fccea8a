package accounts_test

import (
	"context"
	"testing"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/platform/accounts"
	"github.com/switchbridge/switchbridge/bridge/store/storetest"
)

// TestMain stops the PostgreSQL the tests started.
func TestMain(m *testing.M) { storetest.Main(m) }

// mustOpen opens the platform's records at dir in the dialect under test
// (the same database again for the same dir).
func mustOpen(t *testing.T, dir string) *accounts.Store {
	t.Helper()
	return accounts.New(storetest.Open(t, dir))
}

// seed stores alice, her app c1 and its installation into location 1.
func seed(t *testing.T, db *accounts.Store) (*bridge.User, *bridge.App, *bridge.Installation) {
	t.Helper()
	ctx := context.Background()
	u, err := db.CreateUser(ctx, "alice", []byte("hash"), []int64{2, 1, 2})
	if err != nil {
		t.Fatal(err)
	}
	a := &bridge.App{ClientID: "c1", Name: "App", SecretHash: []byte("s"), RedirectURIs: []string{"https://a/cb", "https://b/cb"}, OwnerID: u.ID}
	if err := db.CreateApp(ctx, a); err != nil {
		t.Fatal(err)
	}
	in := &bridge.Installation{ClientID: "c1", UserID: u.ID, LocationID: 1, SwitchIDs: []string{"b", "a"}}
	if err := db.Install(ctx, in); err != nil {
		t.Fatal(err)
	}
	return u, a, in
}

// countRows counts a table's rows, for tests of pruning.
func countRows(ctx context.Context, db *accounts.Store, table string) (int, error) {
	var n int
	err := db.DB().QueryRowContext(ctx, "SELECT count(*) FROM "+table).Scan(&n)
	return n, err
}
