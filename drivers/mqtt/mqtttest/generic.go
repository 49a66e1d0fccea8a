package mqtttest

import (
	"encoding/json"
	"testing"
)

// GenericOptions describe a simulated generic MQTT switch.
type GenericOptions struct {
	ID                string
	CommandTopic      string // "" for a read-only device (a sensor-like relay)
	StateTopic        string
	PayloadOn         string // default ON
	PayloadOff        string // default OFF
	StateKey          string // when set, state is {"<key>":"<payload>"}
	Retain            bool   // state messages retained
	AvailabilityTopic string // online, will offline; none when empty
}

// Generic simulates a switch that follows the usual Home Assistant MQTT
// switch conventions: it echoes its state after every command.
type Generic struct {
	*sim
	o GenericOptions
}

var _ Plug = (*Generic)(nil)

// NewGeneric connects a simulated generic switch.
func NewGeneric(tb testing.TB, broker string, o GenericOptions) *Generic {
	tb.Helper()
	if o.PayloadOn == "" {
		o.PayloadOn = "ON"
	}
	if o.PayloadOff == "" {
		o.PayloadOff = "OFF"
	}
	if o.ID == "" {
		o.ID = "generic-" + o.StateTopic
	}
	g := &Generic{sim: newSim(tb, broker, o.ID, 1), o: o}
	if o.AvailabilityTopic != "" {
		g.willTopic, g.willPayload, g.willQoS = o.AvailabilityTopic, "offline", 1
	} else {
		g.willTopic, g.willPayload = o.StateTopic+"/lwt", "gone"
	}
	if o.CommandTopic != "" {
		g.subs[o.CommandTopic] = 1
	} else {
		g.subs[o.StateTopic+"/unused"] = 0
	}
	g.handle = g.onMessage
	g.announce = func() {
		if o.AvailabilityTopic != "" {
			g.pub(o.AvailabilityTopic, 1, true, "online")
		}
	}
	g.greet = g.report
	g.Start()
	return g
}

func (g *Generic) report() {
	p := onOff(g.On(), g.o.PayloadOn, g.o.PayloadOff)
	if g.o.StateKey != "" {
		b, _ := json.Marshal(map[string]any{g.o.StateKey: p, "rssi": -60})
		p = string(b)
	}
	g.pub(g.o.StateTopic, 1, g.o.Retain, p)
}

func (g *Generic) onMessage(topic string, payload []byte) {
	if topic != g.o.CommandTopic || !g.command() {
		return
	}
	switch string(payload) {
	case g.o.PayloadOn:
		g.set(true)
	case g.o.PayloadOff:
		g.set(false)
	}
}

// Set implements Plug.
func (g *Generic) Set(on bool) {
	g.act.Lock()
	defer g.act.Unlock()
	g.set(on)
}

// set switches the relay and reports it; act is held.
func (g *Generic) set(on bool) {
	g.setRelay(0, on)
	g.report()
}
