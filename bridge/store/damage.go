package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// What the store does when the data directory is not what the hub left
// there: it refuses to start rather than serve from a damaged database
// (every request would fail while the hub looks healthy) or start afresh
// beside the remains of a hub that had users, apps and tokens (every client
// would get 401 with nothing in the log to say why). Each refusal names the
// file and points at "Backups and restore" in systemd/README.md.

// MarkerName is a file the store writes into the data directory once its
// database exists: from then on a missing or empty database is a loss to
// report, not a first start.
const MarkerName = "switchbridge.initialized"

const markerText = `This data directory belongs to a switchbridge hub.
While this file is here, switchbridge refuses to start when switchbridge.db
is missing or empty, rather than start again as a new, empty hub.
See "Backups and restore" in systemd/README.md.
`

const restoreHint = `restore it from a backup (see "Backups and restore" in systemd/README.md)`

// checkNotLost refuses a missing or empty database in a data directory that
// shows the hub had state: the marker, the value journal or a WAL file.
// An empty directory passes: that is a first start.
func checkNotLost(dataDir string) error {
	path := filepath.Join(dataDir, FileName)
	st, err := os.Stat(path)
	state := "missing"
	switch {
	case err == nil && st.Size() > 0:
		return nil
	case err == nil:
		state = "empty"
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("database %s: %w", path, err)
	}
	for _, name := range []string{MarkerName, JournalName, FileName + "-wal"} {
		if _, err := os.Stat(filepath.Join(dataDir, name)); err == nil {
			return fmt.Errorf("database %s is %s, but %s is there, so this hub had users, apps and tokens: "+
				"refusing to start as a new, empty hub. Stop it and %s; to start over with nothing, move the data directory %s aside",
				path, state, filepath.Join(dataDir, name), restoreHint, dataDir)
		}
	}
	return nil
}

// markHadState writes the marker once.
func markHadState(dataDir string) error {
	path := filepath.Join(dataDir, MarkerName)
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil // another command wrote it just now
	}
	if err != nil {
		return err
	}
	_, err = f.WriteString(markerText)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path) // half a marker is worse than none: the next start writes it again
	}
	return err
}

// checkIntegrity runs SQLite's quick_check (every page's structure, not the
// indexes' contents against their tables): a hub of 10,000 installations
// takes about 20 ms on a PC, a few hundred on a Pi (see BenchmarkOpen).
func (db *DB) checkIntegrity(ctx context.Context, path string) error {
	rows, err := db.db.QueryContext(ctx, "PRAGMA quick_check")
	if err != nil {
		return damaged(fmt.Errorf("checking %s: %w", path, err), path)
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return damaged(fmt.Errorf("checking %s: %w", path, err), path)
		}
		if line != "ok" && len(problems) < 3 { // a few say enough; a wrecked file has thousands
			problems = append(problems, line)
		}
	}
	if err := rows.Err(); err != nil {
		return damaged(fmt.Errorf("checking %s: %w", path, err), path)
	}
	if len(problems) > 0 {
		return &DamagedError{Path: path, Detail: strings.Join(problems, "; ")}
	}
	return nil
}

// DamagedError is a database file SQLite finds corrupt.
type DamagedError struct {
	Path   string
	Detail string // what SQLite found
}

func (e *DamagedError) Error() string {
	return fmt.Sprintf("database %s is damaged (%s): the hub will not start on it. Stop it and %s, "+
		"or move the file aside to start with no users, apps or tokens", e.Path, oneLine(e.Detail), restoreHint)
}

// SQLite's primary result codes for a damaged file, a file that is not a
// database, and a full disk.
const (
	sqliteCorrupt = 11
	sqliteFull    = 13
	sqliteNotADB  = 26
)

func sqliteCode(err error) int {
	var se interface{ Code() int }
	if errors.As(err, &se) {
		return se.Code() & 0xff // extended codes keep the primary one in the low byte
	}
	return 0
}

// damaged turns an error SQLite gives for a corrupt file into a
// DamagedError; others pass unchanged.
func damaged(err error, path string) error {
	if c := sqliteCode(err); c == sqliteCorrupt || c == sqliteNotADB {
		return &DamagedError{Path: path, Detail: err.Error()}
	}
	return err
}

// IsDiskFull reports whether err comes from a full disk: ENOSPC from the
// kernel or SQLITE_FULL from SQLite.
func IsDiskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || sqliteCode(err) == sqliteFull
}

// DiskFullError is an error caused by a full disk, said in plain words.
type DiskFullError struct {
	Dir string
	Err error
}

func (e *DiskFullError) Error() string {
	return fmt.Sprintf("no space left on device: the file system holding %s is full; free some space and start again (%s)", e.Dir, oneLine(e.Err.Error()))
}

func (e *DiskFullError) Unwrap() error { return e.Err }

// ExplainDiskFull wraps an error caused by a full disk in a DiskFullError
// (once); other errors pass unchanged.
func ExplainDiskFull(err error, dir string) error {
	var dfe *DiskFullError
	if err == nil || !IsDiskFull(err) || errors.As(err, &dfe) {
		return err
	}
	return &DiskFullError{Dir: dir, Err: err}
}

// oneLine keeps a message on one log line: errors.Join and SQLite's
// messages may carry newlines.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
