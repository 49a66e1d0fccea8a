package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// Backup writes a consistent copy of the hub's state to dst, while the
// daemon runs or not: one snapshot of the database (VACUUM INTO, a single
// read transaction, so it never sees half a command) with the values of the
// value journal the snapshot lacks folded in (and the audit records
// journaled with them), so the copy is one
// self-contained database file. Under a running daemon the snapshot
// records how far the journal was folded into it (JournalMark), and every
// journal line past that, read after the snapshot in the same journal
// generation, is newer than anything in the snapshot (see snapshot). The copy must pass
// quick_check before it takes dst's name; an existing dst is never
// overwritten.
func (db *DB) Backup(ctx context.Context, dataDir, dst string) (values int, err error) {
	if db.dialect == Postgres {
		return 0, ErrBackupElsewhere
	}
	if _, err := os.Lstat(dst); err == nil {
		return 0, fmt.Errorf("%s exists already; choose a new name", dst)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return 0, err
	}
	tmp := dst + ".partial"
	os.Remove(tmp) // left by a backup that was interrupted
	defer func() {
		if err != nil {
			os.Remove(tmp)
		}
	}()
	journal, err := db.snapshot(ctx, dataDir, tmp, dst)
	if err != nil {
		return 0, err
	}
	cp, err := OpenFile(ctx, tmp)
	if err != nil {
		return 0, fmt.Errorf("checking the copy: %w", err)
	}
	closeCopy := sync.OnceValue(cp.Close)
	defer closeCopy()
	if journal != nil {
		fold, ok, err := cp.journalFold(ctx)
		if err != nil {
			return 0, err
		}
		vs := journal.unfolded(fold, ok)
		recs := journal.unfoldedAudit(fold, ok) // the audit records of the same commands
		if len(vs) > 0 || len(recs) > 0 {
			// Recorded as folded, so that restoring the copy beside the same
			// journal does not replay these lines a second time.
			var end int64
			if len(journal.Ends) > 0 {
				end = journal.Ends[len(journal.Ends)-1]
			}
			if len(journal.AuditEnds) > 0 {
				end = max(end, journal.AuditEnds[len(journal.AuditEnds)-1])
			}
			if err := cp.FoldJournalAudited(ctx, vs, recs, JournalMark{Generation: journal.Generation, Size: end}); err != nil {
				return 0, ExplainDiskFull(fmt.Errorf("adding the journal's values to the copy: %w", err), filepath.Dir(dst))
			}
		}
		values = len(vs)
	}
	if err := cp.checkIntegrity(ctx, tmp); err != nil {
		return 0, err
	}
	// Closing the last connection folds the copy's WAL into the file and
	// removes it: the copy is one file.
	if err := closeCopy(); err != nil {
		return 0, err
	}
	if _, err := os.Stat(tmp + "-wal"); err == nil {
		return 0, fmt.Errorf("the copy %s still has a WAL file beside it", tmp)
	}
	if err := syncFile(tmp); err != nil {
		return 0, ExplainDiskFull(err, filepath.Dir(dst))
	}
	if err := os.Rename(tmp, dst); err != nil {
		return 0, err
	}
	return values, syncFile(filepath.Dir(dst))
}

// snapshotTries bounds how often Backup takes its snapshot again because
// the journal started a new generation meanwhile.
const snapshotTries = 5

// snapshot copies the database into tmp and reads the value journal as it
// stands after the copy. A daemon that stores a batch between the copy and
// the read empties the journal and starts a new generation, and the copy
// would then lack that batch's values while the journal no longer has
// them; so the journal is read before the copy too, and the copy is taken
// again until both reads see the same generation.
func (db *DB) snapshot(ctx context.Context, dataDir, tmp, dst string) (*parsedJournal, error) {
	for try := 1; ; try++ {
		before, err := readJournalFile(dataDir)
		if err != nil {
			return nil, fmt.Errorf("reading the value journal: %w", err)
		}
		os.Remove(tmp)
		if err := createPrivate(tmp); err != nil {
			return nil, ExplainDiskFull(err, filepath.Dir(dst))
		}
		// VACUUM INTO writes into an empty file and keeps its mode.
		if _, err := db.db.ExecContext(ctx, "VACUUM INTO ?", tmp); err != nil {
			return nil, ExplainDiskFull(fmt.Errorf("copying the database to %s: %w", tmp, err), filepath.Dir(dst))
		}
		afterCopy(tmp)
		after, err := readJournalFile(dataDir)
		if err != nil {
			return nil, fmt.Errorf("reading the value journal: %w", err)
		}
		if generation(before) == generation(after) {
			return after, nil
		}
		if try == snapshotTries {
			return nil, fmt.Errorf("the value journal started anew during each of %d copies; try again", snapshotTries)
		}
	}
}

// afterCopy runs once the snapshot is in the copy, before the second read
// of the journal and before the copy is opened; tests replace it to play a
// daemon storing a batch just then, or to look at the copy's mode.
var afterCopy = func(tmp string) {}

// generation is a journal's generation; 0 for no journal.
func generation(p *parsedJournal) int64 {
	if p == nil {
		return 0
	}
	return p.Generation
}

// createPrivate creates the empty file path with FileMode, whatever the
// umask: SQLite would create it 0644 less the umask, so a copy of the
// password hashes would be readable by others until it is opened as a
// database, which tightens it. O_EXCL follows no link planted there.
func createPrivate(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, FileMode)
	if err != nil {
		return fmt.Errorf("creating %s: %w", path, err)
	}
	defer f.Close()
	if err := f.Chmod(FileMode); err != nil {
		return fmt.Errorf("making %s private (%v): %w", path, FileMode, err)
	}
	return nil
}

// syncFile flushes a file or a directory (a rename) to the disk.
func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// ErrBackupElsewhere is Backup's answer on PostgreSQL, whose own tools
// make consistent copies of a running database.
var ErrBackupElsewhere = errors.New("the platform's records are in PostgreSQL: back them up with pg_dump (see \"Backups and restore\" in systemd/README.md)")
