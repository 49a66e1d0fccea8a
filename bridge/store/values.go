package store

import (
	"context"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
)

// The last write wins: callers write values in the order they learnt them.
// Comparing the stored times instead would let a wall-clock step back (a
// Pi has no clock of its own until NTP answers) silently discard new values.
const saveSwitchValue = `INSERT INTO switch_states (switch_id, value, updated_at) VALUES (?, ?, ?)
	ON CONFLICT (switch_id) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`

// SaveSwitchValue stores a switch's last known value.
func (db *DB) SaveSwitchValue(ctx context.Context, switchID string, v bridge.Value, at time.Time) error {
	_, err := db.saveValueStmt.ExecContext(ctx, switchID, string(v), unix(at))
	return db.note(err)
}

// SwitchValue is one switch's value at a time, for SaveSwitchValues.
type SwitchValue struct {
	SwitchID string
	Value    bridge.Value
	At       time.Time
}

// SaveSwitchValues stores many values in one transaction, in order (a later
// value for the same switch wins): one disk write for a command that
// switched a hundred plugs.
func (db *DB) SaveSwitchValues(ctx context.Context, vs []SwitchValue) error {
	return db.saveValues(ctx, vs, nil, nil)
}

// saveValues stores vs and, when fold is set, records in the same
// transaction that the journal is folded up to it.
func (db *DB) saveValues(ctx context.Context, vs []SwitchValue, recs []bridge.AuditRecord, fold *JournalMark) error {
	if len(vs) == 0 && len(recs) == 0 && fold == nil {
		return nil
	}
	tx, err := db.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	stmt := tx.StmtContext(ctx, db.saveValueStmt)
	defer stmt.Close()
	for _, v := range vs {
		if _, err := stmt.ExecContext(ctx, v.SwitchID, string(v.Value), unix(v.At)); err != nil {
			return err
		}
	}
	if err := db.saveAudit(ctx, tx, recs); err != nil {
		return err
	}
	if fold != nil {
		if _, err := tx.ExecContext(ctx, saveFold, fold.Generation, fold.Size); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// SwitchValues returns every stored switch value by switch id.
func (db *DB) SwitchValues(ctx context.Context) (map[string]bridge.Value, error) {
	rows, err := db.db.QueryContext(ctx, `SELECT switch_id, value FROM switch_states`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]bridge.Value{}
	for rows.Next() {
		var id, v string
		if err := rows.Scan(&id, &v); err != nil {
			return nil, err
		}
		out[id] = bridge.Value(v)
	}
	return out, rows.Err()
}
