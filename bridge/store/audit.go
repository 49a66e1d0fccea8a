package store

import (
	"context"
	"database/sql"

	"github.com/switchbridge/switchbridge/bridge"
)

// The audit log: the records of the commands the installation API sent
// (bridge.AuditRecord). A command's records reach the value journal in the
// write of its values (Journal.AppendAudited) and the database when the
// journal is folded; the ValueWriter keeps the table within its bounds.

const insertAudit = `INSERT INTO audit_log (at, installation_id, client_id, user_id, switch_id, command, outcome, latency_ms, request_id)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`

func saveAudit(ctx context.Context, tx *sql.Tx, recs []bridge.AuditRecord) error {
	for _, r := range recs {
		if _, err := tx.ExecContext(ctx, insertAudit, unix(r.At), r.InstallationID, r.ClientID, r.UserID, r.SwitchID,
			string(r.Command), r.Outcome, r.Latency.Milliseconds(), r.RequestID); err != nil {
			return err
		}
	}
	return nil
}
