// Package hubstore keeps the hub's records: each switch's last value and
// the value journal, the audit log, the webhooks and their outbox, the
// replica of a linked hub's platform, the energy totals, the devices the
// MQTT driver discovered, the embedded broker's client ids and its
// onboarding window. It is the hub's half of the store: the tables are
// the schema's (bridge/store, one schema for both roles), the engine
// under them bridge/store's, and the queries here are the hub's alone, so
// that no platform package reaches a hub's record, nor the other way
// round (bridge/layout_test.go). A hub keeps them in SQLite; a single box
// in the one database its platform's records share.
package hubstore

import "github.com/switchbridge/switchbridge/bridge/store"

// Store is the hub's records in a database the engine opened.
type Store struct {
	db *store.DB
}

// New is the hub's records in db. Closing db is its opener's business.
func New(db *store.DB) *Store { return &Store{db: db} }

// DB is the engine under the records, for what the engine itself does
// (Ping, Backup, Dialect).
func (s *Store) DB() *store.DB { return s.db }
