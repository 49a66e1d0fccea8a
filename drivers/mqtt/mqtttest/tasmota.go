package mqtttest

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// TasmotaOptions describe a simulated Tasmota device. Defaults are the
// firmware's.
type TasmotaOptions struct {
	Topic       string // %topic%; default tasmota_<6 hex>
	Relays      int    // default 1
	SetOption4  bool   // replies on stat/<topic>/POWER instead of RESULT
	SetOption26 bool   // POWER1 even with one relay
	PowerRetain bool   // plain stat/<topic>/POWER retained
	StateText   [2]string
	// Discovery publishes tasmota/discovery/<MAC>/config and …/sensors
	// at every connect, as the firmware does by default (SetOption19 0);
	// off here so that tests of other things see only the plug's topics.
	Discovery bool
	MAC       string // 12 hex digits; default from the topic (TasmotaMAC)
}

// Tasmota simulates a Tasmota device with the default FullTopic
// %prefix%/%topic%/. It answers every POWER command and query with
// stat/<topic>/RESULT {"POWER":"ON"} and then plain stat/<topic>/POWER ON,
// reports the new state even when nothing changed, and has the last will
// tele/<topic>/LWT Offline (retained). On every connect it sends itself an
// empty POWER; on the first after boot also INFO1..3 and every relay's
// state.
type Tasmota struct {
	*sim
	o       TasmotaOptions
	booting atomic.Bool // until the first connect after Start
}

var _ Plug = (*Tasmota)(nil)

// NewTasmota connects a simulated Tasmota device to broker.
func NewTasmota(tb testing.TB, broker string, o TasmotaOptions) *Tasmota {
	tb.Helper()
	if o.Topic == "" {
		o.Topic = "tasmota_1A2B3C"
	}
	if o.StateText == ([2]string{}) {
		o.StateText = [2]string{"OFF", "ON"}
	}
	t := &Tasmota{sim: newSim(tb, broker, "DVES_"+o.Topic, o.Relays), o: o}
	t.willTopic, t.willPayload, t.willQoS = "tele/"+o.Topic+"/LWT", "Offline", 1
	t.subs["cmnd/"+o.Topic+"/#"] = 0
	t.handle = t.onMessage
	t.announce = func() { t.pub("tele/"+o.Topic+"/LWT", 1, true, "Online") }
	t.greet = func() {
		if o.Discovery {
			t.announceDiscovery()
		}
		// The iobroker workaround: an empty POWER to itself, so a
		// RESULT/POWER pair follows.
		t.pub("cmnd/"+o.Topic+"/POWER", 0, false, "")
		if !t.booting.Swap(false) {
			return
		}
		// The first connect after boot: INFO1..3, then every relay.
		t.pub("tele/"+o.Topic+"/INFO1", 0, false, `{"Info1":{"Module":"Generic","Version":"14.4.1(release-tasmota)","FallbackTopic":"cmnd/DVES_1A2B3C_fb/","GroupTopic":"cmnd/tasmotas/"}}`)
		t.pub("tele/"+o.Topic+"/INFO2", 0, false, `{"Info2":{"WebServerMode":"Admin","Hostname":"`+o.Topic+`","IPAddress":"192.0.2.20"}}`)
		t.pub("tele/"+o.Topic+"/INFO3", 0, false, `{"Info3":{"RestartReason":"Power On","BootCount":3}}`)
		for i := range t.relays {
			t.report(i)
		}
	}
	t.Start()
	return t
}

// Start implements Plug: an explicit start is a boot, after which the
// first connect reports more than a reconnect does.
func (t *Tasmota) Start() {
	t.booting.Store(true)
	t.sim.Start()
}

// Relays is how many relays the device has.
func (t *Tasmota) Relays() int { return len(t.relays) }

// powerKey is GetPowerDevice: POWER for a lone relay unless SetOption26.
func (t *Tasmota) powerKey(i int) string {
	if len(t.relays) == 1 && !t.o.SetOption26 {
		return "POWER"
	}
	return "POWER" + strconv.Itoa(i+1)
}

func (t *Tasmota) text(on bool) string { return onOff(on, t.o.StateText[1], t.o.StateText[0]) }

func (t *Tasmota) onMessage(topic string, payload []byte) {
	prefix := "cmnd/" + t.o.Topic + "/"
	if !strings.HasPrefix(topic, prefix) {
		return
	}
	cmd := strings.ToUpper(topic[len(prefix):])
	if !t.command() {
		return
	}
	if !strings.HasPrefix(cmd, "POWER") {
		t.pub("stat/"+t.o.Topic+"/RESULT", 0, false, `{"Command":"Unknown"}`)
		return
	}
	idx := 1
	if digits := cmd[len("POWER"):]; digits != "" {
		n, err := strconv.Atoi(digits)
		if err != nil {
			t.pub("stat/"+t.o.Topic+"/RESULT", 0, false, `{"Command":"Unknown"}`)
			return
		}
		idx = n
	}
	if idx > len(t.relays) {
		t.pub("stat/"+t.o.Topic+"/RESULT", 0, false, `{"Command":"Error"}`)
		return
	}
	relays := []int{idx - 1}
	if idx == 0 {
		relays = relays[:0]
		for i := range t.relays {
			relays = append(relays, i)
		}
	}
	p := strings.TrimSpace(string(payload))
	for _, i := range relays {
		switch strings.ToUpper(p) {
		case "ON", "TRUE", "START", "1", strings.ToUpper(t.o.StateText[1]):
			t.setRelay(i, true)
		case "OFF", "FALSE", "STOP", "0", strings.ToUpper(t.o.StateText[0]):
			t.setRelay(i, false)
		case "TOGGLE", "2":
			t.setRelay(i, !t.relay(i))
		default:
			// "", "?" and anything unrecognised are a query.
		}
		t.report(i)
	}
}

// report sends what Tasmota sends after a power change or query.
func (t *Tasmota) report(i int) {
	key, text := t.powerKey(i), t.text(t.relay(i))
	js, _ := json.Marshal(map[string]string{key: text})
	if t.o.SetOption4 {
		t.pub("stat/"+t.o.Topic+"/"+key, 0, false, string(js))
	} else {
		t.pub("stat/"+t.o.Topic+"/RESULT", 0, false, string(js))
	}
	t.pub("stat/"+t.o.Topic+"/"+key, 0, t.o.PowerRetain, text)
}

// Set implements Plug: a button press on relay 1.
func (t *Tasmota) Set(on bool) {
	t.act.Lock()
	defer t.act.Unlock()
	t.setRelay(0, on)
	t.report(0)
}

// Tele publishes tele/<topic>/STATE as TelePeriod does.
func (t *Tasmota) Tele() {
	st := map[string]any{"Time": "2026-01-01T00:00:05", "Uptime": "0T00:00:05", "UptimeSec": 5, "Heap": 25,
		"SleepMode": "Dynamic", "Sleep": 50, "LoadAvg": 19, "MqttCount": 1,
		"Wifi": map[string]any{"AP": 1, "SSId": "home", "RSSI": 80, "Signal": -60}}
	for i := range t.relays {
		st[t.powerKey(i)] = t.text(t.relay(i))
	}
	b, _ := json.Marshal(st)
	t.pub("tele/"+t.o.Topic+"/STATE", 0, false, string(b))
}

func (t *Tasmota) String() string { return fmt.Sprintf("tasmota %s", t.o.Topic) }

// Fleet starts n simulated Tasmota plugs on broker, for benchmarks, named
// after name: topics <name>_000, <name>_001…, switch ids <name>000,
// <name>001…. It returns the topics, the ids and the config lines for a
// `driver: mqtt` switch list.
func Fleet(tb testing.TB, broker, name string, n int) (topics, ids, switches []string) {
	tb.Helper()
	for i := range n {
		topic := fmt.Sprintf("%s_%03d", name, i)
		id := fmt.Sprintf("%s%03d", name, i)
		NewTasmota(tb, broker, TasmotaOptions{Topic: topic})
		topics = append(topics, topic)
		ids = append(ids, id)
		switches = append(switches, fmt.Sprintf("id: %s, name: %s, profile: tasmota, topic: %s", id, strings.ToUpper(id), topic))
	}
	return topics, ids, switches
}

// Sensor publishes tele/<topic>/SENSOR as a metering Tasmota (a Sonoff
// POW, an Athom plug) does every TelePeriod: power in W, voltage, current
// and Total, the device's energy counter in kWh (which the owner may
// reset with EnergyTotal 0).
func (t *Tasmota) Sensor(watts, volts, amps, totalKWh float64) {
	t.pub("tele/"+t.o.Topic+"/SENSOR", 0, false, fmt.Sprintf(
		`{"Time":"2024-01-01T12:00:00","ENERGY":{"TotalStartTime":"2023-01-01T00:00:00","Total":%.3f,"Yesterday":0.000,"Today":0.000,"Period":0,"Power":%g,"ApparentPower":%g,"ReactivePower":0,"Factor":1.00,"Voltage":%g,"Current":%.3f}}`,
		totalKWh, watts, watts, volts, amps))
}
