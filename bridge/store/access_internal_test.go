package store

import (
	"os"
	"path/filepath"
	"testing"
)

// TestAccessCacheNoticesReplacedShm: a -shm file deleted and made again
// (SQLite does so when the last connection of every process closes and
// another opens) is no longer trusted, nor read, by the file still open:
// the header is read again from the new file.
func TestAccessCacheNoticesReplacedShm(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db-shm")
	write := func(b byte) {
		t.Helper()
		buf := make([]byte, walHeaderSize)
		for i := range buf {
			buf[i] = b
		}
		if err := os.WriteFile(path, buf, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	w := &accessCache{path: path}
	defer w.close()
	write(1)
	if hdr, ok := w.header(); !ok || hdr[0] != 1 {
		t.Fatalf("first read: %v %v", hdr[0], ok)
	}
	if hdr, ok := w.header(); !ok || hdr[0] != 1 {
		t.Fatalf("unchanged file: %v %v", hdr[0], ok)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	write(2)
	if _, ok := w.header(); ok {
		t.Fatal("the header of a deleted -shm file was trusted")
	}
	if hdr, ok := w.header(); !ok || hdr[0] != 2 {
		t.Fatalf("after reopening: %v %v, want the new file's header", hdr[0], ok)
	}
}
