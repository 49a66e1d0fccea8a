package mqtt

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/drivers"
	"github.com/switchbridge/switchbridge/drivers/mqtt/mqtttest"
)

// Which mqtt: keys a reload applies in place, and which need a restart.
func TestRestartFor(t *testing.T) {
	base := Settings{Broker: Embedded, Listen: "127.0.0.1:1883", ClientID: "hub", MaxClients: 10,
		Users: map[string]Login{"a": {Password: "x"}}, TLS: &TLSFiles{CA: "ca.pem"}}
	for _, c := range []struct {
		name   string
		change func(s *Settings)
		want   []string
	}{
		{"nothing", func(*Settings) {}, nil},
		{"logins", func(s *Settings) { s.Users = map[string]Login{"b": {Password: "y", Switches: []string{"p"}}} }, nil},
		{"confirm_timeout", func(s *Settings) { s.ConfirmTimeout = config.Duration(time.Second) }, nil},
		{"the same TLS files, another pointer", func(s *Settings) { s.TLS = &TLSFiles{CA: "ca.pem"} }, nil},
		{"listen", func(s *Settings) { s.Listen = "127.0.0.1:1884" }, []string{"listen"}},
		{"listen and max_clients", func(s *Settings) { s.Listen, s.MaxClients = "0.0.0.0:1883", 20 }, []string{"listen", "max_clients"}},
		{"broker", func(s *Settings) { s.Broker = "tcp://192.0.2.1:1883" }, []string{"broker"}},
	} {
		next := base
		c.change(&next)
		if got := restartFor(base, next); !slices.Equal(got, c.want) {
			t.Errorf("%s: restart for %v, want %v", c.name, got, c.want)
		}
	}
}

// Which connected clients a reload of the logins disconnects.
func TestReloadAdmits(t *testing.T) {
	rules := &brokerRules{}
	prev := newAuthConfig(HubLogin, "hubpw", map[string]Login{"a": {Password: "1"}, "b": {Password: "2"}, "c": {Password: "3"}}, rules)
	next := newAuthConfig(HubLogin, "hubpw", map[string]Login{"a": {Password: "1"}, "b": {Password: "changed"}, "d": {Password: "4", ClientIDs: []string{"DVES_*"}}}, rules)
	open := newAuthConfig(HubLogin, "hubpw", nil, rules)
	for _, c := range []struct {
		prev, next *authConfig
		user, id   string
		want       bool
	}{
		{prev, next, "a", "plug-a", true},     // unchanged
		{prev, next, "b", "plug-b", false},    // its password changed
		{prev, next, "c", "plug-c", false},    // its login removed
		{prev, next, "a", "DVES_1", false},    // its client id now claimed by d
		{open, open, "DVES_USER", "x", true},  // no logins before or after
		{open, next, "DVES_USER", "x", false}, // logins now: anonymous no more
		{open, next, "a", "x", false},         // came in without a password a now needs
	} {
		if got := admits(c.prev, c.next, c.user, c.id); got != c.want {
			t.Errorf("admits(%s as %s) = %v, want %v", c.user, c.id, got, c.want)
		}
	}
}

// On an external broker a reload that adds and removes switches keeps the
// hub's connection: the same client, no reconnect, the kept plug's state
// as it was, the new plug's retained state taken in.
func TestReloadKeepsTheBrokerConnection(t *testing.T) {
	b := mqtttest.StartMosquitto(t)
	kept := mqtttest.NewTasmota(t, b.URL, mqtttest.TasmotaOptions{Topic: "kept"})
	kept.Set(true)
	added := mqtttest.NewTasmota(t, b.URL, mqtttest.TasmotaOptions{Topic: "added", PowerRetain: true})
	added.Set(true)
	section := "broker: " + b.URL + "\nclient_id: reload-hub"
	h := startHub(t, hubConfig(section,
		`id: kept, name: Kept, profile: tasmota, topic: kept`,
		`id: gone, name: Gone, profile: tasmota, topic: gone`))
	eventually(t, 5*time.Second, "the kept plug's state", func() bool { return h.state(t, "kept").Value == "on" })
	sw, _ := h.Switch("kept")
	dev := sw.Device.(*device)
	d := dev.d
	client := d.c
	seen := h.state(t, "kept").LastSeen

	c, err := config.Load("next.yaml", config.Text(hubConfig(section,
		`id: kept, name: Kept, profile: tasmota, topic: kept`,
		`id: added, name: Added, profile: tasmota, topic: added`)))
	if err != nil {
		t.Fatal(err)
	}
	next, err := drivers.Build(c, drivers.Registry{Registration()}, drivers.Env{Notify: h.notes.notify})
	if err != nil {
		t.Fatal(err)
	}
	devs, err := next.OpenReplacing(context.Background(), h.set)
	if err != nil {
		t.Fatal(err)
	}
	h.set = next
	t.Cleanup(func() { next.Close() })
	var got map[string]*device = map[string]*device{}
	for _, s := range devs {
		got[s.ID] = s.Device.(*device)
	}
	if got["kept"] != dev || dev.d.c != client || d.closed.Load() {
		t.Fatal("the reload replaced the kept plug or the broker connection")
	}
	if st := dev.State(); st.Value != "on" || !st.Available || st.LastSeen.Before(seen) {
		t.Errorf("the kept plug after the reload: %+v", st)
	}
	if _, ok := got["gone"]; ok {
		t.Error("the removed switch is still served")
	}
	eventually(t, 5*time.Second, "the added plug's state", func() bool {
		st := got["added"].State()
		return st.Value == "on" && st.Available
	})
}

// On the embedded broker a reload that changes a login's switches applies
// its new topic rules to the login's next packet, on the connection it
// has: no disconnect, no reconnect.
func TestReloadAppliesRulesToConnectedClients(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", mqtttest.FreePort(t))
	section := func(switches string) string {
		return "broker: embedded\nlisten: " + addr + "\nclient_id: rules-hub\nusers:\n  a: {password: pa, switches: [" + switches + "]}\n  b: {password: pb, switches: [two]}"
	}
	h := startHub(t, hubConfig(section("one"),
		`id: one, name: One, profile: esphome, prefix: one, object_id: relay`,
		`id: two, name: Two, profile: esphome, prefix: two, object_id: relay`))
	var lost atomic.Int32
	o := paho.NewClientOptions().AddBroker("tcp://" + addr).SetClientID("plug-a").SetUsername("a").SetPassword("pa").SetAutoReconnect(false)
	o.SetConnectionLostHandler(func(paho.Client, error) { lost.Add(1) })
	c := paho.NewClient(o)
	if tok := c.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("connect: %v", tok.Error())
	}
	defer c.Disconnect(0)
	publish := func(topic, payload string) {
		t.Helper()
		// QoS 1: the broker has handled it (kept or dropped) once acknowledged.
		if tok := c.Publish(topic, 1, false, payload); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
			t.Fatalf("publish %s: %v", topic, tok.Error())
		}
	}
	publish("one/switch/relay/state", "ON")
	publish("two/switch/relay/state", "ON") // b's switch, not a's: dropped
	eventually(t, 5*time.Second, "one's report", func() bool { return h.state(t, "one").Value == "on" })
	if st := h.state(t, "two"); st.Value != "" || st.Available {
		t.Fatalf("a's report for two reached the hub before its rules allowed it: %+v", st)
	}

	cfg, err := config.Load("next.yaml", config.Text(hubConfig(section("one, two"),
		`id: one, name: One, profile: esphome, prefix: one, object_id: relay`,
		`id: two, name: Two, profile: esphome, prefix: two, object_id: relay`)))
	if err != nil {
		t.Fatal(err)
	}
	next, err := drivers.Build(cfg, drivers.Registry{Registration()}, drivers.Env{Notify: h.notes.notify})
	if err != nil {
		t.Fatal(err)
	}
	sws, err := next.OpenReplacing(context.Background(), h.set)
	if err != nil {
		t.Fatal(err)
	}
	h.set = next
	t.Cleanup(func() { next.Close() })
	var two bridge.Device
	for _, s := range sws {
		if s.ID == "two" {
			two = s.Device
		}
	}
	publish("two/switch/relay/state", "ON")
	eventually(t, 5*time.Second, "a's report for two, allowed now", func() bool { return two.State().Value == "on" })
	if !c.IsConnectionOpen() || lost.Load() != 0 {
		t.Error("the client lost its connection at the reload")
	}
}

// TestPlugBackAtOnceAfterAReload: a plug whose connection a reload ended
// (its password changed, as when it is adopted under a login of its own)
// and which is back at once, with the same client id and the new
// password, is sent its commands. mochi takes a clean session's client off
// its client list by client id once the old connection has wound down;
// the plug's new client, let in meanwhile, was taken off in its place:
// connected, subscribed, online to the hub and sent nothing, so every
// command to it ran to its deadline. The hook now ends the old connection
// and waits for it to leave before the new one joins (awaitPredecessor).
//
// The moment is narrow, so the test goes through it 40 times, each with a
// command that must be confirmed. Before the fix, four such runs side by
// side, ten times each under the race detector, failed in three of four
// (a command unconfirmed at one of the 40); with it, none did. A single
// run on an idle machine rarely meets the moment: the reload test through
// the CLI (TestDevicesListenAdoptThenReload) found it.
func TestPlugBackAtOnceAfterAReload(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", mqtttest.FreePort(t))
	section := func(password string) string {
		return "broker: embedded\nlisten: " + addr + "\nclient_id: reload-hub\nconfirm_timeout: 3s\nusers:\n  a: {password: " + password + ", switches: [one]}"
	}
	const plug = `id: one, name: One, profile: esphome, prefix: one, object_id: relay`
	h := startHub(t, hubConfig(section("p0"), plug))
	// connect connects the plug, ESPHome as it is: a last will, then its
	// subscription, its online and its state; it answers each command
	// with the state commanded.
	connect := func(password string) paho.Client {
		t.Helper()
		o := paho.NewClientOptions().AddBroker("tcp://" + addr).SetClientID("plug-one").SetUsername("a").SetPassword(password).SetAutoReconnect(false)
		o.SetWill("one/status", "offline", 0, true)
		c := paho.NewClient(o)
		if tok := c.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
			t.Fatalf("the plug's connect: %v", tok.Error())
		}
		tok := c.Subscribe("one/switch/relay/command", 0, func(_ paho.Client, m paho.Message) {
			c.Publish("one/switch/relay/state", 0, false, string(m.Payload()))
		})
		if !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
			t.Fatalf("the plug's subscription: %v", tok.Error())
		}
		c.Publish("one/status", 0, true, "online").Wait()
		c.Publish("one/switch/relay/state", 0, false, "OFF").Wait()
		return c
	}
	c := connect("p0")
	defer func() { c.Disconnect(0) }()
	for i := 1; i <= 40; i++ {
		password := fmt.Sprintf("p%d", i)
		cfg, err := config.Load("next.yaml", config.Text(hubConfig(section(password), plug)))
		if err != nil {
			t.Fatal(err)
		}
		next, err := drivers.Build(cfg, drivers.Registry{Registration()}, drivers.Env{Notify: h.notes.notify})
		if err != nil {
			t.Fatal(err)
		}
		// The reload ends the plug's connection: its password changed.
		reloaded := time.Now()
		sws, err := next.OpenReplacing(context.Background(), h.set)
		if err != nil {
			t.Fatal(err)
		}
		h.set = next
		t.Cleanup(func() { next.Close() })
		c.Disconnect(0)
		c = connect(password)
		var dev bridge.Device
		for _, s := range sws {
			if s.ID == "one" {
				dev = s.Device
			}
		}
		// Available again by the plug's word since the reload: its old
		// connection's last will (offline) came first.
		eventually(t, 5*time.Second, "the plug back", func() bool {
			st := dev.State()
			return st.Available && st.LastSeen.After(reloaded)
		})
		cmd := bridge.CommandOn
		if i%2 == 0 {
			cmd = bridge.CommandOff
		}
		do := func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return dev.(bridge.Commander).Do(ctx, cmd)
		}
		err = do()
		if errors.Is(err, bridge.ErrUnavailable) {
			// Seen once in 400 reloads under the race detector with
			// three more runs beside: the hub took the old connection's
			// offline in after the plug's online. Not what this test is
			// about (a plug sent nothing); the command goes again once
			// the plug is available, and must then be confirmed.
			t.Logf("reload %d: %v; again once available", i, err)
			eventually(t, 5*time.Second, "the plug available again", func() bool { return dev.State().Available })
			err = do()
		}
		if err != nil {
			t.Fatalf("reload %d, the plug back at once: %v", i, err)
		}
	}
}
