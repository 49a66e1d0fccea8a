package store

// What a package keeping a role's records over the engine
// (bridge/hub/hubstore, bridge/platform/accounts) builds on: the engine's
// queries and its prepared statements, times as the tables store them,
// its noting of a damaged file and its reading of constraint errors.
// Such a package reaches the database through these alone, never through
// a *sql.DB, so that opening, closing, pooling and preparing stay the
// engine's.

import (
	"context"
	"database/sql"
	"time"
)

// ExecContext runs a statement that returns no rows.
func (db *DB) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return db.db.ExecContext(ctx, q, args...)
}

// QueryContext runs a query.
func (db *DB) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return db.db.QueryContext(ctx, q, args...)
}

// QueryRowContext runs a query of at most one row.
func (db *DB) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	return db.db.QueryRowContext(ctx, q, args...)
}

// Stmt returns q prepared, preparing it on its first use: the statements
// every API request runs (a token's check, an installation's read), for
// the pure-Go SQLite spends more time preparing a statement than running
// one of these. Close closes them.
func (db *DB) Stmt(ctx context.Context, q string) (*sql.Stmt, error) {
	if st, ok := db.stmts.Load(q); ok {
		return st.(*sql.Stmt), nil
	}
	db.stmtMu.Lock()
	defer db.stmtMu.Unlock()
	if st, ok := db.stmts.Load(q); ok {
		return st.(*sql.Stmt), nil
	}
	st, err := db.db.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	db.stmts.Store(q, st)
	return st, nil
}

// BeginTx begins a transaction: a write transaction takes the
// database's write lock at once, on either dialect (dialect.go).
func (db *DB) BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error) {
	return db.db.BeginTx(ctx, opts)
}

// Note records err when SQLite gave it for a damaged file, so that Ping
// (the watchdog's health check) fails from then on; it returns err.
func (db *DB) Note(err error) error { return db.note(err) }

// Millis is t as the tables store it: milliseconds since the epoch.
func Millis(t time.Time) int64 { return unix(t) }

// FromMillis is the time a table stored as Millis.
func FromMillis(ms int64) time.Time { return fromUnix(ms) }

// IsUnique reports whether err is a uniqueness constraint's, on either
// dialect.
func IsUnique(err error) bool { return isUnique(err) }

// IsForeignKey reports whether err is a foreign key constraint's, on
// either dialect.
func IsForeignKey(err error) bool { return isForeignKey(err) }
