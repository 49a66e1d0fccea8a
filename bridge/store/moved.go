package store

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// MovedName is the file migrate-storage leaves beside a SQLite database
// whose records it copied into PostgreSQL. While it is there, Open refuses
// that database: a platform started on it again would serve what it held
// at the move (tokens revoked since accepted again, installations made
// since unknown) and record what PostgreSQL never sees.
const MovedName = "moved-to-postgresql"

// MarkMoved writes the MovedName file beside the SQLite database at
// dbPath, saying when and where to its records went (where: the target as
// DB.Where names it, never a password).
func MarkMoved(dbPath, where string, at time.Time) error {
	text := fmt.Sprintf("The records of %s were copied into the %s\n"+
		"by switchbridge migrate-storage on %s.\n"+
		"While this file is here, switchbridge refuses to use this SQLite database: what the\n"+
		"platform recorded in PostgreSQL since the copy is not in it. Remove this file to use\n"+
		"it anyway.\n", dbPath, where, at.UTC().Format(time.RFC3339))
	path := filepath.Join(filepath.Dir(dbPath), MovedName)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		return fmt.Errorf("marking %s as moved: %w", dbPath, err)
	}
	return nil
}

// checkNotMoved refuses the database of a data directory that
// migrate-storage moved to PostgreSQL.
func checkNotMoved(dataDir string) error {
	path := filepath.Join(dataDir, MovedName)
	f, err := os.Open(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("data dir %s: reading %s: %w", dataDir, path, err)
	}
	defer f.Close()
	// What the file says is only quoted: its first KiB is plenty.
	body, err := io.ReadAll(io.LimitReader(f, 1<<10))
	if err != nil {
		return fmt.Errorf("data dir %s: reading %s: %w", dataDir, path, err)
	}
	// The file's first two lines say where to and when; they are ours
	// unless somebody edited them, so only a bounded, printable part
	// is quoted.
	said := strings.Join(strings.Fields(firstLines(string(body), 2)), " ")
	if len(said) > 600 || strings.ContainsFunc(said, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		said = "see the file"
	}
	return fmt.Errorf("%s was moved to PostgreSQL (%s): the platform's records since are there, not here. "+
		"Set storage.postgres.dsn_file in the config to that database's DSN file; "+
		"to start on this SQLite database anyway, without what PostgreSQL recorded since the move, remove %s",
		filepath.Join(dataDir, FileName), said, path)
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "\n")
}
