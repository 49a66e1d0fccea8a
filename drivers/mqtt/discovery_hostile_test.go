package mqtt

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/switchbridge/switchbridge/bridge/hub/hubstore"
	"github.com/switchbridge/switchbridge/drivers/mqtt/mqtttest"
)

var _ DiscoveredStore = (*hubstore.Store)(nil)

func slogTo(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

// The list reaches the hub's store, where the owner's commands read it,
// and follows a device that clears its announcement.
func TestDiscoveryStored(t *testing.T) {
	b := mqtttest.StartMosquitto(t)
	db := openStore(t, t.TempDir())
	d := openDriverOn(t, db, "broker: "+b.URL+"\nclient_id: hub-store", `id: tas, name: Kitchen, profile: tasmota, topic: tas1`)
	mqtttest.NewTasmota(t, b.URL, mqtttest.TasmotaOptions{Topic: "tas1", Discovery: true, MAC: "A4CF12000001"})
	mqtttest.NewTasmota(t, b.URL, mqtttest.TasmotaOptions{Topic: "tasmota_0A0B0C", Discovery: true, MAC: "A4CF120A0B0C"})
	eventually(t, 10*time.Second, "both stored", func() bool {
		devs, err := db.DiscoveredDevices(context.Background())
		return err == nil && len(devs) == 2
	})
	devs, _ := db.DiscoveredDevices(context.Background())
	if devs[0].ID != "tasmota-A4CF12000001" || devs[0].UsedBy != "tas" || devs[1].UsedBy != "" ||
		devs[1].Entry != `{id: tasmota, name: Tasmota, driver: mqtt, profile: tasmota, topic: tasmota_0A0B0C}` {
		t.Errorf("stored %+v", devs)
	}
	// An empty retained config removes the device, as Tasmota does when
	// discovery is turned off.
	c := rawClient(t, b.URL, "clearer")
	c.Publish("tasmota/discovery/A4CF120A0B0C/config", 0, true, "").Wait()
	eventually(t, 10*time.Second, "the cleared device gone from the store", func() bool {
		devs, err := db.DiscoveredDevices(context.Background())
		return err == nil && len(devs) == 1 && devs[0].ID == "tasmota-A4CF12000001" && len(d.Discovered()) == 1
	})
}

func rawClient(t *testing.T, url, id string) paho.Client {
	t.Helper()
	c := paho.NewClient(paho.NewClientOptions().AddBroker(url).SetClientID(id))
	if tok := c.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("connect %s: %v", id, tok.Error())
	}
	t.Cleanup(func() { c.Disconnect(0) })
	return c
}

// Hostile announcements: huge, malformed, a config under another MAC,
// thousands of fake devices. The list stays bounded, each kind of refusal
// is logged once, and a genuine device announced afterwards is still
// listed (the rate bound refills).
func TestDiscoveryHostile(t *testing.T) {
	b := mqtttest.StartMosquitto(t)
	logs := &logLines{}
	d := openDriver(t, "broker: "+b.URL+"\nclient_id: hub-hostile")
	d.disc.log = slogTo(logs)
	c := rawClient(t, b.URL, "hostile")
	pub := func(topic, payload string) {
		if tok := c.Publish(topic, 0, false, payload); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
			t.Fatalf("publish: %v", tok.Error())
		}
	}
	good := mqtttest.TasmotaDiscoveryConfig(mqtttest.TasmotaOptions{Topic: "t1", MAC: "A4CF12000001"}, 1)
	pub("tasmota/discovery/A4CF12000001/config", strings.Repeat("x", maxAnnouncement+1))
	pub("tasmota/discovery/A4CF12000001/config", `{"mac":`)
	pub("tasmota/discovery/BBBBBBBBBBBB/config", good) // under another device's MAC
	pub("homeassistant/switch/x/config", `{"cmd_t":"a/set"}`)
	pub("zigbee2mqtt/bridge/devices", `[{"ieee_address":1}]`)
	pub("shellies/announce", `{"id":"shelly1-1","model":"SHSW-1"`)
	// Two thousand fake devices, each under its own MAC.
	for i := range 2000 {
		mac := fmt.Sprintf("A4CF12%06X", i+16)
		pub("tasmota/discovery/"+mac+"/config", mqtttest.TasmotaDiscoveryConfig(mqtttest.TasmotaOptions{Topic: fmt.Sprintf("fake%d", i), MAC: mac}, 1))
	}
	// One Zigbee2MQTT inventory of a thousand switches.
	var list []string
	for i := range 1000 {
		list = append(list, fmt.Sprintf(`{"ieee_address":"0x%016x","friendly_name":"z%d","type":"Router","definition":{"model":"m","vendor":"v","exposes":[{"type":"switch","features":[{"name":"state","property":"state"}]}]}}`, i, i))
	}
	pub("zigbee2mqtt/bridge/devices", "["+strings.Join(list, ",")+"]")
	pub("hub-hostile-discovery/rpc", `{"id":99,"result":{"id":"shellyplus1-x","gen":2}}`) // an answer to nothing asked
	// The messages of one client arrive in order: once this last one (of a
	// source not yet flooded) is listed, all were read.
	pub("homeassistant/switch/marker/config", `{"name":"Marker","stat_t":"m/state","cmd_t":"m/set","uniq_id":"marker"}`)
	eventually(t, 20*time.Second, "the last announcement read", func() bool {
		for _, dev := range d.Discovered() {
			if dev.ID == "ha-marker" {
				return true
			}
		}
		return false
	})
	devs := d.Discovered()
	if len(devs) > maxDiscovered {
		t.Fatalf("listed %d devices, beyond the bound %d", len(devs), maxDiscovered)
	}
	for _, dev := range devs {
		if dev.ID == "tasmota-BBBBBBBBBBBB" || dev.ID == "tasmota-A4CF12000001" || dev.ID == "ha-x" || dev.ID == "shellyplus1-x" {
			t.Errorf("refused announcement listed: %+v", dev)
		}
	}
	// Each source's refusals are logged once, not per message.
	out := logs.String()
	for _, src := range []string{sourceTasmota, sourceHA, sourceZ2M, sourceShelly} {
		if n := strings.Count(out, "announcement refused (further ones from this source are not logged)\" source="+src); n != 1 {
			t.Errorf("refusals of source %s logged %d times, want once:\n%s", src, n, out)
		}
	}
	if n := strings.Count(out, "too many new devices announced at once"); n != 2 { // Tasmota's and Zigbee2MQTT's floods
		t.Errorf("the rate bound logged %d times, want once per source:\n%s", n, out)
	}
	// Once the burst has refilled, a genuine plug is listed again.
	time.Sleep(2 * newPerSourceEvery)
	if len(d.Discovered()) < maxDiscovered {
		mqtttest.NewTasmota(t, b.URL, mqtttest.TasmotaOptions{Topic: "genuine", Discovery: true, MAC: "A4CF12ABCDEF"})
		eventually(t, 10*time.Second, "a genuine plug listed after the flood", func() bool {
			for _, dev := range d.Discovered() {
				if dev.ID == "tasmota-A4CF12ABCDEF" {
					return true
				}
			}
			return false
		})
	}
}

// On the embedded broker a plug login announces only its own plugs: a
// Tasmota config naming another login's plug is dropped by the broker,
// its own is listed.
func TestDiscoveryEmbeddedLoginsAnnounceOnlyTheirOwn(t *testing.T) {
	d := openDriver(t, "broker: embedded\nlisten: 127.0.0.1:0\nusers:\n  kitchen: {password: pw-kitchen-1, switches: [kitchen]}\n  hall: {password: pw-hall-12, switches: [hall]}",
		`id: kitchen, name: Kitchen, profile: tasmota, topic: tas1`, `id: hall, name: Hall, profile: tasmota, topic: tas2`)
	url := "tcp://" + d.broker.dialAddr
	login := func(user, pw string) paho.Client {
		c := paho.NewClient(paho.NewClientOptions().AddBroker(url).SetClientID("c-" + user).SetUsername(user).SetPassword(pw))
		if tok := c.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
			t.Fatalf("connect %s: %v", user, tok.Error())
		}
		t.Cleanup(func() { c.Disconnect(0) })
		return c
	}
	hall, kitchen := login("hall", "pw-hall-12"), login("kitchen", "pw-kitchen-1")
	// hall announces kitchen's plug under a MAC of its own choosing.
	hall.Publish("tasmota/discovery/A4CF12000009/config", 0, true,
		mqtttest.TasmotaDiscoveryConfig(mqtttest.TasmotaOptions{Topic: "tas1", MAC: "A4CF12000009"}, 1)).Wait()
	// Then its own, which arrives after: once listed, the first was read.
	hall.Publish("tasmota/discovery/A4CF12000002/config", 0, true,
		mqtttest.TasmotaDiscoveryConfig(mqtttest.TasmotaOptions{Topic: "tas2", MAC: "A4CF12000002"}, 1)).Wait()
	kitchen.Publish("tasmota/discovery/A4CF12000001/config", 0, true,
		mqtttest.TasmotaDiscoveryConfig(mqtttest.TasmotaOptions{Topic: "tas1", MAC: "A4CF12000001"}, 1)).Wait()
	eventually(t, 10*time.Second, "both logins' own plugs listed", func() bool { return len(d.Discovered()) >= 2 })
	time.Sleep(100 * time.Millisecond)
	got := map[string]string{}
	for _, dev := range d.Discovered() {
		got[dev.ID] = dev.UsedBy
	}
	want := map[string]string{"tasmota-A4CF12000001": "kitchen", "tasmota-A4CF12000002": "hall"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("listed %v, want %v (hall's announcement of kitchen's plug dropped)", got, want)
	}
}
