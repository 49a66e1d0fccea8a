package hubstore

import (
	"context"
	"strings"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/store"
)

// The audit log: the records of the commands the installation API sent
// (bridge.AuditRecord). They reach the table with the values of their
// commands, when the engine folds the value journal (store.Journal); the
// ValueWriter keeps the table within its bounds.

// Audit returns the records f selects, newest first: by time, then on
// SQLite the last stored first.
func (s *Store) Audit(ctx context.Context, f bridge.AuditFilter) ([]bridge.AuditRecord, error) {
	var where []string
	var args []any
	if f.InstallationID != "" {
		where, args = append(where, "installation_id = ?"), append(args, f.InstallationID)
	}
	if f.ClientID != "" {
		where, args = append(where, "client_id = ?"), append(args, f.ClientID)
	}
	if f.SwitchID != "" {
		where, args = append(where, "switch_id = ?"), append(args, f.SwitchID)
	}
	if !f.Since.IsZero() {
		where, args = append(where, "at >= ?"), append(args, store.Millis(f.Since))
	}
	q := `SELECT at, installation_id, client_id, user_id, switch_id, command, outcome, latency_ms, request_id FROM audit_log`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	// Commands a millisecond apart share their time: on SQLite, where a
	// hub keeps its log, the later one stored (the order of the journal)
	// comes first. (PostgreSQL has no such order of its own; a platform
	// there runs no commands.)
	if s.db.Dialect() == store.Postgres {
		q += " ORDER BY at DESC, request_id"
	} else {
		q += " ORDER BY at DESC, rowid DESC"
	}
	if f.Limit > 0 {
		q += " LIMIT ?"
		args = append(args, f.Limit)
	}
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []bridge.AuditRecord
	for rows.Next() {
		var r bridge.AuditRecord
		var at, ms int64
		var cmd string
		if err := rows.Scan(&at, &r.InstallationID, &r.ClientID, &r.UserID, &r.SwitchID, &cmd, &r.Outcome, &ms, &r.RequestID); err != nil {
			return nil, err
		}
		r.Command = bridge.Command(cmd)
		r.At, r.Latency = store.FromMillis(at), time.Duration(ms)*time.Millisecond
		out = append(out, r)
	}
	return out, rows.Err()
}

// PruneAudit deletes the records older than maxAge and then, while more
// than maxRows are left, the oldest; a bound of 0 is not applied. It
// returns how many it deleted.
func (s *Store) PruneAudit(ctx context.Context, maxAge time.Duration, maxRows int) (int64, error) {
	var n int64
	if maxAge > 0 {
		res, err := s.db.ExecContext(ctx, `DELETE FROM audit_log WHERE at < ?`, store.Millis(s.now().Add(-maxAge)))
		if err != nil {
			return 0, err
		}
		d, _ := res.RowsAffected()
		n += d
	}
	if maxRows > 0 {
		count, err := s.AuditRows(ctx)
		if err != nil || count <= int64(maxRows) {
			return n, err
		}
		// Exactly the oldest past the bound, though records of one
		// command share their time: the table has no key, so each
		// engine's row address picks them.
		q := `DELETE FROM audit_log WHERE rowid IN (SELECT rowid FROM audit_log ORDER BY at, rowid LIMIT ?)`
		if s.db.Dialect() == store.Postgres {
			q = `DELETE FROM audit_log WHERE ctid IN (SELECT ctid FROM audit_log ORDER BY at LIMIT ?)`
		}
		res, err := s.db.ExecContext(ctx, q, count-int64(maxRows))
		if err != nil {
			return n, err
		}
		d, _ := res.RowsAffected()
		n += d
	}
	return n, nil
}

// AuditRows is how many records the audit log holds.
func (s *Store) AuditRows(ctx context.Context) (int64, error) {
	var n int64
	err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM audit_log`).Scan(&n)
	return n, err
}
