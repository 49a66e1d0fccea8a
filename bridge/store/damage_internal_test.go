package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestPingReadsTheTables opens a damaged database past the integrity check
// (as a hub opened before the damage would be): "SELECT 1" still answers,
// and Ping, which feeds the watchdog, must not.
func TestPingReadsTheTables(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		addUser(t, db, fmt.Sprintf("user%d", i), make([]byte, 60))
	}
	if err := db.Ping(ctx); err != nil {
		t.Fatalf("Ping of a sound database: %v", err)
	}
	db.Close()
	path := filepath.Join(dir, FileName)
	f, _ := os.OpenFile(path, os.O_WRONLY, 0)
	garbage := make([]byte, 2*4096)
	rand.Read(garbage)
	f.WriteAt(garbage, 4096)
	f.Close()

	sdb, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer sdb.Close()
	unchecked := &DB{db: sdb}
	var one int
	if err := sdb.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		t.Fatalf("SELECT 1 on the damaged file: %v (the test needs it to pass, as it did for the old health check)", err)
	}
	if err := unchecked.Ping(ctx); err == nil {
		t.Fatal("Ping passes on a damaged database")
	}
}

// TestOpenNamesAFullDisk makes the data dir's probe write fail with ENOSPC.
func TestOpenNamesAFullDisk(t *testing.T) {
	saved := probeWrite
	defer func() { probeWrite = saved }()
	probeWrite = func(f *os.File) error {
		return &fs.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
	}
	dir := t.TempDir()
	_, err := Open(context.Background(), dir)
	if err == nil || !strings.HasPrefix(err.Error(), "no space left on device: the file system holding "+dir+" is full") {
		t.Fatalf("Open on a full disk = %v", err)
	}
}

// TestSQLiteFullIsDiskFull fills a database capped at a few pages: SQLite's
// own "disk is full" must read as one too.
func TestSQLiteFullIsDiskFull(t *testing.T) {
	ctx := context.Background()
	sdb, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "small.db")+"?_pragma=max_page_count(3)")
	if err != nil {
		t.Fatal(err)
	}
	defer sdb.Close()
	sdb.ExecContext(ctx, "CREATE TABLE t (b BLOB)")
	_, err = sdb.ExecContext(ctx, "INSERT INTO t VALUES (zeroblob(100000))")
	if err == nil || !IsDiskFull(err) {
		t.Fatalf("insert into a full database = %v, want a disk-full error", err)
	}
	if e := ExplainDiskFull(fmt.Errorf("migration: %w", err), "/data"); !strings.HasPrefix(e.Error(), "no space left on device") {
		t.Errorf("explained: %v", e)
	}
	if IsDiskFull(errors.New("database or disk is full")) {
		t.Error("a plain string counted as a disk-full error")
	}
}

// BenchmarkOpen measures opening a hub with 10,000 installations (each
// with three switches and a token; 200 users, 50 apps): the integrity check
// runs on every start and must keep it fast. quick_check_ms is the check
// alone.
func BenchmarkOpen(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	db, err := Open(ctx, dir)
	if err != nil {
		b.Fatal(err)
	}
	tx, _ := db.db.BeginTx(ctx, nil)
	now := time.Now().UnixMilli()
	for u := range 200 {
		tx.Exec(`INSERT INTO users (id, name, password_hash, created_at) VALUES (?, ?, ?, ?)`, u+1, fmt.Sprintf("user%d", u), make([]byte, 60), now)
		tx.Exec(`INSERT INTO user_locations (user_id, location_id) VALUES (?, 1)`, u+1)
	}
	for a := range 50 {
		tx.Exec(`INSERT INTO apps (client_id, name, secret_hash, owner_id, published, created_at) VALUES (?, ?, ?, 1, 1, ?)`, fmt.Sprintf("app%d", a), "App", make([]byte, 32), now)
	}
	for i := range 10000 {
		id := fmt.Sprintf("inst-%06d", i)
		if _, err := tx.Exec(`INSERT INTO installations (id, client_id, user_id, location_id, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)`,
			id, fmt.Sprintf("app%d", i%50), i%200+1, i/200+1, now+int64(i), now); err != nil {
			b.Fatal(err)
		}
		for s := range 3 {
			tx.Exec(`INSERT INTO installation_switches (installation_id, pos, switch_id) VALUES (?, ?, ?)`, id, s, fmt.Sprintf("switch-%d", (i+s)%40))
		}
		hash := make([]byte, 32)
		rand.Read(hash)
		tx.Exec(`INSERT INTO tokens (hash, installation_id, created_at, expires_at) VALUES (?, ?, ?, ?)`, hash, id, now, now+3600_000)
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	db.Close()

	var check time.Duration
	for b.Loop() {
		db, err := Open(ctx, dir)
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if err := db.checkIntegrity(ctx, "x"); err != nil {
			b.Fatal(err)
		}
		check += time.Since(start)
		db.Close()
	}
	b.ReportMetric(float64(check.Microseconds())/1e3/float64(b.N), "quick_check_ms")
	fi, _ := os.Stat(filepath.Join(dir, FileName))
	b.ReportMetric(float64(fi.Size())/1e6, "db_MB")
}
