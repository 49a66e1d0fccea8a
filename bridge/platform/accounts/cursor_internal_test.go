package accounts

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
)

// TestCursorOfARestoredPlatform: a cursor names its change log entry by a
// tag, so a platform restored from a backup, whose log goes on from the
// backup with other entries, refuses a cursor a hub took past the backup
// even once its own sequence has passed it, and resumes one from before.
func TestCursorOfARestoredPlatform(t *testing.T) {
	f := newFeedFixture(t)
	before := f.changes(t, "h1", f.cursor1)
	if before.CursorTag == "" {
		t.Fatal("a batch without a cursor tag")
	}
	if err := f.db.CheckCursor(f.ctx, before.Cursor, before.CursorTag); err != nil {
		t.Fatalf("the live cursor: %v", err)
	}
	for _, bad := range []struct {
		seq int64
		tag string
	}{{before.Cursor, ""}, {before.Cursor, "0000000000000000"}, {before.Cursor + 1, before.CursorTag}, {before.Cursor - 1, before.CursorTag}} {
		if err := f.db.CheckCursor(f.ctx, bad.seq, bad.tag); !errors.Is(err, bridge.ErrCursorGone) {
			t.Errorf("cursor %d tag %q: %v, want ErrCursorGone", bad.seq, bad.tag, err)
		}
	}

	backup := filepath.Join(t.TempDir(), "backup.db")
	if _, err := f.db.DB().Backup(f.ctx, t.TempDir(), backup); err != nil {
		t.Fatal(err)
	}
	// The live platform goes on; a hub follows it.
	if err := f.db.CreateToken(f.ctx, []byte("after-the-backup"), f.in1.ID, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	after := f.changes(t, "h1", before.Cursor)
	if after.Cursor <= before.Cursor || len(after.Tokens) != 1 {
		t.Fatalf("the change after the backup: %+v", after)
	}

	restored, err := openFile(f.ctx, backup)
	if err != nil {
		t.Fatal(err)
	}
	defer restored.DB().Close()
	// The restored platform's log passes the hub's sequence with other
	// entries.
	for i := range 3 {
		if err := restored.CreateToken(f.ctx, []byte{'r', byte(i)}, f.in1.ID, time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	if seq, _ := restored.ChangeSeq(f.ctx); seq < after.Cursor {
		t.Fatalf("the restored log is at %d, not past the hub's %d: the check below proves nothing", seq, after.Cursor)
	}
	if err := restored.CheckCursor(f.ctx, after.Cursor, after.CursorTag); !errors.Is(err, bridge.ErrCursorGone) {
		t.Errorf("a cursor past the backup on the restored platform: %v, want ErrCursorGone", err)
	}
	if err := restored.CheckCursor(f.ctx, before.Cursor, before.CursorTag); err != nil {
		t.Errorf("a cursor from before the backup on the restored platform: %v", err)
	}
}

// TestCursorAcrossCompaction: a hub at the newest entry resumes after
// compaction emptied the log, because the floor keeps that entry's tag.
func TestCursorAcrossCompaction(t *testing.T) {
	ForEachDialect(t, func(t *testing.T) {
		f := newFeedFixture(t)
		b := f.changes(t, "h1", f.cursor1)
		n, err := f.db.CompactChanges(f.ctx, time.Now().Add(time.Hour), 0)
		if err != nil || n == 0 {
			t.Fatalf("compaction dropped %d: %v", n, err)
		}
		if seq, _ := f.db.ChangeSeq(f.ctx); seq != 0 {
			t.Fatalf("the log still holds entries up to %d", seq)
		}
		if err := f.db.CheckCursor(f.ctx, b.Cursor, b.CursorTag); err != nil {
			t.Errorf("the newest cursor after compaction: %v", err)
		}
		if err := f.db.CheckCursor(f.ctx, b.Cursor, "0000000000000000"); !errors.Is(err, bridge.ErrCursorGone) {
			t.Errorf("a wrong tag at the floor: %v, want ErrCursorGone", err)
		}
		if err := f.db.CheckCursor(f.ctx, f.cursor1, ""); !errors.Is(err, bridge.ErrCursorGone) {
			t.Errorf("a cursor below the floor: %v, want ErrCursorGone", err)
		}
		snap, err := f.db.Snapshot(f.ctx, "h1")
		if err != nil || snap.Cursor != b.Cursor || snap.CursorTag != b.CursorTag {
			t.Errorf("snapshot after compaction at %d %q, want %d %q (%v)", snap.Cursor, snap.CursorTag, b.Cursor, b.CursorTag, err)
		}
	})
}
