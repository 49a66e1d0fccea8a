// Package store is the storage engine both roles share: it opens the
// database (SQLite in the data directory, pure Go, WAL mode; or, for a
// platform that outgrows one machine, PostgreSQL shared by any number of
// platform processes: dialect.go), brings its one schema up to date
// (migrations/, one folder per dialect, proved identical by
// TestSchemasAgree), checks it for damage, keeps its files private, backs
// it up and copies it to PostgreSQL. It also keeps the value journal and
// its fold into the database, because a backup reads the journal and
// replays what the database lacks into its copy: one `switchbridge
// backup` covers a single box whole. It imports no role. Each role's
// records are a package of that role's over this engine (engine.go): the
// hub's bridge/hub/hubstore, the platform's bridge/platform/accounts, so
// that neither role's code can reach the other's records.
package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

//go:embed migrations/sqlite/*.sql migrations/postgres/*.sql
var migrations embed.FS

// DB is the store.
type DB struct {
	db      *sql.DB
	dialect Dialect
	now     func() time.Time

	// On PostgreSQL: the connection settings, the change log's notices
	// and the goroutine listening for them (postgres.go).
	pg         *pgx.ConnConfig
	notices    *notices
	stopListen context.CancelFunc
	listening  sync.WaitGroup

	// The statements every API request or reported state runs, prepared
	// once: the pure-Go SQLite spends more time preparing a statement than
	// running one of these.
	saveValueStmt, generationStmt *sql.Stmt
	// stmts are the statements the records' packages prepared through
	// Stmt, by query text; stmtMu serialises their preparing.
	stmts  sync.Map
	stmtMu sync.Mutex

	access accessCache

	// path is the database file; damage the first error SQLite gave a
	// query of the hot paths for a damaged file (note), which Ping then
	// reports; checked is when quick_check last ran (unix ms).
	path    string
	damage  atomic.Pointer[DamagedError]
	checked atomic.Int64
}

// quickCheckEvery is how often Ping runs quick_check: the watchdog's
// health check then notices a page damaged while the hub runs, even one no
// request has read yet, within this plus the watchdog's interval.
const quickCheckEvery = 10 * time.Minute

// FileName is the database's name inside the data directory.
const FileName = "switchbridge.db"

// DirMode and FileMode are the modes of the data directory and of every
// file the hub keeps in it: the database holds password hashes, so nothing
// there is for other users, whatever the umask.
const (
	DirMode  fs.FileMode = 0o700
	FileMode fs.FileMode = 0o600
)

// Open opens (creating if need be) the database in dataDir and brings its
// schema up to date. It fails with a clear message when the directory cannot
// be created or written. The directory is made private (DirMode) even when
// it already existed with another mode, as a packaged install or an older
// version may have left it.
func Open(ctx context.Context, dataDir string) (*DB, error) {
	if err := os.MkdirAll(dataDir, DirMode); err != nil {
		return nil, fmt.Errorf("data dir %s: %w", dataDir, err)
	}
	// MkdirAll leaves an existing directory's mode alone, and a new one's
	// is masked by the umask.
	if err := os.Chmod(dataDir, DirMode); err != nil {
		return nil, fmt.Errorf("data dir %s: making it private (%v): %w", dataDir, DirMode, err)
	}
	probe, err := os.CreateTemp(dataDir, ".write-test-*")
	if err != nil {
		return nil, ExplainDiskFull(fmt.Errorf("data dir %s is not writable: %w", dataDir, err), dataDir)
	}
	// One byte, not only an empty file: a full disk still has inodes for
	// one, and must show up here rather than as a failed first command.
	err = probeWrite(probe)
	probe.Close()
	os.Remove(probe.Name())
	if err != nil {
		return nil, ExplainDiskFull(fmt.Errorf("data dir %s: writing a file: %w", dataDir, err), dataDir)
	}
	if err := checkNotLost(dataDir); err != nil {
		return nil, err
	}
	if err := checkNotMoved(dataDir); err != nil {
		return nil, err
	}
	db, err := OpenFile(ctx, filepath.Join(dataDir, FileName))
	if err != nil {
		return nil, ExplainDiskFull(err, dataDir)
	}
	if err := markHadState(dataDir); err != nil {
		db.Close()
		return nil, ExplainDiskFull(fmt.Errorf("data dir %s: %w", dataDir, err), dataDir)
	}
	return db, nil
}

// probeWrite writes to the data dir's probe file; tests replace it to play
// a full disk.
var probeWrite = func(f *os.File) error {
	_, err := f.Write([]byte{'\n'})
	return err
}

// OpenFile opens the database file at path. The database and its -wal and
// -shm files are made private (FileMode).
func OpenFile(ctx context.Context, path string) (*DB, error) {
	if err := privateFiles(path); err != nil {
		return nil, err
	}
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "synchronous(NORMAL)") // WAL + NORMAL: durable across a process kill; a power cut may lose the last commit
	q.Set("_txlock", "immediate")           // writers queue on busy_timeout instead of failing half way
	sdb, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, err
	}
	sdb.SetMaxOpenConns(4)
	db := &DB{db: sdb, dialect: SQLite, now: time.Now, access: accessCache{path: path + "-shm"}, path: path}
	if err := db.checkIntegrity(ctx, path); err != nil {
		sdb.Close()
		return nil, err
	}
	db.checked.Store(time.Now().UnixMilli())
	if err := db.migrate(ctx); err != nil {
		sdb.Close()
		return nil, damaged(fmt.Errorf("opening %s: %w", path, err), path)
	}
	// SQLite has created the -wal and -shm files by now, with the
	// database's own mode; checking costs two stats.
	if err := privateFiles(path); err != nil {
		sdb.Close()
		return nil, err
	}
	if err := db.prepare(ctx); err != nil {
		sdb.Close()
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	return db, nil
}

// prepare prepares the statements of the hot paths.
func (db *DB) prepare(ctx context.Context) error {
	for _, p := range []struct {
		dst *(*sql.Stmt)
		q   string
	}{
		{&db.saveValueStmt, saveSwitchValue},
		{&db.generationStmt, selectAccessGeneration},
	} {
		var err error
		if *p.dst, err = db.db.PrepareContext(ctx, p.q); err != nil {
			return err
		}
	}
	return nil
}

// privateFiles makes the database at path and its -wal and -shm files
// FileMode, creating the database (empty) when it does not exist yet.
// SQLite creates a database with 0644 less the umask, but creates its -wal
// and -shm files with the mode of the database file, whatever the umask
// (unix VFS, "findCreateFileMode"): a private database file keeps the
// files SQLite adds later private too. Files left by an older version or a
// killed process are fixed here.
func privateFiles(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, FileMode)
	if err != nil {
		return fmt.Errorf("opening %s: %w", path, err)
	}
	f.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := chmodPrivate(p); err != nil {
			return err
		}
	}
	return nil
}

// chmodPrivate sets a file the hub keeps to FileMode unless it is already
// (a chmod is a metadata write on an SD card); a file that does not exist is
// fine.
func chmodPrivate(p string) error {
	st, err := os.Stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err == nil && st.Mode().Perm() != FileMode {
		err = os.Chmod(p, FileMode)
	}
	if err != nil {
		return fmt.Errorf("making %s private (%v): %w", p, FileMode, err)
	}
	return nil
}

// Ping checks that the database answers from its tables. "SELECT 1" is
// not enough: it never reads the file, so a damaged database passes it
// while every request fails. Counting walks each table's pages, which a
// hub's few thousand rows make cheap (see BenchmarkOpen).
func (db *DB) Ping(ctx context.Context) error {
	if db.dialect == Postgres {
		return db.pingPostgres(ctx)
	}
	if d := db.damage.Load(); d != nil {
		return d
	}
	var n int64
	if err := db.db.QueryRowContext(ctx, pingQuery).Scan(&n); err != nil {
		return db.note(err)
	}
	if time.Since(time.UnixMilli(db.checked.Load())) < quickCheckEvery {
		return nil
	}
	err := db.checkIntegrity(ctx, db.path)
	var d *DamagedError
	if errors.As(err, &d) {
		db.damage.CompareAndSwap(nil, d)
		return d
	}
	if err == nil {
		db.checked.Store(time.Now().UnixMilli())
	}
	return err
}

// note records err when SQLite gave it for a damaged file, so that Ping
// (the watchdog's health check) fails from then on: a hub that answers 500
// to every request must not report itself healthy. It returns err.
func (db *DB) note(err error) error {
	if c := sqliteCode(err); c == sqliteCorrupt || c == sqliteNotADB {
		db.damage.CompareAndSwap(nil, &DamagedError{Path: db.path, Detail: err.Error()})
	}
	return err
}

const pingQuery = `SELECT (SELECT count(*) FROM users) + (SELECT count(*) FROM user_locations) +
	(SELECT count(*) FROM apps) + (SELECT count(*) FROM app_redirect_uris) +
	(SELECT count(*) FROM installations) + (SELECT count(*) FROM installation_switches) +
	(SELECT count(*) FROM codes) + (SELECT count(*) FROM tokens) + (SELECT count(*) FROM refresh_tokens) +
	(SELECT count(*) FROM switch_states)`

// Close closes the database.
func (db *DB) Close() error {
	for _, st := range []*sql.Stmt{db.saveValueStmt, db.generationStmt} {
		if st != nil {
			st.Close()
		}
	}
	db.stmts.Range(func(_, st any) bool { st.(*sql.Stmt).Close(); return true })
	db.access.mu.Lock()
	db.access.close()
	db.access.mu.Unlock()
	if db.stopListen != nil {
		db.stopListen()
		db.listening.Wait()
	}
	return db.db.Close()
}

func (db *DB) migrate(ctx context.Context) error {
	names, err := fs.Glob(migrations, "migrations/sqlite/*.sql")
	if err != nil {
		return err
	}
	sort.Strings(names)
	var version int
	if err := db.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return err
	}
	if version > len(names) {
		return fmt.Errorf("database schema version %d is newer than this binary knows (%d); use a newer switchbridge", version, len(names))
	}
	for i := version; i < len(names); i++ {
		body, err := migrations.ReadFile(names[i])
		if err != nil {
			return err
		}
		tx, err := db.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, string(body)); err != nil {
			tx.Rollback()
			return fmt.Errorf("migration %s: %w", names[i], err)
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", i+1)); err != nil {
			tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	return nil
}

func unix(t time.Time) int64 { return t.UnixMilli() }

func fromUnix(ms int64) time.Time { return time.UnixMilli(ms) }

// Querier is a database or a transaction: the engine, a *sql.DB or a
// *sql.Tx.
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// QueryStrings runs a query of one text column on d.
func QueryStrings(ctx context.Context, d Querier, q string, args ...any) ([]string, error) {
	rows, err := d.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

func isUnique(err error) bool {
	return err != nil && (pgCode(err) == "23505" || strings.Contains(err.Error(), "UNIQUE constraint failed"))
}

func isForeignKey(err error) bool {
	return err != nil && (pgCode(err) == "23503" || strings.Contains(err.Error(), "FOREIGN KEY constraint failed"))
}
