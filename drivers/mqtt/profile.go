package mqtt

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/drivers"
)

// plug is what a profile makes of one switch's options: the topics to
// watch, how to read each, and how to command the plug.
type plug struct {
	profile string
	// routes maps each subscribed topic to its parser.
	routes map[string]parser
	// command builds the message that sets the plug to v; nil for a
	// read-only plug.
	command func(v bridge.Value) message
	// query is what asks the plug to report its state (sent at every
	// connect), or nil when the firmware has no way to ask.
	query *message
	// repeatsState is true when the firmware reports its state after every
	// command even if nothing changed. When false, a command for the value
	// the plug already reported is confirmed by that report.
	repeatsState bool
	// rpc is the Shelly RPC switch id, or -1 for other profiles. Shelly RPC
	// replies arrive on the hub's own topic and are matched by request id.
	rpc int
	// rpcPrefix is the Shelly RPC topic prefix.
	rpcPrefix string
}

// message is one publish. Commands are never retained: the driver has no
// way to say otherwise.
type message struct {
	topic   string
	payload []byte
}

// parser reads one message on a plug's topic.
type parser func(payload []byte) report

// report is what one message says about a plug; zero fields say nothing.
type report struct {
	value bridge.Value
	// avail is the plug's own availability.
	avail availability
	// bridge is the availability of the gateway in front of the plug
	// (Zigbee2MQTT's bridge/state).
	bridge availability
	// failure is this plug's command rejected by the firmware (a Shelly
	// RPC error, matched to the request by id).
	failure string
	// rejected is a rejection that cannot be pinned on one command:
	// Tasmota's {"Command":"Error"} names no relay, and the device's other
	// relays share the topic. It is kept as a hint for a command that then
	// times out.
	rejected string
}

type availability int8

const (
	availUnknown availability = iota
	availOnline
	availOffline
)

func (a availability) String() string {
	switch a {
	case availOnline:
		return "online"
	case availOffline:
		return "offline"
	}
	return "unknown"
}

// buildPlug checks one switch's options and makes its plug. It does no I/O.
func buildPlug(s drivers.Spec) (*plug, error) {
	var o Options
	ps := &config.Problems{}
	if err := config.DecodeStrict(s.Options, &o); err != nil {
		ps.Merge(err, s.Line)
		return nil, ps.Err()
	}
	at := func(key string) *yaml.Node {
		if n := config.Lookup(s.Options, key); n != nil {
			return n
		}
		return &yaml.Node{Line: s.Line}
	}
	bad := func(key, format string, args ...any) {
		ps.Add(at(key), "switch %q: %s", s.ID, fmt.Sprintf(format, args...))
	}
	allowed, ok := profileKeys[o.Profile]
	if !ok {
		if o.Profile == "" {
			bad("profile", "an mqtt switch needs a profile (%s)", strings.Join(profileNames, ", "))
		} else {
			bad("profile", "unknown profile %q (known: %s)", o.Profile, strings.Join(profileNames, ", "))
		}
		return nil, ps.Err()
	}
	if s.Options != nil {
		for i := 0; i+1 < len(s.Options.Content); i += 2 {
			k := s.Options.Content[i]
			if k.Value != "profile" && !slices.Contains(allowed, k.Value) {
				ps.Add(k, "switch %q: key %q does not apply to profile %s (its keys: %s)", s.ID, k.Value, o.Profile, strings.Join(allowed, ", "))
			}
		}
	}
	topic := func(key, t string) string {
		if err := checkTopic(t); err != nil {
			bad(key, "%s %s", key, err)
		}
		return t
	}
	level := func(key, v string) string {
		if v == "" {
			bad(key, "%s is required for profile %s", key, o.Profile)
		} else if strings.ContainsAny(v, "+#/") || strings.ContainsRune(v, 0) {
			bad(key, "%s %q must be a single topic level (no /, + or #)", key, v)
		}
		return v
	}
	index := func(key string, p *int, def, max int) int {
		if p == nil {
			return def
		}
		if *p < 0 || *p > max {
			bad(key, "%s must be between 0 and %d, not %d", key, max, *p)
		}
		return *p
	}

	p := &plug{profile: o.Profile, routes: map[string]parser{}, rpc: -1}
	switch o.Profile {
	case "tasmota":
		relay := index("relay", o.Relay, 0, 32)
		texts := StateText{Off: "OFF", On: "ON"}
		if o.StateText != nil {
			if o.StateText.Off != "" {
				texts.Off = o.StateText.Off
			}
			if o.StateText.On != "" {
				texts.On = o.StateText.On
			}
			if strings.EqualFold(texts.Off, texts.On) {
				bad("state_text", "state_text off and on must differ")
			}
		}
		full := o.FullTopic
		if full == "" {
			full = "%prefix%/%topic%/"
		}
		prefixes := []string{"cmnd", "stat", "tele"}
		if o.Prefixes != nil {
			if len(o.Prefixes) != 3 {
				bad("prefixes", "prefixes lists Prefix1, 2 and 3 (command, state, telemetry), e.g. [cmnd, stat, tele]")
			} else {
				prefixes = o.Prefixes
			}
		}
		if !strings.Contains(full, "%prefix%") {
			bad("full_topic", "full_topic %q must contain %%prefix%%", full)
		}
		level("topic", o.Topic)
		if strings.Contains(full, "%hostname%") {
			level("hostname", o.Hostname)
		}
		if strings.Contains(full, "%id%") {
			level("mac", o.MAC)
		}
		if len(full) > 100 {
			bad("full_topic", "full_topic is longer than Tasmota's 100 characters")
		}
		expand := func(prefix, cmd string) string {
			r := strings.NewReplacer("%prefix%", prefix, "%topic%", o.Topic, "%hostname%", o.Hostname, "%id%", o.MAC)
			t := r.Replace(full)
			if !strings.HasSuffix(t, "/") {
				t += "/"
			}
			return t + cmd
		}
		power := "POWER"
		if relay > 0 {
			power += strconv.Itoa(relay)
		}
		// A single relay reports as POWER (SetOption26=0) or POWER1
		// (SetOption26=1); accept both for relay 0 and 1.
		keys := []string{power}
		if relay <= 1 {
			keys = []string{"POWER", "POWER1"}
		}
		cmd := topic("topic", expand(prefixes[0], power))
		p.command = func(v bridge.Value) message {
			return message{topic: cmd, payload: []byte(strings.ToUpper(string(v)))}
		}
		// An empty payload is a query; the reply is the usual RESULT + POWER.
		p.query = &message{topic: cmd}
		p.repeatsState = true
		p.routes[expand(prefixes[1], "RESULT")] = func(b []byte) report { return parseTasmotaJSON(b, keys, texts) }
		for _, k := range keys {
			// Plain ON/OFF, or with SetOption4 the JSON form as well.
			p.routes[expand(prefixes[1], k)] = func(b []byte) report {
				if r := parseTasmotaJSON(b, keys, texts); r.value != "" {
					return r
				}
				return report{value: parseWord(b, texts.On, texts.Off)}
			}
		}
		p.routes[expand(prefixes[2], "STATE")] = func(b []byte) report {
			r := parseTasmotaJSON(b, keys, texts)
			r.rejected = "" // telemetry carries no command result
			return r
		}
		p.routes[expand(prefixes[2], "LWT")] = func(b []byte) report {
			return report{avail: parseAvailability(b, "Online", "Offline")}
		}

	case "shelly-gen1":
		id := level("device_id", o.DeviceID)
		relay := index("relay", o.Relay, 0, 16)
		base := fmt.Sprintf("shellies/%s/relay/%d", id, relay)
		p.command = func(v bridge.Value) message {
			return message{topic: base + "/command", payload: []byte(v)} // lower case: on, off
		}
		p.query = &message{topic: "shellies/" + id + "/command", payload: []byte("update")}
		p.routes[topic("device_id", base)] = func(b []byte) report {
			// "overpower" means the relay turned itself off.
			return report{value: parseWord(b, "on", "off", "overpower")}
		}
		p.routes["shellies/"+id+"/online"] = func(b []byte) report {
			return report{avail: parseAvailability(b, "true", "false")}
		}

	case "shelly-rpc":
		prefix := topic("prefix", o.Prefix)
		if prefix == "" {
			bad("prefix", "prefix (the device's MQTT topic prefix, e.g. shellyplus1-a8032ab12345) is required")
		} else if strings.ContainsAny(prefix, "%?") || len(prefix) > 300 {
			bad("prefix", "prefix %q: Shelly allows at most 300 characters and no %%, ?, + or #", prefix)
		}
		id := index("switch", o.Switch, 0, 64)
		p.rpc, p.rpcPrefix = id, prefix
		p.command = func(v bridge.Value) message { return message{topic: prefix + "/rpc"} } // payload made per request
		p.query = &message{topic: prefix + "/rpc"}
		p.repeatsState = true // every Switch.Set gets a reply
		p.routes[prefix+"/events/rpc"] = func(b []byte) report { return report{value: parseShellyNotify(b, id)} }
		p.routes[fmt.Sprintf("%s/status/switch:%d", prefix, id)] = func(b []byte) report {
			return report{value: parseShellyOutput(b)}
		}
		p.routes[prefix+"/online"] = func(b []byte) report {
			return report{avail: parseAvailability(b, "true", "false")}
		}

	case "zigbee2mqtt":
		base := o.BaseTopic
		if base == "" {
			base = "zigbee2mqtt"
		}
		topic("base_topic", base)
		name := o.FriendlyName
		if name == "" {
			bad("friendly_name", "friendly_name is required for profile zigbee2mqtt")
		} else if err := checkTopic(name); err != nil {
			bad("friendly_name", "friendly_name %s", err)
		} else if name == "bridge" || strings.HasPrefix(name, "bridge/") {
			bad("friendly_name", "friendly_name %q is Zigbee2MQTT's own topic", name)
		}
		key := "state"
		if o.Endpoint != "" {
			level("endpoint", o.Endpoint)
			key += "_" + o.Endpoint
		}
		dev := base + "/" + name
		p.command = func(v bridge.Value) message {
			b, _ := json.Marshal(map[string]string{key: strings.ToUpper(string(v))})
			return message{topic: dev + "/set", payload: b}
		}
		q, _ := json.Marshal(map[string]string{key: ""})
		p.query = &message{topic: dev + "/get", payload: q}
		p.repeatsState = true // the optimistic state follows every set
		p.routes[dev] = func(b []byte) report { return report{value: parseJSONState(b, key, "ON", "OFF")} }
		p.routes[dev+"/availability"] = func(b []byte) report {
			return report{avail: parseZ2MAvailability(b)}
		}
		p.routes[base+"/bridge/state"] = func(b []byte) report {
			return report{bridge: parseZ2MAvailability(b)}
		}

	case "esphome":
		prefix := topic("prefix", o.Prefix)
		obj := o.ObjectID
		if o.CommandTopic == "" || o.StateTopic == "" {
			level("object_id", obj)
		}
		cmd, state := o.CommandTopic, o.StateTopic
		if cmd == "" {
			cmd = prefix + "/switch/" + obj + "/command"
		}
		if state == "" {
			state = prefix + "/switch/" + obj + "/state"
		}
		topic("command_topic", cmd)
		topic("state_topic", state)
		p.command = func(v bridge.Value) message {
			return message{topic: cmd, payload: []byte(strings.ToUpper(string(v)))}
		}
		p.routes[state] = func(b []byte) report { return report{value: parseWord(b, "ON", "OFF")} }
		p.routes[prefix+"/status"] = func(b []byte) report {
			return report{avail: parseAvailability(b, "online", "offline")}
		}

	case "generic":
		state := topic("state_topic", o.StateTopic)
		on, off := o.PayloadOn, o.PayloadOff
		if on == "" {
			on = "ON"
		}
		if off == "" {
			off = "OFF"
		}
		sOn, sOff := o.StateOn, o.StateOff
		if sOn == "" {
			sOn = on
		}
		if sOff == "" {
			sOff = off
		}
		if strings.EqualFold(on, off) {
			bad("payload_on", "payload_on and payload_off must differ")
		}
		if strings.EqualFold(sOn, sOff) {
			bad("state_on", "state_on and state_off must differ")
		}
		if o.CommandTopic != "" {
			cmd := topic("command_topic", o.CommandTopic)
			p.command = func(v bridge.Value) message {
				if v == bridge.On {
					return message{topic: cmd, payload: []byte(on)}
				}
				return message{topic: cmd, payload: []byte(off)}
			}
		}
		key := o.StateKey
		p.routes[state] = func(b []byte) report {
			if key != "" {
				return report{value: parseJSONState(b, key, sOn, sOff)}
			}
			return report{value: parseWord(b, sOn, sOff)}
		}
		if o.AvailabilityTopic != "" {
			avail := topic("availability_topic", o.AvailabilityTopic)
			if avail == state {
				bad("availability_topic", "availability_topic must differ from state_topic")
			}
			yes, no := o.PayloadAvailable, o.PayloadNotAvailable
			if yes == "" {
				yes = "online"
			}
			if no == "" {
				no = "offline"
			}
			p.routes[avail] = func(b []byte) report { return report{avail: parseAvailability(b, yes, no)} }
		} else if o.PayloadAvailable != "" || o.PayloadNotAvailable != "" {
			bad("payload_available", "payload_available and payload_not_available need availability_topic")
		}
	}
	if p.command != nil && p.rpc < 0 {
		for _, v := range []bridge.Value{bridge.On, bridge.Off} {
			if _, watched := p.routes[p.command(v).topic]; watched {
				bad("command_topic", "the command topic must differ from the topics the plug reports on")
				break
			}
		}
	}
	if err := ps.Err(); err != nil {
		return nil, err
	}
	return p, nil
}
