package mqtttest

// What each simulated firmware announces about itself, as the firmware
// writes it: Tasmota's tasmota/discovery/<MAC>/config and …/sensors
// (SetOption19 0, the default), Shelly Gen1's shellies/announce, a Gen2+
// Shelly's answer to Shelly.GetDeviceInfo, and Zigbee2MQTT's retained
// bridge/devices. ESPHome's Home Assistant discovery is in esphome.go.

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strings"
)

// TasmotaMAC is the MAC a simulated Tasmota announces when its options
// give none: the topic's last six hex digits behind a fixed vendor part,
// as tasmota_%06X is made from the MAC.
func TasmotaMAC(o TasmotaOptions) string {
	if o.MAC != "" {
		return strings.ToUpper(o.MAC)
	}
	h := fnv.New32a()
	h.Write([]byte(o.Topic))
	return fmt.Sprintf("A4CF12%06X", h.Sum32()&0xFFFFFF)
}

// TasmotaDiscoveryConfig is the retained config Tasmota 14 publishes on
// tasmota/discovery/<MAC>/config at every connect (xdrv_12_discovery).
func TasmotaDiscoveryConfig(o TasmotaOptions, relays int) string {
	mac := TasmotaMAC(o)
	if relays < 1 {
		relays = 1
	}
	fn := make([]any, 8)
	rl := make([]int, 8)
	for i := range relays {
		rl[i] = 1
		if i == 0 {
			fn[i] = "Tasmota"
		} else {
			fn[i] = fmt.Sprintf("Tasmota%d", i+1)
		}
	}
	texts := o.StateText
	if texts == ([2]string{}) {
		texts = [2]string{"OFF", "ON"}
	}
	so4 := 0
	if o.SetOption4 {
		so4 = 1
	}
	neg := []int{-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1}
	b, _ := json.Marshal(map[string]any{
		"ip": "192.0.2.20", "dn": "Tasmota", "fn": fn, "hn": "tasmota-" + mac[6:] + "-" + "2876", "mac": mac,
		"md": "Sonoff Basic", "ty": 0, "if": 0, "cam": 0, "ofln": "Offline", "onln": "Online",
		"state": []string{texts[0], texts[1], "TOGGLE", "HOLD"}, "sw": "14.4.1", "t": o.Topic, "ft": "%prefix%/%topic%/",
		"tp": []string{"cmnd", "stat", "tele"}, "rl": rl, "swc": neg, "swn": make([]any, 28), "btn": make([]int, 32),
		"so": map[string]int{"4": so4, "11": 0, "13": 0, "17": 0, "20": 0, "30": 0, "68": 0, "73": 0, "82": 0, "114": 0, "117": 0},
		"lk": 0, "lt_st": 0, "bat": 0, "dslp": 0, "sho": []int{}, "sht": [][]int{}, "ver": 1,
	})
	return string(b)
}

// TasmotaDiscoverySensors is the retained tasmota/discovery/<MAC>/sensors.
func TasmotaDiscoverySensors() string {
	return `{"sn":{"Time":"2026-01-01T00:00:00"},"ver":1}`
}

// announceDiscovery publishes the device's discovery messages, retained.
func (t *Tasmota) announceDiscovery() {
	mac := TasmotaMAC(t.o)
	t.pub("tasmota/discovery/"+mac+"/config", 0, true, TasmotaDiscoveryConfig(t.o, len(t.relays)))
	t.pub("tasmota/discovery/"+mac+"/sensors", 0, true, TasmotaDiscoverySensors())
}

// ShellyGen1Model is the model code a Gen1 device with that many relays
// announces: the Shelly 1, the Shelly 2.5, the Shelly 4Pro.
func ShellyGen1Model(relays int) string {
	switch relays {
	case 2:
		return "SHSW-25"
	case 4:
		return "SHSW-44"
	}
	return "SHSW-1"
}

// ShellyGen1Announce is what a Gen1 device publishes on shellies/announce
// at connect and when shellies/command says announce.
func ShellyGen1Announce(id string, relays int) string {
	b, _ := json.Marshal(map[string]any{"id": id, "model": ShellyGen1Model(relays), "mac": "A8032AB12345", "ip": "192.0.2.10",
		"new_fw": false, "fw_ver": "20230913-112003/v1.14.0-gcb84623"})
	return string(b)
}

// ShellyRPCApp is the "app" of a Gen2+ device with that many switches.
func ShellyRPCApp(switches int) string {
	switch switches {
	case 2:
		return "Plus2PM"
	case 4:
		return "Pro4PM"
	}
	return "Plus1"
}

// deviceInfo is the result of Shelly.GetDeviceInfo.
func (s *ShellyRPC) deviceInfo() map[string]any {
	mac := strings.ToUpper(s.prefix[strings.LastIndex(s.prefix, "-")+1:])
	return map[string]any{"name": nil, "id": s.prefix, "mac": mac, "slot": 0, "model": "SNSW-001X16EU", "gen": 2,
		"fw_id": "20241011-114455/1.4.4-g6d2a586", "ver": "1.4.4", "app": ShellyRPCApp(len(s.relays)), "auth_en": false, "auth_domain": nil}
}

// bridgeDevices is Zigbee2MQTT's bridge/devices: the coordinator, then
// each device with its switch exposes.
func (z *Z2M) bridgeDevices() string {
	list := []map[string]any{{"ieee_address": "0x00124b0000000000", "type": "Coordinator", "network_address": 0,
		"friendly_name": "Coordinator", "supported": true, "disabled": false, "definition": nil, "interview_completed": true}}
	for _, d := range z.devs {
		var exposes []map[string]any
		feature := func(prop string) map[string]any {
			return map[string]any{"type": "binary", "name": "state", "property": prop, "access": 7,
				"value_on": "ON", "value_off": "OFF", "value_toggle": "TOGGLE", "description": "On/off state of the switch"}
		}
		if len(d.Endpoints) == 0 {
			exposes = append(exposes, map[string]any{"type": "switch", "features": []any{feature("state")}})
		}
		for _, ep := range d.Endpoints {
			exposes = append(exposes, map[string]any{"type": "switch", "endpoint": ep, "features": []any{feature("state_" + ep)}})
		}
		exposes = append(exposes, map[string]any{"type": "numeric", "name": "linkquality", "property": "linkquality", "access": 1, "unit": "lqi"})
		list = append(list, map[string]any{"ieee_address": Z2MIEEE(d.Name), "type": "Router", "network_address": 1234,
			"friendly_name": d.Name, "supported": true, "disabled": false, "interview_completed": true, "software_build_id": "1.0.5",
			"definition": map[string]any{"model": "TS011F_plug_1", "vendor": "TuYa", "description": "Smart plug (with power monitoring)",
				"exposes": exposes, "options": []any{}, "supports_ota": true}})
	}
	b, _ := json.Marshal(list)
	return string(b)
}

// Z2MIEEE is the IEEE address a simulated Zigbee device has.
func Z2MIEEE(name string) string {
	h := fnv.New64a()
	h.Write([]byte(name))
	return fmt.Sprintf("0x%016x", h.Sum64())
}
