package mqtt

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/bridge/infra/logtest"
	"github.com/switchbridge/switchbridge/drivers"
	"github.com/switchbridge/switchbridge/drivers/mqtt/mqtttest"
)

// TestTasmotaDefaultsQuiet connects a client that does at every connect
// what a real Tasmota does: it subscribes to its own topic, its group
// topic cmnd/tasmotas/# and its fallback topic cmnd/<client id>_fb/#, and
// asks itself for its state with an empty POWER. None of it is refused or
// logged; and it still never receives another plug's command.
func TestTasmotaDefaultsQuiet(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", mqtttest.FreePort(t))
	cfg, err := config.Load("test.yaml", config.Text(hubConfig("broker: embedded\nlisten: "+addr+"\nusers:\n"+
		"  tas: {password: p1, switches: [tas]}\n  other: {password: p2, switches: [other]}",
		`id: tas, name: Tasmota, profile: tasmota, topic: tas1`,
		`id: other, name: Other, profile: tasmota, topic: tas2`)))
	if err != nil {
		t.Fatal(err)
	}
	log := &logtest.Buffer{}
	set, err := drivers.Build(cfg, drivers.Registry{Registration()}, drivers.Env{Notify: func(string, bridge.State) {},
		Logger: slog.New(slog.NewTextHandler(log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sws, err := set.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	h, err := bridge.NewSwitchboard([]bridge.Location{{ID: 1, Name: "Home", Switches: []string{"tas", "other"}}}, sws, bridge.SwitchboardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mqtttest.NewTasmota(t, "tcp://other:p2@"+addr, mqtttest.TasmotaOptions{Topic: "tas2"})

	var mu sync.Mutex
	var got []string
	o := paho.NewClientOptions().AddBroker("tcp://" + addr).SetClientID("DVES_1A2B3C").SetUsername("tas").SetPassword("p1")
	o.SetConnectTimeout(2 * time.Second).SetAutoReconnect(false)
	o.SetDefaultPublishHandler(func(_ paho.Client, m paho.Message) {
		mu.Lock()
		got = append(got, m.Topic())
		mu.Unlock()
	})
	c := paho.NewClient(o)
	if tok := c.Connect(); !tok.WaitTimeout(3*time.Second) || tok.Error() != nil {
		t.Fatalf("connect: %v", tok.Error())
	}
	defer c.Disconnect(0)
	filters := map[string]byte{"cmnd/tas1/#": 0, "cmnd/tasmotas/#": 0, "cmnd/DVES_1A2B3C_fb/#": 0}
	tok := c.SubscribeMultiple(filters, nil)
	if !tok.WaitTimeout(3*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribe: %v", tok.Error())
	}
	for f, code := range tok.(*paho.SubscribeToken).Result() {
		if code == 0x80 {
			t.Errorf("subscription to %s refused", f)
		}
	}
	// Another client's fallback topic is another client's.
	tok = c.Subscribe("cmnd/DVES_FFFFFF_fb/#", 0, nil)
	if !tok.WaitTimeout(3*time.Second) || tok.(*paho.SubscribeToken).Result()["cmnd/DVES_FFFFFF_fb/#"] != 0x80 {
		t.Errorf("subscription to another client's fallback topic granted")
	}
	if p := c.Publish("cmnd/tas1/POWER", 1, false, ""); !p.WaitTimeout(3*time.Second) || p.Error() != nil {
		t.Fatalf("publish: %v", p.Error())
	}
	// The other plug's command: sent by the hub, confirmed by that plug,
	// never delivered here. The hub commands only a plug it has heard from.
	eventually(t, 10*time.Second, "the hub heard the other plug", func() bool { return (&testHub{Switchboard: h}).state(t, "other").Available })
	if err := h.Command(ctx, []string{"other"}, bridge.CommandOn); err != nil {
		t.Fatalf("command to the other plug: %v", err)
	}
	// A message of its own is delivered after anything queued before it.
	if p := c.Publish("stat/tas1/POWER", 1, false, "OFF"); !p.WaitTimeout(3*time.Second) || p.Error() != nil {
		t.Fatal(p.Error())
	}
	eventually(t, 3*time.Second, "the hub heard tas", func() bool { return !(&testHub{Switchboard: h}).state(t, "tas").Updated.IsZero() })
	mu.Lock()
	defer mu.Unlock()
	for _, topic := range got {
		if strings.HasPrefix(topic, "cmnd/tas2/") {
			t.Errorf("the Tasmota-like client received the other plug's command %s", topic)
		}
	}
	// The one refusal logged is the subscription to another client's
	// fallback topic, which the test asked for.
	for line := range strings.Lines(log.String()) {
		if strings.Contains(line, "level=WARN") && !strings.Contains(line, "cmnd/DVES_FFFFFF_fb/#") {
			t.Errorf("the broker warned about firmware defaults: %s", line)
		}
	}
}
