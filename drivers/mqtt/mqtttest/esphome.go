package mqtttest

import (
	"fmt"
	"strings"
	"testing"
)

// ESPHome simulates an ESPHome node with one MQTT switch: commands on
// <prefix>/switch/<object_id>/command (ON, OFF, TOGGLE, any case), state on
// …/state, retained, published only when it changes (as the switch's
// publish deduplication does) and at every connect; availability on
// <prefix>/status (online, will offline, retained). Its session is
// persistent (clean_session false), as ESPHome's default.
type ESPHome struct {
	*sim
	prefix, obj string
}

var _ Plug = (*ESPHome)(nil)

// NewESPHome connects a simulated ESPHome node.
func NewESPHome(tb testing.TB, broker, prefix, objectID string) *ESPHome {
	tb.Helper()
	e := &ESPHome{sim: newSim(tb, broker, prefix, 1), prefix: prefix, obj: objectID}
	e.willTopic, e.willPayload, e.willQoS = prefix+"/status", "offline", 0
	e.persistent = true // ESPHome's clean_session defaults to false
	e.subs[e.base()+"/command"] = 0
	e.handle = e.onMessage
	e.announce = func() { e.pub(prefix+"/status", 0, true, "online") }
	e.greet = func() {
		e.pub(fmt.Sprintf("homeassistant/switch/%s/%s/config", prefix, objectID), 0, true,
			fmt.Sprintf(`{"name":%q,"stat_t":"%s/state","cmd_t":"%s/command","avty_t":"%s/status","uniq_id":"ESPswitch%s"}`,
				objectID, e.base(), e.base(), prefix, objectID))
		e.report()
	}
	e.Start()
	return e
}

func (e *ESPHome) base() string { return e.prefix + "/switch/" + e.obj }

func (e *ESPHome) report() { e.pub(e.base()+"/state", 0, true, onOff(e.On(), "ON", "OFF")) }

func (e *ESPHome) onMessage(topic string, payload []byte) {
	if topic != e.base()+"/command" || !e.command() {
		return
	}
	var now bool
	switch strings.ToUpper(string(payload)) {
	case "ON":
		now = true
	case "OFF":
		now = false
	case "TOGGLE":
		now = !e.On()
	default:
		return // ESPHome logs a warning and publishes nothing
	}
	e.set(now)
}

// Set implements Plug; like the firmware it publishes only a change.
func (e *ESPHome) Set(on bool) {
	e.act.Lock()
	defer e.act.Unlock()
	e.set(on)
}

// set switches the relay and reports it; act is held.
func (e *ESPHome) set(on bool) {
	if e.setRelay(0, on) != on {
		e.report()
	}
}
