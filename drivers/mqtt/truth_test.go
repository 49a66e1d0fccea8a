package mqtt

import (
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/drivers/mqtt/mqtttest"
)

// TestLastSeenIsLive: a broker's retained copy makes a plug known (its
// own last word, replaced by its will when it goes) but says nothing of
// when it was seen; a live message sets last_seen. A plug that has said
// nothing is not available; a command to it fails at once naming its
// topics when it announces itself, and is sent when a command is the only
// way to hear from it (a generic plug without availability_topic).
func TestLastSeenIsLive(t *testing.T) {
	b := mqtttest.StartMosquitto(t)
	c := paho.NewClient(paho.NewClientOptions().AddBroker(b.URL).SetClientID("truth-plug"))
	if tok := c.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("connect: %v", tok.Error())
	}
	defer c.Disconnect(0)
	if tok := c.Publish("desk/switch/fan/state", 0, true, "ON"); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("publish: %v", tok.Error())
	}
	h := startHub(t, hubConfig("broker: "+b.URL+"\nclient_id: truth-hub",
		`id: desk, name: Desk, profile: esphome, prefix: desk, object_id: fan`,
		`id: ghost, name: Ghost, profile: esphome, prefix: ghost, object_id: fan`,
		`id: quiet, name: Quiet, profile: generic, state_topic: quiet/state, command_topic: quiet/set`))
	eventually(t, 5*time.Second, "the retained state taken in", func() bool { return h.state(t, "desk").Available })
	if st := h.state(t, "desk"); st.Value != "on" || !st.LastSeen.IsZero() {
		t.Errorf("from a retained copy: %+v, want on with no last_seen", st)
	}
	for _, id := range []string{"ghost", "quiet"} {
		if st := h.state(t, id); st.Available || !st.LastSeen.IsZero() {
			t.Errorf("%s, which said nothing: %+v, want unavailable, never seen", id, st)
		}
	}
	err := h.Command(t.Context(), []string{"ghost"}, "on")
	if e, ok := err.(*bridge.Error); !ok || len(e.Failures) != 1 || e.Failures[0].Reason != bridge.FailUnavailable ||
		!strings.Contains(e.Failures[0].Message, "waiting for a message on ghost/status, ghost/switch/fan/state") {
		t.Errorf("command to a plug never heard from: %#v, want it unavailable, naming its topics", err)
	}
	// The quiet plug answers what it is told: the command reaches it.
	c.Subscribe("quiet/set", 0, func(c paho.Client, m paho.Message) { c.Publish("quiet/state", 0, false, m.Payload()) }).WaitTimeout(5 * time.Second)
	if err := h.Command(t.Context(), []string{"quiet"}, "on"); err != nil {
		t.Errorf("command to a plug only a command hears from: %v", err)
	}
	if st := h.state(t, "quiet"); !st.Available || st.LastSeen.IsZero() {
		t.Errorf("quiet after it confirmed: %+v, want available and seen", st)
	}
	before := time.Now()
	c.Publish("desk/switch/fan/state", 0, false, "OFF")
	eventually(t, 5*time.Second, "a live report's last_seen", func() bool {
		st := h.state(t, "desk")
		return st.Value == "off" && !st.LastSeen.Before(before)
	})
}
