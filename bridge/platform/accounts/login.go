package accounts

// The login pages' state (migration 0015): logged-in sessions, the signing
// key and the counts of failed logins. It is here, not in a process's
// memory, so that several platform processes behind one address are one
// platform: a user logs in through one and consents through another, a
// logout through one ends the session for all, and failed logins count
// together wherever they land. The rules (lifetimes, bounds, delays) are
// the caller's; the store keeps the rows and the bounds it is given.

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/store"
)

// StartLoginSession stores s under hash, the hash of its cookie (not
// s.CSRF, which the caller derives from the cookie). In the
// same transaction it ends the session whose hash is replaced (when not
// nil: a login replaces the visitor's cookie), drops sessions expired at
// s.Created, and makes room: the user's oldest sessions go until fewer
// than perUser are left, then the oldest of all until fewer than total
// are. ENOTFOUND when the user is gone.
func (db *Store) StartLoginSession(ctx context.Context, hash []byte, s bridge.LoginSession, replaced []byte, perUser, total int) error {
	tx, err := db.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if replaced != nil {
		if _, err := tx.ExecContext(ctx, `DELETE FROM login_sessions WHERE hash = ?`, replaced); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM login_sessions WHERE expires_at <= ?`, store.Millis(s.Created)); err != nil {
		return err
	}
	if err := dropOldest(ctx, tx, `WHERE user_id = ?`, perUser, s.UserID); err != nil {
		return err
	}
	if err := dropOldest(ctx, tx, ``, total); err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO login_sessions (hash, user_id, password, created_at, expires_at)
		VALUES (?, ?, ?, ?, ?)`, hash, s.UserID, s.Password, store.Millis(s.Created), store.Millis(s.Expires))
	if store.IsForeignKey(err) {
		return bridge.Errorf(bridge.ENOTFOUND, "no user with id %d", s.UserID)
	}
	if err != nil {
		return err
	}
	return tx.Commit()
}

// dropOldest deletes the oldest sessions of those where selects until
// fewer than limit are left, making room for one more.
func dropOldest(ctx context.Context, tx *sql.Tx, where string, limit int, args ...any) error {
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM login_sessions `+where, args...).Scan(&n); err != nil {
		return err
	}
	if n < limit {
		return nil
	}
	_, err := tx.ExecContext(ctx, `DELETE FROM login_sessions WHERE hash IN
		(SELECT hash FROM login_sessions `+where+` ORDER BY created_at, hash LIMIT ?)`, append(args, n-limit+1)...)
	return err
}

// LoginSession returns the session stored under hash, expired or not (the
// caller knows the time), without its CSRF token; ENOTFOUND when there is
// none.
func (db *Store) LoginSession(ctx context.Context, hash []byte) (*bridge.LoginSession, error) {
	var s bridge.LoginSession
	var created, expires int64
	err := db.db.QueryRowContext(ctx, `SELECT user_id, password, created_at, expires_at FROM login_sessions WHERE hash = ?`, hash).
		Scan(&s.UserID, &s.Password, &created, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, bridge.Errorf(bridge.ENOTFOUND, "no such login session")
	}
	if err != nil {
		return nil, err
	}
	s.Created, s.Expires = store.FromMillis(created), store.FromMillis(expires)
	return &s, nil
}

// EndLoginSession deletes the session stored under hash; ending one that
// is not there is no error.
func (db *Store) EndLoginSession(ctx context.Context, hash []byte) error {
	_, err := db.db.ExecContext(ctx, `DELETE FROM login_sessions WHERE hash = ?`, hash)
	return err
}

// SigningKey returns the key stored under name. When there is none yet it
// stores fresh first; of processes that ask at once, every one gets the
// key stored first, whichever that was, since the insert does nothing
// when one is there and the key is read back after it.
func (db *Store) SigningKey(ctx context.Context, name string, fresh []byte) ([]byte, error) {
	const read = `SELECT key FROM signing_keys WHERE name = ?`
	var key []byte
	err := db.db.QueryRowContext(ctx, read, name).Scan(&key)
	if err == nil {
		return key, nil // the common case, without a write
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return nil, err
	}
	if _, err := db.db.ExecContext(ctx, `INSERT INTO signing_keys (name, key, created_at) VALUES (?, ?, ?)
		ON CONFLICT (name) DO NOTHING`, name, fresh, store.Millis(db.now())); err != nil {
		return nil, err
	}
	if err := db.db.QueryRowContext(ctx, read, name).Scan(&key); err != nil {
		return nil, err
	}
	return key, nil
}

// LoginFailures returns each key's failures at or after since, in order:
// a key without any (never failed, forgotten, or forgotten by
// ForgetLoginFailures) has a zero count.
func (db *Store) LoginFailures(ctx context.Context, since time.Time, keys ...[]byte) ([]bridge.FailureCount, error) {
	out := make([]bridge.FailureCount, len(keys))
	for i, k := range keys {
		var n, last int64
		err := db.db.QueryRowContext(ctx, `SELECT failures, last_at FROM login_failures WHERE key = ? AND last_at >= ?`, k, store.Millis(since)).Scan(&n, &last)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out[i] = bridge.FailureCount{Count: int(n), Last: store.FromMillis(last)}
	}
	return out, nil
}

// ChargeLoginFailure is a login's check and charge against its keys, in
// one write transaction: write transactions run one at a time across every
// process (BEGIN IMMEDIATE on SQLite, the write lock on PostgreSQL), so no
// other login reads the counts between this one's read and its write. It
// reads each key's failures at or after since (a zero count for a key with
// none, or whose failures are older) and hands them to allow, in order;
// when allow accepts them it counts one failure at at against each key,
// a key whose last failure was before since starting over. It returns the
// counts allow was given and whether they were charged.
//
// The charge is made before the password is checked, so that parallel
// logins cannot all pass on the same count; the caller takes it back with
// UndoLoginFailure or ForgetLoginFailures when the password was right.
//
// It keeps the table bounded in the same transaction: failures before
// since are dropped (which is what makes such a key start over), and when
// more than maxKeys keys are left, those whose last failure is oldest go
// until a quarter of the room is free again, so a flood of new keys cannot
// wipe out the count of a key failing now.
func (db *Store) ChargeLoginFailure(ctx context.Context, at, since time.Time, maxKeys int, allow func([]bridge.FailureCount) bool, keys ...[]byte) ([]bridge.FailureCount, bool, error) {
	tx, err := db.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, false, err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `DELETE FROM login_failures WHERE last_at < ?`, store.Millis(since)); err != nil {
		return nil, false, err
	}
	before := make([]bridge.FailureCount, len(keys))
	for i, k := range keys {
		var n, last int64
		err := tx.QueryRowContext(ctx, `SELECT failures, last_at FROM login_failures WHERE key = ?`, k).Scan(&n, &last)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, false, err
		}
		before[i] = bridge.FailureCount{Count: int(n), Last: store.FromMillis(last)}
	}
	if !allow(before) {
		return before, false, nil // nothing written: the rollback ends it
	}
	for _, k := range keys {
		if _, err := tx.ExecContext(ctx, `INSERT INTO login_failures (key, failures, last_at) VALUES (?1, 1, ?2)
			ON CONFLICT (key) DO UPDATE SET failures = login_failures.failures + 1, last_at = ?2`, k, store.Millis(at)); err != nil {
			return nil, false, err
		}
	}
	var held int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM login_failures`).Scan(&held); err != nil {
		return nil, false, err
	}
	if held > maxKeys {
		if _, err := tx.ExecContext(ctx, `DELETE FROM login_failures WHERE key IN
			(SELECT key FROM login_failures ORDER BY last_at, key LIMIT ?)`, held-maxKeys*3/4); err != nil {
			return nil, false, err
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, false, err
	}
	return before, true, nil
}

// UndoLoginFailure takes back the failure ChargeLoginFailure counted at at
// against key, whose count before it was before. When no failure was
// counted against the key since, the key is as it was before (gone when it
// had none); otherwise it counts one failure fewer and keeps the later
// failure's time. A key that is gone (forgotten, or dropped to bound the
// table) stays gone.
func (db *Store) UndoLoginFailure(ctx context.Context, at time.Time, key []byte, before bridge.FailureCount) error {
	tx, err := db.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var n, last int64
	err = tx.QueryRowContext(ctx, `SELECT failures, last_at FROM login_failures WHERE key = ?`, key).Scan(&n, &last)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	switch {
	case n == int64(before.Count)+1 && last == store.Millis(at) && before.Count == 0:
		_, err = tx.ExecContext(ctx, `DELETE FROM login_failures WHERE key = ?`, key)
	case n == int64(before.Count)+1 && last == store.Millis(at):
		_, err = tx.ExecContext(ctx, `UPDATE login_failures SET failures = ?, last_at = ? WHERE key = ?`, before.Count, store.Millis(before.Last), key)
	case n <= 1:
		_, err = tx.ExecContext(ctx, `DELETE FROM login_failures WHERE key = ?`, key)
	default:
		_, err = tx.ExecContext(ctx, `UPDATE login_failures SET failures = failures - 1 WHERE key = ?`, key)
	}
	if err != nil {
		return err
	}
	return tx.Commit()
}

// ForgetLoginFailures drops the keys' failures.
func (db *Store) ForgetLoginFailures(ctx context.Context, keys ...[]byte) error {
	tx, err := db.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, k := range keys {
		if _, err := tx.ExecContext(ctx, `DELETE FROM login_failures WHERE key = ?`, k); err != nil {
			return err
		}
	}
	return tx.Commit()
}
