package store

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestOpenRefusesAMovedDatabase(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	dbPath := filepath.Join(dir, FileName)
	at := time.Date(2026, 11, 25, 21, 0, 0, 0, time.UTC)
	if err := MarkMoved(dbPath, `PostgreSQL database "sb" as "switchbridge" at db.example:5432`, at); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(dir, MovedName)
	if st, err := os.Stat(marker); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("marker: %v, %v", st, err)
	}
	_, err = Open(ctx, dir)
	want := []string{
		dbPath + " was moved to PostgreSQL",
		`copied into the PostgreSQL database "sb" as "switchbridge" at db.example:5432`,
		"on 2026-11-25T21:00:00Z",
		"storage.postgres.dsn_file",
		"remove " + marker,
	}
	for _, w := range want {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("Open of a moved database: %v; want %q in it", err, w)
		}
	}

	// An edited marker is not quoted into the error (a terminal would
	// take its escapes), but still refuses.
	if err := os.WriteFile(marker, []byte("\x1b[2J\x1b[31mall fine\x07\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Open(ctx, dir)
	if err == nil || strings.ContainsAny(err.Error(), "\x1b\x07") || !strings.Contains(err.Error(), "(see the file)") {
		t.Errorf("Open with an edited marker: %v", err)
	}

	if err := os.Remove(marker); err != nil {
		t.Fatal(err)
	}
	db, err = Open(ctx, dir)
	if err != nil {
		t.Fatalf("Open once the marker is removed: %v", err)
	}
	db.Close()
}
