package mqtt

// Home Assistant MQTT discovery: a retained JSON object on
// homeassistant/switch/[<node_id>/]<object_id>/config with command_topic,
// state_topic, payload_on/off, state_on/off, value_template,
// availability_topic (or an availability list) and its payloads,
// unique_id and device; keys may be abbreviated (cmd_t, stat_t, avty_t…)
// and "~" in a topic stands for the base topic given under "~". ESPHome
// publishes it by default, Tasmota with SetOption19 1. An ESPHome or
// Tasmota switch is proposed under its own profile, anything else as
// generic.

import (
	"encoding/json"
	"errors"
	"regexp"
	"strconv"
	"strings"
)

// haAbbreviations are the abbreviations of the keys read here.
var haAbbreviations = map[string]string{
	"cmd_t": "command_topic", "stat_t": "state_topic", "avty_t": "availability_topic", "avty": "availability",
	"pl_on": "payload_on", "pl_off": "payload_off", "stat_on": "state_on", "stat_off": "state_off",
	"pl_avail": "payload_available", "pl_not_avail": "payload_not_available", "uniq_id": "unique_id",
	"val_tpl": "value_template", "dev": "device", "t": "topic",
}

var haDeviceAbbreviations = map[string]string{
	"ids": "identifiers", "mf": "manufacturer", "mdl": "model", "sw": "sw_version",
}

// haValueKey is the one value_template the generic profile can follow: a
// key of the JSON state.
var haValueKey = regexp.MustCompile(`^\{\{\s*value_json\.([A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)*)\s*\}\}$`)

var (
	esphomeCommand = regexp.MustCompile(`^(.+)/switch/([^/]+)/command$`)
	tasmotaPower   = regexp.MustCompile(`^cmnd/([^/]+)/POWER([0-9]*)$`)
)

// haObject reads a discovery object with its keys written out.
func haObject(b []byte, abbr map[string]string) (map[string]json.RawMessage, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, err
	}
	if raw == nil {
		return nil, errors.New("not a JSON object")
	}
	out := make(map[string]json.RawMessage, len(raw))
	for k, v := range raw {
		if full, ok := abbr[k]; ok {
			k = full
		}
		out[k] = v
	}
	return out, nil
}

func haString(o map[string]json.RawMessage, key string) string {
	var s string
	if v, ok := o[key]; ok {
		if json.Unmarshal(v, &s) != nil {
			// A number or a boolean payload, as HA allows.
			s = strings.Trim(string(v), `"`)
			if _, err := strconv.ParseFloat(s, 64); err != nil && s != "true" && s != "false" {
				return ""
			}
		}
	}
	return s
}

// parseHADiscovery reads a switch's config; ids are the topic's node_id
// and object_id levels.
func parseHADiscovery(ids []string, payload []byte) ([]Device, error) {
	o, err := haObject(payload, haAbbreviations)
	if err != nil {
		return nil, err
	}
	base := haString(o, "~")
	topic := func(key string) string {
		t := haString(o, key)
		switch {
		case base == "":
		case strings.HasPrefix(t, "~"):
			t = base + t[1:]
		case strings.HasSuffix(t, "~"):
			t = t[:len(t)-1] + base
		}
		return t
	}
	cmd, state, avail := topic("command_topic"), topic("state_topic"), topic("availability_topic")
	availOn, availOff := cmpOr(haString(o, "payload_available"), "online"), cmpOr(haString(o, "payload_not_available"), "offline")
	if avail == "" {
		var list []map[string]json.RawMessage
		if v, ok := o["availability"]; ok && json.Unmarshal(v, &list) == nil && len(list) > 0 {
			a := map[string]json.RawMessage{}
			for k, v := range list[0] {
				if full, ok := haAbbreviations[k]; ok {
					k = full
				}
				a[k] = v
			}
			avail = haString(a, "topic")
			if base != "" && strings.HasPrefix(avail, "~") {
				avail = base + avail[1:]
			}
			availOn, availOff = cmpOr(haString(a, "payload_available"), availOn), cmpOr(haString(a, "payload_not_available"), availOff)
		}
	}
	if state == "" {
		return nil, errors.New("a switch without state_topic: the hub could not confirm its commands")
	}
	var dev map[string]json.RawMessage
	if v, ok := o["device"]; ok {
		if b, err := json.Marshal(v); err == nil {
			dev, _ = haObject(b, haDeviceAbbreviations)
		}
	}
	d := Device{ID: "ha-" + cmpOr(haString(o, "unique_id"), strings.Join(ids, "-")), Name: haString(o, "name"),
		Model: clip(haString(dev, "model"), maxIDLen), Version: clip(haString(dev, "sw_version"), maxIDLen),
		Topics:       DeviceTopics{Command: cmd, State: state, Availability: avail},
		availability: avail, availableOn: availOn, availableOff: availOff}
	if d.Name == "" {
		d.Name = haString(dev, "name")
	}
	if m := esphomeCommand.FindStringSubmatch(cmd); m != nil && state == m[1]+"/switch/"+m[2]+"/state" && (avail == "" || avail == m[1]+"/status") {
		// ESPHome's unique_id (ESP<component><object_id>) is the same on
		// every node: the node's prefix tells them apart.
		d.ID = "esphome-" + m[1] + "-" + m[2]
		dev, err := makeDevice(d, "esphome", []entryField{{"prefix", m[1]}, {"object_id", m[2]}})
		return []Device{dev}, err
	}
	if m := tasmotaPower.FindStringSubmatch(cmd); m != nil && avail == "tele/"+m[1]+"/LWT" {
		var opts []entryField
		if n, _ := strconv.Atoi(m[2]); n > 1 {
			opts = append(opts, entryField{"relay", n})
		}
		dev, err := makeDevice(d, "tasmota", append([]entryField{{"topic", m[1]}}, opts...))
		return []Device{dev}, err
	}
	opts := []entryField{{"state_topic", state}}
	if cmd != "" {
		opts = append(opts, entryField{"command_topic", cmd})
	}
	for _, k := range []string{"payload_on", "payload_off", "state_on", "state_off"} {
		if v := haString(o, k); v != "" {
			opts = append(opts, entryField{k, v})
		}
	}
	if tpl := haString(o, "value_template"); tpl != "" {
		m := haValueKey.FindStringSubmatch(strings.TrimSpace(tpl))
		if m == nil {
			return nil, errors.New("a value_template other than {{ value_json.<key> }}")
		}
		opts = append(opts, entryField{"state_key", m[1]})
	}
	if avail != "" {
		opts = append(opts, entryField{"availability_topic", avail})
		if availOn != "online" {
			opts = append(opts, entryField{"payload_available", availOn})
		}
		if availOff != "offline" {
			opts = append(opts, entryField{"payload_not_available", availOff})
		}
	}
	out, err := makeDevice(d, "generic", opts)
	return []Device{out}, err
}
