package mqtt

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/switchbridge/switchbridge/bridge"
)

// shellyGen1 is a relay of a classic Shelly (Gen1 firmware's MQTT API):
//
//	profile: shelly-gen1   device_id: shelly1-328900   relay: 0
type shellyGen1 struct {
	DeviceID string `yaml:"device_id"`
	Relay    *int   `yaml:"relay"`
}

func (o *shellyGen1) plug(c *checker) *plug {
	p := &plug{routes: map[string]parser{}}
	id := c.level("device_id", o.DeviceID)
	relay := c.index("relay", o.Relay, 0, 16)
	base := fmt.Sprintf("shellies/%s/relay/%d", id, relay)
	p.command = fixedCommands(func(v bridge.Value) message {
		return message{topic: base + "/command", payload: []byte(v)} // lower case: on, off
	})
	p.query = &message{topic: "shellies/" + id + "/command", payload: []byte("update")}
	p.acl = plugACL{
		// Gen1 takes commands on shellies/command (all devices),
		// shellies/<id>/command and shellies/<id>/<kind>/<i>/command
		// (or /set, or command/<what> for rollers).
		commands: []string{"shellies/command", "shellies/+/command", "shellies/+/+/+/command",
			"shellies/+/+/+/command/#", "shellies/+/+/+/set"},
		publish:   []string{"shellies/" + id + "/#", "shellies/announce"},
		subscribe: []string{"shellies/" + id + "/#", "shellies/command"},
	}
	p.routes[c.topic("device_id", base)] = func(b []byte) report {
		// "overpower" means the relay turned itself off.
		return report{value: parseWord(b, "on", "off", "overpower")}
	}
	// Power in W; energy in watt-minutes, from 0 at every power-up.
	p.routes[base+"/power"] = numberParser(bridge.HasPower, 1)
	p.routes[base+"/energy"] = numberParser(bridge.HasEnergy, 1.0/60000)
	p.routes["shellies/"+id+"/online"] = func(b []byte) report {
		return report{avail: parseAvailability(b, "true", "false")}
	}
	return p
}

// shellyRPC is a switch of a Gen2+ Shelly (Plus, Pro) spoken to over MQTT
// RPC (Gen2 firmware's MQTT RPC): a replier, whose requests go to
// <prefix>/rpc and whose answers come to <src>/rpc.
//
//	profile: shelly-rpc    prefix: shellyplus1-a8032ab12345   switch: 0
type shellyRPC struct {
	Prefix string `yaml:"prefix"`
	Switch *int   `yaml:"switch"`

	id int // the switch, once checked
}

var _ replier = (*shellyRPC)(nil)

func (o *shellyRPC) plug(c *checker) *plug {
	p := &plug{routes: map[string]parser{}}
	prefix := c.topic("prefix", o.Prefix)
	if prefix == "" {
		c.bad("prefix", "prefix (the device's MQTT topic prefix, e.g. shellyplus1-a8032ab12345) is required")
	} else if strings.ContainsAny(prefix, "%?") || len(prefix) > 300 {
		c.bad("prefix", "prefix %q: Shelly allows at most 300 characters and no %%, ?, + or #", prefix)
	}
	o.id = c.index("switch", o.Switch, 0, 64)
	p.repeatsState = true // every Switch.Set gets a reply
	// Its replies go to <client_id>-<switch id>/rpc, which the broker adds
	// to this switch's reports.
	p.acl = plugACL{
		commands:  []string{prefix + "/rpc", prefix + "/command", prefix + "/command/#"},
		publish:   []string{prefix + "/#"},
		subscribe: []string{prefix + "/#"},
	}
	p.routes[prefix+"/events/rpc"] = func(b []byte) report { return parseShellyNotify(b, o.id) }
	p.routes[fmt.Sprintf("%s/status/switch:%d", prefix, o.id)] = func(b []byte) report {
		return report{value: parseShellyOutput(b), meter: parseShellyMeter(b)}
	}
	p.routes[prefix+"/online"] = func(b []byte) report {
		return report{avail: parseAvailability(b, "true", "false")}
	}
	return p
}

// replyTopic implements replier.
func (o *shellyRPC) replyTopic(src string) string { return src + "/rpc" }

// request implements replier: Switch.Set, or Switch.GetStatus to ask.
func (o *shellyRPC) request(id uint64, src string, target bridge.Value) message {
	frame := map[string]any{"id": id, "src": src}
	if target == "" {
		frame["method"] = "Switch.GetStatus"
		frame["params"] = map[string]any{"id": o.id}
	} else {
		frame["method"] = "Switch.Set"
		frame["params"] = map[string]any{"id": o.id, "on": target == bridge.On}
	}
	b, _ := json.Marshal(frame)
	return message{topic: o.Prefix + "/rpc", payload: b}
}

// reply implements replier. Switch.Set answers {"was_on":…} once the relay
// is set, which says nothing of its own; Switch.GetStatus answers the
// status.
func (o *shellyRPC) reply(payload []byte) (uint64, report, bool) {
	r, ok := parseRPCReply(payload)
	switch {
	case !ok:
		return 0, report{}, false
	case r.Error != nil:
		return r.ID, report{failure: fmt.Sprintf("Shelly RPC error %d: %s", r.Error.Code, r.Error.Message)}, true
	}
	return r.ID, report{value: parseShellyOutput(r.Result), meter: parseShellyMeter(r.Result)}, true
}

// shellyStatus is the part of a Shelly Switch status the driver reads.
type shellyStatus struct {
	ID     *int  `json:"id"`
	Output *bool `json:"output"`
}

func (s shellyStatus) value() bridge.Value {
	switch {
	case s.Output == nil:
		return ""
	case *s.Output:
		return bridge.On
	}
	return bridge.Off
}

// parseShellyOutput reads a status/switch:N message or a Switch.GetStatus
// result.
func parseShellyOutput(b []byte) bridge.Value {
	if len(b) > maxPayload {
		return ""
	}
	var st shellyStatus
	if json.Unmarshal(b, &st) != nil {
		return ""
	}
	return st.value()
}

// parseShellyNotify reads a NotifyStatus or NotifyFullStatus frame:
// switch:id's output and readings when the frame carries them.
// NotifyStatus holds only the keys that changed, so a frame without
// output says nothing of it.
func parseShellyNotify(b []byte, id int) report {
	if len(b) > maxPayload {
		return report{}
	}
	var f struct {
		Method string                     `json:"method"`
		Params map[string]json.RawMessage `json:"params"`
	}
	if json.Unmarshal(b, &f) != nil || (f.Method != "NotifyStatus" && f.Method != "NotifyFullStatus") {
		return report{}
	}
	raw, ok := f.Params["switch:"+strconv.Itoa(id)]
	if !ok {
		return report{}
	}
	return report{value: parseShellyOutput(raw), meter: parseShellyMeter(raw)}
}

// rpcReply is a Shelly RPC response frame as it arrives on <src>/rpc.
type rpcReply struct {
	ID     uint64          `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// parseRPCReply reads a response frame. ok is false for anything that is
// not a response with a numeric id and a result or an error.
func parseRPCReply(b []byte) (r rpcReply, ok bool) {
	if len(b) > maxPayload || json.Unmarshal(b, &r) != nil {
		return rpcReply{}, false
	}
	if r.ID == 0 || (r.Error == nil && len(r.Result) == 0) {
		return rpcReply{}, false
	}
	return r, true
}
