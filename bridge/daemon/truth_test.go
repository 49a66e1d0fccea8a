package daemon_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge/daemon/daemontest"
	"github.com/switchbridge/switchbridge/drivers/mqtt/mqtttest"
)

// TestPlugNotHeardFrom: a plug the hub has not heard from since it started
// is not available, has no last_seen, in the list, the single switch, the
// stream's snapshot and the metrics; a command to it fails at once (not at
// its deadline) naming the topics the hub waits on, and not as if the
// broker had dropped. Once the plug reports, the stream and a webhook say
// it is available with its last_seen, the list and the metrics agree, and
// commands reach it.
func TestPlugNotHeardFrom(t *testing.T) {
	broker := mqtttest.StartMosquitto(t)
	// A confirmation deadline far beyond the bound below: a command that
	// waited for it could not pass for one that failed at once.
	const confirm = 30 * time.Second
	h := daemontest.StartWith(t, daemontest.Options{Metrics: true, Server: "  command_timeout: 40s", Config: fmt.Sprintf(`webhooks:
  allow: [public, 127.0.0.1]
mqtt:
  broker: %s
  client_id: truth-hub
  confirm_timeout: %s
locations:
  - id: 1
    name: Home
    switches:
      - {id: late, name: Late plug, driver: mqtt, profile: tasmota, topic: late}
      - {id: lamp, name: Lamp, driver: virtual}
`, broker.URL, confirm)})
	alice := h.AddUser(t, "alice", "alice-pw", 1)
	app := h.AddApp(t, alice, true, redirect)
	g := h.Authorize(t, app, "alice", "alice-pw", 1, "late", "lamp")
	connected := `switchbridge_mqtt_connected{broker="` + broker.URL + `"}`
	waitFor(t, 10*time.Second, "the hub connected to the broker", func() bool { return sample(scrape(t, h), connected) == 1 })

	// Not heard from: the same everywhere.
	raw := h.Call(t, http.MethodGet, g.URI+"/switches", g.Token.AccessToken)
	var list []map[string]any
	if err := json.Unmarshal([]byte(raw.Body), &list); err != nil || len(list) != 2 {
		t.Fatalf("GET /switches = %d %s", raw.StatusCode, raw.Body)
	}
	if l := list[0]; l["id"] != "late" || l["available"] != false || l["value"] != nil {
		t.Errorf("the plug never heard from is listed as %v, want available false, value null", l)
	}
	if _, ok := list[0]["last_seen"]; ok {
		t.Errorf("the plug never heard from has a last_seen: %s", raw.Body)
	}
	if ls, ok := list[1]["last_seen"].(string); !ok || list[1]["available"] != true {
		t.Errorf("the virtual lamp is listed as %v, want available with a last_seen", list[1])
	} else if _, err := time.Parse(time.RFC3339Nano, ls); err != nil {
		t.Errorf("last_seen %q is not RFC 3339: %v", ls, err)
	}
	one := h.Call(t, http.MethodGet, g.URI+"/switches/late", g.Token.AccessToken)
	if one.StatusCode != http.StatusOK || !strings.Contains(one.Body, `"available":false`) || strings.Contains(one.Body, "last_seen") {
		t.Errorf("GET /switches/late = %d %s, want available false and no last_seen", one.StatusCode, one.Body)
	}
	m := scrape(t, h)
	if v := sample(m, `switchbridge_switch_available{location="1",switch="late"}`); v != 0 {
		t.Errorf("switch_available of the plug = %v, want 0", v)
	}
	if v := sample(m, `switchbridge_switch_last_seen_timestamp_seconds{location="1",switch="late"}`); v != -1 {
		t.Errorf("the plug never heard from has a last_seen series: %v", v)
	}
	if v := sample(m, `switchbridge_switch_last_seen_timestamp_seconds{location="1",switch="lamp"}`); v <= 0 {
		t.Errorf("the lamp's last_seen series = %v, want its time", v)
	}
	s := openStream(t, h, g, "")
	if e := s.next(); e.Event != "snapshot" || !strings.Contains(e.Data, `{"id":"late","name":"Late plug","value":null,"available":false}`) {
		t.Errorf("snapshot %s, want the plug unavailable without last_seen", e.Data)
	}
	r := startReceiver(t, "ok")
	mustRegister(t, h, g, r.URL)

	// A command fails at once, naming what the hub waits for.
	start := time.Now()
	p := h.Call(t, http.MethodPut, g.URI+"/switches/late/on", g.Token.AccessToken)
	took := time.Since(start)
	t.Logf("a command to the plug never heard from failed after %s (confirm_timeout %s)", took.Round(time.Millisecond), confirm)
	if p.StatusCode != http.StatusBadGateway || failureBody(t, p)["late"] != "unavailable" {
		t.Fatalf("PUT late/on = %d %s, want 502 with the plug unavailable", p.StatusCode, p.Body)
	}
	if !strings.Contains(p.Body, "not heard from since the hub started") || !strings.Contains(p.Body, "stat/late/POWER") {
		t.Errorf("the error %s does not say the hub waits on the plug's topics", p.Body)
	}
	if strings.Contains(p.Body, "came back") {
		t.Errorf("the error %s speaks of a broker connection that never dropped", p.Body)
	}
	if took >= confirm/2 {
		t.Errorf("the command took %s: it waited for a deadline (%s)", took, confirm)
	}

	// The plug comes: heard from, available, with last_seen everywhere.
	before := time.Now()
	plug := mqtttest.NewTasmota(t, broker.URL, mqtttest.TasmotaOptions{Topic: "late"})
	var seen string
	for seen == "" {
		_, sw := s.nextSwitch()
		if sw.ID == "late" && sw.Available {
			if sw.LastSeen == nil {
				t.Fatalf("the plug's event says it is available without a last_seen: %+v", sw)
			}
			seen = *sw.LastSeen
		}
	}
	at, err := time.Parse(time.RFC3339Nano, seen)
	if err != nil || at.Before(before.Add(-time.Second)) || at.After(time.Now().Add(time.Second)) {
		t.Errorf("the event's last_seen %q (%v) is not when the plug reported (after %s)", seen, err, before.UTC())
	}
	got := h.List(t, g)
	if !got[0].Available || got[0].LastSeen == nil || got[0].LastSeen.Before(at) {
		t.Errorf("list after the plug reported: %+v, want available with a last_seen of %s or later", got[0], at)
	}
	if v := sample(scrape(t, h), `switchbridge_switch_last_seen_timestamp_seconds{location="1",switch="late"}`); v < float64(at.Unix()) {
		t.Errorf("the plug's last_seen series = %v, want at least %d", v, at.Unix())
	}
	var hook switchEvent
	for _, d := range r.waitFor(1, 10*time.Second) {
		if e := d.event(t); e.ID == "late" && e.Available {
			hook = e
		}
	}
	if hook.LastSeen == nil {
		t.Errorf("no webhook delivery says the plug is available with its last_seen: %+v", r.deliveries())
	}
	if p := h.Call(t, http.MethodPut, g.URI+"/switches/late/on", g.Token.AccessToken); p.StatusCode != http.StatusNoContent || !plug.On() {
		t.Errorf("PUT late/on once heard from = %d %s, plug on %v", p.StatusCode, p.Body, plug.On())
	}
}
