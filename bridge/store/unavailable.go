package store

// A PostgreSQL that cannot be reached for the moment (restarting, failed
// over, out of connections) is the domain's EUNAVAILABLE: the platform
// answers 503 with Retry-After, and clients call again, rather than 500
// for what is no fault of the request or of the platform's code. The
// errors are marked where they leave pgx, in the driver that wraps it
// (dialect.go), so every query of the store is covered by one rule.

import (
	"context"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/switchbridge/switchbridge/bridge"
)

// unavailableRetry is the Retry-After of a request that met the database
// away: a restart of PostgreSQL takes about that long. A hub calls again
// sooner than its back-off for a Retry-After this short.
const unavailableRetry = 2 * time.Second

// unavailableError is a connection-level error of PostgreSQL. It is a
// *bridge.Error with code EUNAVAILABLE for the daemon (errors.As), and its
// cause for database/sql, which must still see driver.ErrBadConn to try
// another connection.
type unavailableError struct {
	cause  error
	domain *bridge.Error
}

func (e *unavailableError) Error() string {
	return "postgres: the database is unavailable: " + e.cause.Error()
}

func (e *unavailableError) Unwrap() []error { return []error{e.domain, e.cause} }

// markUnavailable returns err marked as the database being unavailable
// when it is a connection-level error, else err as it is.
func markUnavailable(err error) error {
	var done *unavailableError
	if err == nil || errors.As(err, &done) || !connectionLevel(err) {
		return err
	}
	return &unavailableError{cause: err, domain: &bridge.Error{Code: bridge.EUNAVAILABLE, RetryAfter: unavailableRetry,
		Message: "the service's database cannot be reached at the moment; try again shortly"}}
}

// connectionLevel reports whether err says the server cannot be reached or
// will not take work now, rather than that a statement failed: a refused
// or broken connection, a failed connection attempt (whatever its reason:
// the process can no longer reach its database), or the server shutting
// down, starting up or out of connections. A cancelled or timed-out
// request is the request's, not the database's.
func connectionLevel(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case strings.HasPrefix(pe.Code, "08"): // connection exception
		case pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03": // admin_shutdown, crash_shutdown, cannot_connect_now
		case pe.Code == "53300": // too_many_connections
		default:
			return false
		}
		return true
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.Is(err, driver.ErrBadConn) || errors.As(err, &ce) || errors.As(err, &ne) ||
		errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// pgTx marks the errors of a transaction's end.
type pgTx struct{ driver.Tx }

func (t pgTx) Commit() error   { return markUnavailable(t.Tx.Commit()) }
func (t pgTx) Rollback() error { return markUnavailable(t.Tx.Rollback()) }

// pgStmt is a prepared statement on PostgreSQL: the query, run through
// its connection like any other (pgx prepares and caches each query per
// connection by itself), so that it too gets SQLite's parameters and
// booleans, the write lock outside a transaction and its errors marked.
type pgStmt struct {
	c *pgConn
	q string
}

func (s pgStmt) Close() error  { return nil }
func (s pgStmt) NumInput() int { return -1 }

func (s pgStmt) Exec(args []driver.Value) (driver.Result, error) {
	return nil, errors.New("store: Exec without a context")
}

func (s pgStmt) Query(args []driver.Value) (driver.Rows, error) {
	return nil, errors.New("store: Query without a context")
}

func (s pgStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	return s.c.ExecContext(ctx, s.q, args)
}

func (s pgStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	return s.c.QueryContext(ctx, s.q, args)
}

// pgRows marks the errors of reading a result, which may come after the
// query was answered (the connection breaking mid-result).
type pgRows struct{ *stdlib.Rows }

func (r pgRows) Next(dest []driver.Value) error {
	err := r.Rows.Next(dest)
	if err == io.EOF {
		return err // the end of the rows, as database/sql expects it
	}
	return markUnavailable(err)
}

func wrapRows(rows driver.Rows) driver.Rows {
	if r, ok := rows.(*stdlib.Rows); ok {
		return pgRows{r}
	}
	return rows
}
