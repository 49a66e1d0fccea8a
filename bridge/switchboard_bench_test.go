package bridge_test

import (
	"context"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
)

// BenchmarkCommandIn is the switchboard's own part in a command to one
// switch, with a device that confirms at once and a Persist that only
// reads what it is given: the lookup, the change cap, the deadline and
// the confirmations handed on.
func BenchmarkCommandIn(b *testing.B) {
	h := newHub(b, map[string]bridge.Device{"lamp": &device{}})
	var stored int
	bridge.Configure(h, func(o *bridge.SwitchboardOptions) {
		o.Persist = func(v bridge.Value, confirmed map[string]time.Time, _ []bridge.AuditRecord) error {
			stored += len(confirmed)
			return nil
		}
	})
	ctx := context.Background()
	ids := []string{"lamp"}
	cmds := [2]bridge.Command{bridge.CommandOn, bridge.CommandOff}
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		if err := h.CommandIn(ctx, 1, ids, cmds[i&1]); err != nil {
			b.Fatal(err)
		}
		i++
	}
	if stored != i {
		b.Fatalf("%d confirmations stored for %d commands", stored, i)
	}
}
