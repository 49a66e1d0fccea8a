package store_test

import (
	"context"
	"github.com/switchbridge/switchbridge/bridge/platform/accounts"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/store"
)

// TestDataDirIsPrivate opens the store under a permissive umask in a data
// directory an older version left 0755, writes through the database and
// the journal, and checks that the directory is 0700 and every file in it
// 0600: the database holds password hashes. Then it loosens every mode the
// way an older version left them and checks that opening again fixes them.
func TestDataDirIsPrivate(t *testing.T) {
	old := syscall.Umask(0o022) // process-wide; no test in this package runs in parallel
	t.Cleanup(func() { syscall.Umask(old) })
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}

	openAndWrite := func() (*store.DB, *store.Journal) {
		t.Helper()
		db, err := store.Open(ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		j, err := store.OpenJournal(dir)
		if err != nil {
			db.Close()
			t.Fatal(err)
		}
		if err := db.SaveSwitchValue(ctx, "lamp", bridge.On, time.Now()); err != nil {
			t.Fatal(err)
		}
		if _, err := accounts.New(db).CreateUser(ctx, "u"+time.Now().Format("150405.000000000"), []byte("hash"), []int64{1}); err != nil {
			t.Fatal(err)
		}
		if err := j.Append([]store.SwitchValue{{SwitchID: "lamp", Value: bridge.Off, At: time.Now()}}); err != nil {
			t.Fatal(err)
		}
		return db, j
	}
	check := func(when string, want ...string) {
		t.Helper()
		st, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != store.DirMode {
			t.Errorf("%s: data dir mode %v, want %v", when, st.Mode().Perm(), store.DirMode)
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, e := range entries {
			info, err := e.Info()
			if err != nil {
				t.Fatal(err)
			}
			seen[e.Name()] = true
			if info.Mode().Perm() != store.FileMode {
				t.Errorf("%s: %s has mode %v, want %v", when, e.Name(), info.Mode().Perm(), store.FileMode)
			}
		}
		for _, name := range want {
			if !seen[name] {
				t.Errorf("%s: %s is missing, so its mode was not checked (files: %v)", when, name, seen)
			}
		}
	}

	all := []string{store.FileName, store.FileName + "-wal", store.FileName + "-shm", store.JournalName}
	db, j := openAndWrite()
	check("fresh, open", all...)
	j.Close()
	db.Close()
	check("fresh, closed")

	// What an older version left: a world-readable database, journal and
	// directory, and a -wal and -shm a killed process did not remove.
	for _, name := range all {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); os.IsNotExist(err) {
			if err := os.WriteFile(p, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chmod(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	db, j = openAndWrite()
	defer db.Close()
	defer j.Close()
	check("reopened", all...)
}
