package bridge

import (
	"math"
	"testing"
	"time"
)

// TestEnergyCounter: a counter that drops is counted on from the total, a
// jump larger than the plug can draw is ignored, and the total never
// decreases, across a restart from the stored record too. The counter is
// not kept (no store): its total is shown as it is.
func TestEnergyCounter(t *testing.T) {
	t0 := time.Date(2024, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	c := NewEnergyCounter("plug", nil, false)
	if _, ok := c.Shown(); ok {
		t.Errorf("a total shown before any reading")
	}
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
		out := c.Take(s.device, at(s.sec))
		total, ok := c.Shown()
		if !ok || math.Abs(total-s.total) > 1e-9 || out != s.out {
			t.Errorf("step %d (%g at %ds): total %g (%v) outcome %d, want %g outcome %d", i, s.device, s.sec, total, ok, out, s.total, s.out)
		}
		if total < prev {
			t.Errorf("step %d: total went back from %g to %g", i, prev, total)
		}
		if c.Held() {
			t.Errorf("step %d: a counter without a store held", i)
		}
		prev = total
	}

	// A restart from the stored record: the device rebooted meanwhile.
	rec := c.Record()
	r := NewEnergyCounter("plug", &rec, false)
	if out := r.Take(0.5, at(7200)); out != EnergyReset {
		t.Errorf("after restart and reboot: outcome %d, want reset", out)
	}
	if total, _ := r.Shown(); math.Abs(total-(9.014+0.5)) > 1e-9 {
		t.Errorf("after restart and reboot: %g, want %g", total, 9.014+0.5)
	}
}

// An energyOp is a step of a kept counter's life in TestEnergyCeiling.
type energyOp int

const (
	take     energyOp = iota // a reading of the device counter d at sec
	write                    // the keeper writes a record with a reserve
	lost                     // ... and the write fails: the store keeps the one before
	unheard                  // ... the write reaches the store, yet fails for the hub
	shutdown                 // the exact record written at shutdown
	kill                     // kill -9 and a restart from the store's record
)

// TestEnergyCeiling runs a kept counter through sequences of readings,
// writes (some failing), shutdowns and kill -9s, with a model of the
// store. After each step the total shown is checked against the expected
// one and against the promises: it never decreases, across restarts too,
// and never passes the ceiling of the record in the store; a restart
// starts at that ceiling, so a reboot of the plug while the hub was down,
// seen or not, takes nothing back, and a kill -9 adds at most one
// reserve.
func TestEnergyCeiling(t *testing.T) {
	t0 := time.Date(2024, 1, 1, 12, 0, 0, 0, time.UTC)
	const every = 10 * time.Minute
	most := MaxPlugPower / 1000 * every.Hours()
	none := math.Inf(-1)
	type step struct {
		op      energyOp
		d       float64
		sec     int
		shown   float64 // none: no total shown; 0: not checked
		ceiling float64 // of the record written; 0: not checked
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"nothing shown before the first record; held at the ceiling until the next", []step{
			{op: take, d: 5.0, shown: none},
			{op: write, shown: 5.0, ceiling: 5.0 + EnergySlack}, // nothing drawn yet: the least reserve
			{op: take, d: 5.005, sec: 10, shown: 5.005},
			{op: take, d: 5.02, sec: 20, shown: 5.01}, // passes the ceiling: held
			{op: take, d: 5.03, sec: 30, shown: 5.01},
			// 30 Wh, over a minute at least (a tenth of the 10 minutes),
			// is 1.8 kW: twice that for 10 minutes is 0.6 kWh.
			{op: write, sec: 30, shown: 5.03, ceiling: 5.03 + 0.6},
			{op: take, d: 5.04, sec: 40, shown: 5.04},
		}},
		{"readings seconds apart: the counter's resolution reserves little", []step{
			{op: take, d: 5.0, shown: none},
			{op: write, shown: 5.0, ceiling: 5.0 + EnergySlack},
			// 1 Wh in 2 s would read as 1.8 kW; over a minute it is 60 W:
			// twice that for 10 minutes is 20 Wh, not the most a plug draws.
			{op: take, d: 5.001, sec: 2, shown: 5.001},
			{op: write, sec: 2, shown: 5.001, ceiling: 5.001 + 0.02},
		}},
		{"a reset during the downtime, seen", []step{
			{op: take, d: 5.0, shown: none},
			{op: write, shown: 5.0, ceiling: 5.01},
			{op: take, d: 5.004, sec: 60, shown: 5.004},
			{op: kill, shown: 5.01},                     // before a reading: the stored ceiling
			{op: take, d: 0.001, sec: 120, shown: 5.01}, // 5.001 from the counter, below the ceiling
			{op: take, d: 0.003, sec: 130, shown: 5.01}, // 5.012: held at the ceiling
			{op: write, sec: 130, shown: 5.012},         // a reserve
		}},
		{"a reset during the downtime, passing the recorded counter", []step{
			{op: take, d: 5.0, shown: none},
			{op: write, shown: 5.0, ceiling: 5.01},
			{op: take, d: 0.002, sec: 60, shown: 5.002},
			// A reset is written at once: 2 Wh in 60 s, as a rate over 10
			// minutes, twice.
			{op: write, sec: 60, shown: 5.002, ceiling: 5.002 + 2*0.002*10},
			{op: take, d: 0.010, sec: 120, shown: 5.010},
			{op: kill},
			// The counter reset again while the hub was down and is past
			// the recorded 0.002: 5.005 from the record, below the 5.010
			// shown; the total starts at the ceiling.
			{op: take, d: 0.005, sec: 180, shown: 5.042},
			{op: take, d: 0.006, sec: 190, shown: 5.042}, // held: the ceiling written
			{op: write, sec: 190, shown: 5.043},
			{op: take, d: 0.007, sec: 200, shown: 5.044}, // counted on, the reserve once
		}},
		{"a kill -9 adds at most the reserve, once", []step{
			{op: take, d: 5.0, shown: none},
			{op: write, shown: 5.0, ceiling: 5.01},
			{op: take, d: 5.1, sec: 600, shown: 5.01},
			{op: write, sec: 600, shown: 5.1, ceiling: 5.1 + 2*0.1}, // 100 Wh in 10 minutes, twice
			{op: take, d: 5.15, sec: 900, shown: 5.15},
			{op: kill},
			{op: take, d: 5.16, sec: 960, shown: 5.3}, // no reset: 5.16, the ceiling above
			{op: take, d: 5.17, sec: 970, shown: 5.3},
			{op: write, sec: 970, shown: 5.31},
			{op: kill},
			// The new ceiling, its reserve measured on what the plug drew
			// (70 Wh in 370 s), not on what the last restart added.
			{op: take, d: 5.18, sec: 980, shown: 5.31 + 2*0.07*600/370},
		}},
		{"a clean shutdown adds nothing and loses nothing", []step{
			{op: take, d: 5.0, shown: none},
			{op: write, shown: 5.0, ceiling: 5.01},
			{op: take, d: 5.003, sec: 60, shown: 5.003},
			{op: shutdown, sec: 60, shown: 5.003, ceiling: 5.003},
			{op: kill, shown: 5.003},
			{op: take, d: 5.003, sec: 120, shown: 5.003},
			{op: take, d: 5.004, sec: 130, shown: 5.003}, // above the exact ceiling: held
			{op: write, sec: 130, shown: 5.004},
		}},
		{"a failed write holds under both ceilings", []step{
			{op: take, d: 5.0, shown: none},
			{op: lost, shown: none}, // still nothing written
			{op: write, shown: 5.0, ceiling: 5.01},
			{op: take, d: 5.05, sec: 60, shown: 5.01},
			{op: write, sec: 60, shown: 5.05, ceiling: 5.05 + most},
			// 1 Wh in 10 minutes: a ceiling below the one stored. While it
			// may or may not be stored, the lower one holds.
			{op: take, d: 5.051, sec: 660, shown: 5.051},
			{op: unheard, sec: 660, shown: 5.051, ceiling: 5.051 + EnergySlack},
			{op: take, d: 5.065, sec: 670, shown: 5.061},
			{op: kill, shown: 5.061}, // the store has the lower one
			{op: take, d: 5.065, sec: 700, shown: 5.061},
		}},
		{"a jump and an invalid reading after a restart keep the ceiling", []step{
			{op: take, d: 5.0, shown: none},
			{op: write, shown: 5.0, ceiling: 5.01},
			{op: kill},
			{op: take, d: 900, sec: 10, shown: 5.01},
			{op: take, d: -1, sec: 20, shown: 5.01},
			{op: take, d: 900.001, sec: 30, shown: 5.01}, // 5.011, held
		}},
		{"an idle plug: the least reserve", []step{
			{op: take, d: 1.0, shown: none},
			{op: write, shown: 1.0, ceiling: 1.01},
			{op: take, d: 1.0, sec: 3600, shown: 1.0},
			{op: write, sec: 3600, shown: 1.0, ceiling: 1.01},
			{op: take, d: 1.001, sec: 7200, shown: 1.001},
			// 1 Wh in an hour is 0.33 Wh in 10 minutes: less than the slack.
			{op: write, sec: 7200, shown: 1.001, ceiling: 1.011},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stored *EnergyRecord // the store's record
			c := NewEnergyCounter("plug", nil, true)
			highest := math.Inf(-1)
			for i, s := range tc.steps {
				var wrote EnergyRecord
				switch s.op {
				case take:
					c.Take(s.d, t0.Add(time.Duration(s.sec)*time.Second))
				case write, lost, unheard:
					wrote = c.Reserve(every)
					if s.op != lost {
						r := wrote
						stored = &r
					}
					if s.op == write {
						c.Written(wrote)
					}
				case shutdown:
					wrote = c.Final()
					r := wrote
					stored = &r
					c.Written(wrote)
				case kill:
					var rec *EnergyRecord
					if stored != nil {
						r := *stored
						rec = &r
					}
					c = NewEnergyCounter("plug", rec, true)
				}
				shown, ok := c.Shown()
				switch {
				case s.shown == none && ok:
					t.Errorf("step %d: shows %g before a record is written", i, shown)
				case s.shown != none && s.shown != 0 && (!ok || math.Abs(shown-s.shown) > 1e-9):
					t.Errorf("step %d: shows %g (%v), want %g", i, shown, ok, s.shown)
				}
				if s.ceiling > 0 && math.Abs(wrote.Ceiling-s.ceiling) > 1e-9 {
					t.Errorf("step %d: wrote ceiling %g, want %g", i, wrote.Ceiling, s.ceiling)
				}
				if wrote.SwitchID != "" && wrote.Ceiling < wrote.Total {
					t.Errorf("step %d: wrote ceiling %g below the total %g", i, wrote.Ceiling, wrote.Total)
				}
				if !ok {
					continue
				}
				if shown < highest-1e-9 {
					t.Errorf("step %d: the total shown went back from %g to %g", i, highest, shown)
				}
				highest = max(highest, shown)
				if stored == nil || shown > max(stored.Ceiling, stored.Total)+1e-9 {
					t.Errorf("step %d: shows %g above the stored record %+v", i, shown, stored)
				}
				if total, _ := c.Total(); c.Held() != (total > shown+1e-12) {
					t.Errorf("step %d: held %v with the total %g and %g shown", i, c.Held(), total, shown)
				}
			}
		})
	}
}

// TestEnergyCeilingOfAnOlderRecord: a record written before the hub kept
// ceilings (0) holds the total shown at its total until the next write.
func TestEnergyCeilingOfAnOlderRecord(t *testing.T) {
	t0 := time.Date(2024, 1, 1, 12, 0, 0, 0, time.UTC)
	c := NewEnergyCounter("plug", &EnergyRecord{SwitchID: "plug", Total: 7, Device: 2, At: t0}, true)
	if v, ok := c.Shown(); !ok || v != 7 {
		t.Errorf("before a reading: %g (%v), want 7", v, ok)
	}
	c.Take(2.001, t0.Add(time.Minute))
	if v, _ := c.Shown(); v != 7 || !c.Held() {
		t.Errorf("after a reading: %g (held %v), want 7 held", v, c.Held())
	}
	c.Written(c.Reserve(10 * time.Minute))
	if v, _ := c.Shown(); math.Abs(v-7.001) > 1e-9 || c.Held() {
		t.Errorf("after a write: %g (held %v), want 7.001", v, c.Held())
	}
}
