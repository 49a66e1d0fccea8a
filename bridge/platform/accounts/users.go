package accounts

import (
	"context"
	"database/sql"
	"errors"
	"strings"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/store"
)

// CreateUser adds a user, with an id no user had before (migration
// 0012). ECONFLICT when the name is taken.
func (db *Store) CreateUser(ctx context.Context, name string, passwordHash []byte, locations []int64) (*bridge.User, error) {
	now := db.now()
	tx, err := db.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	var id int64
	err = tx.QueryRowContext(ctx, `INSERT INTO users (id, name, password_hash, created_at)
		VALUES ((SELECT value + 1 FROM id_high_water WHERE name = 'users'), ?, ?, ?) RETURNING id`, name, passwordHash, store.Millis(now)).Scan(&id)
	if err != nil {
		if store.IsUnique(err) {
			return nil, bridge.Errorf(bridge.ECONFLICT, "user %q exists already", name)
		}
		return nil, err
	}
	for _, l := range dedupe(locations) {
		if _, err := tx.ExecContext(ctx, `INSERT INTO user_locations (user_id, location_id) VALUES (?, ?)`, id, l); err != nil {
			return nil, err
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	return &bridge.User{ID: id, Name: name, PasswordHash: passwordHash, Locations: dedupe(locations), CreatedAt: store.FromMillis(store.Millis(now))}, nil
}

func dedupe(ids []int64) []int64 {
	seen := map[int64]bool{}
	var out []int64
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// UserByName returns a user; ENOTFOUND when there is none.
func (db *Store) UserByName(ctx context.Context, name string) (*bridge.User, error) {
	return db.user(ctx, `WHERE name = ?`, name)
}

// UserByID returns a user; ENOTFOUND when there is none.
func (db *Store) UserByID(ctx context.Context, id int64) (*bridge.User, error) {
	return db.user(ctx, `WHERE id = ?`, id)
}

func (db *Store) user(ctx context.Context, where string, arg any) (*bridge.User, error) {
	u := &bridge.User{}
	var created int64
	err := db.db.QueryRowContext(ctx, `SELECT id, name, password_hash, created_at, owner FROM users `+where, arg).
		Scan(&u.ID, &u.Name, &u.PasswordHash, &created, &u.Owner)
	if errors.Is(err, sql.ErrNoRows) {
		if name, ok := arg.(string); ok {
			return nil, bridge.Errorf(bridge.ENOTFOUND, "no user %q", name)
		}
		return nil, bridge.Errorf(bridge.ENOTFOUND, "no user with id %v", arg)
	}
	if err != nil {
		return nil, err
	}
	u.CreatedAt = store.FromMillis(created)
	u.Locations, err = db.userLocations(ctx, u.ID)
	return u, err
}

func (db *Store) userLocations(ctx context.Context, id int64) ([]int64, error) {
	rows, err := db.db.QueryContext(ctx, `SELECT location_id FROM user_locations WHERE user_id = ? ORDER BY location_id`, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var l int64
		if err := rows.Scan(&l); err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, rows.Err()
}

// MemberOf reports whether user id belongs to location loc; false for a
// user that does not exist.
func (db *Store) MemberOf(ctx context.Context, id, loc int64) (bool, error) {
	var one int
	err := db.preparedRow(ctx, selectMember, id, loc).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, db.db.Note(err)
}

const selectMember = `SELECT 1 FROM user_locations WHERE user_id = ? AND location_id = ?`

// Users lists every user by name.
func (db *Store) Users(ctx context.Context) ([]*bridge.User, error) {
	rows, err := db.db.QueryContext(ctx, `SELECT name FROM users ORDER BY name`)
	if err != nil {
		return nil, err
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return nil, err
		}
		names = append(names, n)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := make([]*bridge.User, 0, len(names))
	for _, n := range names {
		u, err := db.UserByName(ctx, n)
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}

// SetPassword replaces a user's password hash; ENOTFOUND for no such user.
func (db *Store) SetPassword(ctx context.Context, name string, passwordHash []byte) error {
	res, err := db.db.ExecContext(ctx, `UPDATE users SET password_hash = ? WHERE name = ?`, passwordHash, name)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return bridge.Errorf(bridge.ENOTFOUND, "no user %q", name)
	}
	return nil
}

// SetOwner makes a user an owner, who may use the console, or takes that
// away (migration 0027); ENOTFOUND for no such user. The flag is the
// platform's alone: no hub is told of it.
func (db *Store) SetOwner(ctx context.Context, name string, owner bool) error {
	res, err := db.db.ExecContext(ctx, `UPDATE users SET owner = ? WHERE name = ?`, owner, name)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return bridge.Errorf(bridge.ENOTFOUND, "no user %q", name)
	}
	return nil
}

// DeleteUser removes a user with their memberships and installations (and
// so the installations' tokens). A user who owns apps is refused with
// ECONFLICT naming them: their apps serve other users, so deleting the
// developer must not silently uninstall those; delete the apps first.
// ENOTFOUND for no such user.
func (db *Store) DeleteUser(ctx context.Context, name string) error {
	tx, err := db.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var id int64
	err = tx.QueryRowContext(ctx, `SELECT id FROM users WHERE name = ?`, name).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return bridge.Errorf(bridge.ENOTFOUND, "no user %q", name)
	}
	if err != nil {
		return err
	}
	rows, err := tx.QueryContext(ctx, `SELECT client_id FROM apps WHERE owner_id = ? ORDER BY created_at, client_id`, id)
	if err != nil {
		return err
	}
	var owned []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			rows.Close()
			return err
		}
		owned = append(owned, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if len(owned) > 0 {
		return bridge.Errorf(bridge.ECONFLICT, "user %q owns app(s) %s; delete those first (app delete ID)", name, strings.Join(owned, ", "))
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM users WHERE id = ?`, id); err != nil {
		return err
	}
	return tx.Commit()
}

// AddUserLocation makes a user a member of a location; adding one they
// belong to already is no change. ENOTFOUND for no such user.
func (db *Store) AddUserLocation(ctx context.Context, name string, loc int64) error {
	res, err := db.db.ExecContext(ctx, `INSERT INTO user_locations (user_id, location_id) SELECT id, ? FROM users WHERE name = ?
		ON CONFLICT DO NOTHING`, loc, name)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		if _, err := db.UserByName(ctx, name); err != nil {
			return err
		}
	}
	return nil
}

// RemoveUserLocation ends a user's membership of a location and, in the
// same transaction, uninstalls everything they installed there: those
// installations reach no switch any more and would only linger on the
// connected apps page. It returns how many it uninstalled. ENOTFOUND for no
// such user or no such membership.
func (db *Store) RemoveUserLocation(ctx context.Context, name string, loc int64) (int, error) {
	tx, err := db.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	var id int64
	err = tx.QueryRowContext(ctx, `SELECT id FROM users WHERE name = ?`, name).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, bridge.Errorf(bridge.ENOTFOUND, "no user %q", name)
	}
	if err != nil {
		return 0, err
	}
	res, err := tx.ExecContext(ctx, `DELETE FROM user_locations WHERE user_id = ? AND location_id = ?`, id, loc)
	if err != nil {
		return 0, err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return 0, bridge.Errorf(bridge.ENOTFOUND, "user %q does not belong to location %d", name, loc)
	}
	res, err = tx.ExecContext(ctx, `DELETE FROM installations WHERE user_id = ? AND location_id = ?`, id, loc)
	if err != nil {
		return 0, err
	}
	n, _ := res.RowsAffected()
	return int(n), tx.Commit()
}
