package mqtt

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/drivers"
	"github.com/switchbridge/switchbridge/drivers/mqtt/mqtttest"
)

// connections records when the driver's client connected (its OnConnect).
type connections struct {
	observer
	up chan time.Time
}

func (c *connections) connected(_ string, up bool) {
	if up {
		select {
		case c.up <- time.Now():
		default: // the test reads every one; never block the client
		}
	}
}

// TestReconnectAfterEachOutage: the broker is killed for a second three
// times, 12 s apart (the hub's connection lives longer than stableAfter
// between them), and three times 5 s apart (it does not). After each
// outage the hub connects again within 2 s of the broker accepting
// connections, as after the first: paho's own back-off carried over from
// one outage to the next and grew to 30 s, and outages closer than
// stableAfter made ours grow too.
func TestReconnectAfterEachOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("three broker outages 12 s apart take about 40 s")
	}
	t.Parallel()
	for _, apart := range []time.Duration{12 * time.Second, 5 * time.Second} {
		t.Run(apart.String()+" apart", func(t *testing.T) {
			t.Parallel()
			reconnectAfterOutages(t, apart)
		})
	}
}

func reconnectAfterOutages(t *testing.T, apart time.Duration) {
	const (
		outages = 3
		outage  = time.Second
		bound   = 2 * time.Second // the requirement
	)
	b := mqtttest.StartMosquitto(t)
	d, err := New(drivers.Env{Settings: mustNode(t, "{broker: "+b.URL+", client_id: outages-hub}")})
	if err != nil {
		t.Fatal(err)
	}
	obs := &connections{observer: d.(*driver).obs, up: make(chan time.Time, 16)}
	d.(*driver).obs = obs
	if err := d.Add(drivers.Spec{ID: "p", Options: mustNode(t, "{profile: tasmota, topic: p}")}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	devs, err := d.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	connected := func(what string) time.Time {
		t.Helper()
		select {
		case at := <-obs.up:
			return at
		case <-time.After(15 * time.Second):
			t.Fatalf("no connection within 15 s %s", what)
			return time.Time{}
		}
	}
	last := connected("at start-up")
	for i := 1; i <= outages; i++ {
		time.Sleep(time.Until(last.Add(apart)))
		b.Stop()
		time.Sleep(outage)
		b.Start()
		up := b.Up()
		last = connected("after the broker restarted")
		took := last.Sub(up)
		t.Logf("outage %d: connected %s after the broker accepted connections", i, took.Round(time.Millisecond))
		if took > bound {
			t.Errorf("outage %d: the hub connected %s after the broker was back, want at most %s", i, took.Round(time.Millisecond), bound)
		}
		// Subscribed again too: the switch is available.
		// (No plug answers here: the driver's own state is what counts.)
		eventually(t, 5*time.Second, "subscribed again", func() bool { return devs["p"].(*device).d.connected() })
	}
}

// TestStateAfterBrokerRestart: every plug whose firmware can be asked for
// its state is switched by hand while the broker is down, then comes back
// announcing itself before it subscribes and without reporting its state.
// The hub's first question to each is lost; its re-asks make the cached
// value right within a few seconds of the broker's return.
func TestStateAfterBrokerRestart(t *testing.T) {
	t.Parallel()
	const (
		late = 1500 * time.Millisecond // past the first question and the first re-ask
		few  = 7 * time.Second
	)
	b := mqtttest.StartMosquitto(t)
	plugs := map[string]mqtttest.Plug{
		"tas": mqtttest.NewTasmota(t, b.URL, mqtttest.TasmotaOptions{Topic: "late_tas"}),
		"sg1": mqtttest.NewShellyGen1(t, b.URL, "shelly1-1a2b3c", 1, true),
		"rpc": mqtttest.NewShellyRPC(t, b.URL, "shellyplus1-1a2b3c4d5e6f", 1, false),
		"z2m": mqtttest.NewZ2M(t, b.URL, "zigbee2mqtt", mqtttest.Z2MAvailabilityJSON, mqtttest.Z2MDevice{Name: "late"}),
	}
	h := startHub(t, hubConfig("broker: "+b.URL+"\nclient_id: resync-hub",
		`id: tas, name: Tasmota, profile: tasmota, topic: late_tas`,
		`id: sg1, name: Shelly 1, profile: shelly-gen1, device_id: shelly1-1a2b3c`,
		`id: rpc, name: Shelly Plus, profile: shelly-rpc, prefix: shellyplus1-1a2b3c4d5e6f`,
		`id: z2m, name: Zigbee, profile: zigbee2mqtt, friendly_name: late`,
	))
	ids := slices.Sorted(maps.Keys(plugs))
	for _, id := range ids {
		eventually(t, 5*time.Second, id+" off and available", func() bool {
			st := h.state(t, id)
			return st.Available && st.Value == bridge.Off
		})
	}
	b.Stop()
	eventually(t, 5*time.Second, "every plug and the hub disconnected", func() bool {
		for _, id := range ids {
			if plugs[id].Connected() || h.state(t, id).Available {
				return false
			}
		}
		return true
	})
	for _, id := range ids {
		plugs[id].SubscribeLate(late)
		plugs[id].Set(true) // by hand; the report is lost with the broker
	}
	b.Start()
	up := b.Up()
	deadline := up.Add(few)
	for _, id := range ids {
		for {
			st := h.state(t, id)
			if st.Available && st.Value == bridge.On {
				t.Logf("%s right %s after the broker was back", id, time.Since(up).Round(time.Millisecond))
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s = %+v %s after the broker was back; the plug is on", id, st, few)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// The answers came from the plugs, asked after they had subscribed.
	for _, id := range ids {
		if !plugs[id].On() {
			t.Errorf("simulated %s is off: the hub's questions switched it", id)
		}
	}
}
