package store

import (
	"context"
	"io/fs"
	"os"
	"sync"
)

// AccessGeneration is the counter that every write taking access away moves
// (see migration 0005): a cached grant is good only while it has not moved.
//
// Every API request asks, so the answer is kept as long as no transaction
// has committed since it was read, which the WAL index tells without a
// query: its header, at the start of the -shm file that every process
// sharing the database maps, changes with each commit (its change counter,
// frame count and salts; https://sqlite.org/walformat.html), and a writer
// updates it before its commit returns. Reading those bytes costs one pread
// and one fstat; only when they differ from the bytes read before the last
// query is the counter read again. Anything unexpected (no -shm file, a
// read error, a -shm file replaced) falls back to the query.
func (db *DB) AccessGeneration(ctx context.Context) (int64, error) {
	w := &db.access
	w.mu.Lock()
	hdr, fresh := w.header()
	if fresh && w.known && hdr == w.hdr {
		n := w.n
		w.mu.Unlock()
		return n, nil
	}
	w.mu.Unlock()
	var n int64
	if err := db.generationStmt.QueryRowContext(ctx).Scan(&n); err != nil {
		return 0, db.note(err)
	}
	if fresh {
		// hdr was read before the query: should a commit have come in
		// between, the next call sees another header and asks again.
		w.mu.Lock()
		w.hdr, w.n, w.known = hdr, n, true
		w.mu.Unlock()
	}
	return n, nil
}

const selectAccessGeneration = `SELECT n FROM access_generation WHERE id = 1`

// walHeaderSize is the WAL index header: the two copies SQLite keeps of
// its 48 bytes, both compared.
const walHeaderSize = 96

// accessCache is AccessGeneration's memory of the last counter read and
// the WAL index header read just before it.
type accessCache struct {
	mu    sync.Mutex
	path  string // of the -shm file
	shm   *os.File
	id    fs.FileInfo // of shm when opened, to notice a replaced file
	hdr   [walHeaderSize]byte
	n     int64
	known bool
}

// header reads the WAL index header; ok is false when it cannot be trusted.
func (w *accessCache) header() (hdr [walHeaderSize]byte, ok bool) {
	if w.path == "" {
		return hdr, false
	}
	if w.shm == nil {
		f, err := os.Open(w.path)
		if err != nil {
			return hdr, false
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return hdr, false
		}
		w.shm, w.id, w.known = f, st, false
	}
	// SQLite deletes the -shm file when the last connection of every
	// process closes, and makes a new one on the next open: the old one,
	// still open here, would never change again.
	if w.replaced() {
		w.close()
		return hdr, false
	}
	if n, err := w.shm.ReadAt(hdr[:], 0); n != walHeaderSize || err != nil {
		return hdr, false
	}
	return hdr, true
}

func (w *accessCache) close() {
	if w.shm != nil {
		w.shm.Close()
	}
	w.shm, w.id, w.known = nil, nil, false
}
