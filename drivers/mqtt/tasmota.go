package mqtt

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/switchbridge/switchbridge/bridge"
)

// tasmota is a Tasmota device's relay:
//
//	profile: tasmota   topic: tasmota_1A2B3C   relay: 2 (POWER2; 0 or absent: POWER)
//	                   full_topic: "%prefix%/%topic%/"  prefixes: [cmnd, stat, tele]
//	                   hostname, mac (for %hostname% and %id%)  state_text: {off: OFF, on: ON}
type tasmota struct {
	Topic     string     `yaml:"topic"`
	Relay     *int       `yaml:"relay"`
	FullTopic string     `yaml:"full_topic"`
	Prefixes  []string   `yaml:"prefixes"`
	Hostname  string     `yaml:"hostname"`
	MAC       string     `yaml:"mac"`
	StateText *stateText `yaml:"state_text"`
}

// stateText is Tasmota's StateText1 (off) and StateText2 (on).
type stateText struct {
	Off string `yaml:"off"`
	On  string `yaml:"on"`
}

func (o *tasmota) plug(c *checker) *plug {
	p := &plug{routes: map[string]parser{}}
	relay := c.index("relay", o.Relay, 0, 32)
	texts := stateText{Off: "OFF", On: "ON"}
	if o.StateText != nil {
		if o.StateText.Off != "" {
			texts.Off = o.StateText.Off
		}
		if o.StateText.On != "" {
			texts.On = o.StateText.On
		}
		if strings.EqualFold(texts.Off, texts.On) {
			c.bad("state_text", "state_text off and on must differ")
		}
	}
	full := o.FullTopic
	if full == "" {
		full = "%prefix%/%topic%/"
	}
	prefixes := []string{"cmnd", "stat", "tele"}
	if o.Prefixes != nil {
		if len(o.Prefixes) != 3 {
			c.bad("prefixes", "prefixes lists Prefix1, 2 and 3 (command, state, telemetry), e.g. [cmnd, stat, tele]")
		} else {
			prefixes = o.Prefixes
		}
	}
	if !strings.Contains(full, "%prefix%") {
		c.bad("full_topic", "full_topic %q must contain %%prefix%%", full)
	}
	c.level("topic", o.Topic)
	if strings.Contains(full, "%hostname%") {
		c.level("hostname", o.Hostname)
	}
	if strings.Contains(full, "%id%") {
		c.level("mac", o.MAC)
	}
	if len(full) > 100 {
		c.bad("full_topic", "full_topic is longer than Tasmota's 100 characters")
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
	// The command namespace of every Tasmota with this full topic: a
	// group topic (cmnd/tasmotas/POWER) switches this plug too.
	anyDevice := strings.NewReplacer("%prefix%", prefixes[0], "%topic%", "+", "%hostname%", "+", "%id%", "+").Replace(full)
	if !strings.HasSuffix(anyDevice, "/") {
		anyDevice += "/"
	}
	p.acl = plugACL{
		commands:  []string{anyDevice + "#"},
		publish:   append([]string{expand(prefixes[1], "#"), expand(prefixes[2], "#")}, tasmotaAnnouncements...),
		subscribe: []string{expand(prefixes[0], "#"), expand(prefixes[1], "#"), expand(prefixes[2], "#")},
	}
	if strings.Contains(full, "%topic%") {
		// What the firmware subscribes to at every connect besides its own
		// topic: the default group topic and its fallback topic. Only the
		// hub publishes on command topics, and it uses neither, so they
		// bring the plug nothing; refusing them would log at every connect.
		group := strings.NewReplacer("%prefix%", prefixes[0], "%topic%", "tasmotas", "%hostname%", o.Hostname, "%id%", o.MAC).Replace(full)
		fallback := strings.NewReplacer("%prefix%", prefixes[0], "%topic%", "%client%_fb", "%hostname%", o.Hostname, "%id%", o.MAC).Replace(full)
		p.acl.subscribe = append(p.acl.subscribe, strings.TrimSuffix(group, "/")+"/#")
		p.acl.clientSubscribe = []string{strings.TrimSuffix(fallback, "/") + "/#"}
	}
	cmd := c.topic("topic", expand(prefixes[0], power))
	p.command = fixedCommands(func(v bridge.Value) message {
		return message{topic: cmd, payload: []byte(strings.ToUpper(string(v)))}
	})
	// An empty payload is a query; the reply is the usual RESULT + POWER.
	p.query = &message{topic: cmd}
	p.repeatsState = true
	usual := usualReplies(keys, texts)
	p.routes[expand(prefixes[1], "RESULT")] = func(b []byte) report {
		if v, ok := usual.match(b); ok {
			return report{value: v}
		}
		return parseTasmotaJSON(b, keys, texts)
	}
	for _, k := range keys {
		// Plain ON/OFF, or with SetOption4 the JSON form as well.
		p.routes[expand(prefixes[1], k)] = func(b []byte) report {
			if v, ok := usual.match(b); ok {
				return report{value: v}
			}
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
	// Energy: tele/SENSOR every TelePeriod, and the answers to Status 8
	// and Status 10.
	meter := func(b []byte) report { return report{meter: parseTasmotaEnergy(b, relay)} }
	p.routes[expand(prefixes[2], "SENSOR")] = meter
	p.routes[expand(prefixes[1], "STATUS8")] = meter
	p.routes[expand(prefixes[1], "STATUS10")] = meter
	p.routes[expand(prefixes[2], "LWT")] = func(b []byte) report {
		return report{avail: parseAvailability(b, "Online", "Offline")}
	}
	return p
}

// tasmotaReplies are the replies to a power command exactly as Tasmota
// writes them, {"POWER":"ON"} and the like, with the value each says.
type tasmotaReplies []tasmotaReply

type tasmotaReply struct {
	payload []byte
	value   bridge.Value
}

// usualReplies lists the replies for each of keys in both state texts.
func usualReplies(keys []string, texts stateText) tasmotaReplies {
	var rs tasmotaReplies
	for _, k := range keys {
		for _, t := range []struct {
			text  string
			value bridge.Value
		}{{texts.On, bridge.On}, {texts.Off, bridge.Off}} {
			b, err := json.Marshal(map[string]string{k: t.text})
			if err == nil {
				rs = append(rs, tasmotaReply{b, t.value})
			}
		}
	}
	return rs
}

// match reports the value of b when it is one of the usual replies, byte
// for byte: what parseTasmotaJSON would make of it, without decoding JSON
// into a map (the largest part of handling a reply, and a command to a
// hundred plugs gets a hundred). Anything else is left to it.
func (rs tasmotaReplies) match(b []byte) (bridge.Value, bool) {
	if len(b) == 0 || b[0] != '{' {
		return "", false
	}
	for _, r := range rs {
		if bytes.Equal(b, r.payload) {
			return r.value, true
		}
	}
	return "", false
}

// parseTasmotaJSON reads a Tasmota RESULT, SetOption4 stat/POWER or
// tele/STATE object: the first of keys present holds a StateText. A
// {"Command":"Error"} or {"Command":"Unknown"} reply is a rejection.
func parseTasmotaJSON(b []byte, keys []string, texts stateText) report {
	obj, ok := jsonObject(b)
	if !ok {
		return report{}
	}
	var r report
	for _, k := range keys {
		if raw, ok := obj[k]; ok {
			var s string
			if json.Unmarshal(raw, &s) == nil {
				r.value = parseWord([]byte(s), texts.On, texts.Off)
			}
			break
		}
	}
	if raw, ok := obj["Command"]; ok {
		var s string
		if json.Unmarshal(raw, &s) == nil && (s == "Error" || s == "Unknown") {
			r.rejected = "Tasmota answered {\"Command\":\"" + s + "\"} (check the relay index)"
		}
	}
	return r
}
