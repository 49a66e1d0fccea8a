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
	"time"

	"github.com/switchbridge/switchbridge/bridge/store"
)

// Store is the platform's records in a database the engine opened.
type Store struct {
	// DB is the engine, embedded while the platform's records move here
	// from it: what has not moved yet is still its method.
	*store.DB
	db  *store.DB
	now func() time.Time // tests set it
}

// New is the platform's records in db. Closing db is its opener's
// business.
func New(db *store.DB) *Store { return &Store{DB: db, db: db, now: time.Now} }
