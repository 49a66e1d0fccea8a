package mqtt

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
)

// device is one plug as the hub sees it.
type device struct {
	d    *driver
	id   string
	line int // of its switch in the config
	plug *plug
	// options is its switch's driver keys as text: a reload keeps the
	// device (and what it knows) when they did not change.
	options string
	// cmd holds a token while a command runs, so a plug has one command in
	// flight at a time and each confirmation belongs to one command.
	cmd chan struct{}

	mu      sync.Mutex
	value   bridge.Value
	updated time.Time
	avail   availability // the plug's own availability topic
	gateway availability // Zigbee2MQTT's bridge/state
	waiters []*waiter
	// live counts the value reports the plug sent (not the broker's
	// retained copies); a resync stops asking once it moves.
	live uint64
	// asking is the current resync's number; a timer of an older one
	// does nothing. requery is its pending re-ask, if any.
	asking  uint64
	requery *time.Timer
	// heard is set by any message from or about the plug (a report, its
	// availability, its gateway's, an answer, anything on its topics,
	// retained copies included) since the broker connection last went
	// down. announced is set once the plug has ever said it was online or
	// offline: such firmware says so again when it comes back. A command
	// for a plug not heard from since the connection came back, which is
	// askable or announced, waits for it (see holdUntilHeard).
	heard, announced bool
	// heardLive is heard without the retained copies: after a restart of
	// a broker with persistence, a retained "online" may predate the
	// outage, and the plug may not be back yet.
	heardLive bool
	// known is set by the first message from or about the plug itself
	// (not its gateway's) since the driver opened, retained copies
	// included, and never cleared: until then the hub does not claim the
	// plug is there, and a command to it fails at once (see
	// whyUnavailableLocked). A broker's retained copy counts: it is the
	// plug's own last word, and its last will replaces it when it goes.
	known bool
	// lastSeen is when the plug last sent a message the hub received live
	// (a retained copy is of an unknown age); zero when never.
	lastSeen time.Time
	// reading is what the plug last measured; nil while never.
	reading *bridge.Reading
	// change is closed (and replaced) when heard, the availability or the
	// connection changes: what a held command waits on.
	change chan struct{}
}

// State implements bridge.Device from the cache; it never waits.
func (dev *device) State() bridge.State {
	dev.mu.Lock()
	defer dev.mu.Unlock()
	return dev.stateLocked()
}

func (dev *device) stateLocked() bridge.State {
	// Not heard from is not available, whether or not a command may try.
	return bridge.State{Value: dev.value, Available: dev.known && dev.whyUnavailableLocked() == "", Updated: dev.updated, LastSeen: dev.lastSeen, Reading: dev.readingLocked()}
}

// readingLocked is a copy of the reading, for a State that leaves the lock.
func (dev *device) readingLocked() *bridge.Reading {
	if dev.reading == nil {
		return nil
	}
	r := *dev.reading
	return &r
}

// takeMeterLocked merges what one message measured into the reading: a
// message may hold only some quantities (a Shelly NotifyStatus holds what
// changed). A counter in m has been taken by the energy keeper, whose
// total shown is the reading's energy (none until it may show one).
func (dev *device) takeMeterLocked(m *meterReport, now time.Time) {
	if dev.reading == nil {
		dev.reading = &bridge.Reading{}
	}
	r := dev.reading
	if m.has&bridge.HasPower != 0 {
		r.Power = m.power
	}
	if m.has&bridge.HasVoltage != 0 {
		r.Voltage = m.voltage
	}
	if m.has&bridge.HasCurrent != 0 {
		r.Current = m.current
	}
	if m.has&bridge.HasEnergy != 0 {
		dev.showEnergyLocked()
	}
	r.Has |= m.has &^ bridge.HasEnergy
	r.At = now
}

// showEnergyLocked puts the energy keeper's total shown in the reading.
// Both the plug's messages and the keeper's writes (showEnergy) come
// here under dev.mu, reading the keeper's latest, so the energy shown
// never goes back.
func (dev *device) showEnergyLocked() bool {
	total, ok := dev.d.energy.shown(dev.id)
	r := dev.reading
	if !ok || r == nil || (r.Has&bridge.HasEnergy != 0 && r.Energy >= total) {
		return false
	}
	r.Energy = total
	r.Has |= bridge.HasEnergy
	return true
}

// showEnergy implements energyViewer: a write of the plug's energy record
// let its total shown grow (it was held at the ceiling, or not shown
// before the first record). Reads and the metrics show it at once; the
// event stream with the plug's next reading.
func (dev *device) showEnergy() {
	dev.mu.Lock()
	grew := dev.showEnergyLocked()
	st := dev.stateLocked()
	dev.mu.Unlock()
	if grew {
		dev.d.notify(dev.id, st)
	}
}

// whyUnavailableLocked says why a command cannot reach the plug now, or "".
// A plug not heard from since the hub started is one, unless a command is
// the only way to hear from it (it can neither be asked nor announces
// itself: a generic plug without availability_topic reports only what it
// is told or changes by hand), so a command to it is sent.
func (dev *device) whyUnavailableLocked() string {
	switch {
	case dev.d.closed.Load():
		return "the hub is shutting down"
	case !dev.d.connected():
		return fmt.Sprintf("the MQTT broker %s is not connected", dev.d.url)
	case !dev.known && dev.plug.hearable():
		return "not heard from since the hub started; waiting for a message on " + dev.plug.waitsOn()
	case dev.avail == availOffline:
		return "the plug reports itself offline"
	case dev.gateway == availOffline:
		return "its Zigbee2MQTT bridge is offline"
	}
	return ""
}

// Supports implements bridge.CommandSupporter: a generic plug without a
// command topic is read-only.
func (dev *device) Supports(bridge.Command) bool { return dev.plug.commandable() }

// changeLocked is the channel closed at the plug's next change.
func (dev *device) changeLocked() <-chan struct{} {
	if dev.change == nil {
		dev.change = make(chan struct{})
	}
	return dev.change
}

// changedLocked wakes the commands held in holdUntilHeard.
func (dev *device) changedLocked() {
	if dev.change != nil {
		close(dev.change)
		dev.change = nil
	}
}

// apply takes in what one message said. It never blocks: it runs on the
// MQTT client's message goroutine. force notifies the hub even when the
// report is empty (a connection came up).
func (dev *device) apply(r report, force bool) {
	now := time.Now()
	if r.meter != nil && r.meter.has&bridge.HasEnergy != 0 {
		dev.d.energy.take(dev.id, r.meter.energy, now, dev)
	}
	dev.mu.Lock()
	if r.meter != nil {
		dev.takeMeterLocked(r.meter, now)
	}
	was, wasKnown := dev.whyUnavailableLocked(), dev.known
	// A plug (or its Zigbee2MQTT bridge) that comes online may have
	// changed while away, and Zigbee2MQTT does not retain states: ask.
	cameOnline := (r.avail == availOnline && dev.avail != availOnline) || (r.bridge == availOnline && dev.gateway != availOnline)
	if r.avail != availUnknown {
		dev.avail = r.avail
	}
	if r.bridge != availUnknown {
		dev.gateway = r.bridge
	}
	if r.value != "" {
		dev.value, dev.updated = r.value, time.Now()
		if !r.retained {
			dev.live++
		}
	}
	if r.avail != availUnknown || r.bridge != availUnknown {
		dev.announced = true
	}
	// force is the connection coming up, not a message.
	if !force {
		dev.heard = true
		dev.heardLive = dev.heardLive || !r.retained
		// Zigbee2MQTT's bridge/state speaks for the bridge, not the device.
		if !r.gatewayOnly() {
			dev.known = true
			if !r.retained {
				dev.lastSeen = time.Now()
			}
		}
	}
	why := dev.whyUnavailableLocked()
	keep := dev.waiters[:0]
	for _, w := range dev.waiters {
		switch {
		case why != "":
			w.done <- fmt.Errorf("%s: %w", why, bridge.ErrUnavailable)
		case r.failure != "":
			w.done <- errors.New(r.failure)
		case r.rejected != "":
			w.hint = r.rejected
			keep = append(keep, w)
		case r.value != "" && r.value == w.target:
			w.done <- nil
		default:
			keep = append(keep, w)
		}
	}
	clear(dev.waiters[len(keep):])
	dev.waiters = keep
	// After the waiters have their answers: a held command woken here
	// finds its confirmation already in, and does not send a copy.
	if dev.heard || why != was {
		dev.changedLocked()
	}
	st := dev.stateLocked()
	dev.mu.Unlock()

	if why != was && why != "" && dev.d.ready.Load() {
		dev.d.log.Warn("switch unavailable", "switch", dev.id, "reason", bridge.Untrusted(why))
	} else if why != was && why == "" && !force {
		if wasKnown {
			dev.d.log.Info("switch available again", "switch", dev.id)
		} else {
			dev.d.log.Info("switch heard from: available", "switch", dev.id)
		}
	}
	if cameOnline && dev.d.ready.Load() {
		go dev.d.resync(dev) // not from here: this goroutine must never wait on the client
	}
	if r.rejected != "" && len(keep) == 0 {
		dev.d.log.Debug("firmware rejected a command or query", "switch", dev.id, "answer", bridge.Untrusted(r.rejected))
	}
	// Any live message moves last_seen, which the hub hears of too.
	if force || why != was || r.value != "" || r.avail != availUnknown || r.bridge != availUnknown || !r.retained {
		dev.d.notify(dev.id, st)
	}
}

// down forgets the plug's availability (it is learnt again from the
// retained messages after reconnecting), fails waiting commands and tells
// the hub the plug is unavailable.
func (dev *device) down() {
	dev.mu.Lock()
	dev.stopAskingLocked()
	dev.avail, dev.gateway = availUnknown, availUnknown
	dev.heard, dev.heardLive = false, false
	dev.changedLocked()
	for _, w := range dev.waiters {
		w.done <- fmt.Errorf("the MQTT broker connection is down: %w", bridge.ErrUnavailable)
	}
	clear(dev.waiters)
	dev.waiters = dev.waiters[:0]
	st := dev.stateLocked()
	dev.mu.Unlock()
	dev.d.notify(dev.id, st)
}

// Profile names the firmware profile the plug speaks, for the hub's
// switchbridge_switch_info.
func (dev *device) Profile() string { return dev.plug.profile }
