package hubstore

// The embedded MQTT broker's client ids and the logins they belong to
// (migration 0018). The rules (which login may bind, how many it keeps)
// are the broker's; the store keeps the rows, one write transaction per
// binding, so that two logins connecting with one new client id at once
// cannot both have it.

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/store"
)

// MQTTClientIDLogin returns the login client id id is bound to, "" when
// it is bound to none.
func (s *Store) MQTTClientIDLogin(ctx context.Context, id string) (string, error) {
	var login string
	err := s.db.QueryRowContext(ctx, `SELECT login FROM mqtt_client_ids WHERE client_id = ?`, id).Scan(&login)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return login, err
}

// BindMQTTClientID binds client id id to login at at, when it is bound to
// no login or, with take, to another, and notes at as its last use when it
// is login's; it returns the login id is bound to after. When login then
// holds more than keep client ids, its least recently used other ones are
// unbound.
func (s *Store) BindMQTTClientID(ctx context.Context, id, login string, at time.Time, take bool, keep int) (string, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return "", err
	}
	defer tx.Rollback()
	var owner string
	err = tx.QueryRowContext(ctx, `SELECT login FROM mqtt_client_ids WHERE client_id = ?`, id).Scan(&owner)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		_, err = tx.ExecContext(ctx, `INSERT INTO mqtt_client_ids (client_id, login, bound_at, last_at) VALUES (?1, ?2, ?3, ?3)`, id, login, store.Millis(at))
	case err != nil:
		return "", err
	case owner == login:
		_, err = tx.ExecContext(ctx, `UPDATE mqtt_client_ids SET last_at = ? WHERE client_id = ?`, store.Millis(at), id)
	case take:
		_, err = tx.ExecContext(ctx, `UPDATE mqtt_client_ids SET login = ?1, bound_at = ?2, last_at = ?2 WHERE client_id = ?3`, login, store.Millis(at), id)
	default:
		return owner, nil // another login's: nothing written
	}
	if err != nil {
		return "", err
	}
	var held int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM mqtt_client_ids WHERE login = ?`, login).Scan(&held); err != nil {
		return "", err
	}
	if held > keep {
		if _, err := tx.ExecContext(ctx, `DELETE FROM mqtt_client_ids WHERE client_id IN
			(SELECT client_id FROM mqtt_client_ids WHERE login = ?1 AND client_id <> ?2 ORDER BY last_at, client_id LIMIT ?3)`, login, id, held-keep); err != nil {
			return "", err
		}
	}
	return login, tx.Commit()
}

// ReleaseMQTTClientID unbinds client id id, so that the next login to
// connect with it has it; ENOTFOUND when it was bound to none.
func (s *Store) ReleaseMQTTClientID(ctx context.Context, id string) (*bridge.MQTTClientID, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	c, err := scanClientID(tx.QueryRowContext(ctx, `SELECT client_id, login, bound_at, last_at FROM mqtt_client_ids WHERE client_id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, bridge.Errorf(bridge.ENOTFOUND, "client id %q is bound to no login", id)
	}
	if err != nil {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM mqtt_client_ids WHERE client_id = ?`, id); err != nil {
		return nil, err
	}
	return c, tx.Commit()
}

// MQTTClientIDs lists every bound client id, by login and client id.
func (s *Store) MQTTClientIDs(ctx context.Context) ([]*bridge.MQTTClientID, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT client_id, login, bound_at, last_at FROM mqtt_client_ids ORDER BY login, client_id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*bridge.MQTTClientID
	for rows.Next() {
		c, err := scanClientID(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

func scanClientID(r interface{ Scan(...any) error }) (*bridge.MQTTClientID, error) {
	var c bridge.MQTTClientID
	var bound, last int64
	if err := r.Scan(&c.ID, &c.Login, &bound, &last); err != nil {
		return nil, err
	}
	c.Bound, c.LastUsed = store.FromMillis(bound), store.FromMillis(last)
	return &c, nil
}
