package mqtt

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/drivers/mqtt/mqtttest"
)

// plugs is one simulator of every profile, plus the problem cases.
type plugs struct {
	tas    *mqtttest.Tasmota // retained POWER, already on
	tas2   *mqtttest.Tasmota // two relays, SetOption26; the switch is relay 2
	tas4   *mqtttest.Tasmota // SetOption4 (replies on stat/<topic>/POWER) and its own state texts
	sg1    *mqtttest.ShellyGen1
	rpc    *mqtttest.ShellyRPC
	z2m    *mqtttest.Z2M // hall/lamp and double (l1, l2)
	esp    *mqtttest.ESPHome
	gen    *mqtttest.Generic
	ro     *mqtttest.Generic // no command topic
	silent *mqtttest.Tasmota
	gone   *mqtttest.ESPHome // crashes
}

func startPlugs(t *testing.T, url string) *plugs {
	t.Helper()
	p := &plugs{
		tas:    mqtttest.NewTasmota(t, url, mqtttest.TasmotaOptions{Topic: "tas1", PowerRetain: true}),
		tas2:   mqtttest.NewTasmota(t, url, mqtttest.TasmotaOptions{Topic: "tas2", Relays: 2, SetOption26: true}),
		tas4:   mqtttest.NewTasmota(t, url, mqtttest.TasmotaOptions{Topic: "tas4", SetOption4: true, StateText: [2]string{"AUS", "AN"}}),
		sg1:    mqtttest.NewShellyGen1(t, url, "shelly1-328900", 1, true),
		rpc:    mqtttest.NewShellyRPC(t, url, "shellyplus1-a8032ab12345", 1, false),
		z2m:    mqtttest.NewZ2M(t, url, "zigbee2mqtt", mqtttest.Z2MAvailabilityJSON, mqtttest.Z2MDevice{Name: "hall/lamp"}, mqtttest.Z2MDevice{Name: "double", Endpoints: []string{"l1", "l2"}}),
		esp:    mqtttest.NewESPHome(t, url, "livingroom", "lamp"),
		gen:    mqtttest.NewGeneric(t, url, mqtttest.GenericOptions{CommandTopic: "gen/set", StateTopic: "gen/state", StateKey: "state", Retain: true, AvailabilityTopic: "gen/avail"}),
		ro:     mqtttest.NewGeneric(t, url, mqtttest.GenericOptions{StateTopic: "ro/state", PayloadOn: "1", PayloadOff: "0", Retain: true}),
		silent: mqtttest.NewTasmota(t, url, mqtttest.TasmotaOptions{Topic: "quiet"}),
		gone:   mqtttest.NewESPHome(t, url, "gone", "relay"),
	}
	p.tas.Set(true)
	return p
}

var plugSwitches = []string{
	`id: tas, name: Tasmota, profile: tasmota, topic: tas1`,
	`id: tas2, name: Tasmota relay 2, profile: tasmota, topic: tas2, relay: 2`,
	`id: tas4, name: Tasmota SetOption4, profile: tasmota, topic: tas4, state_text: {off: AUS, on: AN}`,
	`id: sg1, name: Shelly 1, profile: shelly-gen1, device_id: shelly1-328900`,
	`id: rpc, name: Shelly Plus, profile: shelly-rpc, prefix: shellyplus1-a8032ab12345`,
	`id: z2m, name: Hall lamp, profile: zigbee2mqtt, friendly_name: hall/lamp`,
	`id: z2m-l2, name: Double l2, profile: zigbee2mqtt, friendly_name: double, endpoint: l2`,
	`id: esp, name: ESPHome, profile: esphome, prefix: livingroom, object_id: lamp`,
	`id: gen, name: Generic, profile: generic, command_topic: gen/set, state_topic: gen/state, state_key: state, availability_topic: gen/avail`,
	`id: ro, name: Read-only, profile: generic, state_topic: ro/state, payload_on: "1", payload_off: "0"`,
	`id: silent, name: Silent, profile: tasmota, topic: quiet`,
	`id: gone, name: Gone, profile: esphome, prefix: gone, object_id: relay`,
	`id: tas-r5, name: No relay 5, profile: tasmota, topic: tas1, relay: 5`,
	`id: rpc-3, name: No switch 3, profile: shelly-rpc, prefix: shellyplus1-a8032ab12345, switch: 3`,
}

// commandable is every switch that confirms commands.
var commandable = []string{"tas", "tas2", "tas4", "sg1", "rpc", "z2m", "z2m-l2", "esp", "gen"}

func TestDriverMosquitto(t *testing.T) {
	b := mqtttest.StartMosquitto(t)
	p := startPlugs(t, b.URL) // before the hub: their retained state is waiting
	h := startHub(t, hubConfig("broker: "+b.URL+"\nclient_id: hub-test\nconfirm_timeout: 2s", plugSwitches...))
	driverSuite(t, h, p, b.URL)

	t.Run("broker killed and restarted", func(t *testing.T) {
		for _, id := range append([]string{"gone"}, commandable...) {
			if id != "gone" {
				eventually(t, 3*time.Second, id+" available", func() bool { return h.state(t, id).Available })
			}
		}
		b.Stop()
		eventually(t, 5*time.Second, "every switch unavailable while the broker is down", func() bool {
			for _, id := range commandable {
				if h.state(t, id).Available {
					return false
				}
			}
			return true
		})
		// GET still answers from the cache.
		if st := h.state(t, "esp"); st.Value != bridge.On || st.Updated.IsZero() {
			t.Errorf("esp while down = %+v, want the cached on", st)
		}
		eventually(t, time.Second, "the hub told tas is unavailable", func() bool {
			st, _ := h.notes.get("tas")
			return !st.Available && st.Value == bridge.On
		})
		start := time.Now()
		err := h.Command(context.Background(), commandable, bridge.CommandOn)
		// Waiting for a confirmation would take the 2 s confirm_timeout;
		// 1.5 s tells the two apart and leaves room for a loaded machine.
		if d := time.Since(start); d > 1500*time.Millisecond {
			t.Errorf("command with the broker down took %s; want a fast failure", d)
		}
		for _, id := range commandable {
			if r := failures(err)[id]; r != bridge.FailUnavailable {
				t.Errorf("%s: reason %q, want %q (err %v)", id, r, bridge.FailUnavailable, err)
			}
		}
		// While the broker is down the Zigbee lamp (on, as commanded
		// last) is switched off by hand; Z2M's state is not retained, so
		// only the driver's /get after reconnecting can learn it.
		if st := h.state(t, "z2m"); st.Value != bridge.On {
			t.Fatalf("z2m before the restart = %+v, want on", st)
		}
		p.z2m.Set(false)
		b.Start()
		eventually(t, 10*time.Second, "switches available again after the broker restart", func() bool {
			for _, id := range commandable {
				if !h.state(t, id).Available {
					return false
				}
			}
			return true
		})
		// The hub is back within a second of the broker; the plugs take
		// their own time, and a command sent before a plug has subscribed
		// again is lost. Each announces itself once it has subscribed.
		eventually(t, 10*time.Second, "every plug online again", func() bool {
			for _, id := range commandable {
				sw, _ := h.Switch(id)
				dev := sw.Device.(*device)
				dev.mu.Lock()
				online := dev.avail == availOnline
				dev.mu.Unlock()
				if !online {
					return false
				}
			}
			return true
		})
		eventually(t, 5*time.Second, "z2m resynced to off", func() bool { return h.state(t, "z2m").Value == bridge.Off })
		if err := h.Command(context.Background(), commandable, bridge.CommandOff); err != nil {
			t.Fatalf("off after restart: %v", err)
		}
		for _, id := range commandable {
			if v := h.state(t, id).Value; v != bridge.Off {
				t.Errorf("%s = %q after off", id, v)
			}
		}
	})
}

func TestDriverEmbedded(t *testing.T) {
	port := mqtttest.FreePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	h := startHub(t, hubConfig("broker: embedded\nlisten: "+addr+"\nconfirm_timeout: 2s", plugSwitches...))
	p := startPlugs(t, "tcp://"+addr)
	driverSuite(t, h, p, "tcp://"+addr)
}

// Every firmware works with a login tied to its switches, the broker's
// topic rules applied. (The observer that looks for retained commands has
// a login of the older form, which may read more.)
func TestDriverEmbeddedLogins(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", mqtttest.FreePort(t))
	var ids []string
	for _, s := range plugSwitches {
		ids = append(ids, strings.TrimPrefix(strings.Split(s, ",")[0], "id: "))
	}
	users := "users:\n  plugs: {password: pw, switches: [" + strings.Join(ids, ", ") + "]}\n  observer: obs"
	h := startHub(t, hubConfig("broker: embedded\nlisten: "+addr+"\nconfirm_timeout: 2s\n"+users, plugSwitches...))
	p := startPlugs(t, "tcp://plugs:pw@"+addr)
	driverSuite(t, h, p, "tcp://observer:obs@"+addr)
}

// driverSuite runs the same checks against any broker.
func driverSuite(t *testing.T, h *testHub, p *plugs, url string) {
	t.Run("list", func(t *testing.T) {
		want := map[string]bridge.Value{"tas": bridge.On, "ro": bridge.Off}
		for _, id := range commandable {
			if want[id] == "" {
				want[id] = bridge.Off
			}
		}
		for id, v := range want {
			eventually(t, 5*time.Second, id+" reported "+string(v), func() bool {
				st := h.state(t, id)
				return st.Value == v && st.Available && !st.Updated.IsZero()
			})
			eventually(t, time.Second, "hub notified of "+id, func() bool {
				st, ok := h.notes.get(id)
				return ok && st.Value == v && st.Available
			})
		}
		p.ro.Set(true)
		eventually(t, 3*time.Second, "read-only plug's live report", func() bool { return h.state(t, "ro").Value == bridge.On })
	})

	t.Run("on and off", func(t *testing.T) {
		for _, cmd := range []bridge.Command{bridge.CommandOn, bridge.CommandOff, bridge.CommandOn} {
			if err := h.Command(context.Background(), commandable, cmd); err != nil {
				t.Fatalf("%s: %v", cmd, err)
			}
			for _, id := range commandable {
				if v := h.state(t, id).Value; v != cmd.Value() {
					t.Errorf("after %s, %s = %q", cmd, id, v)
				}
			}
			on := cmd == bridge.CommandOn
			sims := map[string]bool{"tas": p.tas.On(), "tas4": p.tas4.On(), "sg1": p.sg1.On(), "rpc": p.rpc.On(), "z2m": p.z2m.State("hall/lamp", "state"),
				"z2m-l2": p.z2m.State("double", "state_l2"), "esp": p.esp.On(), "gen": p.gen.On()}
			for id, got := range sims {
				if got != on {
					t.Errorf("after %s, simulated %s is on=%v", cmd, id, got)
				}
			}
			if p.tas2.On() {
				t.Error("relay 1 of tas2 switched; the switch is relay 2")
			}
			if p.z2m.State("double", "state_l1") {
				t.Error("endpoint l1 switched; the switch is l2")
			}
		}
		// ESPHome reports only changes: "on" again is confirmed by the
		// state it already reported, without waiting for the timeout.
		start := time.Now()
		if err := h.Command(context.Background(), []string{"esp", "sg1"}, bridge.CommandOn); err != nil {
			t.Fatalf("on again: %v", err)
		}
		if d := time.Since(start); d > 1500*time.Millisecond { // under the 2 s confirm_timeout, with room for load
			t.Errorf("on again took %s", d)
		}
	})

	t.Run("read-only is unsupported", func(t *testing.T) {
		before := p.ro.Commands()
		err := h.Command(context.Background(), []string{"ro", "tas"}, bridge.CommandOff)
		if bridge.ErrorCode(err) != bridge.ENOTIMPLEMENTED || failures(err)["ro"] != bridge.FailUnsupported {
			t.Fatalf("err = %v, want not_implemented naming ro", err)
		}
		if h.state(t, "tas").Value != bridge.On {
			t.Error("tas was switched although the command was refused")
		}
		sw, _ := h.Switch("ro")
		if err := sw.Device.(bridge.Commander).Do(context.Background(), bridge.CommandOn); !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("Do on read-only = %v, want ErrUnsupported", err)
		}
		if p.ro.Commands() != before {
			t.Error("the read-only plug was sent something")
		}
	})

	t.Run("firmware rejects the command", func(t *testing.T) {
		// Shelly answers an RPC error for a switch id it lacks, matched to
		// the request by id: the command fails at once.
		start := time.Now()
		err := h.Command(context.Background(), []string{"rpc-3"}, bridge.CommandOn)
		if got := failures(err); got["rpc-3"] != bridge.FailError {
			t.Fatalf("err = %v, want rpc-3 failed", err)
		}
		if d := time.Since(start); d > 1500*time.Millisecond { // under the 2 s confirm_timeout, with room for load
			t.Errorf("took %s; the firmware's error should end the wait", d)
		}
		if f := err.(*bridge.Error).Failures[0]; !strings.Contains(f.Message, "-105") {
			t.Errorf("message %q does not carry the firmware's answer", f.Message)
		}
		// Tasmota's {"Command":"Error"} for a relay it lacks names no relay,
		// so it cannot fail the command outright (it would fail the other
		// relays' commands too); the timeout then says what was seen.
		sw, _ := h.Switch("tas-r5")
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		err = sw.Device.(bridge.Commander).Do(ctx, bridge.CommandOn)
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), `{"Command":"Error"}`) {
			t.Errorf("tas-r5: %v, want a timeout mentioning the rejection", err)
		}
		// Meanwhile the real relay of the same device works.
		if err := h.Command(context.Background(), []string{"tas"}, bridge.CommandOff); err != nil {
			t.Errorf("tas beside the rejected relay: %v", err)
		}
		if err := h.Command(context.Background(), []string{"tas"}, bridge.CommandOn); err != nil {
			t.Errorf("tas beside the rejected relay: %v", err)
		}
	})

	t.Run("silent plug times out", func(t *testing.T) {
		p.silent.SetSilent(true)
		defer p.silent.SetSilent(false)
		var locs []bridge.Location
		for _, l := range h.Locations() {
			locs = append(locs, *l)
		}
		short, err := bridge.NewSwitchboard(locs, h.Switches(), bridge.SwitchboardOptions{Timeout: 300 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		before := p.silent.Commands()
		start := time.Now()
		err = short.Command(context.Background(), []string{"silent", "tas"}, bridge.CommandOff)
		d := time.Since(start)
		if got := failures(err); got["silent"] != bridge.FailTimeout || len(got) != 1 {
			t.Fatalf("err = %v, want only silent timing out", err)
		}
		// The plug's 2 s confirm_timeout would end it at 2 s at the
		// earliest: anything sooner was the hub's 300 ms deadline, however
		// loaded the machine.
		if d < 300*time.Millisecond || d >= 2*time.Second {
			t.Errorf("took %s, want about the 300ms deadline", d)
		}
		if p.silent.Commands() != before+1 {
			t.Errorf("silent plug received %d commands, want 1", p.silent.Commands()-before)
		}
		if h.state(t, "tas").Value != bridge.Off {
			t.Error("the other plug was not switched")
		}
	})

	t.Run("confirm_timeout bounds a command", func(t *testing.T) {
		p.silent.SetSilent(true)
		defer p.silent.SetSilent(false)
		sw, _ := h.Switch("silent")
		start := time.Now()
		err := sw.Device.(bridge.Commander).Do(context.Background(), bridge.CommandOn)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want DeadlineExceeded", err)
		}
		// Not sooner than the 2 s set; the default (5 s) would end it at
		// 5 s, so 4 s tells the two apart with room for a loaded machine.
		if d := time.Since(start); d < 2*time.Second || d > 4*time.Second {
			t.Errorf("took %s, want the 2s confirm_timeout", d)
		}
	})

	t.Run("no command is published retained", func(t *testing.T) {
		for _, topic := range retainedTopics(t, url) {
			if isCommandTopic(topic) {
				t.Errorf("retained message on command topic %s", topic)
			}
		}
	})

	t.Run("offline plug", func(t *testing.T) {
		p.gone.Crash()
		eventually(t, 3*time.Second, "gone unavailable after its will", func() bool { return !h.state(t, "gone").Available })
		if st := h.state(t, "gone"); st.Value != bridge.Off {
			t.Errorf("gone = %+v, want the cached value kept", st)
		}
		start := time.Now()
		err := h.Command(context.Background(), []string{"gone", "tas"}, bridge.CommandOn)
		if got := failures(err); got["gone"] != bridge.FailUnavailable || len(got) != 1 {
			t.Fatalf("err = %v, want only gone unavailable", err)
		}
		if d := time.Since(start); d > 1500*time.Millisecond { // under the 2 s confirm_timeout, with room for load
			t.Errorf("took %s", d)
		}
		if !strings.Contains(err.Error(), "gone (unavailable)") {
			t.Errorf("message %q does not name the plug", err)
		}
	})

	t.Run("Z2M device offline by availability", func(t *testing.T) {
		p.z2m.SetDeviceAvailable("double", false)
		defer p.z2m.SetDeviceAvailable("double", true)
		eventually(t, 3*time.Second, "z2m-l2 unavailable", func() bool { return !h.state(t, "z2m-l2").Available })
		sw, _ := h.Switch("z2m-l2")
		if err := sw.Device.(bridge.Commander).Do(context.Background(), bridge.CommandOff); !errors.Is(err, bridge.ErrUnavailable) {
			t.Errorf("err = %v, want ErrUnavailable", err)
		}
		if !h.state(t, "z2m").Available {
			t.Error("the other Zigbee device went unavailable too")
		}
	})
}

// retainedTopics connects a fresh client, which receives every retained
// message, and returns their topics.
func retainedTopics(t *testing.T, url string) []string {
	t.Helper()
	var mu sync.Mutex
	var topics []string
	o := paho.NewClientOptions().AddBroker(url).SetClientID("retained-observer").SetOrderMatters(false)
	c := paho.NewClient(o)
	if tok := c.Connect(); !tok.WaitTimeout(3*time.Second) || tok.Error() != nil {
		t.Fatalf("observer connect: %v", tok.Error())
	}
	defer c.Disconnect(0)
	// Every plug's top level rather than #, which the embedded broker
	// refuses to every client but the hub.
	filters := map[string]byte{}
	for _, f := range []string{"cmnd", "stat", "tele", "shellies", "shellyplus1-a8032ab12345", "zigbee2mqtt", "livingroom", "gen", "ro", "gone"} {
		filters[f+"/#"] = 1
	}
	tok := c.SubscribeMultiple(filters, func(_ paho.Client, m paho.Message) {
		if m.Retained() {
			mu.Lock()
			topics = append(topics, m.Topic())
			mu.Unlock()
		}
	})
	if !tok.WaitTimeout(3*time.Second) || tok.Error() != nil {
		t.Fatalf("observer subscribe: %v", tok.Error())
	}
	time.Sleep(300 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if len(topics) == 0 {
		t.Fatal("no retained message at all; the observer cannot be working")
	}
	return slices.Clone(topics)
}

func isCommandTopic(topic string) bool {
	return strings.HasPrefix(topic, "cmnd/") || strings.HasSuffix(topic, "/command") || strings.HasSuffix(topic, "/set") ||
		strings.HasSuffix(topic, "/get") || strings.HasSuffix(topic, "/rpc") || strings.HasPrefix(topic, "shellies/command")
}

// Messages are applied in the order the broker delivered them: a burst of
// alternating reports ends in the last one. A report on a second switch,
// published after the burst, marks its end: the broker delivers one
// client's messages to a subscriber in order.
func TestReportsApplyInOrder(t *testing.T) {
	b := mqtttest.StartMosquitto(t)
	h := startHub(t, hubConfig("broker: "+b.URL, `id: g, name: G, profile: generic, state_topic: g/state`,
		`id: marker, name: Marker, profile: generic, state_topic: marker/state`))
	o := paho.NewClientOptions().AddBroker(b.URL).SetClientID("burst")
	c := paho.NewClient(o)
	if tok := c.Connect(); !tok.WaitTimeout(3*time.Second) || tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	defer c.Disconnect(0)
	for round := 0; round < 20; round++ {
		for i := 0; i < 50; i++ {
			c.Publish("g/state", 1, false, []string{"ON", "OFF"}[i%2])
		}
		want := bridge.Off
		if round%2 == 1 {
			c.Publish("g/state", 1, false, "ON")
			want = bridge.On
		}
		marker := []bridge.Value{bridge.On, bridge.Off}[round%2]
		if tok := c.Publish("marker/state", 1, false, strings.ToUpper(string(marker))); !tok.WaitTimeout(3 * time.Second) {
			t.Fatal("publish not acknowledged")
		}
		eventually(t, 3*time.Second, fmt.Sprintf("round %d marker", round), func() bool {
			return h.state(t, "marker").Value == marker
		})
		if got := h.state(t, "g").Value; got != want {
			t.Fatalf("round %d: state %s after the burst, want the last report %s", round, got, want)
		}
	}
}
