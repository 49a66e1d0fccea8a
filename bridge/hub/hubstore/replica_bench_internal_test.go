package hubstore

import (
	"context"
	"crypto/sha256"
	"fmt"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/store"
)

// BenchmarkApplyBatch measures a hub applying the batch a refresh storm
// or a revoked grant brings: n changed tokens of one installation (each
// revoked, as after a revocation), and as many deleted, into a replica
// that holds them.
func BenchmarkApplyBatch(b *testing.B) {
	for _, n := range []int{1, 100, 2000} {
		b.Run(fmt.Sprintf("tokens=%d", n), func(b *testing.B) {
			ctx := context.Background()
			eng, err := store.Open(ctx, b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			db := New(eng)
			defer eng.Close()
			in := bridge.ReplicaInstallation{ID: "in1", ClientID: "c1", UserID: 1, LocationID: 1, SwitchIDs: []string{"lamp"}, UpdatedAt: time.Now()}
			batch := &bridge.ChangeBatch{Installations: []bridge.ReplicaInstallation{in}}
			for i := range n {
				h := sha256.Sum256(fmt.Appendf(nil, "token %d", i))
				batch.Tokens = append(batch.Tokens, bridge.ReplicaToken{Hash: h[:], InstallationID: in.ID, ExpiresAt: time.Now().Add(time.Hour), Revoked: true})
				d := sha256.Sum256(fmt.Appendf(nil, "gone %d", i))
				batch.DeletedTokens = append(batch.DeletedTokens, d[:])
			}
			cursor := int64(0)
			for b.Loop() {
				cursor++
				batch.Cursor = cursor
				if err := db.ApplyBatch(ctx, batch, time.Now()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
