package bridge

import (
	"context"
	"math"
	"time"
)

// Reading is what a metering device last reported of what it draws. A
// quantity the device never reported is not Has; Energy is the total the
// hub shows of its own running total (EnergyCounter.Shown), not the
// device's counter.
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
// (their difference is the offset a counter reset added), and the
// ceiling of the totals the hub may show until the record is replaced.
type EnergyRecord struct {
	SwitchID string
	Total    float64 // kWh, the hub's running total
	Device   float64 // kWh, the device's counter when Total was taken
	// Ceiling (kWh, at least Total) is the most the hub shows of the
	// total while this record is the one stored: what it showed before a
	// kill -9 is at most Ceiling, and a restart starts the total there.
	// 0 in a record written before the hub kept ceilings: Total then.
	Ceiling float64
	At      time.Time
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
//
// A kept counter (its records stored) also never shows a total above the
// ceiling of the record in the store, like a database sequence that
// hands out numbers only below the block it has written: each record
// written (Reserve) reserves room above the running total, and when the
// total reaches the ceiling before the next record may be written, the
// total shown holds there until it is. After a kill -9, the device's
// counter may have reset while the hub was down and passed the recorded
// one, which would read as growth since the record, less than the total
// shown; a restart therefore starts the total at the stored ceiling at
// least, so that it never goes back and adds at most one reserve.
type EnergyCounter struct {
	// rec.Total is the running total; rec.Ceiling the ceiling of the
	// record in the store (the lower of two while a write is under way).
	rec    EnergyRecord
	primed bool // rec holds a device counter to compare with
	// kept: the records are stored, and the total shown is held under
	// the ceiling. stored: a record of the switch may be in the store;
	// until then a kept counter shows nothing.
	kept, stored bool
	// floor is the ceiling of the record a restart began from: the total
	// does not start below it.
	floor float64
	// base is the running total when the record was last written, at
	// the reading time baseAt: the reserve is measured from them.
	base   float64
	baseAt time.Time
}

// NewEnergyCounter starts a counter from a stored record, or from nothing
// when rec is nil (the first reading then sets the total). kept says
// whether its records are written to a store: if not, its total is shown
// as it is, and lost at a restart.
func NewEnergyCounter(id string, rec *EnergyRecord, kept bool) *EnergyCounter {
	c := &EnergyCounter{rec: EnergyRecord{SwitchID: id}, kept: kept}
	if rec != nil {
		c.rec, c.primed, c.stored = *rec, true, true
		c.rec.SwitchID = id
		c.rec.Ceiling = max(rec.Ceiling, rec.Total)
		c.floor = c.rec.Ceiling
		c.base, c.baseAt = rec.Total, rec.At
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

// Take takes in the device's counter d (kWh) read at at, and says what it
// made of it. A jump is ignored, not held against later readings: the
// counter is followed from its new value. The first reading after a
// restart brings the total up to the stored ceiling when it is below.
func (c *EnergyCounter) Take(d float64, at time.Time) EnergyOutcome {
	if math.IsNaN(d) || math.IsInf(d, 0) || d < 0 {
		return EnergyInvalid
	}
	if !c.primed {
		c.rec.Total, c.rec.Device, c.rec.At, c.primed = d, d, at, true
		c.base, c.baseAt = d, at
		return EnergyCounted
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
	t := c.rec.Total + delta
	if t < c.floor {
		// A restart's first reading: the total starts at the ceiling. What
		// it adds was not drawn, so the reserve does not count it.
		c.base += c.floor - t
		t = c.floor
	}
	c.rec.Total = t
	c.rec.Device = d
	if at.After(c.rec.At) {
		c.rec.At = at
	}
	return out
}

// total is the running total, the floor of a restart included.
func (c *EnergyCounter) total() float64 { return max(c.rec.Total, c.floor) }

// Total is the running total, and whether there is one yet.
func (c *EnergyCounter) Total() (float64, bool) { return c.total(), c.primed }

// Shown is the total the hub may show, and whether it may show one: the
// running total, held at the stored ceiling; for a kept counter, nothing
// until a record is written.
func (c *EnergyCounter) Shown() (float64, bool) {
	if !c.primed || (c.kept && !c.stored) {
		return 0, false
	}
	if c.kept {
		return min(c.total(), c.rec.Ceiling), true
	}
	return c.total(), true
}

// Held reports whether the total shown lags the running total: a record
// with a higher ceiling must be written for it to catch up.
func (c *EnergyCounter) Held() bool {
	return c.kept && c.primed && (!c.stored || c.total() > c.rec.Ceiling)
}

// Reserve returns the record to write now, its ceiling above the running
// total by a reserve: twice what the plug drew since the record last
// written (over a tenth of every at least), as a rate over every (the
// time until the next write may be), at least EnergySlack and at most
// MaxPlugPower for every. Until Written
// says the record is stored, the total shown is held under the lower of
// its ceiling and the one before, either of which the store may hold.
func (c *EnergyCounter) Reserve(every time.Duration) EnergyRecord {
	t := c.total()
	most := MaxPlugPower / 1000 * every.Hours()
	reserve := EnergySlack
	if drew := t - c.base; drew > 0 {
		// Over a span shorter than a tenth of every (the first record after
		// a start, readings seconds apart), a counter's resolution (1 Wh)
		// would read as a large rate and reserve energy the plug never
		// draws, which a kill -9 would then add: the span counts as that
		// tenth at least. A plug drawing more than that estimate holds its
		// total at the ceiling until the next write, lagging, never lost.
		span := max(c.rec.At.Sub(c.baseAt), every/10)
		reserve = 2 * drew * every.Hours() / span.Hours()
	}
	r := c.rec
	r.Total = t
	r.Ceiling = t + min(max(reserve, EnergySlack), most)
	c.lower(r.Ceiling)
	return r
}

// Final returns the record to write at shutdown: the exact total, its
// ceiling the total itself, so that a restart adds nothing.
func (c *EnergyCounter) Final() EnergyRecord {
	r := c.rec
	r.Total = c.total()
	r.Ceiling = r.Total
	c.lower(r.Ceiling)
	return r
}

// lower holds the total shown under ceiling too while a record with it
// is being written.
func (c *EnergyCounter) lower(ceiling float64) {
	if c.stored {
		c.rec.Ceiling = min(c.rec.Ceiling, ceiling)
	}
}

// Written tells the counter that r, from Reserve or Final, is stored.
func (c *EnergyCounter) Written(r EnergyRecord) {
	c.stored = true
	c.rec.Ceiling = r.Ceiling
	c.base, c.baseAt = r.Total, r.At
}

// Record is the counter's running record: its total, the device's counter
// and when, and the ceiling of the stored one.
func (c *EnergyCounter) Record() EnergyRecord {
	r := c.rec
	r.Total = c.total()
	return r
}
