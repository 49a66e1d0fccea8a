package hubstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/store/storetest"
)

// TestEnergyTotals: records are written, replaced and read back through
// another connection, their ceilings with them, on both dialects.
func TestEnergyTotals(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T) {
		ctx := context.Background()
		dir := t.TempDir()
		one, other := open(t, dir), open(t, dir)
		t0 := time.UnixMilli(1_700_000_000_000)
		a := bridge.EnergyRecord{SwitchID: "a", Total: 12.5, Device: 0.25, Ceiling: 12.75, At: t0}
		b := bridge.EnergyRecord{SwitchID: "b", Total: 1, Device: 1, At: t0}
		if err := one.SaveEnergy(ctx, []bridge.EnergyRecord{a, b}); err != nil {
			t.Fatal(err)
		}
		a.Total, a.Device, a.Ceiling, a.At = 13.75, 1.5, 14.125, t0.Add(time.Minute)
		if err := one.SaveEnergy(ctx, []bridge.EnergyRecord{a}); err != nil {
			t.Fatal(err)
		}
		got, err := other.EnergyRecords(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0] != a || got[1] != b {
			t.Errorf("read back %+v, want %+v and %+v", got, a, b)
		}
	})
}
