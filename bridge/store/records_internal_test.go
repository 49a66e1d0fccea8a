package store

import (
	"context"
	"testing"
	"time"
)

// The engine's tests fill the platform's tables with plain statements:
// the platform's rules are bridge/platform/accounts', which imports the
// engine.

// addUser stores a user in location 1 and returns its id.
func addUser(t testing.TB, db *DB, name string, passwordHash []byte) int64 {
	t.Helper()
	ctx := context.Background()
	res, err := db.db.ExecContext(ctx, `INSERT INTO users (name, password_hash, created_at) VALUES (?, ?, ?)`, name, passwordHash, time.Now().UnixMilli())
	if err != nil {
		t.Fatal(err)
	}
	id, _ := res.LastInsertId()
	if _, err := db.db.ExecContext(ctx, `INSERT INTO user_locations (user_id, location_id) VALUES (?, 1)`, id); err != nil {
		t.Fatal(err)
	}
	return id
}

// addToken stores an app of user's, its installation in location 1 and a
// token of it, valid for an hour.
func addToken(t testing.TB, db *DB, user int64, hash []byte) {
	t.Helper()
	ctx := context.Background()
	now := time.Now().UnixMilli()
	for _, q := range []struct {
		q    string
		args []any
	}{
		{`INSERT INTO apps (client_id, name, secret_hash, owner_id, published, created_at) VALUES ('c', 'C', ?, ?, 1, ?)`, []any{[]byte("s"), user, now}},
		{`INSERT INTO installations (id, client_id, user_id, location_id, created_at, updated_at) VALUES ('inst-1', 'c', ?, 1, ?, ?)`, []any{user, now, now}},
		{`INSERT INTO tokens (hash, installation_id, created_at, expires_at) VALUES (?, 'inst-1', ?, ?)`, []any{hash, now, now + time.Hour.Milliseconds()}},
	} {
		if _, err := db.db.ExecContext(ctx, q.q, q.args...); err != nil {
			t.Fatal(err)
		}
	}
}
