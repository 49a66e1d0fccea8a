package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// damagedTokenIndex makes a store with a token, then writes garbage over
// the root page of the tokens' primary-key index, which the token check
// reads and a count of the table does not, and opens the file past the
// integrity check, as a hub that was running before the damage has it.
func damagedTokenIndex(t *testing.T) *DB {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	db, err := Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	addToken(t, db, addUser(t, db, "alice", []byte("x")), []byte("token-hash"))
	var root, pageSize int64
	if err := db.db.QueryRowContext(ctx, `SELECT rootpage FROM sqlite_master WHERE name = 'sqlite_autoindex_tokens_1'`).Scan(&root); err != nil {
		t.Fatal(err)
	}
	if err := db.db.QueryRowContext(ctx, `PRAGMA page_size`).Scan(&pageSize); err != nil {
		t.Fatal(err)
	}
	db.Close() // checkpoints the WAL into the file
	path := filepath.Join(dir, FileName)
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	garbage := make([]byte, pageSize)
	rand.Read(garbage)
	if _, err := f.WriteAt(garbage, (root-1)*pageSize); err != nil {
		t.Fatal(err)
	}
	f.Close()

	sdb, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sdb.Close() })
	return &DB{db: sdb, path: path, now: time.Now}
}

// readToken reads a token through the tokens' index, by a statement the
// engine prepared, and notes its error, as the platform's token check
// (bridge/platform/accounts) does.
func readToken(ctx context.Context, db *DB, hash []byte) error {
	st, err := db.Stmt(ctx, `SELECT installation_id FROM tokens WHERE hash = ?`)
	if err != nil {
		return db.Note(err)
	}
	var id string
	return db.Note(st.QueryRowContext(ctx, hash).Scan(&id))
}

// TestPingFailsOnceTheTokenCheckMeetsDamage: the token check of a running
// hub meets a damaged page; from then on Ping, the watchdog's health check,
// fails with the damage, although its counts of the tables still pass.
func TestPingFailsOnceTheTokenCheckMeetsDamage(t *testing.T) {
	ctx := context.Background()
	db := damagedTokenIndex(t)
	db.checked.Store(time.Now().UnixMilli()) // quick_check ran at open
	if err := db.Ping(ctx); err != nil {
		t.Skipf("the table counts already read the damaged index (%v): the case below is not reached", err)
	}
	if err := readToken(ctx, db, []byte("token-hash")); err == nil || errors.Is(err, sql.ErrNoRows) {
		t.Fatalf("the token check on a damaged index: %v, want an error", err)
	}
	var d *DamagedError
	if err := db.Ping(ctx); !errors.As(err, &d) || d.Path != db.path {
		t.Errorf("Ping after the token check met the damage: %v, want a DamagedError naming the file", err)
	}
}

// TestPingRunsQuickCheck: damage no request has met yet is found by the
// quick_check Ping runs every quickCheckEvery.
func TestPingRunsQuickCheck(t *testing.T) {
	db := damagedTokenIndex(t)
	db.checked.Store(time.Now().Add(-quickCheckEvery).UnixMilli())
	var d *DamagedError
	if err := db.Ping(context.Background()); !errors.As(err, &d) {
		t.Errorf("Ping %s after the last quick_check: %v, want a DamagedError", quickCheckEvery, err)
	}
}
