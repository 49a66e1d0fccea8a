package accounts

import (
	"context"
	"database/sql"

	"github.com/switchbridge/switchbridge/bridge/store"
)

// preparedRow runs q, which the engine prepares once (store.DB.Stmt),
// for at most one row. Should preparing fail, q runs unprepared, and its
// error is the query's.
func (db *Store) preparedRow(ctx context.Context, q string, args ...any) *sql.Row {
	st, err := db.db.Stmt(ctx, q)
	if err != nil {
		return db.db.QueryRowContext(ctx, q, args...)
	}
	return st.QueryRowContext(ctx, args...)
}

// prepared runs q, which the engine prepares once.
func (db *Store) prepared(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	st, err := db.db.Stmt(ctx, q)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

// strings runs a query of one text column.
func (db *Store) strings(ctx context.Context, q string, args ...any) ([]string, error) {
	return store.QueryStrings(ctx, db.db, q, args...)
}
