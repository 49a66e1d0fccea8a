package hubstore

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/store"
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
	w.OldSecretUntil, w.CreatedAt = optTime(oldUntil), store.FromMillis(created)
	w.LastSuccessAt, w.LastFailureAt, w.FailingSince = optTime(success), optTime(failure), optTime(failing)
	return w, nil
}

func optTime(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return store.FromMillis(ms)
}

// optUnix is optTime's inverse: 0 for the zero time.
func optUnix(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return store.Millis(t)
}

// AddWebhook registers w (ID, InstallationID, URL, Secret set) unless its
// installation already has max webhooks (ETOOMANY) or one with that URL
// (ECONFLICT). It fills in CreatedAt.
func (s *Store) AddWebhook(ctx context.Context, w *bridge.Webhook, max int) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return s.db.Note(err)
	}
	defer tx.Rollback()
	var n, same int
	if err := tx.QueryRowContext(ctx, `SELECT count(*), count(*) FILTER (WHERE url = ?) FROM webhooks WHERE installation_id = ?`, w.URL, w.InstallationID).Scan(&n, &same); err != nil {
		return s.db.Note(err)
	}
	if same > 0 {
		return bridge.Errorf(bridge.ECONFLICT, "this installation already has a webhook for %s", w.URL)
	}
	if n >= max {
		return bridge.Errorf(bridge.ETOOMANY, "this installation already has %d webhooks, the most it may have", n)
	}
	w.CreatedAt = s.now()
	if _, err := tx.ExecContext(ctx, `INSERT INTO webhooks (id, installation_id, url, secret, created_at) VALUES (?, ?, ?, ?, ?)`,
		w.ID, w.InstallationID, w.URL, w.Secret, store.Millis(w.CreatedAt)); err != nil {
		return s.db.Note(err)
	}
	return s.db.Note(tx.Commit())
}

// Webhooks lists an installation's webhooks, oldest first; every webhook
// when installationID is "".
func (s *Store) Webhooks(ctx context.Context, installationID string) ([]*bridge.Webhook, error) {
	q := `SELECT ` + webhookColumns + ` FROM webhooks w WHERE ? = '' OR w.installation_id = ? ORDER BY w.created_at, w.id`
	rows, err := s.db.QueryContext(ctx, q, installationID, installationID)
	if err != nil {
		return nil, s.db.Note(err)
	}
	defer rows.Close()
	var out []*bridge.Webhook
	for rows.Next() {
		w, err := scanWebhook(rows)
		if err != nil {
			return nil, s.db.Note(err)
		}
		out = append(out, w)
	}
	return out, s.db.Note(rows.Err())
}

// Webhook returns one webhook; ENOTFOUND when there is none.
func (s *Store) Webhook(ctx context.Context, id string) (*bridge.Webhook, error) {
	w, err := scanWebhook(s.db.QueryRowContext(ctx, `SELECT `+webhookColumns+` FROM webhooks w WHERE w.id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, bridge.Errorf(bridge.ENOTFOUND, "no webhook %q", id)
	}
	return w, s.db.Note(err)
}

// DeleteWebhook removes an installation's webhook and what its outbox
// holds; ENOTFOUND when the installation has no such webhook.
func (s *Store) DeleteWebhook(ctx context.Context, installationID, id string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM webhooks WHERE id = ? AND installation_id = ?`, id, installationID)
	return s.oneRow(res, err, "no webhook %q in this installation", id)
}

func (s *Store) oneRow(res sql.Result, err error, format string, args ...any) error {
	if err != nil {
		return s.db.Note(err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return s.db.Note(err)
	} else if n == 0 {
		return bridge.Errorf(bridge.ENOTFOUND, format, args...)
	}
	return nil
}

// DeleteWebhooksOf removes every webhook of an installation (one that is
// gone).
func (s *Store) DeleteWebhooksOf(ctx context.Context, installationID string) error {
	_, err := s.db.ExecContext(ctx, `DELETE FROM webhooks WHERE installation_id = ?`, installationID)
	return s.db.Note(err)
}

// RotateWebhookSecret gives a webhook a new secret; the one it had still
// signs deliveries until overlapUntil.
func (s *Store) RotateWebhookSecret(ctx context.Context, installationID, id, secret string, overlapUntil time.Time) error {
	res, err := s.db.ExecContext(ctx, `UPDATE webhooks SET old_secret = secret, old_secret_until = ?, secret = ? WHERE id = ? AND installation_id = ?`,
		store.Millis(overlapUntil), secret, id, installationID)
	return s.oneRow(res, err, "no webhook %q in this installation", id)
}

// EnqueueWebhookDeliveries queues deliveries. One that finds a delivery of
// the same webhook and switch waiting replaces its message (a newer state),
// keeping its place in time and its attempts, so a receiver that is down
// is not hit harder by a flapping plug. Disabled webhooks get nothing.
func (s *Store) EnqueueWebhookDeliveries(ctx context.Context, ds []bridge.WebhookDelivery) error {
	if len(ds) == 0 {
		return nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return s.db.Note(err)
	}
	defer tx.Rollback()
	for _, d := range ds {
		if _, err := tx.ExecContext(ctx, `INSERT INTO webhook_outbox (webhook_id, switch_id, version, msg_id, payload, queued_at, next_at)
			SELECT ?, ?, 1, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM webhooks WHERE id = ? AND disabled_reason = '')
			ON CONFLICT (webhook_id, switch_id) DO UPDATE SET version = webhook_outbox.version + 1, msg_id = excluded.msg_id, payload = excluded.payload`,
			d.WebhookID, d.SwitchID, d.MsgID, d.Payload, store.Millis(d.QueuedAt), store.Millis(d.NextAt), d.WebhookID); err != nil {
			return s.db.Note(err)
		}
	}
	return s.db.Note(tx.Commit())
}

// DueWebhookDeliveries returns the delivery due first of each enabled
// webhook with one due at now, up to limit webhooks, the longest waiting
// first. One per webhook, since a webhook takes one at a time: a
// receiver that hangs with many changes waiting must not fill the limit
// and hide another webhook's delivery.
func (s *Store) DueWebhookDeliveries(ctx context.Context, now time.Time, limit int) ([]bridge.WebhookDelivery, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT webhook_id, installation_id, switch_id, version, msg_id, payload, attempts, queued_at, next_at FROM (
		SELECT o.webhook_id, w.installation_id, o.switch_id, o.version, o.msg_id, o.payload, o.attempts, o.queued_at, o.next_at,
			ROW_NUMBER() OVER (PARTITION BY o.webhook_id ORDER BY o.next_at, o.queued_at, o.switch_id) AS n
		FROM webhook_outbox o JOIN webhooks w ON w.id = o.webhook_id
		WHERE o.next_at <= ? AND w.disabled_reason = '') due
		WHERE n = 1 ORDER BY next_at, queued_at, webhook_id LIMIT ?`, store.Millis(now), limit)
	if err != nil {
		return nil, s.db.Note(err)
	}
	defer rows.Close()
	var out []bridge.WebhookDelivery
	for rows.Next() {
		var d bridge.WebhookDelivery
		var queued, next int64
		if err := rows.Scan(&d.WebhookID, &d.InstallationID, &d.SwitchID, &d.Version, &d.MsgID, &d.Payload, &d.Attempts, &queued, &next); err != nil {
			return nil, s.db.Note(err)
		}
		d.QueuedAt, d.NextAt = store.FromMillis(queued), store.FromMillis(next)
		out = append(out, d)
	}
	return out, s.db.Note(rows.Err())
}

// NextWebhookDelivery is when the next delivery of an enabled webhook is
// due; zero when none waits.
func (s *Store) NextWebhookDelivery(ctx context.Context) (time.Time, error) {
	var next sql.NullInt64
	err := s.db.QueryRowContext(ctx, `SELECT min(o.next_at) FROM webhook_outbox o JOIN webhooks w ON w.id = o.webhook_id WHERE w.disabled_reason = ''`).Scan(&next)
	if err != nil || !next.Valid {
		return time.Time{}, s.db.Note(err)
	}
	return store.FromMillis(next.Int64), nil
}

// WebhookDelivered records that the receiver took a delivery: it leaves the
// outbox unless a newer change replaced it meanwhile (another version),
// which is then due at once.
func (s *Store) WebhookDelivered(ctx context.Context, d bridge.WebhookDelivery, at time.Time) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return s.db.Note(err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `DELETE FROM webhook_outbox WHERE webhook_id = ? AND switch_id = ? AND version = ?`, d.WebhookID, d.SwitchID, d.Version)
	if err != nil {
		return s.db.Note(err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		if _, err := tx.ExecContext(ctx, `UPDATE webhook_outbox SET attempts = 0, next_at = ? WHERE webhook_id = ? AND switch_id = ?`,
			store.Millis(at), d.WebhookID, d.SwitchID); err != nil {
			return s.db.Note(err)
		}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE webhooks SET last_success_at = ?, failing_since = 0 WHERE id = ?`, store.Millis(at), d.WebhookID); err != nil {
		return s.db.Note(err)
	}
	return s.db.Note(tx.Commit())
}

// WebhookFailed records a failed delivery, due again at next. It returns
// when the webhook's failures began.
func (s *Store) WebhookFailed(ctx context.Context, d bridge.WebhookDelivery, at, next time.Time, why string) (failingSince time.Time, err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return time.Time{}, s.db.Note(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `UPDATE webhook_outbox SET attempts = attempts + 1, next_at = ? WHERE webhook_id = ? AND switch_id = ?`,
		store.Millis(next), d.WebhookID, d.SwitchID); err != nil {
		return time.Time{}, s.db.Note(err)
	}
	var since int64
	if err := tx.QueryRowContext(ctx, `UPDATE webhooks SET last_failure_at = ?, last_error = ?,
		failing_since = CASE failing_since WHEN 0 THEN ? ELSE failing_since END WHERE id = ? RETURNING failing_since`,
		store.Millis(at), why, store.Millis(at), d.WebhookID).Scan(&since); err != nil {
		return time.Time{}, s.db.Note(err)
	}
	return store.FromMillis(since), s.db.Note(tx.Commit())
}

// DisableWebhook stops deliveries to a webhook, for reason, and empties
// its outbox.
func (s *Store) DisableWebhook(ctx context.Context, id, reason string) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return s.db.Note(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `UPDATE webhooks SET disabled_reason = ? WHERE id = ?`, reason, id); err != nil {
		return s.db.Note(err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM webhook_outbox WHERE webhook_id = ?`, id); err != nil {
		return s.db.Note(err)
	}
	return s.db.Note(tx.Commit())
}

// EnableWebhook lets a disabled webhook be delivered to again, as an
// owner asks: its reason and its failures are forgotten, so it has
// webhook.MaxFailing again before it is disabled for failing. Nothing
// that happened while it was disabled is sent. ENOTFOUND when there is
// no such webhook, ECONFLICT when it is not disabled.
func (s *Store) EnableWebhook(ctx context.Context, id string) error {
	res, err := s.db.ExecContext(ctx, `UPDATE webhooks SET disabled_reason = '', failing_since = 0 WHERE id = ? AND disabled_reason <> ''`, id)
	if err != nil {
		return s.db.Note(err)
	}
	if n, err := res.RowsAffected(); err != nil || n > 0 {
		return s.db.Note(err)
	}
	if _, err := s.Webhook(ctx, id); err != nil {
		return err
	}
	return bridge.Errorf(bridge.ECONFLICT, "webhook %s is not disabled", id)
}

// DropWebhookDeliveries empties the outbox of an installation's webhooks
// and returns how many deliveries it dropped: its grant has no live token,
// and what waited is not sent once it has one again.
func (s *Store) DropWebhookDeliveries(ctx context.Context, installationID string) (int, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM webhook_outbox WHERE webhook_id IN (SELECT id FROM webhooks WHERE installation_id = ?)`, installationID)
	if err != nil {
		return 0, s.db.Note(err)
	}
	n, err := res.RowsAffected()
	return int(n), s.db.Note(err)
}

// WebhookOutbox reports how many deliveries wait and since when the
// oldest waits (zero when none does).
func (s *Store) WebhookOutbox(ctx context.Context) (depth int, oldest time.Time, err error) {
	var first sql.NullInt64
	if err := s.db.QueryRowContext(ctx, `SELECT count(*), min(queued_at) FROM webhook_outbox`).Scan(&depth, &first); err != nil {
		return 0, time.Time{}, s.db.Note(err)
	}
	if first.Valid {
		oldest = store.FromMillis(first.Int64)
	}
	return depth, oldest, nil
}
