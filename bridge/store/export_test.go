package store

import (
	"context"
	"testing"

	"github.com/switchbridge/switchbridge/bridge/store/pgtest"
)

// CountRows counts a table's rows, for tests of pruning.
func (db *DB) CountRows(ctx context.Context, table string) (int, error) {
	var n int
	err := db.db.QueryRowContext(ctx, "SELECT count(*) FROM "+table).Scan(&n)
	return n, err
}

// AfterBackupCopy lets store_test play a daemon that stores a batch between
// a backup's copy of the database and its read of the journal.
var AfterBackupCopy = &afterCopy

// The store's tests that are about its rules, not SQLite's files, run on
// both dialects: ForEachDialect runs a test once per dialect, and OpenTest
// opens the store "at dir" in the dialect under test, the same database
// again for the same dir (a second process on one database).
var (
	testDialect = SQLite
	testDSNs    = map[string]string{}
)

// ForEachDialect runs f as a subtest per dialect. On PostgreSQL it skips
// when the server's binaries are missing, except under CI=true.
func ForEachDialect(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	for _, d := range []Dialect{SQLite, Postgres} {
		t.Run(string(d), func(t *testing.T) {
			testDialect = d
			t.Cleanup(func() { testDialect = SQLite })
			f(t)
		})
	}
}

// OpenTest opens the store for dir in the dialect under test, closed
// when the test ends.
func OpenTest(tb testing.TB, dir string) *DB {
	tb.Helper()
	ctx := context.Background()
	var db *DB
	var err error
	if testDialect == Postgres {
		dsn, ok := testDSNs[dir]
		if !ok {
			dsn = pgtest.DSN(tb)
			testDSNs[dir] = dsn
		}
		db, err = OpenPostgres(ctx, dsn)
	} else {
		db, err = Open(ctx, dir)
	}
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

// DialectUnderTest is the dialect under test.
func DialectUnderTest() Dialect { return testDialect }

// TestMain stops the PostgreSQL the tests started.
func TestMain(m *testing.M) { pgtest.Main(m) }
