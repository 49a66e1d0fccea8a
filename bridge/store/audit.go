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

// auditChunks are how many records one INSERT carries, largest first: a
// fold stores a coalescing window's records (hundreds on a busy hub), and
// one statement per record spent more in the driver than in SQLite. The
// three statements are prepared once (DB.Stmt); preparing one of fifty
// rows every fold cost more than it saved.
var auditChunks = [...]int{50, 10, 1}

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

var insertAuditChunk = [len(auditChunks)]string{insertAuditRows(auditChunks[0]), insertAuditRows(auditChunks[1]), insertAuditRows(auditChunks[2])}

// saveAudit inserts recs in tx, as many to a statement as auditChunks
// allows: per record a third less than one single-row insert each
// (BenchmarkFoldAudit).
func (db *DB) saveAudit(ctx context.Context, tx *sql.Tx, recs []bridge.AuditRecord) error {
	args := make([]any, 0, 9*min(len(recs), auditChunks[0]))
	for i, n := range auditChunks {
		if len(recs) < n {
			continue
		}
		st, err := db.Stmt(ctx, insertAuditChunk[i])
		if err != nil {
			return err
		}
		stmt := tx.StmtContext(ctx, st)
		for ; len(recs) >= n; recs = recs[n:] {
			args = args[:0]
			for _, r := range recs[:n] {
				args = append(args, unix(r.At), r.InstallationID, r.ClientID, r.UserID, r.SwitchID,
					string(r.Command), r.Outcome, r.Latency.Milliseconds(), r.RequestID)
			}
			if _, err := stmt.ExecContext(ctx, args...); err != nil {
				stmt.Close()
				return err
			}
		}
		stmt.Close()
	}
	return nil
}
