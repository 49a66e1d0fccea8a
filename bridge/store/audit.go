package store

import (
	"context"
	"database/sql"
	"strings"

	"github.com/switchbridge/switchbridge/bridge"
)

// The audit log: the records of the commands the installation API sent
// (bridge.AuditRecord). A command's records reach the value journal in the
// write of its values (Journal.AppendAudited) and the database when the
// journal is folded; the ValueWriter keeps the table within its bounds.

const insertAudit = `INSERT INTO audit_log (at, installation_id, client_id, user_id, switch_id, command, outcome, latency_ms, request_id) VALUES `

// auditRowsPerInsert is how many records one INSERT carries: a fold
// stores a coalescing window's records (hundreds on a busy hub), and one
// statement per record spent more in the driver than in SQLite.
const auditRowsPerInsert = 50

// insertAuditRows is an INSERT of n records.
func insertAuditRows(n int) string {
	var b strings.Builder
	b.WriteString(insertAudit)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?)")
	}
	return b.String()
}

var insertAuditFull = insertAuditRows(auditRowsPerInsert)

// saveAudit inserts recs, auditRowsPerInsert to a statement (prepared once
// per fold) and the rest in one more: per record that is a third of what
// one prepared single-row insert cost (BenchmarkFoldAudit).
func saveAudit(ctx context.Context, tx *sql.Tx, recs []bridge.AuditRecord) error {
	args := make([]any, 0, 9*min(len(recs), auditRowsPerInsert))
	exec := func(stmt *sql.Stmt, query string, rs []bridge.AuditRecord) error {
		args = args[:0]
		for _, r := range rs {
			args = append(args, unix(r.At), r.InstallationID, r.ClientID, r.UserID, r.SwitchID,
				string(r.Command), r.Outcome, r.Latency.Milliseconds(), r.RequestID)
		}
		var err error
		if stmt != nil {
			_, err = stmt.ExecContext(ctx, args...)
		} else {
			_, err = tx.ExecContext(ctx, query, args...)
		}
		return err
	}
	if len(recs) >= auditRowsPerInsert {
		stmt, err := tx.PrepareContext(ctx, insertAuditFull)
		if err != nil {
			return err
		}
		defer stmt.Close()
		for len(recs) >= auditRowsPerInsert {
			if err := exec(stmt, "", recs[:auditRowsPerInsert]); err != nil {
				return err
			}
			recs = recs[auditRowsPerInsert:]
		}
	}
	if len(recs) == 0 {
		return nil
	}
	return exec(nil, insertAuditRows(len(recs)), recs)
}
