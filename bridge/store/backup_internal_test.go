package store

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestBackupCopyIsPrivate makes a backup under a permissive umask and looks
// at the copy's mode while it is being made (once the snapshot is in it,
// before anything else touches it) and at the end: the copy holds the
// password hashes, so it is never readable by others.
func TestBackupCopyIsPrivate(t *testing.T) {
	old := syscall.Umask(0o022) // process-wide; no test in this package runs in parallel
	t.Cleanup(func() { syscall.Umask(old) })
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "data")
	db, err := Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	addUser(t, db, "alice", []byte("hash"))

	var during os.FileMode
	var size int64
	saved := afterCopy
	t.Cleanup(func() { afterCopy = saved })
	afterCopy = func(tmp string) {
		if st, err := os.Stat(tmp); err == nil {
			during, size = st.Mode().Perm(), st.Size()
		}
	}
	dst := filepath.Join(t.TempDir(), "backup.db")
	if _, err := db.Backup(ctx, dir, dst); err != nil {
		t.Fatal(err)
	}
	if size == 0 {
		t.Fatal("the copy was empty after the snapshot: the check below proves nothing")
	}
	if during != FileMode {
		t.Errorf("the copy was %v while being made, want %v", during, FileMode)
	}
	st, err := os.Stat(dst)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != FileMode {
		t.Errorf("the backup is %v, want %v", st.Mode().Perm(), FileMode)
	}
}
