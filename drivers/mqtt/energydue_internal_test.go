package mqtt

import (
	"testing"
	"time"
)

// Records written at different times fall due on the same boundaries,
// never sooner than energyWriteEvery after their write.
func TestEnergyDueOnACommonGrid(t *testing.T) {
	base := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	want := base.Add(20 * time.Minute)
	for _, w := range []time.Duration{time.Second, 3 * time.Minute, 9*time.Minute + 59*time.Second, 10 * time.Minute} {
		written := base.Add(w)
		due := energyDue(written)
		if due.Sub(written) < energyWriteEvery {
			t.Errorf("written at +%s: due %s later, sooner than %s", w, due.Sub(written), energyWriteEvery)
		}
		if !due.Equal(want) {
			t.Errorf("written at +%s: due at %s, want the shared boundary %s", w, due.Format(time.TimeOnly), want.Format(time.TimeOnly))
		}
	}
	if due := energyDue(base); !due.Equal(base.Add(energyWriteEvery)) {
		t.Errorf("written on a boundary: due at %s, want the next one", due.Format(time.TimeOnly))
	}
}
