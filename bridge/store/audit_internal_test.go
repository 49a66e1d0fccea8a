package store

import (
	"context"
	"testing"
	"time"
)

// TestAuditRidesTheJournal: a command's audit records go into the journal
// in the write of its values, reach the database with them when the
// journal is replayed (as after a kill -9), and read back whole and
// filtered.
func TestAuditRidesTheJournal(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	j, err := OpenJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	at := time.UnixMilli(1_800_000_000_000)
	recs := []AuditRecord{
		{At: at, InstallationID: "inst-1", ClientID: "app-1", UserID: 7, SwitchID: "kitchen", Command: "on", Outcome: "ok", Latency: 42 * time.Millisecond, RequestID: "r1"},
		{At: at.Add(time.Second), InstallationID: "inst-2", ClientID: "app-2", UserID: 8, SwitchID: "hall", Command: "off", Outcome: "timeout", Latency: 5 * time.Second, RequestID: "r2 \"quoted\"\nline"},
	}
	before := j.Mark().Size
	if err := j.AppendAudited([]SwitchValue{{SwitchID: "kitchen", Value: "on", At: at}}, recs[:1]); err != nil {
		t.Fatal(err)
	}
	if err := j.AppendAudited(nil, recs[1:]); err != nil {
		t.Fatal(err)
	}
	if j.Mark().Size == before {
		t.Fatal("nothing journaled")
	}
	if got, _ := db.Audit(ctx, AuditFilter{}); len(got) != 0 {
		t.Fatalf("the database holds %v before the journal is folded", got)
	}
	rep, err := j.Replay(db)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Unreadable != 0 || rep.Replayed != 1 {
		t.Errorf("replay %+v, want the one value and no unreadable line", rep)
	}
	got, err := db.Audit(ctx, AuditFilter{})
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
		f    AuditFilter
		want string
	}{
		{AuditFilter{InstallationID: "inst-1"}, "r1"},
		{AuditFilter{SwitchID: "hall"}, recs[1].RequestID},
		{AuditFilter{Since: at.Add(time.Second)}, recs[1].RequestID},
	} {
		got, err := db.Audit(ctx, c.f)
		if err != nil || len(got) != 1 || got[0].RequestID != c.want {
			t.Errorf("audit %+v = %+v, %v; want only %q", c.f, got, err, c.want)
		}
	}
	// A replay after a fold adds nothing twice.
	if _, err := j.Replay(db); err != nil {
		t.Fatal(err)
	}
	if got, _ := db.Audit(ctx, AuditFilter{}); len(got) != 2 {
		t.Errorf("after a second replay, %d records", len(got))
	}
}

// TestAuditBounds: PruneAudit deletes what is older than the age bound by
// the store's clock, then the oldest past the row bound.
func TestAuditBounds(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := time.UnixMilli(1_800_000_000_000)
	db.now = func() time.Time { return now }
	var recs []AuditRecord
	for i := range 10 {
		recs = append(recs, AuditRecord{At: now.Add(-time.Duration(i) * 24 * time.Hour), InstallationID: "inst-1", SwitchID: "kitchen", Command: "on", Outcome: "ok", RequestID: string(rune('a' + i))})
	}
	if err := db.FoldJournalAudited(ctx, nil, recs, JournalMark{}); err != nil {
		t.Fatal(err)
	}
	// Older than 7 days: days 8 and 9 go (day 7 is exactly at the bound).
	if n, err := db.PruneAudit(ctx, 7*24*time.Hour, 0); err != nil || n != 2 {
		t.Fatalf("prune by age deleted %d, %v; want 2", n, err)
	}
	if n, err := db.PruneAudit(ctx, 7*24*time.Hour, 5); err != nil || n != 3 {
		t.Fatalf("prune by rows deleted %d, %v; want 3", n, err)
	}
	got, _ := db.Audit(ctx, AuditFilter{})
	if len(got) != 5 || got[0].RequestID != "a" || got[4].RequestID != "e" {
		t.Errorf("left %+v, want the 5 newest", got)
	}
}
