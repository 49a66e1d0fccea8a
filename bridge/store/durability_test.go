package store_test

import (
	"context"
	"crypto/rand"
	"errors"
	"github.com/switchbridge/switchbridge/bridge/platform/accounts"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/store"
)

// Damage writes random bytes over pages 2 and 3 of a stopped hub's
// database, as a failing SD card or a stray dd would.
func damage(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	garbage := make([]byte, 2*4096)
	rand.Read(garbage)
	if _, err := f.WriteAt(garbage, 4096); err != nil {
		t.Fatal(err)
	}
}

// seededDir is a data dir whose hub had a user, an app and an
// installation, closed cleanly.
func seededDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	db, err := store.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	seed(t, db)
	db.SaveSwitchValue(context.Background(), "a", bridge.On, time.Now())
	db.Close()
	return dir
}

func TestOpenRefusesADamagedDatabase(t *testing.T) {
	dir := seededDir(t)
	path := filepath.Join(dir, store.FileName)
	damage(t, path)
	_, err := store.Open(context.Background(), dir)
	var de *store.DamagedError
	if !errors.As(err, &de) {
		t.Fatalf("Open of a damaged database = %v, want a DamagedError", err)
	}
	for _, want := range []string{path, "is damaged", "Backups and restore", "restore it from a backup"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message lacks %q: %v", want, err)
		}
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("message spans lines: %q", err)
	}
}

func TestOpenRefusesALostDatabase(t *testing.T) {
	t.Run("first start", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "data")
		db, err := store.Open(context.Background(), dir)
		if err != nil {
			t.Fatalf("first start on an empty dir: %v", err)
		}
		db.Close()
		if _, err := os.Stat(filepath.Join(dir, store.MarkerName)); err != nil {
			t.Errorf("no marker after the first start: %v", err)
		}
		// And again: the hub now has its database.
		db, err = store.Open(context.Background(), dir)
		if err != nil {
			t.Fatalf("second start: %v", err)
		}
		db.Close()
	})
	for name, c := range map[string]struct {
		lose  func(dir string) error
		state string
	}{
		"truncated": {func(dir string) error { return os.Truncate(filepath.Join(dir, store.FileName), 0) }, "is empty"},
		"deleted":   {func(dir string) error { return os.Remove(filepath.Join(dir, store.FileName)) }, "is missing"},
		"deleted beside a journal, no marker": {func(dir string) error {
			os.Remove(filepath.Join(dir, store.MarkerName)) // a data dir from before the marker
			os.WriteFile(filepath.Join(dir, store.JournalName), []byte("1700000000000 on a\n"), 0o600)
			return os.Remove(filepath.Join(dir, store.FileName))
		}, "is missing"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := seededDir(t)
			if err := c.lose(dir); err != nil {
				t.Fatal(err)
			}
			db, err := store.Open(context.Background(), dir)
			if err == nil {
				db.Close()
				t.Fatal("opened as a new, empty hub")
			}
			for _, want := range []string{filepath.Join(dir, store.FileName) + " " + c.state, "refusing to start as a new, empty hub", "Backups and restore"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("message lacks %q: %v", want, err)
				}
			}
			if fi, err := os.Stat(filepath.Join(dir, store.FileName)); err == nil && fi.Size() > 0 {
				t.Error("the refusal created a database")
			}
		})
	}
}

// TestReplaySkipsWhatAFoldStored plays a daemon killed after it stored a
// batch (the journaled on, then a newer report of off) but before it
// emptied the journal: the restart must not bring the older on back.
func TestReplaySkipsWhatAFoldStored(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := mustOpen(t, dir)
	j, err := store.OpenJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	j.Append([]store.SwitchValue{{SwitchID: "x", Value: bridge.On, At: now}})
	if err := db.FoldJournal(ctx, []store.SwitchValue{{SwitchID: "x", Value: bridge.Off, At: now.Add(time.Second)}}, j.Mark()); err != nil {
		t.Fatal(err)
	}
	// killed here: no Compact. A command after the restart appends more.
	j.Close()
	j, err = store.OpenJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	rep, err := j.Replay(db)
	if err != nil || rep.Folded != 1 || rep.Replayed != 0 {
		t.Fatalf("Replay = %+v, %v; want the one line counted as already stored", rep, err)
	}
	if vals, _ := db.SwitchValues(ctx); vals["x"] != bridge.Off {
		t.Errorf("x = %s after the restart, want the newer off", vals["x"])
	}
	// The next generation replays again in full.
	j.Append([]store.SwitchValue{{SwitchID: "x", Value: bridge.On, At: now.Add(2 * time.Second)}})
	if rep, err := j.Replay(db); err != nil || rep.Replayed != 1 {
		t.Fatalf("Replay of a new generation = %+v, %v", rep, err)
	}
	if vals, _ := db.SwitchValues(ctx); vals["x"] != bridge.On {
		t.Errorf("x = %s, want on", vals["x"])
	}
}

func TestJournalReportsWhatItSkips(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := mustOpen(t, dir)
	now := time.Now()
	db.SaveSwitchValue(ctx, "hall", bridge.On, now.Add(time.Hour)) // stored by a clock that was ahead
	good := "1700000000000 on kitchen\n"
	lines := []string{
		"#gen 42\n",
		good,
		"garbage without fields\n",
		"1700000000000 maybe kitchen\n",
		strings.Repeat("x", 5000) + "\n", // longer than any line we write
		"1700000000001 off hall\n",
		"1700000000000 of", // torn
	}
	var offsets []int64
	var off int64
	for i, l := range lines {
		if i == 2 || i == 3 || i == 4 || i == 6 {
			offsets = append(offsets, off)
		}
		off += int64(len(l))
	}
	os.WriteFile(filepath.Join(dir, store.JournalName), []byte(strings.Join(lines, "")), 0o600)
	j, err := store.OpenJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	rep, err := j.Replay(db)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Replayed != 2 || rep.Unreadable != 3 || len(rep.UnreadableAt) != 3 ||
		rep.UnreadableAt[0] != offsets[0] || rep.UnreadableAt[1] != offsets[1] || rep.UnreadableAt[2] != offsets[2] {
		t.Errorf("report %+v, want 2 replayed and 3 unreadable at %v", rep, offsets[:3])
	}
	if rep.TornAt != offsets[3] || rep.TornBytes != int64(len(lines[6])) {
		t.Errorf("torn tail at %d (%d bytes), want %d (%d)", rep.TornAt, rep.TornBytes, offsets[3], len(lines[6]))
	}
	if len(rep.Overridden) != 1 || rep.Overridden[0].SwitchID != "hall" || rep.Overridden[0].Stored != bridge.On {
		t.Errorf("overridden = %+v, want hall's stored on replaced by the journal's off", rep.Overridden)
	}
	vals, _ := db.SwitchValues(ctx)
	if vals["kitchen"] != bridge.On || vals["hall"] != bridge.Off {
		t.Errorf("values %v", vals)
	}
	if fi, _ := os.Stat(filepath.Join(dir, store.JournalName)); fi.Size() != 0 {
		t.Errorf("journal not emptied (torn tail not cut): %d bytes", fi.Size())
	}
}

func TestBackupFoldsTheJournal(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := mustOpen(t, dir)
	_, _, in := seed(t, db)
	j, err := store.OpenJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	now := time.Now()
	// x: journaled on, then a newer off stored by a fold whose journal was
	// not emptied yet. y: journaled after the fold, in no database yet.
	j.Append([]store.SwitchValue{{SwitchID: "x", Value: bridge.On, At: now}})
	db.FoldJournal(ctx, []store.SwitchValue{{SwitchID: "x", Value: bridge.Off, At: now}}, j.Mark())
	j.Append([]store.SwitchValue{{SwitchID: "y", Value: bridge.On, At: now}})

	dst := filepath.Join(t.TempDir(), "backup.db")
	n, err := db.Backup(ctx, dir, dst)
	if err != nil || n != 1 {
		t.Fatalf("Backup = %d, %v; want the one unfolded value", n, err)
	}
	if _, err := db.Backup(ctx, dir, dst); err == nil || !strings.Contains(err.Error(), "exists already") {
		t.Errorf("second backup to the same file: %v", err)
	}
	if _, err := os.Stat(dst + "-wal"); err == nil {
		t.Error("the backup has a WAL file beside it")
	}
	cp, err := store.OpenFile(ctx, dst)
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	vals, _ := cp.SwitchValues(ctx)
	if vals["x"] != bridge.Off || vals["y"] != bridge.On {
		t.Errorf("backup values %v, want x off (the fold's) and y on (the journal's)", vals)
	}
	if _, err := accounts.New(cp).Installation(ctx, in.ID); err != nil {
		t.Errorf("installation not in the backup: %v", err)
	}
}

// TestJournalOnAFullDisk appends to a journal that is /dev/full: every
// write fails with ENOSPC, as on a full file system.
func TestJournalOnAFullDisk(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	dir := t.TempDir()
	if err := os.Symlink("/dev/full", filepath.Join(dir, store.JournalName)); err != nil {
		t.Fatal(err)
	}
	j, err := store.OpenJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	err = j.Append([]store.SwitchValue{{SwitchID: "x", Value: bridge.On, At: time.Now()}})
	if !errors.Is(err, syscall.ENOSPC) || !store.IsDiskFull(err) {
		t.Fatalf("Append on a full disk = %v", err)
	}
	msg := store.ExplainDiskFull(err, dir).Error()
	if !strings.HasPrefix(msg, "no space left on device: the file system holding "+dir+" is full") {
		t.Errorf("message %q does not say plainly that the disk is full", msg)
	}
	if store.ExplainDiskFull(store.ExplainDiskFull(err, dir), dir).Error() != msg {
		t.Error("explained twice")
	}
	if other := errors.New("x"); store.ExplainDiskFull(other, dir) != other {
		t.Error("an unrelated error was rewritten")
	}
}

// TestBackupWhileABatchIsStored: the daemon stores a batch of journaled
// values and empties the journal just after the backup copied the
// database. The copy lacks the batch and the journal no longer has it, so
// the backup must copy again rather than lose those values.
func TestBackupWhileABatchIsStored(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := mustOpen(t, dir)
	seed(t, db)
	j, err := store.OpenJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	vs := []store.SwitchValue{{SwitchID: "x", Value: bridge.On, At: time.Now()}}
	if err := j.Append(vs); err != nil {
		t.Fatal(err)
	}
	copies := 0
	old := *store.AfterBackupCopy
	*store.AfterBackupCopy = func(string) {
		copies++
		if copies == 1 {
			mark := j.Mark()
			if err := db.FoldJournal(ctx, vs, mark); err != nil {
				t.Error(err)
			}
			if err := j.CompactTo(mark); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(func() { *store.AfterBackupCopy = old })

	dst := filepath.Join(t.TempDir(), "backup.db")
	if _, err := db.Backup(ctx, dir, dst); err != nil {
		t.Fatal(err)
	}
	cp, err := store.OpenFile(ctx, dst)
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	if vals, _ := cp.SwitchValues(ctx); vals["x"] != bridge.On {
		t.Errorf("backup values %v, want x on: the batch stored during the backup was lost", vals)
	}
	if copies < 2 {
		t.Errorf("the database was copied %d times, want a second copy after the journal started anew", copies)
	}
}

// TestCompactToKeepsWhatCameAfterTheMark: a fold stores the journal up to
// its mark while a command appends past it; compacting then keeps exactly
// the lines past the mark, in a file of a new generation, so neither a
// replay nor the next append loses or repeats a line. A mark the journal
// has moved on from leaves it alone.
func TestCompactToKeepsWhatCameAfterTheMark(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := mustOpen(t, dir)
	// A copy a crash left half made is not a journal: it goes at start-up.
	next := filepath.Join(dir, store.JournalName+".next")
	if err := os.WriteFile(next, []byte("#gen 7\n1 on x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	j, err := store.OpenJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { j.Close() }()
	if _, err := os.Stat(next); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s left after opening the journal: %v", next, err)
	}
	now := time.Now()
	j.Append([]store.SwitchValue{{SwitchID: "x", Value: bridge.On, At: now}})
	mark := j.Mark()
	// The fold's transaction runs; a command appends meanwhile.
	j.Append([]store.SwitchValue{{SwitchID: "y", Value: bridge.On, At: now.Add(time.Second)}})
	if err := db.FoldJournal(ctx, []store.SwitchValue{{SwitchID: "x", Value: bridge.On, At: now}}, mark); err != nil {
		t.Fatal(err)
	}
	if err := j.CompactTo(mark); err != nil {
		t.Fatal(err)
	}
	vs, err := store.ReadJournal(dir)
	if err != nil || len(vs) != 1 || vs[0].SwitchID != "y" {
		t.Fatalf("journal after compacting = %+v, %v; want y's line alone", vs, err)
	}
	if m := j.Mark(); m.Generation == mark.Generation {
		t.Errorf("the kept lines are still of generation %d, whose lines the database holds up to %d", m.Generation, mark.Size)
	}
	st, err := os.Stat(filepath.Join(dir, store.JournalName))
	if err != nil || st.Mode().Perm() != store.FileMode {
		t.Errorf("journal's mode after compacting: %v, %v; want %v", st.Mode().Perm(), err, store.FileMode)
	}
	// Appends go on into the new file; a stale mark changes nothing.
	j.Append([]store.SwitchValue{{SwitchID: "z", Value: bridge.Off, At: now.Add(2 * time.Second)}})
	if err := j.CompactTo(mark); err != nil {
		t.Fatal(err)
	}
	if vs, err := store.ReadJournal(dir); err != nil || len(vs) != 2 || vs[1].SwitchID != "z" {
		t.Fatalf("journal after a later append and a stale mark = %+v, %v; want y and z", vs, err)
	}
	// Killed now: the restart replays y and z, not x a second time.
	j.Close()
	if j, err = store.OpenJournal(dir); err != nil {
		t.Fatal(err)
	}
	rep, err := j.Replay(db)
	if err != nil || rep.Replayed != 2 || rep.Folded != 0 {
		t.Fatalf("Replay = %+v, %v; want y and z replayed, nothing counted twice", rep, err)
	}
	vals, _ := db.SwitchValues(ctx)
	if vals["x"] != bridge.On || vals["y"] != bridge.On || vals["z"] != bridge.Off {
		t.Errorf("values after the restart = %v", vals)
	}
}
