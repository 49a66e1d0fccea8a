package daemon_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
)

// TestEventsSayWhoseCommand: a change made by an installation's command is
// "own": true on that installation's stream and webhook, and has no own
// field on those of another installation granted the same switch; a change
// the device made is nobody's.
func TestEventsSayWhoseCommand(t *testing.T) {
	f := newFixture(t)
	h := f.hub
	mine := h.Authorize(t, f.app, "alice", "alice-pw", 1, "kitchen", "hall")
	otherApp := h.AddApp(t, f.alice, true, redirect)
	other := h.Authorize(t, otherApp, "alice", "alice-pw", 1, "kitchen")
	if mine.URI == other.URI {
		t.Fatal("the two grants are one installation")
	}
	rMine, rOther := startReceiver(t, "ok"), startReceiver(t, "ok")
	mustRegister(t, h, mine, rMine.URL)
	mustRegister(t, h, other, rOther.URL)
	sMine, sOther := openStream(t, h, mine, ""), openStream(t, h, other, "")
	sMine.next() // the snapshots
	sOther.next()

	p := h.Call(t, http.MethodPut, mine.URI+"/switches/kitchen/on", mine.Token.AccessToken)
	if p.StatusCode != http.StatusNoContent {
		t.Fatalf("PUT kitchen on = %d %s", p.StatusCode, p.Body)
	}
	own := func(what string, data []byte, want bool) {
		t.Helper()
		var e switchEvent
		if err := json.Unmarshal(data, &e); err != nil {
			t.Fatalf("%s: %s: %v", what, data, err)
		}
		if e.ID != "kitchen" || e.Cause == "" {
			t.Fatalf("%s: %s, want kitchen's change with its cause", what, data)
		}
		switch {
		case want && (e.Own == nil || !*e.Own):
			t.Errorf("%s: %s, want own: true", what, data)
		case !want && e.Own != nil:
			t.Errorf("%s: %s, want no own field", what, data)
		}
	}
	ev := sMine.wantChange("kitchen", "on", "off", "api")
	own("the commanding installation's stream", []byte(ev.Data), true)
	ev = sOther.wantChange("kitchen", "on", "off", "api")
	own("the other installation's stream", []byte(ev.Data), false)
	own("the commanding installation's webhook", rMine.waitFor(1, 10*time.Second)[0].Msg.Data, true)
	own("the other installation's webhook", rOther.waitFor(1, 10*time.Second)[0].Msg.Data, false)

	// The device switches itself off: nobody's command.
	notify(t, h, "kitchen", bridge.Off)
	own("a device's change on the commanding installation's stream", []byte(sMine.wantChange("kitchen", "off", "on", "device").Data), false)
	own("a device's change on the other stream", []byte(sOther.wantChange("kitchen", "off", "on", "device").Data), false)
	own("a device's change on the commanding installation's webhook", rMine.waitFor(2, 10*time.Second)[1].Msg.Data, false)
}
