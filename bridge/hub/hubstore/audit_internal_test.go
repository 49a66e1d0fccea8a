package hubstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/store"
	"github.com/switchbridge/switchbridge/bridge/store/storetest"
)

// openWithJournal opens a database and its journal in a new data
// directory, closed when the test ends.
func openWithJournal(t *testing.T) (dir string, eng *store.DB, db *Store, j *store.Journal) {
	t.Helper()
	dir = t.TempDir()
	eng, err := store.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	if j, err = store.OpenJournal(dir); err != nil {
		t.Fatal(err)
	}
	return dir, eng, New(eng), j
}

// TestAuditRidesTheJournal: a command's audit records go into the journal
// in the write of its values, reach the database with them when the
// journal is replayed (as after a kill -9), and read back whole and
// filtered.
func TestAuditRidesTheJournal(t *testing.T) {
	ctx := context.Background()
	_, eng, db, j := openWithJournal(t)
	defer j.Close()
	at := time.UnixMilli(1_800_000_000_000)
	recs := []bridge.AuditRecord{
		{At: at, InstallationID: "inst-1", ClientID: "app-1", UserID: 7, SwitchID: "kitchen", Command: "on", Outcome: "ok", Latency: 42 * time.Millisecond, RequestID: "r1"},
		{At: at.Add(time.Second), InstallationID: "inst-2", ClientID: "app-2", UserID: 8, SwitchID: "hall", Command: "off", Outcome: "timeout", Latency: 5 * time.Second, RequestID: "r2 \"quoted\"\nline"},
	}
	before := j.Mark().Size
	if err := j.AppendAudited([]store.SwitchValue{{SwitchID: "kitchen", Value: "on", At: at}}, recs[:1]); err != nil {
		t.Fatal(err)
	}
	if err := j.AppendAudited(nil, recs[1:]); err != nil {
		t.Fatal(err)
	}
	if j.Mark().Size == before {
		t.Fatal("nothing journaled")
	}
	if got, _ := db.Audit(ctx, bridge.AuditFilter{}); len(got) != 0 {
		t.Fatalf("the database holds %v before the journal is folded", got)
	}
	rep, err := j.Replay(eng)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Unreadable != 0 || rep.Replayed != 1 || rep.AuditReplayed != 2 {
		t.Errorf("replay %+v, want the one value, the two records and no unreadable line", rep)
	}
	got, err := db.Audit(ctx, bridge.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != recs[1] || !got[1].At.Equal(recs[0].At) {
		t.Fatalf("audit = %+v, want both records, newest first", got)
	}
	got[1].At = recs[0].At
	if got[1] != recs[0] {
		t.Errorf("record %+v, want %+v", got[1], recs[0])
	}
	for _, c := range []struct {
		f    bridge.AuditFilter
		want string
	}{
		{bridge.AuditFilter{InstallationID: "inst-1"}, "r1"},
		{bridge.AuditFilter{ClientID: "app-2"}, recs[1].RequestID},
		{bridge.AuditFilter{ClientID: "app-1", SwitchID: "kitchen"}, "r1"},
		{bridge.AuditFilter{SwitchID: "hall"}, recs[1].RequestID},
		{bridge.AuditFilter{Since: at.Add(time.Second)}, recs[1].RequestID},
	} {
		got, err := db.Audit(ctx, c.f)
		if err != nil || len(got) != 1 || got[0].RequestID != c.want {
			t.Errorf("audit %+v = %+v, %v; want only %q", c.f, got, err, c.want)
		}
	}
	// A replay after a fold adds nothing twice.
	if _, err := j.Replay(eng); err != nil {
		t.Fatal(err)
	}
	if got, _ := db.Audit(ctx, bridge.AuditFilter{}); len(got) != 2 {
		t.Errorf("after a second replay, %d records", len(got))
	}
}

// TestAuditBounds: PruneAudit deletes what is older than the age bound by
// the store's clock, then the oldest past the row bound: exactly down to
// it, though records of one command share their time. On both dialects.
func TestAuditBounds(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T) {
		ctx := context.Background()
		db := New(storetest.Open(t, t.TempDir()))
		now := time.UnixMilli(1_800_000_000_000)
		db.now = func() time.Time { return now }
		var recs []bridge.AuditRecord
		for i := range 10 {
			recs = append(recs, bridge.AuditRecord{At: now.Add(-time.Duration(i) * 24 * time.Hour), InstallationID: "inst-1", SwitchID: "kitchen", Command: "on", Outcome: "ok", RequestID: string(rune('a' + i))})
		}
		// A command of two switches, the newest of all.
		recs = append(recs, bridge.AuditRecord{At: now, InstallationID: "inst-1", SwitchID: "hall", Command: "on", Outcome: "ok", RequestID: "a"})
		if err := db.FoldJournalAudited(ctx, nil, recs, store.JournalMark{}); err != nil {
			t.Fatal(err)
		}
		if n, err := db.AuditRows(ctx); err != nil || n != 11 {
			t.Fatalf("AuditRows = %d, %v; want 11", n, err)
		}
		// Older than 7 days: days 8 and 9 go (day 7 is exactly at the bound).
		if n, err := db.PruneAudit(ctx, 7*24*time.Hour, 0); err != nil || n != 2 {
			t.Fatalf("prune by age deleted %d, %v; want 2", n, err)
		}
		if n, err := db.PruneAudit(ctx, 7*24*time.Hour, 5); err != nil || n != 4 {
			t.Fatalf("prune by rows deleted %d, %v; want 4", n, err)
		}
		got, _ := db.Audit(ctx, bridge.AuditFilter{})
		if len(got) != 5 || got[0].RequestID != "a" || got[1].RequestID != "a" || got[4].RequestID != "d" {
			t.Errorf("left %+v, want the 5 newest", got)
		}
		// Within both bounds: nothing goes.
		if n, err := db.PruneAudit(ctx, 7*24*time.Hour, 5); err != nil || n != 0 {
			t.Errorf("a second prune deleted %d, %v", n, err)
		}
		if got, _ := db.Audit(ctx, bridge.AuditFilter{Limit: 2}); len(got) != 2 || got[0].RequestID != "a" {
			t.Errorf("Limit 2: %+v, want the two newest", got)
		}
	})
}

// TestAuditByApp: the app filter selects one client id's records, exactly
// (no prefix, no case folding), with the other filters and the limit,
// newest first. On both dialects.
func TestAuditByApp(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T) {
		ctx := context.Background()
		db := New(storetest.Open(t, t.TempDir()))
		at := time.UnixMilli(1_800_000_000_000)
		var recs []bridge.AuditRecord
		for i, c := range []string{"app-a", "app-b", "app-a", "APP-A", "app-a", "app"} {
			sw := "kitchen"
			if i == 4 {
				sw = "hall"
			}
			recs = append(recs, bridge.AuditRecord{At: at.Add(time.Duration(i) * time.Second), InstallationID: "inst-" + c, ClientID: c,
				SwitchID: sw, Command: "on", Outcome: "ok", RequestID: fmt.Sprint("r", i)})
		}
		if err := db.FoldJournalAudited(ctx, nil, recs, store.JournalMark{}); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			f    bridge.AuditFilter
			want string
		}{
			{bridge.AuditFilter{ClientID: "app-a"}, "r4 r2 r0"},
			{bridge.AuditFilter{ClientID: "app"}, "r5"},
			{bridge.AuditFilter{ClientID: "app-a", SwitchID: "kitchen"}, "r2 r0"},
			{bridge.AuditFilter{ClientID: "app-a", Limit: 1}, "r4"},
			{bridge.AuditFilter{ClientID: "app-a", Since: at.Add(2 * time.Second)}, "r4 r2"},
			{bridge.AuditFilter{ClientID: "app-b", InstallationID: "inst-app-a"}, ""},
			{bridge.AuditFilter{ClientID: "none"}, ""},
		} {
			got, err := db.Audit(ctx, c.f)
			var ids []string
			for _, r := range got {
				ids = append(ids, r.RequestID)
			}
			if err != nil || strings.Join(ids, " ") != c.want {
				t.Errorf("audit %+v = %q, %v; want %q", c.f, ids, err, c.want)
			}
		}
	})
}

// foldGate is a database whose folds fail while failing is set, as a
// full disk's do: the journal then keeps what it holds.
type foldGate struct {
	*Store
	failing atomic.Bool
}

func (g *foldGate) FoldJournalAudited(ctx context.Context, vs []store.SwitchValue, recs []bridge.AuditRecord, mark store.JournalMark) error {
	if g.failing.Load() {
		return errors.New("disk full")
	}
	return g.Store.FoldJournalAudited(ctx, vs, recs, mark)
}

// TestValueWriterAudit: a command's records go into the journal with its
// values in one append, reach the database with the next batch (the
// writer wakes for them even when no value changed; a failed batch keeps
// them for the next), and the table is kept within its bounds after each
// batch and by PruneAudit while no command comes.
func TestValueWriterAudit(t *testing.T) {
	ctx := context.Background()
	dir, _, db, j := openWithJournal(t)
	now := time.Now()
	var mu sync.Mutex
	db.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	gate := &foldGate{Store: db}
	w := NewValueWriter(gate, j, AuditBounds{MaxAge: time.Hour, MaxRows: 5}, slog.New(slog.DiscardHandler))
	defer w.Close()
	command := func(i int, confirmed map[string]time.Time) {
		at := now.Add(time.Duration(i) * time.Millisecond)
		recs := []bridge.AuditRecord{
			{At: at, InstallationID: "inst-1", SwitchID: "a", Command: "on", Outcome: "ok", RequestID: fmt.Sprint("r", i)},
			{At: at, InstallationID: "inst-1", SwitchID: "b", Command: "on", Outcome: "timeout", Latency: time.Second, RequestID: fmt.Sprint("r", i)},
		}
		if err := w.Persist(bridge.On, confirmed, recs); err != nil {
			t.Fatal(err)
		}
	}
	// waitFolded waits for a fold to have stored want records and
	// emptied the journal: commands may append while a fold runs, so the
	// records are in the database a moment before the journal is emptied.
	waitFolded := func(want int64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for n, _ := db.AuditRows(ctx); n != want || j.Mark().Size != 0; n, _ = db.AuditRows(ctx) {
			if time.Now().After(deadline) {
				t.Fatalf("%d records in the database and %d bytes in the journal after 10 s, want %d and an emptied journal", n, j.Mark().Size, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	// A command that confirmed nothing: its records alone wake the
	// writer, which stores them.
	command(0, nil)
	waitFolded(2)
	// One append holds a command's value and both its records; a batch
	// that fails leaves them in the journal, and the next one stores them.
	gate.failing.Store(true)
	command(1, map[string]time.Time{"a": now})
	vs, err := store.ReadJournal(dir)
	lines, _ := os.ReadFile(filepath.Join(dir, store.JournalName))
	// "#gen N", then one line for the value and one per record.
	if n := strings.Count(string(lines), "\n"); err != nil || len(vs) != 1 || n != 4 {
		t.Fatalf("journal after one command: %d values (%v), %d lines %q; want its value and both records", len(vs), err, n, lines)
	}
	gate.failing.Store(false)
	waitFolded(4)

	// Past the row bound: the oldest go, exactly down to it.
	for i := 2; i < 5; i++ {
		command(i, nil)
	}
	w.fold()
	got, err := db.Audit(ctx, bridge.AuditFilter{})
	if err != nil || len(got) != 5 || got[0].RequestID != "r4" || got[4].RequestID != "r2" {
		t.Fatalf("after 5 commands of 2 records under max_rows 5: %d records %+v, %v; want the 5 newest", len(got), got, err)
	}
	// Past the age bound, with no command coming: PruneAudit.
	mu.Lock()
	now = now.Add(2 * time.Hour)
	mu.Unlock()
	w.PruneAudit()
	if n, _ := db.AuditRows(ctx); n != 0 {
		t.Errorf("%d records left 2 h later under max_age 1h", n)
	}
}

// TestValueWriterAuditWithoutJournal: when the journal fails, the records
// go to the database before Persist returns, as the values do.
func TestValueWriterAuditWithoutJournal(t *testing.T) {
	ctx := context.Background()
	_, _, db, j := openWithJournal(t)
	w := NewValueWriter(db, j, AuditBounds{}, slog.New(slog.DiscardHandler))
	defer w.Close()
	j.Close() // every append fails from now on
	rec := bridge.AuditRecord{At: time.Now(), InstallationID: "inst-1", SwitchID: "a", Command: "off", Outcome: "failed", RequestID: "r"}
	if err := w.Persist(bridge.Off, nil, []bridge.AuditRecord{rec}); err != nil {
		t.Fatal(err)
	}
	if got, _ := db.Audit(ctx, bridge.AuditFilter{}); len(got) != 1 || got[0].RequestID != "r" {
		t.Errorf("records after Persist with a broken journal: %+v", got)
	}
}

// heldFold is a database whose first fold waits, inside its transaction,
// until release is closed.
type heldFold struct {
	*Store
	once             sync.Once
	entered, release chan struct{}
}

func (h *heldFold) FoldJournalAudited(ctx context.Context, vs []store.SwitchValue, recs []bridge.AuditRecord, mark store.JournalMark) error {
	h.once.Do(func() {
		close(h.entered)
		<-h.release
	})
	return h.Store.FoldJournalAudited(ctx, vs, recs, mark)
}

// TestCommandsDoNotWaitForAFold: a command journals its value and records
// while a fold's transaction is still running (on an SD card it can take
// long), and nothing is lost or stored twice: the fold empties the
// journal of what it stored and keeps what the command appended, which
// the next fold stores.
func TestCommandsDoNotWaitForAFold(t *testing.T) {
	ctx := context.Background()
	dir, eng, db, j := openWithJournal(t)
	held := &heldFold{Store: db, entered: make(chan struct{}), release: make(chan struct{})}
	w := NewValueWriter(held, j, AuditBounds{}, slog.New(slog.DiscardHandler))
	defer w.Close()
	now := time.Now()
	record := func(i int, v bridge.Value) []bridge.AuditRecord {
		return []bridge.AuditRecord{{At: now.Add(time.Duration(i) * time.Millisecond), InstallationID: "inst-1", SwitchID: "a",
			Command: bridge.Command(v), Outcome: bridge.OutcomeOK, RequestID: fmt.Sprint("r", i)}}
	}
	if err := w.Persist(bridge.On, map[string]time.Time{"a": now}, record(1, bridge.On)); err != nil {
		t.Fatal(err)
	}
	folded := make(chan error, 1)
	go func() { folded <- w.fold() }()
	<-held.entered
	persisted := make(chan error, 1)
	go func() {
		persisted <- w.Persist(bridge.Off, map[string]time.Time{"a": now.Add(time.Second)}, record(2, bridge.Off))
	}()
	select {
	case err := <-persisted:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second): // a bound for a loaded machine: the append takes microseconds
		close(held.release)
		t.Fatal("a command waited for the fold's transaction to end")
	}
	close(held.release)
	if err := <-folded; err != nil {
		t.Fatal(err)
	}
	vs, err := store.ReadJournal(dir)
	if err != nil || len(vs) != 1 || vs[0].Value != bridge.Off {
		t.Fatalf("journal after the fold = %+v, %v; want the second command's off alone", vs, err)
	}
	if got, _ := db.Audit(ctx, bridge.AuditFilter{}); len(got) != 1 || got[0].RequestID != "r1" {
		t.Fatalf("records stored by the fold = %+v; want the first command's", got)
	}
	if err := w.fold(); err != nil {
		t.Fatal(err)
	}
	got, _ := db.Audit(ctx, bridge.AuditFilter{})
	vals, _ := eng.SwitchValues(ctx)
	if len(got) != 2 || got[0].RequestID != "r2" || vals["a"] != bridge.Off {
		t.Fatalf("after the next fold: records %+v, a = %s; want both commands' records once and off", got, vals["a"])
	}
	if m := j.Mark(); m.Size != 0 {
		t.Errorf("the journal holds %d bytes when the database holds everything", m.Size)
	}
}

// TestFoldStoresEveryRecordOnce: a fold inserts its records several to a
// statement; whatever their number (one, one short of a statement's
// worth, a statement's worth, one more, several and a rest), each is
// stored once, whole.
func TestFoldStoresEveryRecordOnce(t *testing.T) {
	ctx := context.Background()
	at := time.UnixMilli(1_800_000_000_000)
	for _, n := range []int{1, 49, 50, 51, 137} {
		eng, err := store.Open(ctx, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		db := New(eng)
		recs := make([]bridge.AuditRecord, n)
		for i := range recs {
			recs[i] = bridge.AuditRecord{At: at.Add(time.Duration(i) * time.Millisecond), InstallationID: fmt.Sprint("inst-", i%3), ClientID: fmt.Sprint("app-", i),
				UserID: int64(i), SwitchID: fmt.Sprint("sw-", i), Command: bridge.CommandOff, Outcome: bridge.FailTimeout, Latency: time.Duration(i) * time.Millisecond,
				RequestID: fmt.Sprint("r", i)}
		}
		if err := eng.FoldJournalAudited(ctx, nil, recs, store.JournalMark{Generation: 1, Size: 1}); err != nil {
			t.Fatal(err)
		}
		got, err := db.Audit(ctx, bridge.AuditFilter{})
		eng.Close()
		if err != nil || len(got) != n {
			t.Fatalf("%d records folded: %d read back, %v", n, len(got), err)
		}
		for i, r := range got { // newest first
			want := recs[n-1-i]
			if !r.At.Equal(want.At) || r.InstallationID != want.InstallationID || r.ClientID != want.ClientID || r.UserID != want.UserID ||
				r.SwitchID != want.SwitchID || r.Command != want.Command || r.Outcome != want.Outcome || r.Latency != want.Latency || r.RequestID != want.RequestID {
				t.Fatalf("%d records folded: #%d read back as %+v, want %+v", n, i, r, want)
			}
		}
	}
}
