package bridge

import (
	"math"
	"testing"
	"time"
)

// TestEnergyCounter: a counter that drops is counted on from the total, a
// jump larger than the plug can draw is ignored, and the total never
// decreases, across a restart from the stored record too.
func TestEnergyCounter(t *testing.T) {
	t0 := time.Date(2024, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	c := NewEnergyCounter("plug", nil)
	steps := []struct {
		device float64
		sec    int
		total  float64
		out    EnergyOutcome
	}{
		{5.0, 0, 5.0, EnergyCounted},    // the first reading sets the total
		{5.01, 10, 5.01, EnergyCounted}, // 10 Wh in 10 s: within slack
		{0.002, 20, 5.012, EnergyReset}, // a reboot: 2 Wh since
		{0.004, 30, 5.014, EnergyCounted},
		{900, 40, 5.014, EnergyJump},        // 900 kWh in 10 s: ignored
		{900.003, 50, 5.017, EnergyCounted}, // followed from its new value
		{-1, 60, 5.017, EnergyInvalid},
		{math.NaN(), 60, 5.017, EnergyInvalid},
		{904.0, 3660, 9.014, EnergyCounted}, // 4 kWh in an hour: the bound, and slack
	}
	prev := 0.0
	for i, s := range steps {
		total, out := c.Take(s.device, at(s.sec))
		if math.Abs(total-s.total) > 1e-9 || out != s.out {
			t.Errorf("step %d (%g at %ds): total %g outcome %d, want %g outcome %d", i, s.device, s.sec, total, out, s.total, s.out)
		}
		if total < prev {
			t.Errorf("step %d: total went back from %g to %g", i, prev, total)
		}
		prev = total
	}

	// A restart from the stored record: the device rebooted meanwhile.
	rec := c.Record()
	r := NewEnergyCounter("plug", &rec)
	if total, out := r.Take(0.5, at(7200)); out != EnergyReset || math.Abs(total-(9.014+0.5)) > 1e-9 {
		t.Errorf("after restart and reboot: %g %d, want %g reset", total, out, 9.014+0.5)
	}
}
