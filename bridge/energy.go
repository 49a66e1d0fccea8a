package bridge

import (
	"context"
	"math"
	"time"
)

// Reading is what a metering device last reported of what it draws. A
// quantity the device never reported is not Has; Energy is the hub's own
// running total (EnergyCounter), not the device's counter.
type Reading struct {
	Power   float64 // W
	Voltage float64 // V
	Current float64 // A
	Energy  float64 // kWh, never decreasing
	Has     Quantities
	// At is when the device last reported any of them.
	At time.Time
}

// Quantities is a set of the quantities a Reading holds.
type Quantities uint8

// The quantities a meter reports.
const (
	HasPower Quantities = 1 << iota
	HasVoltage
	HasCurrent
	HasEnergy
)

// ReadingStaleAfter is how long a reading holds without news from the
// device: past it, the API shows power and energy as null. It is three
// times Tasmota's default TelePeriod (300 s), the slowest of the
// firmwares' default reporting periods (Shelly reports every 30 s,
// Zigbee2MQTT plugs on change or every few minutes).
const ReadingStaleAfter = 15 * time.Minute

// Stale reports whether the reading may no longer hold at now: the device
// is unavailable, or has not reported for ReadingStaleAfter.
func (st State) Stale(now time.Time) bool {
	if st.Reading == nil {
		return false
	}
	return !st.Available || now.Sub(st.Reading.At) > ReadingStaleAfter
}

// MaxPlugPower bounds what one plug can draw: 16 A at 250 V. A device
// counter that grows by more than this times the time since the last
// reading (plus EnergySlack) is not believed.
const MaxPlugPower = 4000 // W

// EnergySlack is the growth always believed, whatever the time since the
// last reading: the rounding of a counter reported in whole watt-hours
// or watt-minutes, and clocks that disagree by a little.
const EnergySlack = 0.01 // kWh

// EnergyRecord is a switch's energy total as the hub keeps it across
// restarts: its running total and the device's counter at that moment
// (their difference is the offset a counter reset added).
type EnergyRecord struct {
	SwitchID string
	Total    float64 // kWh, the hub's running total
	Device   float64 // kWh, the device's counter when Total was taken
	At       time.Time
}

// EnergyStore keeps the energy records. The hub's store satisfies it.
type EnergyStore interface {
	EnergyRecords(ctx context.Context) ([]EnergyRecord, error)
	// SaveEnergy writes each record, replacing the switch's previous one.
	SaveEnergy(ctx context.Context, rs []EnergyRecord) error
}

// EnergyCounter turns a device's energy counter, which may go back to 0
// (a reboot, a firmware reset, Shelly Gen1 at every power-up), into a
// total that never decreases: a drop counts as a reset, and the energy
// since it is added to the total instead of going back.
type EnergyCounter struct {
	rec    EnergyRecord
	primed bool // rec holds a device counter to compare with
}

// NewEnergyCounter starts a counter from a stored record, or from nothing
// when rec is nil (the first reading then sets the total).
func NewEnergyCounter(id string, rec *EnergyRecord) *EnergyCounter {
	c := &EnergyCounter{rec: EnergyRecord{SwitchID: id}}
	if rec != nil {
		c.rec, c.primed = *rec, true
		c.rec.SwitchID = id
	}
	return c
}

// EnergyOutcome says what Take made of a device counter.
type EnergyOutcome int

// The outcomes of EnergyCounter.Take.
const (
	EnergyCounted EnergyOutcome = iota // the growth was added
	EnergyReset                        // the counter dropped: counted from 0
	EnergyJump                         // grew more than the plug can draw: ignored
	EnergyInvalid                      // not a counter (negative, NaN, infinite)
)

// Take takes in the device's counter d (kWh) read at at, and returns the
// running total and what it made of d. A jump is ignored, not held
// against later readings: the counter is followed from its new value.
func (c *EnergyCounter) Take(d float64, at time.Time) (float64, EnergyOutcome) {
	if math.IsNaN(d) || math.IsInf(d, 0) || d < 0 {
		return c.rec.Total, EnergyInvalid
	}
	if !c.primed {
		c.rec.Total, c.rec.Device, c.rec.At, c.primed = d, d, at, true
		return c.rec.Total, EnergyCounted
	}
	out := EnergyCounted
	delta := d - c.rec.Device
	if delta < 0 {
		// A reset: what the device counted since is all new.
		delta, out = d, EnergyReset
	}
	hours := at.Sub(c.rec.At).Hours()
	if hours < 0 {
		hours = 0
	}
	if delta > MaxPlugPower/1000*hours+EnergySlack {
		delta, out = 0, EnergyJump
	}
	c.rec.Total += delta
	c.rec.Device = d
	if at.After(c.rec.At) {
		c.rec.At = at
	}
	return c.rec.Total, out
}

// Total is the running total, and whether there is one yet.
func (c *EnergyCounter) Total() (float64, bool) { return c.rec.Total, c.primed }

// Record is what to store of the counter.
func (c *EnergyCounter) Record() EnergyRecord { return c.rec }
