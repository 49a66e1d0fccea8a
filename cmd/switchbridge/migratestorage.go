package main

// migrate-storage: a platform's one move from SQLite to PostgreSQL. The
// one command besides backup that names the storage engines, since it
// takes one of each; the copy itself is the store's (CopyToPostgres).

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/bridge/store"
)

func migrateStorage(fs *flag.FlagSet) func(*invocation) error {
	from := fs.String("from", "", "the `SOURCE`: sqlite:PATH, PATH a data directory or its "+store.FileName+" (default: sqlite: and the config's data_dir)")
	to := fs.String("to", "", "the `TARGET`: postgres, the database of storage.postgres.dsn_file or --to-dsn-file")
	dsnFile := fs.String("to-dsn-file", "", "the `FILE` holding the PostgreSQL connection string (default: the config's storage.postgres.dsn_file)")
	return func(c *invocation) error {
		if *to != "postgres" {
			return usageErr("--to takes postgres (the only engine a platform moves to), not %q", *to)
		}
		engine, path, _ := strings.Cut(*from, ":")
		if *from == "" {
			engine = "sqlite"
		}
		if engine != "sqlite" {
			return usageErr("--from takes sqlite:PATH, not %q", *from)
		}
		cfg, err := loadConfig(c.configPath)
		if err != nil {
			return err
		}
		if err := cfg.RefuseMoveToPostgres(); err != nil {
			return err
		}
		if path == "" {
			path = cfg.DataDir
		}
		dbPath, err := sqliteFile(path)
		if err != nil {
			return err
		}
		// The copy reads one snapshot: whatever a running platform wrote
		// after it would be lost with the switch to PostgreSQL.
		if pid, inUse, err := store.InUse(dbPath); err != nil {
			return fmt.Errorf("checking whether %s is in use: %w", dbPath, err)
		} else if inUse {
			return fmt.Errorf("%s is open in process %d (a running switchbridge, or one of its commands): stop the platform first (sudo systemctl stop switchbridge), "+
				"or what it writes after the copy is lost", dbPath, pid)
		}
		pg := cfg.Storage.Postgres
		if *dsnFile != "" {
			pg = &config.Postgres{DSNFile: *dsnFile}
		}
		if pg == nil {
			return fmt.Errorf("no PostgreSQL database to move to: set storage.postgres.dsn_file in %s, or give --to-dsn-file FILE", cfg.File)
		}
		dsn, err := pg.ReadDSN()
		if err != nil {
			return err
		}
		src, err := store.OpenFile(c.ctx, dbPath)
		if err != nil {
			return err
		}
		defer src.Close()
		dst, err := store.OpenPostgres(c.ctx, dsn)
		if err != nil {
			return err
		}
		defer dst.Close()
		rep, err := store.CopyToPostgres(c.ctx, src, dst)
		if err != nil {
			return fmt.Errorf("migrate-storage: %w", err)
		}
		// From now on the records live in PostgreSQL: a platform started
		// on this SQLite database again would serve the old ones.
		if err := printCopy(c, src, dst, rep); err != nil {
			return err
		}
		if err := store.MarkMoved(dbPath, dst.Where(), time.Now()); err != nil {
			return fmt.Errorf("the copy is complete, but %w: do not start the platform on %s again", err, dbPath)
		}
		_, err = fmt.Fprintf(c.stdout, "The SQLite database is left as it was, and %s beside it makes switchbridge\n"+
			"refuse it from now on. Now point the platform's config at PostgreSQL\n"+
			"(storage.postgres.dsn_file) and start it.\n", filepath.Join(filepath.Dir(dbPath), store.MovedName))
		return err
	}
}

// sqliteFile is the database at path: path itself, or the database in the
// data directory path. It must exist and hold something: an empty file is
// a platform with nothing to move, or the wrong path.
func sqliteFile(path string) (string, error) {
	st, err := os.Stat(path)
	if err == nil && st.IsDir() {
		path = filepath.Join(path, store.FileName)
		st, err = os.Stat(path)
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("no SQLite database at %s: give --from sqlite:PATH, the platform's data directory or its %s", path, store.FileName)
	case err != nil:
		return "", err
	case st.Size() == 0:
		return "", fmt.Errorf("%s is empty: there is nothing to move", path)
	}
	return path, nil
}

func printCopy(c *invocation, src, dst *store.DB, rep *store.CopyReport) error {
	fmt.Fprintf(c.stdout, "copied %s\n  into the %s:\n\n", src.Where(), dst.Where())
	var total int64
	width := len("rows in all")
	for _, t := range rep.Tables {
		total += t.Rows
		width = max(width, len(t.Table))
	}
	digits := len(fmt.Sprint(total))
	for _, t := range rep.Tables {
		fmt.Fprintf(c.stdout, "  %-*s  %*d\n", width, t.Table, digits, t.Rows)
	}
	fmt.Fprintf(c.stdout, "  %-*s  %*d\n", width, "rows in all", digits, total)
	_, err := fmt.Fprintf(c.stdout, "\nverified: every table holds as many rows as in SQLite, and the change log ends at %d (tag %s) in both,\n"+
		"so hubs resume from their cursors without a snapshot; the next change is %d.\n",
		rep.Cursor, rep.CursorTag, rep.NextChange)
	return err
}
