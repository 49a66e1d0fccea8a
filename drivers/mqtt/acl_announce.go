package mqtt

// Announcements on the embedded broker: a plug login may announce only
// devices whose state it may itself publish, so it cannot announce its
// neighbour (a Tasmota config naming another plug's topic, a Shelly
// announce with another device's id, a Home Assistant config of another
// plug's topics). The announcement is read with discovery's own parsers.

import "strings"

// announcementPublish are the announcement topics a Tasmota login may
// publish on, its payload checked by mayAnnounce: its native discovery,
// and Home Assistant's with SetOption19 1.
var tasmotaAnnouncements = []string{"tasmota/discovery/+/config", "tasmota/discovery/+/sensors", "homeassistant/switch/+/config"}

// mayAnnounce reports whether user may publish payload on topic, when
// topic is an announcement: every device it announces must be one whose
// state user may publish. Anything else is left to mayPublish.
func (r *brokerRules) mayAnnounce(user, topic string, payload []byte) bool {
	if user == r.hubUser || len(payload) == 0 {
		return true
	}
	levels := strings.Split(topic, "/")
	var devs []Device
	var err error
	switch {
	case len(levels) == 4 && levels[0] == "tasmota" && levels[1] == "discovery" && levels[3] == "config":
		devs, err = parseTasmotaDiscovery(levels[2], payload)
	case topic == "shellies/announce":
		devs, err = parseShellyAnnounce(payload)
	case len(levels) >= 3 && levels[len(levels)-2] == "bridge" && levels[len(levels)-1] == "devices":
		devs, err = parseZ2MDevices(strings.Join(levels[:len(levels)-2], "/"), payload)
	case len(levels) >= 4 && levels[0] == "homeassistant" && levels[1] == "switch" && levels[len(levels)-1] == "config":
		devs, err = parseHADiscovery(levels[2:len(levels)-1], payload)
	default:
		return true
	}
	if err != nil {
		// What the hub would refuse anyway: not passed on to others.
		return false
	}
	if user == OnboardingLogin {
		return r.onboardingMayAnnounce(devs)
	}
	for _, d := range devs {
		if !r.mayPublish(user, d.Topics.State) {
			return false
		}
	}
	return true
}
