package store

// Opening the store on PostgreSQL: connecting, and bringing the schema up
// to date under a lock, so that two platform processes starting at once do
// not both migrate.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// PostgresPoolSize bounds one process's connections to PostgreSQL: a
// platform process's queries are short, and a server's max_connections
// (100 by default) must hold every process's pool.
const PostgresPoolSize = 16

// postgresConnectTimeout bounds the first attempt to reach the server at
// start (a variable for tests).
var postgresConnectTimeout = 10 * time.Second

// OpenPostgres opens the store in the PostgreSQL database at dsn, creating
// or migrating its schema. It refuses, without changing anything, a
// database that cannot be reached, one holding tables that are not
// switchbridge's, and one whose schema is newer than this binary knows.
// Errors never quote the DSN: it may hold a password.
func OpenPostgres(ctx context.Context, dsn string) (*DB, error) {
	sdb, cfg, err := openPostgres(dsn)
	if err != nil {
		return nil, err
	}
	sdb.SetMaxOpenConns(PostgresPoolSize)
	sdb.SetMaxIdleConns(PostgresPoolSize)
	sdb.SetConnMaxIdleTime(5 * time.Minute)
	db := &DB{db: sdb, dialect: Postgres, now: time.Now, pg: cfg}
	pctx, cancel := context.WithTimeout(ctx, postgresConnectTimeout)
	err = sdb.PingContext(pctx)
	timedOut := errors.Is(pctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil
	cancel()
	if err != nil {
		sdb.Close()
		return nil, explainConnect(err, cfg, timedOut)
	}
	if err := db.migratePostgres(ctx); err != nil {
		sdb.Close()
		return nil, err
	}
	if err := db.prepare(ctx); err != nil {
		sdb.Close()
		return nil, fmt.Errorf("postgres: %w", err)
	}
	db.notices = newNotices()
	lctx, stop := context.WithCancel(context.Background())
	db.stopListen = stop
	db.listening.Add(1)
	go db.listen(lctx)
	return db, nil
}

// changesChannel is the channel the change log's triggers notify at
// commit (migrations/postgres).
const changesChannel = "switchbridge_changes"

// notices hands out a channel closed at the next change: every waiter of
// the moment wakes, whichever process wrote.
type notices struct {
	mu sync.Mutex
	ch chan struct{}
}

func newNotices() *notices { return &notices{ch: make(chan struct{})} }

func (n *notices) next() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ch
}

func (n *notices) wake() {
	n.mu.Lock()
	defer n.mu.Unlock()
	close(n.ch)
	n.ch = make(chan struct{})
}

// ChangeNotice returns a channel closed when the change log next grows,
// whichever process wrote it: on PostgreSQL, a NOTIFY the log's triggers
// send at commit. It is nil on SQLite, where readers poll (a nil channel
// never fires). A notice only wakes a reader: the log is what it reads,
// and NOTIFY is never replayed, so readers keep polling too, more slowly.
// The channel is also closed after the listening connection was lost and
// made again, since notices may have been missed meanwhile.
func (db *DB) ChangeNotice() <-chan struct{} {
	if db.notices == nil {
		return nil
	}
	return db.notices.next()
}

// listen holds a connection of its own LISTENing for the change log's
// notices, and makes it again with back-off when it is lost, until ctx
// ends.
func (db *DB) listen(ctx context.Context) {
	defer db.listening.Done()
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		conn, err := pgx.ConnectConfig(ctx, db.pg)
		if err == nil {
			if _, err = conn.Exec(ctx, "LISTEN "+changesChannel); err == nil {
				backoff = 100 * time.Millisecond
				db.notices.wake() // what came while not listening
				for {
					if _, err = conn.WaitForNotification(ctx); err != nil {
						break
					}
					db.notices.wake()
				}
			}
			conn.Close(context.Background())
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// PostgresSchemaVersion is the schema version this binary brings a
// PostgreSQL database to: the number of its PostgreSQL migrations.
func PostgresSchemaVersion() int {
	names, _ := fs.Glob(migrations, "migrations/postgres/*.sql")
	return len(names)
}

// migratePostgres applies the PostgreSQL migrations the database lacks,
// each in its own transaction (PostgreSQL's DDL is transactional: a
// migration that fails leaves nothing behind), holding migrateLockKey so
// that a second process waits, then finds the schema current.
func (db *DB) migratePostgres(ctx context.Context) error {
	names, err := fs.Glob(migrations, "migrations/postgres/*.sql")
	if err != nil {
		return err
	}
	sort.Strings(names)
	conn, err := db.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock(?)", int64(migrateLockKey)); err != nil {
		return fmt.Errorf("postgres: waiting for another process's migration: %w", err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock(?)", int64(migrateLockKey))

	version, err := postgresVersion(ctx, conn)
	if err != nil {
		return err
	}
	if version > len(names) {
		return fmt.Errorf("postgres: the database's schema version %d is newer than this binary knows (%d); use a newer switchbridge", version, len(names))
	}
	for i := version; i < len(names); i++ {
		body, err := migrations.ReadFile(names[i])
		if err != nil {
			return err
		}
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("postgres: %w", err)
		}
		_, err = tx.ExecContext(ctx, string(body))
		if err == nil {
			_, err = tx.ExecContext(ctx, "DELETE FROM schema_version")
		}
		if err == nil {
			_, err = tx.ExecContext(ctx, "INSERT INTO schema_version (version) VALUES (?)", i+1)
		}
		if err == nil {
			err = tx.Commit()
		}
		if err != nil {
			tx.Rollback()
			return fmt.Errorf("postgres: migration %s: %w", strings.TrimPrefix(names[i], "migrations/"), err)
		}
	}
	return nil
}

// postgresVersion reads the schema version: 0 for an empty database. A
// database holding tables but no schema_version belongs to something else.
func postgresVersion(ctx context.Context, conn *sql.Conn) (int, error) {
	var hasVersion bool
	if err := conn.QueryRowContext(ctx, "SELECT to_regclass('schema_version') IS NOT NULL").Scan(&hasVersion); err != nil {
		return 0, fmt.Errorf("postgres: %w", err)
	}
	if !hasVersion {
		var tables int
		if err := conn.QueryRowContext(ctx, `SELECT count(*) FROM information_schema.tables
			WHERE table_schema = current_schema()`).Scan(&tables); err != nil {
			return 0, fmt.Errorf("postgres: %w", err)
		}
		if tables > 0 {
			return 0, errors.New("postgres: the database holds tables but no switchbridge schema: give switchbridge a database of its own (CREATE DATABASE switchbridge)")
		}
		return 0, nil
	}
	var version int
	err := conn.QueryRowContext(ctx, "SELECT version FROM schema_version").Scan(&version)
	if err != nil {
		return 0, fmt.Errorf("postgres: reading the schema version: %w", err)
	}
	return version, nil
}

// pingPostgres is Ping on PostgreSQL: the server answers from a table of
// ours. Damage to the files is PostgreSQL's to detect and report.
func (db *DB) pingPostgres(ctx context.Context) error {
	var v int
	return db.db.QueryRowContext(ctx, "SELECT version FROM schema_version").Scan(&v)
}
