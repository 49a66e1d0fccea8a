package store

import (
	"context"
	"database/sql"
	"strings"
	"time"
)

// AuditRecord is one switch of one command sent through the installation
// API: when, by which installation (its app and user), to which switch,
// which command, how it ended ("ok", a bridge.Fail* reason, or "not_sent"
// when refused before any device was touched), how long it took and the
// X-Request-Id of its answer.
type AuditRecord struct {
	At             time.Time     `json:"at"`
	InstallationID string        `json:"installation"`
	ClientID       string        `json:"app"`
	UserID         int64         `json:"user"`
	SwitchID       string        `json:"switch"`
	Command        string        `json:"command"`
	Outcome        string        `json:"outcome"`
	Latency        time.Duration `json:"latency"`
	RequestID      string        `json:"request_id"`
}

// Audit defaults (audit.max_age, audit.max_rows).
const (
	DefaultAuditMaxAge  = 30 * 24 * time.Hour
	DefaultAuditMaxRows = 100000
)

const insertAudit = `INSERT INTO audit_log (at, installation_id, client_id, user_id, switch_id, command, outcome, latency_ms, request_id)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`

func saveAudit(ctx context.Context, tx *sql.Tx, recs []AuditRecord) error {
	for _, r := range recs {
		if _, err := tx.ExecContext(ctx, insertAudit, unix(r.At), r.InstallationID, r.ClientID, r.UserID, r.SwitchID,
			r.Command, r.Outcome, r.Latency.Milliseconds(), r.RequestID); err != nil {
			return err
		}
	}
	return nil
}

// AuditFilter selects audit records: of one installation, of one switch,
// at or after Since; each when set. Limit bounds how many (the newest);
// none when 0.
type AuditFilter struct {
	InstallationID string
	SwitchID       string
	Since          time.Time
	Limit          int
}

// Audit returns the records f selects, newest first.
func (db *DB) Audit(ctx context.Context, f AuditFilter) ([]AuditRecord, error) {
	var where []string
	var args []any
	if f.InstallationID != "" {
		where, args = append(where, "installation_id = ?"), append(args, f.InstallationID)
	}
	if f.SwitchID != "" {
		where, args = append(where, "switch_id = ?"), append(args, f.SwitchID)
	}
	if !f.Since.IsZero() {
		where, args = append(where, "at >= ?"), append(args, unix(f.Since))
	}
	q := `SELECT at, installation_id, client_id, user_id, switch_id, command, outcome, latency_ms, request_id FROM audit_log`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY at DESC, request_id"
	if f.Limit > 0 {
		q += " LIMIT ?"
		args = append(args, f.Limit)
	}
	rows, err := db.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []AuditRecord
	for rows.Next() {
		var r AuditRecord
		var at, ms int64
		if err := rows.Scan(&at, &r.InstallationID, &r.ClientID, &r.UserID, &r.SwitchID, &r.Command, &r.Outcome, &ms, &r.RequestID); err != nil {
			return nil, err
		}
		r.At, r.Latency = fromUnix(at), time.Duration(ms)*time.Millisecond
		out = append(out, r)
	}
	return out, rows.Err()
}

// PruneAudit deletes the records older than maxAge and, past maxRows, the
// oldest; a bound of 0 is not applied. It returns how many it deleted.
func (db *DB) PruneAudit(ctx context.Context, maxAge time.Duration, maxRows int) (int64, error) {
	var n int64
	if maxAge > 0 {
		res, err := db.db.ExecContext(ctx, `DELETE FROM audit_log WHERE at < ?`, unix(db.now().Add(-maxAge)))
		if err != nil {
			return 0, err
		}
		d, _ := res.RowsAffected()
		n += d
	}
	if maxRows > 0 {
		// The at of the maxRows-th newest record: everything before it goes.
		var cut int64
		err := db.db.QueryRowContext(ctx, `SELECT at FROM audit_log ORDER BY at DESC LIMIT 1 OFFSET ?`, maxRows-1).Scan(&cut)
		if err == sql.ErrNoRows {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		res, err := db.db.ExecContext(ctx, `DELETE FROM audit_log WHERE at < ?`, cut)
		if err != nil {
			return n, err
		}
		d, _ := res.RowsAffected()
		n += d
	}
	return n, nil
}
