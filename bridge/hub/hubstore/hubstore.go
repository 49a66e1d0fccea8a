// Package hubstore keeps the hub's records: the write-behind of the
// switches' values and of the audit log (ValueWriter, over the value
// journal, which stays the engine's because a backup replays it), the
// audit log's reads and bounds, the webhooks and their outbox, the
// replica of a linked hub's platform, the energy totals, the devices the
// MQTT driver discovered, the embedded broker's client ids and its
// onboarding window. It is the hub's half of the store: the tables are
// the schema's (bridge/store, one schema for both roles), the engine
// under them bridge/store's, and the queries here are the hub's alone, so
// that no platform package reaches a hub's record, nor the other way
// round (bridge/layout_test.go). A hub keeps them in SQLite; a single box
// in the one database its platform's records share.
package hubstore

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/store"
)

// Store is the hub's records in a database the engine opened.
type Store struct {
	db  *store.DB
	now func() time.Time // tests set it
	// replicaGen counts the platform's batches the replica applied: only
	// this process writes the replica, so one Store per process.
	replicaGen atomic.Int64
}

// New is the hub's records in db. Closing db is its opener's business.
func New(db *store.DB) *Store { return &Store{db: db, now: time.Now} }

// DB is the engine under the records, for what the engine itself does
// (Ping, Backup, Dialect).
func (s *Store) DB() *store.DB { return s.db }

// FoldJournalAudited stores a batch of values and the audit records
// journaled with them, and that the value journal is folded up to mark,
// in one transaction (the engine's: a backup folds the journal too).
func (s *Store) FoldJournalAudited(ctx context.Context, vs []store.SwitchValue, recs []bridge.AuditRecord, mark store.JournalMark) error {
	return s.db.FoldJournalAudited(ctx, vs, recs, mark)
}
