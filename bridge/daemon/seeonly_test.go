package daemon_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/daemon/daemontest"
	"github.com/switchbridge/switchbridge/bridge/wire"
	"github.com/switchbridge/switchbridge/drivers/mqtt/mqtttest"
)

// seeOnlyRefusal checks that p is the 403 of a command naming exactly the
// see-only switches ids.
func seeOnlyRefusal(t *testing.T, what string, p *daemontest.Page, ids ...string) {
	t.Helper()
	if p.StatusCode != http.StatusForbidden {
		t.Fatalf("%s answered %d, want 403: %s", what, p.StatusCode, p.Body)
	}
	var body wire.ErrorBody
	if err := json.Unmarshal([]byte(p.Body), &body); err != nil {
		t.Fatalf("%s: body %q: %v", what, p.Body, err)
	}
	if body.Status != http.StatusForbidden || len(body.Failures) != len(ids) {
		t.Fatalf("%s: body %s, want failures naming %v", what, p.Body, ids)
	}
	for i, f := range body.Failures {
		if f.SwitchID != ids[i] || f.Reason != bridge.FailSeeOnly || !strings.Contains(body.Message, ids[i]) {
			t.Errorf("%s: failure %+v in %s, want %s refused as see_only", what, f, p.Body, ids[i])
		}
	}
}

// TestSeeOnlySwitch: a switch granted see-only on the consent page is
// listed, read and streamed like any other; a command to it is 403
// naming it and reaches no device; a group command that includes it
// switches nothing, not even the switchable ones; the connected apps page
// shows the choice and changes it back, after which it switches.
func TestSeeOnlySwitch(t *testing.T) {
	f := newFixture(t)
	h := f.hub
	g := h.Authorize(t, f.app, "alice", "alice-pw", 1, "kitchen", daemontest.SeeOnly("hall"))
	state := func(id string) string {
		t.Helper()
		for _, s := range h.List(t, g) {
			if s.ID == id {
				return value(s)
			}
		}
		t.Fatalf("GET /switches lacks %s", id)
		return ""
	}
	// Seen: in the list, readable one by one, in the stream.
	if state("hall") != "on" || state("kitchen") != "off" {
		t.Fatalf("before any command: hall %s, kitchen %s; want on and off", state("hall"), state("kitchen"))
	}
	if p := h.Call(t, http.MethodGet, g.URI+"/switches/hall", g.Token.AccessToken); p.StatusCode != http.StatusOK || !strings.Contains(p.Body, `"id":"hall"`) {
		t.Errorf("GET /switches/hall = %d %s", p.StatusCode, p.Body)
	}
	s := openStream(t, h, g, "")
	if snap := s.next(); snap.Event != "snapshot" || !strings.Contains(snap.Data, `"id":"hall"`) {
		t.Errorf("snapshot %+v lacks hall", snap)
	}

	// Not switched: the device keeps its state, one switch or the group.
	seeOnlyRefusal(t, "PUT /switches/hall/off", h.Call(t, http.MethodPut, g.URI+"/switches/hall/off", g.Token.AccessToken), "hall")
	seeOnlyRefusal(t, "PUT /switches/on", h.Command(t, g, "on"), "hall")
	if state("hall") != "on" || state("kitchen") != "off" {
		t.Errorf("after the refused commands: hall %s, kitchen %s; want on and off (nothing switched)", state("hall"), state("kitchen"))
	}
	// A command other than on or off is 400 first, as for every switch.
	if p := h.Call(t, http.MethodPut, g.URI+"/switches/hall/toggle", g.Token.AccessToken); p.StatusCode != http.StatusBadRequest {
		t.Errorf("PUT /switches/hall/toggle = %d, want 400", p.StatusCode)
	}
	// The switchable one still switches, and its event is the first the
	// stream has: the refusals changed nothing.
	if p := h.Call(t, http.MethodPut, g.URI+"/switches/kitchen/on", g.Token.AccessToken); p.StatusCode != http.StatusNoContent {
		t.Fatalf("PUT /switches/kitchen/on = %d %s", p.StatusCode, p.Body)
	}
	s.wantChange("kitchen", "on", "off", "api")
	// A change at the see-only device is streamed and delivered to the
	// installation's webhook.
	rcv := startReceiver(t, "ok")
	mustRegister(t, h, g, rcv.URL)
	notify(t, h, "hall", bridge.Off)
	s.wantChange("hall", "off", "on", "device")
	delivered := false
	for n := 1; !delivered && n <= 5; n++ { // the hall's change, at most after the kitchen's
		got := rcv.waitFor(n, 10*time.Second)
		e := got[n-1].event(t)
		delivered = e.ID == "hall" && str(e.Value) == "off"
	}
	if !delivered {
		t.Errorf("the webhook got no change of hall: %d deliveries", len(rcv.deliveries()))
	}

	// The connected apps page shows it and changes it back.
	b := h.NewBrowser()
	apps := b.ConnectedApps(t, "alice", "alice-pw")
	if !strings.Contains(apps.Body, `<dd class="see-only">Hall lamp`) {
		t.Errorf("the connected apps page does not show hall as see-only:\n%s", apps.Body)
	}
	id := g.InstallationID()
	form := b.Get(t, "/oauth/apps/switches?installation="+id)
	if !strings.Contains(form.Body, `name="see_only" value="hall" checked`) || strings.Contains(form.Body, `name="see_only" value="kitchen" checked`) {
		t.Errorf("the change page does not tick hall alone as see-only:\n%s", form.Body)
	}
	p := b.Post(t, "/oauth/apps/switches", url.Values{"installation": {id}, "csrf": {form.CSRF(t)}, "switch": {"kitchen", "hall"}})
	if p.StatusCode != http.StatusSeeOther {
		t.Fatalf("saving the switches answered %d: %s", p.StatusCode, p.Body)
	}
	if p := h.Call(t, http.MethodPut, g.URI+"/switches/hall/on", g.Token.AccessToken); p.StatusCode != http.StatusNoContent {
		t.Fatalf("PUT /switches/hall/on after the change = %d %s", p.StatusCode, p.Body)
	}
	s.wantChange("hall", "on", "off", "api")
	// And see-only again: refused at the next command, with the same token.
	form = b.Get(t, "/oauth/apps/switches?installation="+id)
	p = b.Post(t, "/oauth/apps/switches", url.Values{"installation": {id}, "csrf": {form.CSRF(t)}, "switch": {"kitchen", "hall"}, "see_only": {"kitchen"}})
	if p.StatusCode != http.StatusSeeOther {
		t.Fatalf("saving the switches answered %d: %s", p.StatusCode, p.Body)
	}
	if notice := b.Get(t, "/oauth/apps"); !strings.Contains(notice.Body, "It may see but not switch Kitchen light.") {
		t.Errorf("the connected apps page after the change does not say kitchen is see-only:\n%s", notice.Body)
	}
	seeOnlyRefusal(t, "PUT /switches/off", h.Command(t, g, "off"), "kitchen")
	if state("hall") != "on" || state("kitchen") != "on" {
		t.Errorf("after the refused group command: hall %s, kitchen %s; want both on", state("hall"), state("kitchen"))
	}
}

// TestSeeOnlyPlugReceivesNothing: with real plugs on Mosquitto, the
// see-only one receives no command, neither its own nor the group's, while
// the switchable one, commanded after the refusals, switches: its
// confirmation is later than anything the refused commands could have sent.
func TestSeeOnlyPlugReceivesNothing(t *testing.T) {
	b := mqtttest.StartMosquitto(t)
	// Generic plugs: a state query is no command to them, so what they
	// count is what the hub commanded.
	lamp := mqtttest.NewGeneric(t, b.URL, mqtttest.GenericOptions{CommandTopic: "lamp/set", StateTopic: "lamp/state", Retain: true})
	door := mqtttest.NewGeneric(t, b.URL, mqtttest.GenericOptions{CommandTopic: "door/set", StateTopic: "door/state", Retain: true})
	h := startE2E(t, "broker: "+b.URL+"\nclient_id: seeonly-hub",
		`id: lamp, name: Lamp, profile: generic, command_topic: lamp/set, state_topic: lamp/state`,
		`id: door, name: Door, profile: generic, command_topic: door/set, state_topic: door/state`)
	g := h.grant(t, "lamp", daemontest.SeeOnly("door"))
	eventually(t, 10*time.Second, "both plugs listed with their state", func() bool {
		got := values(t, h, g)
		return got["Lamp"] == "off" && got["Door"] == "off"
	})
	seeOnlyRefusal(t, "PUT /switches/door/on", h.Call(t, http.MethodPut, g.URI+"/switches/door/on", g.Token.AccessToken), "door")
	seeOnlyRefusal(t, "PUT /switches/on", h.Command(t, g, "on"), "door")
	if p := h.Call(t, http.MethodPut, g.URI+"/switches/lamp/on", g.Token.AccessToken); p.StatusCode != http.StatusNoContent {
		t.Fatalf("PUT /switches/lamp/on = %d %s", p.StatusCode, p.Body)
	}
	if !lamp.On() || lamp.Commands() != 1 {
		t.Errorf("lamp: on %v after %d commands, want on after 1", lamp.On(), lamp.Commands())
	}
	if door.On() || door.Commands() != 0 {
		t.Errorf("door (see-only): on %v after %d commands, want off after none", door.On(), door.Commands())
	}
}
