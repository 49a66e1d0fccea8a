package mqtt

import (
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/drivers/mqtt/mqtttest"
)

// discoveredPlugs starts one simulator of every firmware that announces
// itself, and a Tasmota the config already uses.
func discoveredPlugs(t *testing.T, url string) {
	mqtttest.NewTasmota(t, url, mqtttest.TasmotaOptions{Topic: "tas1", Discovery: true, MAC: "A4CF12000001"})
	mqtttest.NewTasmota(t, url, mqtttest.TasmotaOptions{Topic: "tasmota_0A0B0C", Discovery: true, MAC: "A4CF120A0B0C"})
	mqtttest.NewTasmota(t, url, mqtttest.TasmotaOptions{Topic: "twin", Relays: 2, Discovery: true, MAC: "A4CF12000002", StateText: [2]string{"AUS", "AN"}})
	mqtttest.NewShellyGen1(t, url, "shelly1-328900", 1, false)
	mqtttest.NewShellyGen1(t, url, "shellyswitch25-C45BBE", 2, false)
	mqtttest.NewShellyRPC(t, url, "shellyplus1-a8032ab12345", 1, false)
	mqtttest.NewZ2M(t, url, "zigbee2mqtt", mqtttest.Z2MAvailabilityJSON, mqtttest.Z2MDevice{Name: "hall/lamp"}, mqtttest.Z2MDevice{Name: "double", Endpoints: []string{"l1", "l2"}})
	mqtttest.NewESPHome(t, url, "livingroom", "lamp")
}

// wantDiscovered is what the list shows of discoveredPlugs: each id with
// its switch entry and the configured switch using it.
var wantDiscovered = map[string]struct{ entry, usedBy string }{
	"tasmota-A4CF12000001":                         {`{id: tasmota, name: Tasmota, driver: mqtt, profile: tasmota, topic: tas1}`, "tas"},
	"tasmota-A4CF120A0B0C":                         {`{id: tasmota, name: Tasmota, driver: mqtt, profile: tasmota, topic: tasmota_0A0B0C}`, ""},
	"tasmota-A4CF12000002-1":                       {`{id: tasmota, name: Tasmota, driver: mqtt, profile: tasmota, topic: twin, relay: 1, state_text: {"off": AUS, "on": AN}}`, ""},
	"tasmota-A4CF12000002-2":                       {`{id: tasmota2, name: Tasmota2, driver: mqtt, profile: tasmota, topic: twin, relay: 2, state_text: {"off": AUS, "on": AN}}`, ""},
	"shelly1-328900":                               {`{id: shelly1-328900, name: shelly1-328900, driver: mqtt, profile: shelly-gen1, device_id: shelly1-328900}`, ""},
	"shellyswitch25-C45BBE-0":                      {`{id: shellyswitch25-c45bbe-relay-0, name: shellyswitch25-C45BBE relay 0, driver: mqtt, profile: shelly-gen1, device_id: shellyswitch25-C45BBE, relay: 0}`, ""},
	"shellyswitch25-C45BBE-1":                      {`{id: shellyswitch25-c45bbe-relay-1, name: shellyswitch25-C45BBE relay 1, driver: mqtt, profile: shelly-gen1, device_id: shellyswitch25-C45BBE, relay: 1}`, ""},
	"shellyplus1-a8032ab12345":                     {`{id: shellyplus1-a8032ab12345, name: shellyplus1-a8032ab12345, driver: mqtt, profile: shelly-rpc, prefix: shellyplus1-a8032ab12345}`, ""},
	"zigbee-" + mqtttest.Z2MIEEE("hall/lamp"):      {`{id: hall-lamp, name: hall/lamp, driver: mqtt, profile: zigbee2mqtt, friendly_name: hall/lamp}`, ""},
	"zigbee-" + mqtttest.Z2MIEEE("double") + "-l1": {`{id: double-l1, name: double l1, driver: mqtt, profile: zigbee2mqtt, friendly_name: double, endpoint: l1}`, ""},
	"zigbee-" + mqtttest.Z2MIEEE("double") + "-l2": {`{id: double-l2, name: double l2, driver: mqtt, profile: zigbee2mqtt, friendly_name: double, endpoint: l2}`, ""},
	"esphome-livingroom-lamp":                      {`{id: lamp, name: lamp, driver: mqtt, profile: esphome, prefix: livingroom, object_id: lamp}`, ""},
}

func checkDiscovered(t *testing.T, d *driver) {
	t.Helper()
	var missing []string
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := map[string]Device{}
		for _, dev := range d.Discovered() {
			got[dev.ID] = dev
		}
		missing = missing[:0]
		for id := range wantDiscovered {
			if _, ok := got[id]; !ok {
				missing = append(missing, id)
			}
		}
		if got["shellyplus1-a8032ab12345"].Model == "shellyplus1" { // the prefix's guess, not the device's own answer
			missing = append(missing, "shellyplus1-a8032ab12345's own model")
		}
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30s, not listed: %v", missing)
		}
		time.Sleep(20 * time.Millisecond)
	}
	got := map[string]Device{}
	for _, dev := range d.Discovered() {
		got[dev.ID] = dev
	}
	for id, w := range wantDiscovered {
		g := got[id]
		if g.Entry != w.entry {
			t.Errorf("%s: entry\n got %s\nwant %s", id, g.Entry, w.entry)
		}
		if g.UsedBy != w.usedBy {
			t.Errorf("%s: used by %q, want %q", id, g.UsedBy, w.usedBy)
		}
		if g.LastSeen.IsZero() {
			t.Errorf("%s: no last_seen", id)
		}
	}
	if len(got) != len(wantDiscovered) {
		t.Errorf("listed %d devices, want %d: %v", len(got), len(wantDiscovered), got)
	}
	if m := got["shellyplus1-a8032ab12345"].Model; m != "Plus1 (SNSW-001X16EU)" {
		t.Errorf("Shelly Plus model %q, want the device's own (Shelly.GetDeviceInfo)", m)
	}
	if v := got["tasmota-A4CF120A0B0C"].Version; v != "14.4.1" {
		t.Errorf("Tasmota version %q", v)
	}
	eventually(t, 5*time.Second, "Tasmota's LWT read as online", func() bool {
		for _, dev := range d.Discovered() {
			if dev.ID == "tasmota-A4CF120A0B0C" {
				return dev.Online != nil && *dev.Online
			}
		}
		return false
	})
}

func TestDiscoveryMosquitto(t *testing.T) {
	b := mqtttest.StartMosquitto(t)
	discoveredPlugs(t, b.URL)
	d := openDriver(t, "broker: "+b.URL+"\nclient_id: hub-disc", `id: tas, name: Kitchen, profile: tasmota, topic: tas1`)
	checkDiscovered(t, d)
}

func TestDiscoveryEmbedded(t *testing.T) {
	d := openDriver(t, "broker: embedded\nlisten: 127.0.0.1:0", `id: tas, name: Kitchen, profile: tasmota, topic: tas1`)
	discoveredPlugs(t, "tcp://"+d.broker.dialAddr)
	checkDiscovered(t, d)
}
