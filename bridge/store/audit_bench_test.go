package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/store"
)

// BenchmarkFoldAudit is what folding a command's value and its audit
// record into SQLite costs, per command, in batches as the value writer
// folds them (the commands of one coalescing window).
func BenchmarkFoldAudit(b *testing.B) {
	for _, c := range []struct {
		batch int
		audit bool
	}{{1, true}, {100, true}, {100, false}} {
		batch := c.batch
		b.Run(fmt.Sprintf("batch=%d/audit=%t", batch, c.audit), func(b *testing.B) {
			ctx := context.Background()
			db, err := store.Open(ctx, b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			at := time.Now()
			rec := bridge.AuditRecord{InstallationID: "inst-0123456789abcdef", ClientID: "client-0123456789", UserID: 1,
				SwitchID: "plug", Command: bridge.CommandOn, Outcome: bridge.OutcomeOK, Latency: 3 * time.Millisecond, RequestID: "req-0123456789abcdef"}
			vs := make([]store.SwitchValue, 0, batch)
			recs := make([]bridge.AuditRecord, 0, batch)
			b.ResetTimer()
			for i := 0; i < b.N; i += batch {
				vs, recs = vs[:0], recs[:0]
				for range batch {
					rec.At = at.Add(time.Duration(i) * time.Millisecond)
					vs = append(vs, store.SwitchValue{SwitchID: "plug", Value: bridge.On, At: rec.At})
					if c.audit {
						recs = append(recs, rec)
					}
				}
				if err := db.FoldJournalAudited(ctx, vs, recs, store.JournalMark{Generation: 1, Size: int64(i)}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkJournalAppend is what a command's one journal write costs on
// the request path: its values alone, or with one audit record per switch
// (N switches).
func BenchmarkJournalAppend(b *testing.B) {
	for _, c := range []struct {
		n     int
		audit bool
	}{{1, false}, {1, true}, {100, false}, {100, true}} {
		b.Run(fmt.Sprintf("n=%d/audit=%t", c.n, c.audit), func(b *testing.B) {
			j, err := store.OpenJournal(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer j.Close()
			at := time.Now()
			vs := make([]store.SwitchValue, c.n)
			var recs []bridge.AuditRecord
			for i := range vs {
				id := fmt.Sprintf("plug-%d", i)
				vs[i] = store.SwitchValue{SwitchID: id, Value: bridge.On, At: at}
				if c.audit {
					recs = append(recs, bridge.AuditRecord{At: at, InstallationID: "inst-0123456789abcdef", ClientID: "client-0123456789", UserID: 1,
						SwitchID: id, Command: bridge.CommandOn, Outcome: bridge.OutcomeOK, Latency: 3 * time.Millisecond, RequestID: "req-0123456789abcdef"})
				}
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if i%1000 == 999 {
					j.CompactTo(j.Mark()) // as folds do: the file stays small
				}
				if err := j.AppendAudited(vs, recs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
