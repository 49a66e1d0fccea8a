package hubstore

// The embedded MQTT broker's onboarding window (migration 0022): opened and
// closed by the owner's command (switchbridge devices listen), read by the
// running hub's broker at each onboarding login and while such clients
// are connected.

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/store"
)

// OpenMQTTOnboarding opens the onboarding window until expires, with the
// password whose SHA-256 is hash, replacing any window open before (and
// so its password).
func (s *Store) OpenMQTTOnboarding(ctx context.Context, hash []byte, opened, expires time.Time) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `DELETE FROM mqtt_onboarding`); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO mqtt_onboarding (id, password_hash, opened_at, expires_at) VALUES (1, ?, ?, ?)`,
		hash, store.Millis(opened), store.Millis(expires)); err != nil {
		return err
	}
	return tx.Commit()
}

// CloseMQTTOnboarding closes the window; it reports whether one was
// open at now.
func (s *Store) CloseMQTTOnboarding(ctx context.Context, now time.Time) (bool, error) {
	w, err := s.MQTTOnboarding(ctx)
	if err != nil {
		return false, err
	}
	if _, err := s.db.ExecContext(ctx, `DELETE FROM mqtt_onboarding`); err != nil {
		return false, err
	}
	return w.OpenAt(now), nil
}

// MQTTOnboarding returns the window, nil when none was opened (or it was
// closed); one past its expiry is returned as it is, for the caller to
// compare with its clock.
func (s *Store) MQTTOnboarding(ctx context.Context) (*bridge.MQTTOnboarding, error) {
	var w bridge.MQTTOnboarding
	var opened, expires int64
	err := s.db.QueryRowContext(ctx, `SELECT password_hash, opened_at, expires_at FROM mqtt_onboarding WHERE id = 1`).
		Scan(&w.PasswordHash, &opened, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	w.Opened, w.Expires = store.FromMillis(opened), store.FromMillis(expires)
	return &w, nil
}
