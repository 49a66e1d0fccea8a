package store

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
)

// Webhooks and their outbox (migration 0014_webhooks).

const webhookColumns = `w.id, w.installation_id, w.url, w.secret, w.old_secret, w.old_secret_until, w.disabled_reason, w.created_at,
	w.last_success_at, w.last_failure_at, w.last_error, w.failing_since,
	(SELECT count(*) FROM webhook_outbox o WHERE o.webhook_id = w.id)`

func scanWebhook(row interface{ Scan(...any) error }) (*bridge.Webhook, error) {
	w := &bridge.Webhook{}
	var oldUntil, created, success, failure, failing int64
	if err := row.Scan(&w.ID, &w.InstallationID, &w.URL, &w.Secret, &w.OldSecret, &oldUntil, &w.DisabledReason, &created,
		&success, &failure, &w.LastError, &failing, &w.Pending); err != nil {
		return nil, err
	}
	w.Disabled = w.DisabledReason != ""
	w.OldSecretUntil, w.CreatedAt = optTime(oldUntil), fromUnix(created)
	w.LastSuccessAt, w.LastFailureAt, w.FailingSince = optTime(success), optTime(failure), optTime(failing)
	return w, nil
}

func optTime(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return fromUnix(ms)
}

// optUnix is optTime's inverse: 0 for the zero time.
func optUnix(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return unix(t)
}

// AddWebhook registers w (ID, InstallationID, URL, Secret set) unless its
// installation already has max webhooks (ETOOMANY) or one with that URL
// (ECONFLICT). It fills in CreatedAt.
func (db *DB) AddWebhook(ctx context.Context, w *bridge.Webhook, max int) error {
	tx, err := db.db.BeginTx(ctx, nil)
	if err != nil {
		return db.note(err)
	}
	defer tx.Rollback()
	var n, same int
	if err := tx.QueryRowContext(ctx, `SELECT count(*), count(*) FILTER (WHERE url = ?) FROM webhooks WHERE installation_id = ?`, w.URL, w.InstallationID).Scan(&n, &same); err != nil {
		return db.note(err)
	}
	if same > 0 {
		return bridge.Errorf(bridge.ECONFLICT, "this installation already has a webhook for %s", w.URL)
	}
	if n >= max {
		return bridge.Errorf(bridge.ETOOMANY, "this installation already has %d webhooks, the most it may have", n)
	}
	w.CreatedAt = db.now()
	if _, err := tx.ExecContext(ctx, `INSERT INTO webhooks (id, installation_id, url, secret, created_at) VALUES (?, ?, ?, ?, ?)`,
		w.ID, w.InstallationID, w.URL, w.Secret, unix(w.CreatedAt)); err != nil {
		return db.note(err)
	}
	return db.note(tx.Commit())
}

// Webhooks lists an installation's webhooks, oldest first; every webhook
// when installationID is "".
func (db *DB) Webhooks(ctx context.Context, installationID string) ([]*bridge.Webhook, error) {
	q := `SELECT ` + webhookColumns + ` FROM webhooks w WHERE ? = '' OR w.installation_id = ? ORDER BY w.created_at, w.id`
	rows, err := db.db.QueryContext(ctx, q, installationID, installationID)
	if err != nil {
		return nil, db.note(err)
	}
	defer rows.Close()
	var out []*bridge.Webhook
	for rows.Next() {
		w, err := scanWebhook(rows)
		if err != nil {
			return nil, db.note(err)
		}
		out = append(out, w)
	}
	return out, db.note(rows.Err())
}

// Webhook returns one webhook; ENOTFOUND when there is none.
func (db *DB) Webhook(ctx context.Context, id string) (*bridge.Webhook, error) {
	w, err := scanWebhook(db.db.QueryRowContext(ctx, `SELECT `+webhookColumns+` FROM webhooks w WHERE w.id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, bridge.Errorf(bridge.ENOTFOUND, "no webhook %q", id)
	}
	return w, db.note(err)
}

// DeleteWebhook removes an installation's webhook and what its outbox
// holds; ENOTFOUND when the installation has no such webhook.
func (db *DB) DeleteWebhook(ctx context.Context, installationID, id string) error {
	res, err := db.db.ExecContext(ctx, `DELETE FROM webhooks WHERE id = ? AND installation_id = ?`, id, installationID)
	return db.oneRow(res, err, "no webhook %q in this installation", id)
}

func (db *DB) oneRow(res sql.Result, err error, format string, args ...any) error {
	if err != nil {
		return db.note(err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return db.note(err)
	} else if n == 0 {
		return bridge.Errorf(bridge.ENOTFOUND, format, args...)
	}
	return nil
}

// DeleteWebhooksOf removes every webhook of an installation (one that is
// gone).
func (db *DB) DeleteWebhooksOf(ctx context.Context, installationID string) error {
	_, err := db.db.ExecContext(ctx, `DELETE FROM webhooks WHERE installation_id = ?`, installationID)
	return db.note(err)
}

// RotateWebhookSecret gives a webhook a new secret; the one it had still
// signs deliveries until overlapUntil.
func (db *DB) RotateWebhookSecret(ctx context.Context, installationID, id, secret string, overlapUntil time.Time) error {
	res, err := db.db.ExecContext(ctx, `UPDATE webhooks SET old_secret = secret, old_secret_until = ?, secret = ? WHERE id = ? AND installation_id = ?`,
		unix(overlapUntil), secret, id, installationID)
	return db.oneRow(res, err, "no webhook %q in this installation", id)
}

// EnqueueWebhookDeliveries queues deliveries. One that finds a delivery of
// the same webhook and switch waiting replaces its message (a newer state),
// keeping its place in time and its attempts, so a receiver that is down
// is not hit harder by a flapping plug. Disabled webhooks get nothing.
func (db *DB) EnqueueWebhookDeliveries(ctx context.Context, ds []bridge.WebhookDelivery) error {
	if len(ds) == 0 {
		return nil
	}
	tx, err := db.db.BeginTx(ctx, nil)
	if err != nil {
		return db.note(err)
	}
	defer tx.Rollback()
	for _, d := range ds {
		if _, err := tx.ExecContext(ctx, `INSERT INTO webhook_outbox (webhook_id, switch_id, version, msg_id, payload, queued_at, next_at)
			SELECT ?, ?, 1, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM webhooks WHERE id = ? AND disabled_reason = '')
			ON CONFLICT (webhook_id, switch_id) DO UPDATE SET version = webhook_outbox.version + 1, msg_id = excluded.msg_id, payload = excluded.payload`,
			d.WebhookID, d.SwitchID, d.MsgID, d.Payload, unix(d.QueuedAt), unix(d.NextAt), d.WebhookID); err != nil {
			return db.note(err)
		}
	}
	return db.note(tx.Commit())
}

// DueWebhookDeliveries returns the delivery due first of each enabled
// webhook with one due at now, up to limit webhooks, the longest waiting
// first. One per webhook, since a webhook takes one at a time: a
// receiver that hangs with many changes waiting must not fill the limit
// and hide another webhook's delivery.
func (db *DB) DueWebhookDeliveries(ctx context.Context, now time.Time, limit int) ([]bridge.WebhookDelivery, error) {
	rows, err := db.db.QueryContext(ctx, `SELECT webhook_id, installation_id, switch_id, version, msg_id, payload, attempts, queued_at, next_at FROM (
		SELECT o.webhook_id, w.installation_id, o.switch_id, o.version, o.msg_id, o.payload, o.attempts, o.queued_at, o.next_at,
			ROW_NUMBER() OVER (PARTITION BY o.webhook_id ORDER BY o.next_at, o.queued_at, o.switch_id) AS n
		FROM webhook_outbox o JOIN webhooks w ON w.id = o.webhook_id
		WHERE o.next_at <= ? AND w.disabled_reason = '') due
		WHERE n = 1 ORDER BY next_at, queued_at, webhook_id LIMIT ?`, unix(now), limit)
	if err != nil {
		return nil, db.note(err)
	}
	defer rows.Close()
	var out []bridge.WebhookDelivery
	for rows.Next() {
		var d bridge.WebhookDelivery
		var queued, next int64
		if err := rows.Scan(&d.WebhookID, &d.InstallationID, &d.SwitchID, &d.Version, &d.MsgID, &d.Payload, &d.Attempts, &queued, &next); err != nil {
			return nil, db.note(err)
		}
		d.QueuedAt, d.NextAt = fromUnix(queued), fromUnix(next)
		out = append(out, d)
	}
	return out, db.note(rows.Err())
}

// NextWebhookDelivery is when the next delivery of an enabled webhook is
// due; zero when none waits.
func (db *DB) NextWebhookDelivery(ctx context.Context) (time.Time, error) {
	var next sql.NullInt64
	err := db.db.QueryRowContext(ctx, `SELECT min(o.next_at) FROM webhook_outbox o JOIN webhooks w ON w.id = o.webhook_id WHERE w.disabled_reason = ''`).Scan(&next)
	if err != nil || !next.Valid {
		return time.Time{}, db.note(err)
	}
	return fromUnix(next.Int64), nil
}

// WebhookDelivered records that the receiver took a delivery: it leaves the
// outbox unless a newer change replaced it meanwhile (another version),
// which is then due at once.
func (db *DB) WebhookDelivered(ctx context.Context, d bridge.WebhookDelivery, at time.Time) error {
	tx, err := db.db.BeginTx(ctx, nil)
	if err != nil {
		return db.note(err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `DELETE FROM webhook_outbox WHERE webhook_id = ? AND switch_id = ? AND version = ?`, d.WebhookID, d.SwitchID, d.Version)
	if err != nil {
		return db.note(err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		if _, err := tx.ExecContext(ctx, `UPDATE webhook_outbox SET attempts = 0, next_at = ? WHERE webhook_id = ? AND switch_id = ?`,
			unix(at), d.WebhookID, d.SwitchID); err != nil {
			return db.note(err)
		}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE webhooks SET last_success_at = ?, failing_since = 0 WHERE id = ?`, unix(at), d.WebhookID); err != nil {
		return db.note(err)
	}
	return db.note(tx.Commit())
}

// WebhookFailed records a failed delivery, due again at next. It returns
// when the webhook's failures began.
func (db *DB) WebhookFailed(ctx context.Context, d bridge.WebhookDelivery, at, next time.Time, why string) (failingSince time.Time, err error) {
	tx, err := db.db.BeginTx(ctx, nil)
	if err != nil {
		return time.Time{}, db.note(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `UPDATE webhook_outbox SET attempts = attempts + 1, next_at = ? WHERE webhook_id = ? AND switch_id = ?`,
		unix(next), d.WebhookID, d.SwitchID); err != nil {
		return time.Time{}, db.note(err)
	}
	var since int64
	if err := tx.QueryRowContext(ctx, `UPDATE webhooks SET last_failure_at = ?, last_error = ?,
		failing_since = CASE failing_since WHEN 0 THEN ? ELSE failing_since END WHERE id = ? RETURNING failing_since`,
		unix(at), why, unix(at), d.WebhookID).Scan(&since); err != nil {
		return time.Time{}, db.note(err)
	}
	return fromUnix(since), db.note(tx.Commit())
}

// DisableWebhook stops deliveries to a webhook, for reason, and empties
// its outbox.
func (db *DB) DisableWebhook(ctx context.Context, id, reason string) error {
	tx, err := db.db.BeginTx(ctx, nil)
	if err != nil {
		return db.note(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `UPDATE webhooks SET disabled_reason = ? WHERE id = ?`, reason, id); err != nil {
		return db.note(err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM webhook_outbox WHERE webhook_id = ?`, id); err != nil {
		return db.note(err)
	}
	return db.note(tx.Commit())
}

// DropWebhookDeliveries empties the outbox of an installation's webhooks
// and returns how many deliveries it dropped: its grant has no live token,
// and what waited is not sent once it has one again.
func (db *DB) DropWebhookDeliveries(ctx context.Context, installationID string) (int, error) {
	res, err := db.db.ExecContext(ctx, `DELETE FROM webhook_outbox WHERE webhook_id IN (SELECT id FROM webhooks WHERE installation_id = ?)`, installationID)
	if err != nil {
		return 0, db.note(err)
	}
	n, err := res.RowsAffected()
	return int(n), db.note(err)
}

// WebhookOutbox reports how many deliveries wait and since when the
// oldest waits (zero when none does).
func (db *DB) WebhookOutbox(ctx context.Context) (depth int, oldest time.Time, err error) {
	var first sql.NullInt64
	if err := db.db.QueryRowContext(ctx, `SELECT count(*), min(queued_at) FROM webhook_outbox`).Scan(&depth, &first); err != nil {
		return 0, time.Time{}, db.note(err)
	}
	if first.Valid {
		oldest = fromUnix(first.Int64)
	}
	return depth, oldest, nil
}
