// Package storetest runs the tests of the packages keeping the roles'
// records (bridge/hub/hubstore, bridge/platform/accounts) on both of the
// engine's dialects, as bridge/store runs its own: ForEachDialect runs a
// test once per dialect, and Open opens the database "at dir" in the
// dialect under test, the same database again for the same dir (a second
// process on one database). A package using it calls Main from its
// TestMain, which stops the PostgreSQL its tests started.
package storetest

import (
	"context"
	"testing"

	"github.com/switchbridge/switchbridge/bridge/store"
	"github.com/switchbridge/switchbridge/bridge/store/pgtest"
)

var (
	dialect = store.SQLite
	dsns    = map[string]string{}
)

// ForEachDialect runs f as a subtest per dialect. On PostgreSQL it skips
// when the server's binaries are missing, except under CI=true.
func ForEachDialect(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	for _, d := range []store.Dialect{store.SQLite, store.Postgres} {
		t.Run(string(d), func(t *testing.T) {
			dialect = d
			t.Cleanup(func() { dialect = store.SQLite })
			f(t)
		})
	}
}

// Open opens the database for dir in the dialect under test, closed when
// the test ends.
func Open(tb testing.TB, dir string) *store.DB {
	tb.Helper()
	ctx := context.Background()
	var db *store.DB
	var err error
	if dialect == store.Postgres {
		dsn, ok := dsns[dir]
		if !ok {
			dsn = pgtest.DSN(tb)
			dsns[dir] = dsn
		}
		db, err = store.OpenPostgres(ctx, dsn)
	} else {
		db, err = store.Open(ctx, dir)
	}
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

// Dialect is the dialect under test.
func Dialect() store.Dialect { return dialect }

// Main runs the tests and stops the PostgreSQL they started.
func Main(m *testing.M) { pgtest.Main(m) }

// SetDialect makes d the dialect under test, for a benchmark that runs on
// each.
func SetDialect(d store.Dialect) { dialect = d }
