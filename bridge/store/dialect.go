package store

// The two SQL engines the store runs on. Queries are written once, with
// SQLite's "?" and "?N" parameters and SQL both engines accept; on
// PostgreSQL a thin database/sql driver around pgx's rewrites the
// parameters to "$N" (once per query text) and gives transactions the
// meaning they have on SQLite:
//
//   - A write transaction takes one advisory lock when it begins, as
//     SQLite's BEGIN IMMEDIATE takes the database's write lock: write
//     transactions run one at a time across every process, so each
//     read-check-write rule (a refresh token's reuse, a name's
//     uniqueness, the next id) means what it means on SQLite, and no two
//     writers can deadlock on each other's rows.
//   - A read-only transaction is REPEATABLE READ: one snapshot, as a
//     SQLite read transaction sees.
//
// The change log's triggers take the same lock for statements run
// outside a transaction, so the log's order is its commit order: a
// reader's cursor never passes a row that commits later (see the
// PostgreSQL migrations).

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// Dialect names the SQL engine behind a DB.
type Dialect string

// The dialects.
const (
	SQLite   Dialect = "sqlite"
	Postgres Dialect = "postgres"
)

// writeLockKey is the advisory lock every PostgreSQL write transaction
// takes first, and the change log's triggers take for statements outside
// one (it must equal the constant in migrations/postgres). migrateLockKey
// is held, per session, while a process migrates the schema.
const (
	writeLockKey   = 8314317162041730917 // "sbchange", big-endian
	migrateLockKey = 8314334732869791073 // "sbschema"
)

// Dialect returns the engine the store runs on.
func (db *DB) Dialect() Dialect { return db.dialect }

// rebind turns SQLite's parameters into PostgreSQL's: "?N" becomes "$N",
// and a bare "?" the next number after the largest used so far, as SQLite
// numbers them. Quoted strings and identifiers are left alone.
func rebind(q string) string {
	if !strings.Contains(q, "?") {
		return q
	}
	var b strings.Builder
	b.Grow(len(q) + 8)
	highest := 0
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch c {
		case '\'', '"':
			j := i + 1
			for j < len(q) && q[j] != c {
				j++
			}
			if j >= len(q) {
				j = len(q) - 1
			}
			b.WriteString(q[i : j+1])
			i = j
		case '?':
			j := i + 1
			for j < len(q) && q[j] >= '0' && q[j] <= '9' {
				j++
			}
			n := highest + 1
			if j > i+1 {
				n, _ = strconv.Atoi(q[i+1 : j])
			}
			if n > highest {
				highest = n
			}
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			i = j - 1
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// rebound caches rebind's answers: the store's queries are a fixed set.
var rebound sync.Map // string → string

func rebindCached(q string) string {
	if v, ok := rebound.Load(q); ok {
		return v.(string)
	}
	r := rebind(q)
	rebound.Store(q, r)
	return r
}

// pgConnector opens pgx connections wrapped in pgConn.
type pgConnector struct{ inner driver.Connector }

func (c pgConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.inner.Connect(ctx)
	if err != nil {
		return nil, markUnavailable(err)
	}
	return &pgConn{Conn: conn.(*stdlib.Conn)}, nil
}

func (c pgConnector) Driver() driver.Driver { return c.inner.Driver() }

// pgConn is a pgx connection that takes SQLite's parameters and SQLite's
// transaction semantics (see the top of this file), and marks its
// connection-level errors as the database being unavailable
// (unavailable.go).
type pgConn struct{ *stdlib.Conn }

func (c *pgConn) Prepare(q string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), q)
}

func (c *pgConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	return pgStmt{c: c, q: q}, nil
}

func (c *pgConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	res, err := c.exec(ctx, q, args)
	return res, markUnavailable(err)
}

func (c *pgConn) exec(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	q, args = rebindCached(q), intBools(args)
	if c.Conn.Conn().PgConn().TxStatus() != 'I' || !isWrite(q) {
		return c.Conn.ExecContext(ctx, q, args)
	}
	// A write outside a transaction runs in one that takes the write lock
	// first, as every write transaction does: a statement that locked
	// rows before its trigger waited for the lock could deadlock with a
	// transaction holding the lock and waiting for those rows.
	tx, err := c.BeginTx(ctx, driver.TxOptions{})
	if err != nil {
		return nil, err
	}
	res, err := c.Conn.ExecContext(ctx, q, args)
	if err != nil {
		tx.Rollback()
		return nil, err
	}
	return res, tx.Commit()
}

func (c *pgConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	rows, err := c.Conn.QueryContext(ctx, rebindCached(q), intBools(args))
	if err != nil {
		return nil, markUnavailable(err)
	}
	return wrapRows(rows), nil
}

// isWrite reports whether q changes rows.
func isWrite(q string) bool {
	q = strings.TrimSpace(q)
	for _, w := range []string{"INSERT", "UPDATE", "DELETE"} {
		if len(q) >= len(w) && strings.EqualFold(q[:len(w)], w) {
			return true
		}
	}
	return false
}

// intBools passes booleans as SQLite stores them, 1 and 0: the schema's
// flags are integers on both engines, and PostgreSQL will not cast a
// boolean parameter to one.
func intBools(args []driver.NamedValue) []driver.NamedValue {
	for i := range args {
		if b, ok := args[i].Value.(bool); ok {
			if b {
				args[i].Value = int64(1)
			} else {
				args[i].Value = int64(0)
			}
		}
	}
	return args
}

func (c *pgConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *pgConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	tx, err := c.begin(ctx, opts)
	if err != nil {
		return nil, markUnavailable(err)
	}
	return pgTx{tx}, nil
}

func (c *pgConn) begin(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if opts.ReadOnly {
		if sql.IsolationLevel(opts.Isolation) == sql.LevelDefault {
			opts.Isolation = driver.IsolationLevel(sql.LevelRepeatableRead)
		}
		return c.Conn.BeginTx(ctx, opts)
	}
	tx, err := c.Conn.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	if _, err := c.Conn.Conn().Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(writeLockKey)); err != nil {
		tx.Rollback()
		if pgconn.SafeToRetry(err) {
			return nil, driver.ErrBadConn
		}
		return nil, err
	}
	return tx, nil
}

// openPostgres opens a pool of connections to the database at dsn.
func openPostgres(dsn string) (*sql.DB, *pgx.ConnConfig, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		// pgx's message may quote the DSN, password and all.
		return nil, nil, errors.New("postgres: the DSN cannot be parsed: expected postgres://user@host:port/database?options or key=value pairs")
	}
	// A server that does not answer at all (its host gone from the
	// network) must not hold a request for the kernel's TCP timeout: a
	// new connection gives up after this, and the request is answered
	// 503. A DSN's connect_timeout wins.
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = postgresConnectTimeout
	}
	return sql.OpenDB(pgConnector{inner: stdlib.GetConnector(*cfg)}), cfg, nil
}

// pgCode is the SQLSTATE of a PostgreSQL error, "" for any other error.
func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}
