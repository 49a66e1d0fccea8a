// Package accounts keeps the platform's records: users and their
// locations, apps, installations, authorization codes and tokens, the
// login pages' sessions and throttling, the registry of hubs and the
// change log that feeds them, and when each installation was last used.
// It is the platform's half of the store, on SQLite or PostgreSQL: the
// tables are the schema's (bridge/store, one schema for both roles), the
// engine under them bridge/store's, and the queries here are the
// platform's alone, so that no hub package reaches a platform's record,
// nor the other way round (bridge/layout_test.go). A single box keeps them
// in the one database its hub's records share. Secrets are stored only as
// hashes.
package accounts

import (
	"context"
	"time"

	"github.com/switchbridge/switchbridge/bridge/store"
)

// Store is the platform's records in a database the engine opened.
type Store struct {
	db  *store.DB
	now func() time.Time // tests set it
}

// New is the platform's records in db. Closing db is its opener's
// business. A Store keeps no state of its own (the engine prepares its
// statements): any number of them over one db are one.
func New(db *store.DB) *Store { return &Store{db: db, now: time.Now} }

// DB is the engine under the records, for what the engine itself does
// (Ping, Backup, Close).
func (db *Store) DB() *store.DB { return db.db }

// AccessGeneration is the counter every write taking access away moves:
// a cached grant is good only while it has not moved. The engine reads
// it, without a query while no transaction has committed (store.DB).
func (db *Store) AccessGeneration(ctx context.Context) (int64, error) {
	return db.db.AccessGeneration(ctx)
}

// ChangeNotice returns a channel closed when the change log next grows,
// on PostgreSQL (store.DB.ChangeNotice); nil on SQLite.
func (db *Store) ChangeNotice() <-chan struct{} { return db.db.ChangeNotice() }

// CheckCursor returns bridge.ErrCursorGone unless the change log holds
// the point (seq, tag) a hub is at (store.DB.CheckCursor).
func (db *Store) CheckCursor(ctx context.Context, seq int64, tag string) error {
	return db.db.CheckCursor(ctx, seq, tag)
}

// CursorFromElsewhere reports whether a hub's cursor names a point this
// change log never held (store.DB.CursorFromElsewhere).
func (db *Store) CursorFromElsewhere(ctx context.Context, seq int64, tag string) (bool, error) {
	return db.db.CursorFromElsewhere(ctx, seq, tag)
}
