package accounts

import (
	"context"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge/store"
	"github.com/switchbridge/switchbridge/bridge/store/storetest"
)

// The package's own tests run on both dialects as the engine's do.
var ForEachDialect = storetest.ForEachDialect

// OpenTest opens the platform's records at dir in the dialect under test.
func OpenTest(tb testing.TB, dir string) *Store { return New(storetest.Open(tb, dir)) }

func unix(t time.Time) int64 { return store.Millis(t) }

func fromUnix(ms int64) time.Time { return store.FromMillis(ms) }

// openFile opens the platform's records in the SQLite file at path.
func openFile(ctx context.Context, path string) (*Store, error) {
	db, err := store.OpenFile(ctx, path)
	if err != nil {
		return nil, err
	}
	return New(db), nil
}
