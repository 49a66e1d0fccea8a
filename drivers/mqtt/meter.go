// Readings of metering plugs: each firmware's own messages made into one
// meter report, and the device's energy counter into the hub's running
// total (bridge.EnergyCounter), kept across restarts in the hub's store.

package mqtt

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
)

// meterReport is what one message says of what a plug draws: the
// quantities in has, energy as the device's own counter in kWh.
type meterReport struct {
	power, voltage, current, energy float64
	has                             bridge.Quantities
}

// set records quantity q as v when v is a plain number.
func (m *meterReport) set(q bridge.Quantities, v float64) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return
	}
	switch q {
	case bridge.HasPower:
		m.power = v
	case bridge.HasVoltage:
		m.voltage = v
	case bridge.HasCurrent:
		m.current = v
	case bridge.HasEnergy:
		if v < 0 {
			return // a counter is never negative
		}
		m.energy = v
	default:
		return
	}
	m.has |= q
}

// meterFrom reads the fields of a JSON object that hold quantities, each
// number scaled by its factor (to W, V, A and kWh). index picks the
// channel of a multi-channel device's arrays (Tasmota's [p1, p2]).
func meterFrom(obj map[string]json.RawMessage, index int, fields map[string]meterField) *meterReport {
	var m meterReport
	for k, f := range fields {
		raw, ok := obj[k]
		if !ok {
			continue
		}
		if v, ok := jsonNumber(raw, index); ok {
			m.set(f.q, v*f.scale)
		}
	}
	if m.has == 0 {
		return nil
	}
	return &m
}

type meterField struct {
	q     bridge.Quantities
	scale float64
}

// jsonNumber reads a number, or the index'th number of an array of them.
func jsonNumber(raw json.RawMessage, index int) (float64, bool) {
	var v float64
	if json.Unmarshal(raw, &v) == nil {
		return v, true
	}
	var vs []float64
	if json.Unmarshal(raw, &vs) == nil && index >= 0 && index < len(vs) {
		return vs[index], true
	}
	return 0, false
}

// tasmotaEnergyFields are the ENERGY object's keys the hub reads; Total is
// the device's counter in kWh (Today, Yesterday and Period are parts of
// it).
var tasmotaEnergyFields = map[string]meterField{
	"Power":   {bridge.HasPower, 1},
	"Voltage": {bridge.HasVoltage, 1},
	"Current": {bridge.HasCurrent, 1},
	"Total":   {bridge.HasEnergy, 1},
}

// parseTasmotaEnergy reads tele/SENSOR ({"ENERGY":{…}}) or the answer to
// Status 8 or 10 ({"StatusSNS":{"ENERGY":{…}}}) for relay (0 or 1: the
// first channel).
func parseTasmotaEnergy(b []byte, relay int) *meterReport {
	obj, ok := jsonObject(b)
	if !ok {
		return nil
	}
	if sns, ok := obj["StatusSNS"]; ok {
		if obj, ok = jsonObject(sns); !ok {
			return nil
		}
	}
	energy, ok := jsonObject(obj["ENERGY"])
	if !ok {
		return nil
	}
	ch := max(relay-1, 0)
	return meterFrom(energy, ch, tasmotaEnergyFields)
}

// shellyMeterFields are a Gen2+ Switch status's keys the hub reads.
var shellyMeterFields = map[string]meterField{
	"apower":  {bridge.HasPower, 1},
	"voltage": {bridge.HasVoltage, 1},
	"current": {bridge.HasCurrent, 1},
}

// parseShellyMeter reads a Gen2+ Switch status (status/switch:N, the
// switch:N of a NotifyStatus, a Switch.GetStatus result): apower (W),
// voltage, current and aenergy.total (Wh). NotifyStatus carries only what
// changed, so any of them may be missing.
func parseShellyMeter(raw []byte) *meterReport {
	obj, ok := jsonObject(raw)
	if !ok {
		return nil
	}
	m := meterFrom(obj, -1, shellyMeterFields)
	if ae, ok := jsonObject(obj["aenergy"]); ok {
		if t, ok := jsonNumber(ae["total"], -1); ok {
			if m == nil {
				m = &meterReport{}
			}
			m.set(bridge.HasEnergy, t/1000)
		}
	}
	if m != nil && m.has == 0 {
		return nil
	}
	return m
}

// z2mMeterFields are a Zigbee2MQTT state's keys the hub reads (the units
// its converters publish).
var z2mMeterFields = map[string]meterField{
	"power":   {bridge.HasPower, 1},
	"voltage": {bridge.HasVoltage, 1},
	"current": {bridge.HasCurrent, 1},
	"energy":  {bridge.HasEnergy, 1},
}

// parseZ2MMeter reads a Zigbee2MQTT device's state JSON. An endpoint's
// own keys (power_l1) come before the device's.
func parseZ2MMeter(b []byte, endpoint string) *meterReport {
	obj, ok := jsonObject(b)
	if !ok {
		return nil
	}
	fields := z2mMeterFields
	if endpoint != "" {
		fields = map[string]meterField{}
		for k, f := range z2mMeterFields {
			if _, ok := obj[k+"_"+endpoint]; ok {
				fields[k+"_"+endpoint] = f
			} else {
				fields[k] = f
			}
		}
	}
	return meterFrom(obj, -1, fields)
}

// parseNumber reads a plain decimal payload (a Shelly Gen1 power or
// energy topic, an ESPHome sensor's state).
func parseNumber(b []byte) (float64, bool) {
	if len(b) > 64 {
		return 0, false
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, false
	}
	return v, true
}

// numberParser reads a plain number on a sensor topic as quantity q,
// multiplied by scale.
func numberParser(q bridge.Quantities, scale float64) parser {
	return func(b []byte) report {
		v, ok := parseNumber(b)
		if !ok {
			return report{}
		}
		var m meterReport
		m.set(q, v*scale)
		if m.has == 0 {
			return report{}
		}
		return report{meter: &m}
	}
}

// sensorTopics are the keys a profile without fixed meter topics
// (ESPHome, generic) takes for a plug's power and energy sensors.
type sensorTopics struct {
	PowerTopic  string `yaml:"power_topic"`
	PowerUnit   string `yaml:"power_unit"`
	EnergyTopic string `yaml:"energy_topic"`
	EnergyUnit  string `yaml:"energy_unit"`
}

// addRoutes checks the sensor keys and routes their topics. defEnergy is
// the firmware's usual energy unit.
func (s sensorTopics) addRoutes(c *checker, p *plug, defEnergy string) {
	units := map[string]float64{"W": 1, "kW": 1000, "Wh": 0.001, "kWh": 1}
	unit := func(key, v, def string, allowed ...string) float64 {
		if v == "" {
			v = def
		}
		for _, a := range allowed {
			if v == a {
				return units[a]
			}
		}
		c.bad(key, "%s %q: one of %s", key, v, strings.Join(allowed, ", "))
		return 1
	}
	if s.PowerTopic != "" {
		t := c.topic("power_topic", s.PowerTopic)
		if _, dup := p.routes[t]; dup {
			c.bad("power_topic", "power_topic must differ from the plug's other topics")
		}
		p.routes[t] = numberParser(bridge.HasPower, unit("power_unit", s.PowerUnit, "W", "W", "kW"))
		p.acl.publish = append(p.acl.publish, t)
	} else if s.PowerUnit != "" {
		c.bad("power_unit", "power_unit needs power_topic")
	}
	if s.EnergyTopic != "" {
		t := c.topic("energy_topic", s.EnergyTopic)
		if _, dup := p.routes[t]; dup {
			c.bad("energy_topic", "energy_topic must differ from power_topic and the plug's other topics")
		}
		p.routes[t] = numberParser(bridge.HasEnergy, unit("energy_unit", s.EnergyUnit, defEnergy, "Wh", "kWh"))
		p.acl.publish = append(p.acl.publish, t)
	} else if s.EnergyUnit != "" {
		c.bad("energy_unit", "energy_unit needs energy_topic")
	}
}

// describe is a reading for a log line.
func (m *meterReport) String() string {
	return fmt.Sprintf("power=%g voltage=%g current=%g energy=%g", m.power, m.voltage, m.current, m.energy)
}

// energyWriteEvery is how often at most a switch's energy record is
// written while its plug reports: the only write readings cause, so that
// fifty plugs reporting every ten seconds do not wear an SD card out. A
// kill -9 loses at most this much of the record, which costs nothing: the
// device's counter still holds what was drawn, and the next reading is
// counted from the record (see bridge.EnergyCounter). Each record carries
// a ceiling reserved for the totals shown until the next one, sized on
// this interval; a total that reaches it sooner is shown held there until
// the next write.
const energyWriteEvery = 10 * time.Minute

// energyFlushEvery is how often the keeper looks for records due.
const energyFlushEvery = time.Minute

// energyDue is when a record written at written falls due again: at the
// first multiple of energyWriteEvery (a grid all records share) at least
// energyWriteEvery later. Every switch's record thus falls due on the
// same boundaries, and the records of fifty plugs go in one write every
// ten minutes (each write costs a page or more of the card whatever its
// size) instead of in writes of their own in different minutes; no
// record is written more often than energyWriteEvery.
func energyDue(written time.Time) time.Time {
	at := written.Add(energyWriteEvery)
	if b := at.Truncate(energyWriteEvery); !b.Equal(at) {
		return b.Add(energyWriteEvery)
	}
	return at
}

// energyKeeper holds the running energy totals of the driver's plugs and
// writes their records to the hub's store.
type energyKeeper struct {
	store bridge.EnergyStore // nil: kept in memory only
	log   *slog.Logger

	mu      sync.Mutex
	loaded  map[string]bridge.EnergyRecord
	entries map[string]*energyEntry
	stop    chan struct{}
	done    chan struct{}
	// kick asks for the urgent records to be written now. A counter reset
	// the record does not hold would, after a kill -9, be taken for the
	// one the restarted hub sees, and the total would go back by what the
	// plug drew between. Resets are rare (a reboot, an owner's reset), so
	// each is written at once; so is a switch's first record, and a total
	// held at its ceiling when its write is allowed.
	kick chan struct{}
}

// energyViewer is what shows a switch's energy total: told when a write
// let the total shown grow, it shows the keeper's shown total anew.
type energyViewer interface{ showEnergy() }

type energyEntry struct {
	c       *bridge.EnergyCounter
	written time.Time // when its record was last written (or the entry made)
	wrote   bool      // a record was written since the driver opened
	dirty   bool      // changed since
	urgent  bool      // to be written at once
	jumpLog time.Time // when a jump was last logged
	viewer  energyViewer
}

func newEnergyKeeper(log *slog.Logger) *energyKeeper {
	return &energyKeeper{log: log, loaded: map[string]bridge.EnergyRecord{}, entries: map[string]*energyEntry{}, kick: make(chan struct{}, 1)}
}

// open loads the stored records, when the hub hands over a store that
// keeps them, and starts writing them.
func (k *energyKeeper) open(store any) {
	if s, ok := store.(bridge.EnergyStore); ok {
		ctx, cancel := context.WithTimeout(context.Background(), clientIDTimeout)
		defer cancel()
		rs, err := s.EnergyRecords(ctx)
		if err != nil {
			// Writing would replace the stored totals with lower ones.
			k.log.Error("reading the stored energy totals; until a restart reads them, the totals start from the plugs' counters and are not written", "err", err)
			return
		}
		k.mu.Lock()
		k.store = s
		for _, r := range rs {
			k.loaded[r.SwitchID] = r
		}
		k.mu.Unlock()
	}
	if k.store == nil {
		return
	}
	k.stop, k.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(k.done)
		t := time.NewTicker(energyFlushEvery)
		defer t.Stop()
		for {
			select {
			case <-k.stop:
				k.flush(true)
				return
			case <-t.C:
				k.flush(false)
			case <-k.kick:
				k.flush(false)
			}
		}
	}()
}

// close writes every record that changed, exact (no reserve), and waits
// for it.
func (k *energyKeeper) close() {
	if k.stop == nil {
		return
	}
	close(k.stop)
	<-k.done
	k.stop = nil
}

// take counts the device counter d of switch id, read now; v is told
// when a write lets the total shown grow (see shown).
func (k *energyKeeper) take(id string, d float64, now time.Time, v energyViewer) {
	k.mu.Lock()
	e := k.entries[id]
	if e == nil {
		var rec *bridge.EnergyRecord
		if r, ok := k.loaded[id]; ok {
			rec = &r
		}
		e = &energyEntry{c: bridge.NewEnergyCounter(id, rec, k.store != nil), written: now}
		if rec == nil {
			e.dirty = true
		}
		k.entries[id] = e
	}
	e.viewer = v
	out := e.c.Take(d, now)
	total, _ := e.c.Total()
	logJump := false
	switch out {
	case bridge.EnergyCounted:
		e.dirty = true
	case bridge.EnergyReset:
		e.dirty, e.urgent = true, true
	case bridge.EnergyJump:
		e.dirty = true
		if now.Sub(e.jumpLog) >= time.Hour || e.jumpLog.IsZero() {
			e.jumpLog, logJump = now, true
		}
	}
	// A total held at its ceiling (or not shown yet: no record written)
	// is written as soon as the cadence allows: at once if nothing was
	// written since the driver opened.
	if e.c.Held() && (!e.wrote || now.Sub(e.written) >= energyWriteEvery) {
		e.urgent = true
	}
	kick := e.urgent
	k.mu.Unlock()
	if kick {
		select {
		case k.kick <- struct{}{}:
		default:
		}
	}
	switch {
	case out == bridge.EnergyReset:
		k.log.Info("energy counter went back (the plug restarted or was reset): counted on from the hub's total", "switch", id, "device_kwh", d, "total_kwh", total)
	case logJump:
		k.log.Warn("energy counter jumped by more than the plug can draw: the jump is ignored (logged at most once an hour)", "switch", id, "device_kwh", d, "total_kwh", total, "max_watts", bridge.MaxPlugPower)
	}
}

// shown is the total switch id may show now, and whether it may show one
// (see bridge.EnergyCounter.Shown).
func (k *energyKeeper) shown(id string) (float64, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	e := k.entries[id]
	if e == nil {
		return 0, false
	}
	return e.c.Shown()
}

// flush writes the records due; at shutdown (all), every record that
// changed or holds a reserve, exact.
func (k *energyKeeper) flush(all bool) {
	now := time.Now()
	var rs []bridge.EnergyRecord
	var es []*energyEntry
	k.mu.Lock()
	for _, e := range k.entries {
		r := e.c.Record()
		switch {
		case all && (e.dirty || r.Ceiling > r.Total):
			rs = append(rs, e.c.Final())
		case e.dirty && (e.urgent || !now.Before(energyDue(e.written))):
			rs = append(rs, e.c.Reserve(energyWriteEvery))
		default:
			continue
		}
		es = append(es, e)
	}
	k.mu.Unlock()
	if len(rs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), clientIDTimeout)
	defer cancel()
	if err := k.store.SaveEnergy(ctx, rs); err != nil {
		k.log.Error("writing the energy totals; tried again in a minute", "err", err, "switches", len(rs))
		return
	}
	var grew []energyViewer
	k.mu.Lock()
	for i, e := range es {
		was, had := e.c.Shown()
		e.c.Written(rs[i])
		if r := e.c.Record(); r.Total == rs[i].Total && r.Device == rs[i].Device && r.At.Equal(rs[i].At) {
			e.dirty = false
		}
		e.urgent, e.written, e.wrote = false, now, true
		if is, ok := e.c.Shown(); ok && (!had || is > was) && e.viewer != nil {
			grew = append(grew, e.viewer)
		}
	}
	k.mu.Unlock()
	for _, v := range grew {
		v.showEnergy()
	}
}
