package mqtt

import (
	"encoding/json"
	"strings"

	"github.com/switchbridge/switchbridge/bridge"
)

// zigbee2MQTT is a Zigbee switch behind a Zigbee2MQTT bridge:
//
//	profile: zigbee2mqtt   friendly_name: hall/lamp   base_topic: zigbee2mqtt   endpoint: l1
type zigbee2MQTT struct {
	BaseTopic    string `yaml:"base_topic"`
	FriendlyName string `yaml:"friendly_name"`
	Endpoint     string `yaml:"endpoint"`
}

func (o *zigbee2MQTT) plug(c *checker) *plug {
	p := &plug{routes: map[string]parser{}}
	base := o.BaseTopic
	if base == "" {
		base = "zigbee2mqtt"
	}
	c.topic("base_topic", base)
	name := o.FriendlyName
	if name == "" {
		c.bad("friendly_name", "friendly_name is required for profile zigbee2mqtt")
	} else if err := checkTopic(name); err != nil {
		c.bad("friendly_name", "friendly_name %s", err)
	} else if name == "bridge" || strings.HasPrefix(name, "bridge/") {
		c.bad("friendly_name", "friendly_name %q is Zigbee2MQTT's own topic", name)
	}
	key := "state"
	if o.Endpoint != "" {
		c.level("endpoint", o.Endpoint)
		key += "_" + o.Endpoint
	}
	dev := base + "/" + name
	p.command = fixedCommands(func(v bridge.Value) message {
		b, _ := json.Marshal(map[string]string{key: strings.ToUpper(string(v))})
		return message{topic: dev + "/set", payload: b}
	})
	q, _ := json.Marshal(map[string]string{key: ""})
	p.query = &message{topic: dev + "/get", payload: q}
	p.repeatsState = true // the optimistic state follows every set
	// A bridge serves every device under its base topic; set and get,
	// with or without an attribute, and bridge requests are commands.
	p.acl = plugACL{
		commands: []string{base + "/#/set", base + "/#/set/+", base + "/#/get", base + "/#/get/+",
			base + "/bridge/request/#"},
		publish:   []string{base + "/#"},
		subscribe: []string{base + "/#"},
	}
	endpoint := o.Endpoint
	p.routes[dev] = func(b []byte) report {
		return report{value: parseJSONState(b, key, "ON", "OFF"), meter: parseZ2MMeter(b, endpoint)}
	}
	p.routes[dev+"/availability"] = func(b []byte) report {
		return report{avail: parseZ2MAvailability(b)}
	}
	p.gateway = base + "/bridge/state"
	p.routes[p.gateway] = func(b []byte) report {
		return report{bridge: parseZ2MAvailability(b)}
	}
	return p
}

// parseZ2MAvailability reads Zigbee2MQTT's availability and bridge/state:
// {"state":"online"} since 2.0, plain online/offline in 1.x legacy mode.
func parseZ2MAvailability(b []byte) availability {
	if a := parseAvailability(b, "online", "offline"); a != availUnknown {
		return a
	}
	switch parseJSONState(b, "state", "online", "offline") {
	case bridge.On:
		return availOnline
	case bridge.Off:
		return availOffline
	}
	return availUnknown
}
