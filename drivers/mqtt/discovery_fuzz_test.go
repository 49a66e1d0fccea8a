package mqtt

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/switchbridge/switchbridge/drivers/mqtt/mqtttest"
)

// FuzzAnnouncements feeds arbitrary payloads to every announcement parser
// through discovery's own entry point, seeded with what the simulators
// announce. Nothing may panic; the list stays within its bound, every
// entry listed builds a plug under its profile, and ids are short and
// printable.
func FuzzAnnouncements(f *testing.F) {
	topics := []string{
		"tasmota/discovery/A4CF12000001/config",
		"shellies/announce",
		"hub-fuzz-discovery/rpc",
		"shellyplus1-a8032ab12345/online",
		"zigbee2mqtt/bridge/devices",
		"homeassistant/switch/livingroom/lamp/config",
	}
	seeds := []string{
		mqtttest.TasmotaDiscoveryConfig(mqtttest.TasmotaOptions{Topic: "tas1", MAC: "A4CF12000001"}, 2),
		mqtttest.ShellyGen1Announce("shelly1-328900", 1),
		`{"id":1,"src":"shellyplus1-a8032ab12345","dst":"hub-fuzz-discovery","result":{"id":"shellyplus1-a8032ab12345","mac":"A8032AB12345","model":"SNSW-001X16EU","gen":2,"ver":"1.4.4","app":"Plus2PM"}}`,
		"true",
		`[{"ieee_address":"0x00124b0000000001","friendly_name":"hall/lamp","type":"Router","definition":{"model":"m","vendor":"v","exposes":[{"type":"switch","endpoint":"l1","features":[{"name":"state","property":"state_l1"}]}]}}]`,
		`{"name":"Lamp","~":"livingroom/switch/lamp","stat_t":"~/state","cmd_t":"~/command","avty":[{"t":"livingroom/status"}],"val_tpl":"{{ value_json.state }}","uniq_id":"x","dev":{"ids":"a","mdl":"esp32"}}`,
	}
	for i, s := range seeds {
		f.Add(uint8(i), []byte(s))
	}
	f.Fuzz(func(t *testing.T, which uint8, payload []byte) {
		if len(payload) > 1<<20 {
			return
		}
		x := newDiscovery(slog.New(slog.DiscardHandler), nil, "hub-fuzz-discovery")
		x.asked["shellyplus1-a8032ab12345"] = true
		x.askedIDs[1] = "shellyplus1-a8032ab12345"
		x.handle(topics[int(which)%len(topics)], payload)
		devs := x.Devices()
		if len(devs) > maxDiscovered {
			t.Fatalf("%d devices listed", len(devs))
		}
		for _, d := range devs {
			if d.ID == "" || len(d.ID) > maxIDLen || strings.ContainsAny(d.ID, " /#+\n") {
				t.Fatalf("id %q", d.ID)
			}
			if d.Entry == "" || d.fingerprint == "" {
				t.Fatalf("device without an entry: %+v", d)
			}
		}
	})
}
