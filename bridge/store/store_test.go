package store_test

import (
	"context"
	"github.com/switchbridge/switchbridge/bridge/platform/accounts"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/store"
)

// mustOpen opens the store at dir in the dialect under test (see
// store.ForEachDialect).
// seed stores alice, her app c1 and its installation into location 1,
// through the platform's records.
func seed(t *testing.T, db *store.DB) (*bridge.User, *bridge.App, *bridge.Installation) {
	t.Helper()
	ctx := context.Background()
	acc := accounts.New(db)
	u, err := acc.CreateUser(ctx, "alice", []byte("hash"), []int64{2, 1, 2})
	if err != nil {
		t.Fatal(err)
	}
	a := &bridge.App{ClientID: "c1", Name: "App", SecretHash: []byte("s"), RedirectURIs: []string{"https://a/cb", "https://b/cb"}, OwnerID: u.ID}
	if err := acc.CreateApp(ctx, a); err != nil {
		t.Fatal(err)
	}
	in := &bridge.Installation{ClientID: "c1", UserID: u.ID, LocationID: 1, SwitchIDs: []string{"b", "a"}}
	if err := acc.Install(ctx, in); err != nil {
		t.Fatal(err)
	}
	return u, a, in
}

func mustOpen(t *testing.T, dir string) *store.DB {
	t.Helper()
	return store.OpenTest(t, dir)
}

func TestSwitchValuesAndPersistence(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := mustOpen(t, dir)
	now := time.Now()
	db.SaveSwitchValue(ctx, "a", bridge.Off, now)
	db.SaveSwitchValue(ctx, "a", bridge.On, now.Add(-time.Minute)) // the last write wins, whatever the wall clock says
	db.SaveSwitchValue(ctx, "b", bridge.Off, now)
	seed(t, db)
	db.Close()

	db2 := mustOpen(t, dir)
	vals, err := db2.SwitchValues(ctx)
	if err != nil || vals["a"] != bridge.On || vals["b"] != bridge.Off {
		t.Errorf("values after reopen = %v %v", vals, err)
	}
	if _, err := accounts.New(db2).UserByName(ctx, "alice"); err != nil {
		t.Errorf("user after reopen: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, store.FileName+"-wal")); err != nil {
		t.Errorf("no WAL file: %v", err)
	}
}

func TestOpenRefusesUnwritableDir(t *testing.T) {
	if os.Geteuid() == 0 {
		// root writes anywhere; use a path under a regular file instead.
		f := filepath.Join(t.TempDir(), "file")
		os.WriteFile(f, nil, 0o600)
		if _, err := store.Open(context.Background(), filepath.Join(f, "data")); err == nil {
			t.Fatal("opened a data dir below a regular file")
		}
		return
	}
	// Open makes a data dir it owns private and writable (0700), so the
	// one it cannot use is one it cannot create.
	parent := t.TempDir()
	os.Chmod(parent, 0o500)
	t.Cleanup(func() { os.Chmod(parent, 0o700) })
	if _, err := store.Open(context.Background(), filepath.Join(parent, "data")); err == nil {
		t.Fatal("opened a data dir below a read-only directory")
	}
}

func TestJournal(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := mustOpen(t, dir)
	j, err := store.OpenJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	now := time.Now()
	db.SaveSwitchValue(ctx, "a", bridge.Off, now.Add(time.Hour)) // a clock that was ahead
	j.Append([]store.SwitchValue{{SwitchID: "a", Value: bridge.On, At: now}, {SwitchID: "b", Value: bridge.On, At: now}})
	j.Append([]store.SwitchValue{{SwitchID: "b", Value: bridge.Off, At: now.Add(time.Second)}})
	// A line torn by a kill in the middle of a write: no newline, id cut.
	f, _ := os.OpenFile(filepath.Join(dir, store.JournalName), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("1700000000000 on ki")
	f.Close()

	read, _ := store.ReadJournal(dir)
	if len(read) != 3 {
		t.Fatalf("ReadJournal = %+v, want the three whole lines", read)
	}
	rep, err := j.Replay(db)
	if err != nil || rep.Replayed != 3 || rep.TornBytes != int64(len("1700000000000 on ki")) {
		t.Fatalf("Replay = %+v, %v", rep, err)
	}
	vals, _ := db.SwitchValues(ctx)
	if vals["a"] != bridge.On || vals["b"] != bridge.Off || vals["ki"] != "" {
		t.Errorf("after replay: %v (the torn line must not count)", vals)
	}
	if read, _ := store.ReadJournal(dir); len(read) != 0 {
		t.Errorf("journal not emptied by Replay: %+v", read)
	}
	// Appends after a truncate land at the start (O_APPEND), and compacting empties it.
	j.Append([]store.SwitchValue{{SwitchID: "c", Value: bridge.On, At: now}})
	if read, _ := store.ReadJournal(dir); len(read) != 1 || read[0].SwitchID != "c" {
		t.Errorf("after truncate and append: %+v", read)
	}
	j.CompactTo(j.Mark())
	if read, _ := store.ReadJournal(dir); len(read) != 0 {
		t.Errorf("compacting left %+v", read)
	}
}
