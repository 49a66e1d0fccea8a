package store_test

import (
	"context"
	"errors"
	"github.com/switchbridge/switchbridge/bridge/platform/accounts"
	"path/filepath"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge/store"
	"github.com/switchbridge/switchbridge/bridge/store/pgtest"
)

// On PostgreSQL the SQLite-only tools say what to use instead, and the
// change log's notices wake a reader for a write made through another
// handle (another process).
func TestPostgresOnly(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	a, err := store.OpenPostgres(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if a.Dialect() != store.Postgres {
		t.Errorf("dialect %q", a.Dialect())
	}
	if _, err := a.Backup(ctx, t.TempDir(), filepath.Join(t.TempDir(), "copy.db")); !errors.Is(err, store.ErrBackupElsewhere) {
		t.Errorf("backup on PostgreSQL: %v", err)
	}
	b, err := store.OpenPostgres(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	notice := a.ChangeNotice()
	if notice == nil {
		t.Fatal("no change notices on PostgreSQL")
	}
	// The listener may connect after the write: a (re)connection is a
	// notice too, so either way the channel closes; what must hold is that
	// after it the write is visible.
	if _, err := accounts.New(b).CreateUser(ctx, "alice", []byte("x"), []int64{1}); err != nil {
		t.Fatal(err)
	}
	wait(t, notice)
	seq, err := accounts.New(a).ChangeSeq(ctx)
	if err != nil || seq == 0 {
		t.Fatalf("after the notice the change log holds up to %d (%v)", seq, err)
	}
	// A notice for a write made after the listener is up.
	notice = a.ChangeNotice()
	if _, err := accounts.New(b).CreateUser(ctx, "bob", []byte("x"), []int64{2}); err != nil {
		t.Fatal(err)
	}
	wait(t, notice)
	if s2, _ := accounts.New(a).ChangeSeq(ctx); s2 <= seq {
		t.Errorf("after the second notice the log is at %d, was %d", s2, seq)
	}
}

func wait(t *testing.T, notice <-chan struct{}) {
	t.Helper()
	select {
	case <-notice:
	case <-time.After(10 * time.Second):
		t.Fatal("no change notice within 10 s")
	}
}
