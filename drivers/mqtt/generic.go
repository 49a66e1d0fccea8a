package mqtt

import (
	"slices"
	"strings"

	"github.com/switchbridge/switchbridge/bridge"
)

// generic is a switch that follows Home Assistant's MQTT switch
// conventions, for firmware without a profile:
//
//	profile: generic   state_topic: x/state   command_topic: x/set (absent: read-only)
//	                   payload_on: ON  payload_off: OFF  state_on/state_off (default: the payloads)
//	                   state_key: a.b (read the value from a JSON payload)
//	                   availability_topic: x/status  payload_available: online  payload_not_available: offline
type generic struct {
	CommandTopic        string `yaml:"command_topic"`
	StateTopic          string `yaml:"state_topic"`
	PayloadOn           string `yaml:"payload_on"`
	PayloadOff          string `yaml:"payload_off"`
	StateOn             string `yaml:"state_on"`
	StateOff            string `yaml:"state_off"`
	StateKey            string `yaml:"state_key"`
	AvailabilityTopic   string `yaml:"availability_topic"`
	PayloadAvailable    string `yaml:"payload_available"`
	PayloadNotAvailable string `yaml:"payload_not_available"`
	PowerTopic          string `yaml:"power_topic"`
	PowerUnit           string `yaml:"power_unit"`
	EnergyTopic         string `yaml:"energy_topic"`
	EnergyUnit          string `yaml:"energy_unit"`
}

func (o *generic) plug(c *checker) *plug {
	p := &plug{routes: map[string]parser{}}
	state := c.topic("state_topic", o.StateTopic)
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
		c.bad("payload_on", "payload_on and payload_off must differ")
	}
	if strings.EqualFold(sOn, sOff) {
		c.bad("state_on", "state_on and state_off must differ")
	}
	// A generic device's topics have no fixed shape; Home Assistant's
	// convention keeps them under one base: the state topic's parent.
	p.acl.publish = []string{state, state + "/#"}
	if i := strings.LastIndexByte(state, '/'); i > 0 {
		p.acl.publish = append(p.acl.publish, state[:i]+"/#")
	}
	p.acl.subscribe = slices.Clone(p.acl.publish)
	if o.CommandTopic != "" {
		cmd := c.topic("command_topic", o.CommandTopic)
		p.acl.commands = []string{cmd}
		p.acl.subscribe = append(p.acl.subscribe, cmd)
		p.command = fixedCommands(func(v bridge.Value) message {
			if v == bridge.On {
				return message{topic: cmd, payload: []byte(on)}
			}
			return message{topic: cmd, payload: []byte(off)}
		})
	}
	key := o.StateKey
	p.routes[state] = func(b []byte) report {
		if key != "" {
			return report{value: parseJSONState(b, key, sOn, sOff)}
		}
		return report{value: parseWord(b, sOn, sOff)}
	}
	sensorTopics{o.PowerTopic, o.PowerUnit, o.EnergyTopic, o.EnergyUnit}.addRoutes(c, p, "kWh")
	if o.AvailabilityTopic != "" {
		avail := c.topic("availability_topic", o.AvailabilityTopic)
		if avail == state {
			c.bad("availability_topic", "availability_topic must differ from state_topic")
		}
		yes, no := o.PayloadAvailable, o.PayloadNotAvailable
		if yes == "" {
			yes = "online"
		}
		if no == "" {
			no = "offline"
		}
		p.routes[avail] = func(b []byte) report { return report{avail: parseAvailability(b, yes, no)} }
		p.announces = true
		p.acl.publish = append(p.acl.publish, avail)
	} else if o.PayloadAvailable != "" || o.PayloadNotAvailable != "" {
		c.bad("payload_available", "payload_available and payload_not_available need availability_topic")
	}
	return p
}
