package accounts

import (
	"context"
	"crypto/sha256"
	"fmt"
	"github.com/switchbridge/switchbridge/bridge/store"
	"github.com/switchbridge/switchbridge/bridge/store/storetest"
	"strings"
	"testing"
	"time"
)

// BenchmarkChanges measures a hub's poll after a refresh storm: the batch
// holds n changed tokens of hub h1's installation, each issued and then
// revoked by the refresh that followed it (two change log entries a
// token). With history, the installation holds that many older tokens too,
// as a grant refreshed for days does. reads/op is the queries that read
// tokens and installations, beyond the three that read the change log.
func BenchmarkChanges(b *testing.B) {
	for _, d := range []store.Dialect{store.SQLite, store.Postgres} {
		b.Run(string(d), func(b *testing.B) {
			storetest.SetDialect(d)
			b.Cleanup(func() { storetest.SetDialect(store.SQLite) })
			for _, c := range []struct{ n, history int }{{1, 0}, {20, 0}, {500, 0}, {500, 20000}} {
				b.Run(fmt.Sprintf("tokens=%d/history=%d", c.n, c.history), func(b *testing.B) {
					db, cursor := newRefreshStorm(b, c.n, c.history)
					ctx := context.Background()
					reads := 0
					for b.Loop() {
						batch, r, err := db.changes(ctx, "h1", cursor)
						if err != nil {
							b.Fatal(err)
						}
						if len(batch.Tokens) != c.n {
							b.Fatalf("%d tokens in the batch, want %d", len(batch.Tokens), c.n)
						}
						reads = r
					}
					b.ReportMetric(float64(reads), "reads/op")
				})
			}
		})
	}
}

// newRefreshStorm returns the feed fixture's store after n refreshes of
// the installation in location 1 (hub h1), which held history tokens
// before them, and h1's cursor before the refreshes.
func newRefreshStorm(tb testing.TB, n, history int) (*Store, int64) {
	tb.Helper()
	f := newFeedFixture(tb)
	tx, err := f.db.db.BeginTx(f.ctx, nil)
	if err != nil {
		tb.Fatal(err)
	}
	defer tx.Rollback()
	now := time.Now()
	const rows = 500 // a statement
	for i := 0; i < history; i += rows {
		k := min(rows, history-i)
		args := make([]any, 0, 4*k)
		for j := range k {
			h := sha256.Sum256(fmt.Appendf(nil, "history-%d", i+j))
			args = append(args, h[:], f.in1.ID, unix(now.Add(-time.Hour))+int64(i+j), unix(now.Add(time.Hour)))
		}
		if _, err := tx.ExecContext(f.ctx, `INSERT INTO tokens (hash, installation_id, created_at, expires_at) VALUES `+
			strings.Repeat("(?, ?, ?, ?), ", k-1)+"(?, ?, ?, ?)", args...); err != nil {
			tb.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		tb.Fatal(err)
	}
	b, err := f.db.Changes(f.ctx, "h1", f.cursor1)
	if err != nil {
		tb.Fatal(err)
	}
	tx, err = f.db.db.BeginTx(f.ctx, nil)
	if err != nil {
		tb.Fatal(err)
	}
	defer tx.Rollback()
	var prev []byte
	for i := range n {
		h := sha256.Sum256(fmt.Appendf(nil, "storm-%d", i))
		if _, err := tx.ExecContext(f.ctx, `INSERT INTO tokens (hash, installation_id, created_at, expires_at) VALUES (?, ?, ?, ?)`,
			h[:], f.in1.ID, unix(now)+int64(i), unix(now.Add(time.Hour))); err != nil {
			tb.Fatal(err)
		}
		if prev != nil {
			if _, err := tx.ExecContext(f.ctx, `UPDATE tokens SET revoked_at = ? WHERE hash = ?`, unix(now)+int64(i), prev); err != nil {
				tb.Fatal(err)
			}
		}
		prev = h[:]
	}
	if err := tx.Commit(); err != nil {
		tb.Fatal(err)
	}
	return f.db, b.Cursor
}
