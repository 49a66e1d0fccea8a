package mqtttest

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Z2M availability modes.
const (
	Z2MAvailabilityOff    = ""       // the default: no availability topics
	Z2MAvailabilityJSON   = "json"   // 2.x: {"state":"online"}
	Z2MAvailabilityLegacy = "legacy" // 1.x legacy_availability_payload: online
)

// Z2MDevice is one Zigbee device behind the simulated bridge.
type Z2MDevice struct {
	Name      string   // friendly name; may contain /
	Endpoints []string // e.g. l1, l2; none for a single relay ("state")
}

// Z2M simulates a Zigbee2MQTT bridge: set on <base>/<name>/set (JSON
// {"state":"ON"}, a bare on/off, or /set/state), the optimistic state
// published after every set on <base>/<name> (JSON, not retained), reads on
// /get, bridge/state as the will, and optional device availability.
type Z2M struct {
	*sim
	base  string
	avail string
	devs  []Z2MDevice
	re    *regexp.Regexp

	zmu    sync.Mutex
	state  map[string]map[string]bool // name → state key → on
	silent map[string]bool
}

// NewZ2M connects a simulated Zigbee2MQTT with the given base topic,
// devices and availability mode.
func NewZ2M(tb testing.TB, broker, base string, avail string, devs ...Z2MDevice) *Z2M {
	tb.Helper()
	z := &Z2M{sim: newSim(tb, broker, "zigbee2mqtt_"+strings.ReplaceAll(base, "/", "_"), 1), base: base, avail: avail, devs: devs,
		re:    regexp.MustCompile(`^` + regexp.QuoteMeta(base) + `/(.+?)/(get|set)(?:/(.+))?$`),
		state: map[string]map[string]bool{}, silent: map[string]bool{}}
	for _, d := range devs {
		z.state[d.Name] = map[string]bool{}
		for _, k := range z.keys(d) {
			z.state[d.Name][k] = false
		}
	}
	z.willTopic, z.willPayload, z.willQoS = base+"/bridge/state", z.payload("offline"), 1
	z.subs[base+"/#"] = 0
	z.handle = z.onMessage
	z.announce = func() {
		z.pub(base+"/bridge/state", 1, true, z.payload("online"))
		z.pub(base+"/bridge/devices", 0, true, z.bridgeDevices())
		if avail != Z2MAvailabilityOff {
			for _, d := range devs {
				z.pub(base+"/"+d.Name+"/availability", 1, true, z.payload("online"))
			}
		}
	}
	z.Start()
	return z
}

func (z *Z2M) payload(state string) string {
	if z.avail == Z2MAvailabilityLegacy {
		return state
	}
	return `{"state":"` + state + `"}`
}

func (z *Z2M) keys(d Z2MDevice) []string {
	if len(d.Endpoints) == 0 {
		return []string{"state"}
	}
	var ks []string
	for _, e := range d.Endpoints {
		ks = append(ks, "state_"+e)
	}
	return ks
}

func (z *Z2M) device(name string) (Z2MDevice, bool) {
	i := slices.IndexFunc(z.devs, func(d Z2MDevice) bool { return d.Name == name })
	if i < 0 {
		return Z2MDevice{}, false
	}
	return z.devs[i], true
}

func (z *Z2M) onMessage(topic string, payload []byte) {
	m := z.re.FindStringSubmatch(topic)
	if m == nil || m[1] == "bridge" || strings.HasPrefix(m[1], "bridge/") {
		return
	}
	name, op, attr := m[1], m[2], m[3]
	ep := ""
	d, ok := z.device(name)
	if !ok {
		// <name>/<endpoint>/set
		i := strings.LastIndex(name, "/")
		if i < 0 {
			return
		}
		if d, ok = z.device(name[:i]); !ok || !slices.Contains(d.Endpoints, name[i+1:]) {
			return
		}
		name, ep = name[:i], name[i+1:]
	}
	z.zmu.Lock()
	silent := z.silent[name]
	z.zmu.Unlock()
	if !z.command() || silent {
		return
	}
	if op == "get" {
		z.publishState(name)
		return
	}
	wants := map[string]string{}
	var obj map[string]any
	switch {
	case attr != "":
		wants[attr] = string(payload)
	case json.Unmarshal(payload, &obj) == nil:
		for k, v := range obj {
			if s, ok := v.(string); ok {
				wants[k] = s
			}
		}
	default:
		wants["state"] = string(payload)
	}
	changed := false
	for k, v := range wants {
		if ep != "" && k == "state" {
			k = "state_" + ep
		}
		z.zmu.Lock()
		cur, known := z.state[name][k]
		if known {
			switch strings.ToLower(v) {
			case "on":
				z.state[name][k], changed = true, true
			case "off":
				z.state[name][k], changed = false, true
			case "toggle":
				z.state[name][k], changed = !cur, true
			}
		}
		z.zmu.Unlock()
	}
	if changed {
		z.publishState(name) // optimistic: published after every successful set
	}
}

func (z *Z2M) publishState(name string) {
	z.zmu.Lock()
	st := map[string]any{"linkquality": 116}
	for k, on := range z.state[name] {
		st[k] = onOff(on, "ON", "OFF")
	}
	z.zmu.Unlock()
	b, _ := json.Marshal(st)
	z.pub(z.base+"/"+name, 0, false, string(b))
}

// State reports a device's state key (state or state_<endpoint>).
func (z *Z2M) State(name, key string) bool {
	z.zmu.Lock()
	defer z.zmu.Unlock()
	return z.state[name][key]
}

// On implements Plug for the first device.
func (z *Z2M) On() bool { return z.State(z.devs[0].Name, z.keys(z.devs[0])[0]) }

// Set implements Plug: the first device's first relay, switched by hand.
func (z *Z2M) Set(on bool) {
	z.act.Lock()
	defer z.act.Unlock()
	z.zmu.Lock()
	z.state[z.devs[0].Name][z.keys(z.devs[0])[0]] = on
	z.zmu.Unlock()
	z.publishState(z.devs[0].Name)
}

// SetSilent implements Plug for every device.
func (z *Z2M) SetSilent(v bool) {
	for _, d := range z.devs {
		z.SetDeviceSilent(d.Name, v)
	}
}

// SetDeviceSilent makes one device drop what it is sent.
func (z *Z2M) SetDeviceSilent(name string, v bool) {
	z.zmu.Lock()
	z.silent[name] = v
	z.zmu.Unlock()
}

// SetDeviceAvailable publishes a device's availability, as Z2M does when
// the device stops answering (availability must be on).
func (z *Z2M) SetDeviceAvailable(name string, online bool) {
	z.pub(z.base+"/"+name+"/availability", 1, true, z.payload(onOff(online, "online", "offline")))
}
