package mqtt

import (
	"strings"

	"github.com/switchbridge/switchbridge/bridge"
)

// esphome is an ESPHome node's MQTT switch:
//
//	profile: esphome   prefix: livingroom   object_id: lamp   (command_topic, state_topic override)
type esphome struct {
	Prefix       string `yaml:"prefix"`
	ObjectID     string `yaml:"object_id"`
	CommandTopic string `yaml:"command_topic"`
	StateTopic   string `yaml:"state_topic"`
	PowerTopic   string `yaml:"power_topic"`
	PowerUnit    string `yaml:"power_unit"`
	EnergyTopic  string `yaml:"energy_topic"`
	EnergyUnit   string `yaml:"energy_unit"`
}

func (o *esphome) plug(c *checker) *plug {
	p := &plug{routes: map[string]parser{}}
	prefix := c.topic("prefix", o.Prefix)
	obj := o.ObjectID
	if o.CommandTopic == "" || o.StateTopic == "" {
		c.level("object_id", obj)
	}
	cmd, state := o.CommandTopic, o.StateTopic
	if cmd == "" {
		cmd = prefix + "/switch/" + obj + "/command"
	}
	if state == "" {
		state = prefix + "/switch/" + obj + "/state"
	}
	c.topic("command_topic", cmd)
	c.topic("state_topic", state)
	// ESPHome takes commands on <prefix>/<component>/<id>[/<what>]/command.
	p.acl = plugACL{
		commands:  []string{prefix + "/#/command", cmd},
		publish:   []string{prefix + "/#", state},
		subscribe: []string{prefix + "/#", cmd},
	}
	p.command = fixedCommands(func(v bridge.Value) message {
		return message{topic: cmd, payload: []byte(strings.ToUpper(string(v)))}
	})
	p.routes[state] = func(b []byte) report { return report{value: parseWord(b, "ON", "OFF")} }
	sensorTopics{o.PowerTopic, o.PowerUnit, o.EnergyTopic, o.EnergyUnit}.addRoutes(c, p, "Wh")
	p.announces = true // its birth message and will, retained
	p.routes[prefix+"/status"] = func(b []byte) report {
		return report{avail: parseAvailability(b, "online", "offline")}
	}
	return p
}
