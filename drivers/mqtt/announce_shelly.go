package mqtt

// Shelly's announcements. Gen1 publishes shellies/announce (id, model,
// mac, ip, fw_ver, new_fw; mode on the Shelly 2/2.5) when it connects and
// whenever shellies/command says "announce". Gen2+ devices announce only
// <prefix>/online true (their will is false); the hub then asks
// Shelly.GetDeviceInfo over RPC (id, mac, model, gen, fw_id, ver, app)
// and reads the answer on its own reply topic.

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// shellyGen1Relays is the relays of each Gen1 model (the "model" of the
// announcement, SHxx codes) that has any. A model not listed (sensors,
// bulbs, dimmers, buttons) is no switch.
var shellyGen1Relays = map[string]int{
	"SHSW-1": 1, "SHSW-PM": 1, "SHSW-L": 1, "SHSW-21": 2, "SHSW-25": 2, "SHSW-44": 4,
	"SHPLG-1": 1, "SHPLG-S": 1, "SHPLG2-1": 1, "SHPLG-U1": 1, "SHEM": 1, "SHEM-3": 1, "SHUNI-1": 2,
}

type shellyAnnounce struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	MAC     string `json:"mac"`
	Version string `json:"fw_ver"`
	Mode    string `json:"mode"`
}

// parseShellyAnnounce reads a Gen1 shellies/announce: one device per relay.
func parseShellyAnnounce(payload []byte) ([]Device, error) {
	var a shellyAnnounce
	if err := json.Unmarshal(payload, &a); err != nil {
		return nil, err
	}
	if a.ID == "" {
		return nil, errEmptyID
	}
	n := shellyGen1Relays[a.Model]
	if a.Mode == "roller" {
		n = 0
	}
	var out []Device
	for i := range n {
		d := Device{ID: a.ID, Model: clip(a.Model, maxIDLen), Version: clip(a.Version, maxIDLen), Name: a.ID,
			availability: "shellies/" + a.ID + "/online", availableOn: "true", availableOff: "false"}
		var opts []entryField
		if n > 1 {
			d.ID += "-" + strconv.Itoa(i)
			d.Name += " relay " + strconv.Itoa(i)
			opts = append(opts, entryField{"relay", i})
		}
		base := fmt.Sprintf("shellies/%s/relay/%d", a.ID, i)
		d.Topics = DeviceTopics{Command: base + "/command", State: base, Availability: d.availability}
		dev, err := makeDevice(d, "shelly-gen1", append([]entryField{{"device_id", a.ID}}, opts...))
		if err != nil {
			return nil, err
		}
		out = append(out, dev)
	}
	return out, nil
}

// shellyRPCSwitches is the switches of each Gen2+ device by its "app"
// (GetDeviceInfo): those with more than one, and those with none. Any
// other is taken to have one (switch:0): the Plus 1, Plus Plug S, Pro 1,
// Mini 1 and their PM variants.
var shellyRPCSwitches = map[string]int{
	"Plus2PM": 2, "Pro2": 2, "Pro2PM": 2, "Pro3": 3, "Pro4PM": 4, "Pro3EM": 0, "ProEM": 1,
	"PlusI4": 0, "PlusHT": 0, "HTG3": 0, "PlusDimmer": 0, "ProDimmerx1": 0, "ProDimmerx2": 0,
	"PlusSmoke": 0, "PlusUni": 2, "PlusRGBWPM": 0, "I4G3": 0, "BluGw": 0,
}

type shellyDeviceInfo struct {
	ID      string `json:"id"`
	MAC     string `json:"mac"`
	Model   string `json:"model"`
	Gen     int    `json:"gen"`
	Version string `json:"ver"`
	App     string `json:"app"`
	Name    string `json:"name"`
}

// shellyRPCDevices makes the devices of a Gen2+ device whose MQTT topic
// prefix is prefix, from its device info (or, before it answered, from the
// prefix alone: one switch).
func shellyRPCDevices(prefix string, info *shellyDeviceInfo) ([]Device, error) {
	id, n := prefix, 1
	var model, version, name string
	if info != nil {
		id, model, version, name = cmpOr(info.ID, prefix), info.Model, info.Version, info.Name
		if c, ok := shellyRPCSwitches[info.App]; ok {
			n = c
		}
		if info.App != "" {
			model = info.App + " (" + model + ")"
		}
	} else if m, _, ok := strings.Cut(prefix, "-"); ok {
		model = m
	}
	var out []Device
	for i := range n {
		d := Device{ID: id, Model: clip(model, maxIDLen), Version: clip(version, maxIDLen), Name: cmpOr(name, id),
			availability: prefix + "/online", availableOn: "true", availableOff: "false"}
		var opts []entryField
		if n > 1 {
			d.ID += "-" + strconv.Itoa(i)
			d.Name += " switch " + strconv.Itoa(i)
			opts = append(opts, entryField{"switch", i})
		}
		d.Topics = DeviceTopics{Command: prefix + "/rpc", State: fmt.Sprintf("%s/status/switch:%d", prefix, i), Availability: d.availability}
		dev, err := makeDevice(d, "shelly-rpc", append([]entryField{{"prefix", prefix}}, opts...))
		if err != nil {
			return nil, err
		}
		out = append(out, dev)
	}
	return out, nil
}

// looksShelly reports whether a topic prefix is a Gen2+ device's default
// one (its device id: shellyplus1-a8032ab12345): only those are listed
// from <prefix>/online alone, which any client may publish.
func looksShelly(prefix string) bool {
	return len(prefix) > 7 && strings.EqualFold(prefix[:6], "shelly") && strings.Contains(prefix, "-") && topicLevel.MatchString(prefix)
}

// maxAsked bounds the Gen2+ devices asked for their info and not yet
// answered.
const maxAsked = 64

// shellyOnline reads <prefix>/online: a Gen2+ device coming online is
// listed (from its prefix), and asked for its device info.
func (x *discovery) shellyOnline(prefix string, payload []byte) {
	if x.isAvailability(prefix + "/online") {
		x.availability(prefix+"/online", payload)
	}
	if parseAvailability(payload, "true", "false") != availOnline || !looksShelly(prefix) {
		return
	}
	x.mu.Lock()
	_, known := x.devs[cleanID(prefix)]
	asked := x.asked[prefix] || len(x.askedIDs) >= maxAsked || len(x.asked) >= maxDiscovered
	if !asked {
		x.asked[prefix] = true
		x.nextAsk++
		x.askedIDs[x.nextAsk] = prefix
	}
	id, ask := x.nextAsk, x.ask
	x.mu.Unlock()
	if !known {
		x.add(sourceShelly, prefix+"/online", payload, func() ([]Device, error) {
			devs, err := shellyRPCDevices(prefix, nil)
			for i := range devs {
				on := true
				devs[i].Online = &on
			}
			return devs, err
		})
	}
	if !asked && ask != nil {
		b, _ := json.Marshal(map[string]any{"id": id, "src": x.hubSource, "method": "Shelly.GetDeviceInfo"})
		m := message{topic: prefix + "/rpc", payload: b}
		ask(m)
		// Asked again while unanswered: the question may have reached
		// the device before it subscribed to its rpc topic.
		x.askAgain(x.quit, 0, func() bool { _, waiting := x.askedIDs[id]; return waiting }, func() { ask(m) })
	}
}

// shellyInfo reads the answer to a Shelly.GetDeviceInfo the hub asked.
func (x *discovery) shellyInfo(payload []byte) {
	r, ok := parseRPCReply(payload)
	if !ok || r.Error != nil {
		return
	}
	x.mu.Lock()
	prefix, asked := x.askedIDs[r.ID]
	delete(x.askedIDs, r.ID)
	x.mu.Unlock()
	if !asked {
		return
	}
	// Who answers is who came online under the prefix asked.
	x.add(sourceShelly, prefix+"/online", []byte("true"), func() ([]Device, error) {
		var info shellyDeviceInfo
		if err := json.Unmarshal(r.Result, &info); err != nil {
			return nil, err
		}
		if info.Gen < 2 {
			return nil, errors.New("not a Gen2+ device")
		}
		devs, err := shellyRPCDevices(prefix, &info)
		if err != nil {
			return nil, err
		}
		x.mu.Lock()
		// The entries from the prefix alone give way to the device's own.
		if info.ID != prefix || len(devs) > 1 {
			x.dropLocked(cleanID(prefix))
		}
		x.mu.Unlock()
		return devs, nil
	})
}

// shellyGen1Online reads shellies/<id>/online: a Gen1 device online that
// is not listed (it connected before the hub, so its announcement was
// missed) is asked, once, to announce itself on its own command topic.
func (x *discovery) shellyGen1Online(id string, payload []byte) {
	topic := "shellies/" + id + "/online"
	if x.isAvailability(topic) {
		x.availability(topic, payload)
		return
	}
	if parseAvailability(payload, "true", "false") != availOnline || !topicLevel.MatchString(id) {
		return
	}
	x.mu.Lock()
	key := "gen1:" + id
	asked := x.asked[key] || len(x.asked) >= maxDiscovered
	x.asked[key] = true
	ask := x.ask
	x.mu.Unlock()
	if !asked && ask != nil {
		m := message{topic: "shellies/" + id + "/command", payload: []byte("announce")}
		ask(m)
		x.askAgain(x.quit, 0, func() bool {
			for devID := range x.devs {
				if devID == id || strings.HasPrefix(devID, id+"-") {
					return false
				}
			}
			return true
		}, func() { ask(m) })
	}
}

// gen1AskAgain are the waits before a Shelly asked a question (a Gen1
// device to announce itself, a Gen2+ device for its info) and still
// unanswered is asked again: the first question is lost when it reaches
// the device before the device has subscribed to its topic (the hub and
// the plug starting together after a power cut). Two more questions at
// most.
var gen1AskAgain = []time.Duration{5 * time.Second, 30 * time.Second}

// askAgain sends a question again after the n-th wait of x.gen1Waits
// (gen1AskAgain), and after the next ones, while pending (read under
// x.mu) says it is still unanswered and discovery has not stopped.
func (x *discovery) askAgain(stop chan struct{}, n int, pending func() bool, send func()) {
	if n >= len(x.gen1Waits) || stop == nil {
		return
	}
	time.AfterFunc(x.gen1Waits[n], func() {
		select {
		case <-stop:
			return
		default:
		}
		x.mu.Lock()
		again := pending()
		x.mu.Unlock()
		if again {
			send()
			x.askAgain(stop, n+1, pending, send)
		}
	})
}
