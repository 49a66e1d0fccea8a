package daemon_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/daemon/daemontest"
	"github.com/switchbridge/switchbridge/drivers/mqtt/mqtttest"
)

// e2eHub is a whole hub (HTTP API, OAuth, store) with mqtt switches.
type e2eHub struct {
	*daemontest.Harness
	owner *bridge.User
}

func startE2E(tb testing.TB, mqttSection string, switches ...string) *e2eHub {
	tb.Helper()
	return startE2ELogged(tb, nil, mqttSection, switches...)
}

// startE2ELogged is startE2E logging to logger (nil: discarded).
func startE2ELogged(tb testing.TB, logger *slog.Logger, mqttSection string, switches ...string) *e2eHub {
	tb.Helper()
	var b strings.Builder
	b.WriteString("mqtt:\n")
	for _, l := range strings.Split(mqttSection, "\n") {
		b.WriteString("  " + l + "\n")
	}
	b.WriteString("locations:\n  - id: 1\n    name: Home\n    switches:\n")
	for _, s := range switches {
		fmt.Fprintf(&b, "      - {driver: mqtt, %s}\n", s)
	}
	// BenchmarkHTTPCommand sends thousands of commands from one
	// installation: the rate limit would answer most of them 429.
	h := daemontest.StartWith(tb, daemontest.Options{Config: b.String(), Server: "  rate_limit: off", Logger: logger})
	return &e2eHub{Harness: h, owner: h.AddUser(tb, "alice", "alice-pw", 1)}
}

// grant authorizes a new app for switches and returns its grant.
func (h *e2eHub) grant(tb testing.TB, switches ...string) daemontest.Grant {
	tb.Helper()
	app := h.AddApp(tb, h.owner, true, "https://client.example/cb")
	return h.Authorize(tb, app, "alice", "alice-pw", 1, switches...)
}

// failureBody decodes an error answer's failures by switch id.
func failureBody(t *testing.T, p *daemontest.Page) map[string]string {
	t.Helper()
	var body struct {
		Failures []bridge.Failure `json:"failures"`
	}
	if err := json.Unmarshal([]byte(p.Body), &body); err != nil {
		t.Fatalf("error body %q: %v", p.Body, err)
	}
	out := map[string]string{}
	for _, f := range body.Failures {
		out[f.SwitchID] = f.Reason
	}
	return out
}

func values(t *testing.T, h *e2eHub, g daemontest.Grant) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, s := range h.List(t, g) {
		v := "<nil>"
		if s.Value != nil {
			v = *s.Value
		}
		out[s.Name] = v
	}
	return out
}

// TestHTTPEndToEnd drives mqtt plugs through the installation API: list,
// on, off, 501 for a read-only plug, a silent plug's timeout, an offline
// plug, and the broker killed and restarted.
func TestHTTPEndToEnd(t *testing.T) {
	b := mqtttest.StartMosquitto(t)
	tas := mqtttest.NewTasmota(t, b.URL, mqtttest.TasmotaOptions{Topic: "kitchen", PowerRetain: true})
	tas.Set(true)
	rpc := mqtttest.NewShellyRPC(t, b.URL, "shellyplus1-a8032ab12345", 1, false)
	z2m := mqtttest.NewZ2M(t, b.URL, "zigbee2mqtt", mqtttest.Z2MAvailabilityLegacy, mqtttest.Z2MDevice{Name: "hall"})
	esp := mqtttest.NewESPHome(t, b.URL, "desk", "fan")
	sg1 := mqtttest.NewShellyGen1(t, b.URL, "shellyplug-s-7AECF4", 1, false)
	gen := mqtttest.NewGeneric(t, b.URL, mqtttest.GenericOptions{CommandTopic: "heater/set", StateTopic: "heater/state", AvailabilityTopic: "heater/status"})
	mqtttest.NewGeneric(t, b.URL, mqtttest.GenericOptions{StateTopic: "door/contact", Retain: true})
	silent := mqtttest.NewTasmota(t, b.URL, mqtttest.TasmotaOptions{Topic: "attic"})
	silent.SetSilent(true)
	gone := mqtttest.NewESPHome(t, b.URL, "shed", "light")

	h := startE2E(t, "broker: "+b.URL+"\nclient_id: e2e-hub\nconfirm_timeout: 500ms",
		`id: kitchen, name: Kitchen, profile: tasmota, topic: kitchen`,
		`id: plus, name: Plus, profile: shelly-rpc, prefix: shellyplus1-a8032ab12345`,
		`id: hall, name: Hall, profile: zigbee2mqtt, friendly_name: hall`,
		`id: desk, name: Desk, profile: esphome, prefix: desk, object_id: fan`,
		`id: plug, name: Plug, profile: shelly-gen1, device_id: shellyplug-s-7AECF4`,
		`id: heater, name: Heater, profile: generic, command_topic: heater/set, state_topic: heater/state, availability_topic: heater/status`,
		`id: door, name: Door, profile: generic, state_topic: door/contact`,
		`id: attic, name: Attic, profile: tasmota, topic: attic`,
		`id: shed, name: Shed, profile: esphome, prefix: shed, object_id: light`,
	)
	good := h.grant(t, "kitchen", "plus", "hall", "desk", "plug", "heater")

	t.Run("list", func(t *testing.T) {
		// The heater's state is not retained and a generic plug cannot be
		// asked, so it is unknown (null) until the heater reports.
		want := map[string]string{"Kitchen": "on", "Plus": "off", "Hall": "off", "Desk": "off", "Plug": "off", "Heater": "<nil>"}
		eventually(t, 5*time.Second, "every plug listed with its reported state", func() bool {
			got := values(t, h, good)
			for k, v := range want {
				if got[k] != v {
					return false
				}
			}
			return true
		})
	})

	t.Run("on and off", func(t *testing.T) {
		for _, cmd := range []string{"on", "off"} {
			p := h.Command(t, good, cmd)
			if p.StatusCode != http.StatusNoContent {
				t.Fatalf("PUT %s = %d %s", cmd, p.StatusCode, p.Body)
			}
			for name, v := range values(t, h, good) {
				if v != cmd {
					t.Errorf("after %s, %s is %s", cmd, name, v)
				}
			}
			on := cmd == "on"
			if tas.On() != on || rpc.On() != on || z2m.On() != on || esp.On() != on || sg1.On() != on || gen.On() != on {
				t.Errorf("after %s a simulated plug disagrees", cmd)
			}
		}
	})

	t.Run("read-only plug is 501", func(t *testing.T) {
		g := h.grant(t, "kitchen", "door")
		p := h.Command(t, g, "on")
		if p.StatusCode != http.StatusNotImplemented || failureBody(t, p)["door"] != bridge.FailUnsupported {
			t.Fatalf("PUT on = %d %s, want 501 naming door", p.StatusCode, p.Body)
		}
		if tas.On() {
			t.Error("kitchen was switched although the command was refused")
		}
		if vs := values(t, h, g); vs["Door"] != "off" {
			t.Errorf("door listed as %q", vs["Door"])
		}
	})

	t.Run("silent plug times out", func(t *testing.T) {
		g := h.grant(t, "kitchen", "attic")
		start := time.Now()
		p := h.Command(t, g, "on")
		// The default command_timeout (5 s) would end it at 5 s: 4 s tells
		// the two apart with room for a loaded machine.
		if d := time.Since(start); d < 500*time.Millisecond || d > 4*time.Second {
			t.Errorf("took %s, want about the 500ms confirm_timeout", d)
		}
		if p.StatusCode != http.StatusBadGateway || !strings.Contains(p.Body, "attic") {
			t.Fatalf("PUT on = %d %s, want 502 naming attic", p.StatusCode, p.Body)
		}
		if got := failureBody(t, p); got["attic"] != bridge.FailTimeout || len(got) != 1 {
			t.Errorf("failures %v", got)
		}
		if !tas.On() {
			t.Error("kitchen did not stay as commanded")
		}
	})

	t.Run("offline plug", func(t *testing.T) {
		g := h.grant(t, "kitchen", "shed")
		gone.Crash()
		eventually(t, 3*time.Second, "shed offline", func() bool {
			p := h.Command(t, g, "off")
			return p.StatusCode == http.StatusBadGateway && failureBody(t, p)["shed"] == bridge.FailUnavailable
		})
		if tas.On() {
			t.Error("kitchen not switched off beside the offline plug")
		}
	})

	t.Run("broker killed and restarted", func(t *testing.T) {
		b.Stop()
		eventually(t, 5*time.Second, "PUT failing fast as unavailable", func() bool {
			start := time.Now()
			p := h.Command(t, good, "on")
			fast := time.Since(start) < 300*time.Millisecond
			return fast && p.StatusCode == http.StatusBadGateway && failureBody(t, p)["kitchen"] == bridge.FailUnavailable
		})
		// GET still answers, from the cache.
		if vs := values(t, h, good); vs["Kitchen"] != "off" {
			t.Errorf("list while the broker is down: %v", vs)
		}
		b.Start()
		eventually(t, 10*time.Second, "PUT working again after the restart", func() bool {
			return h.Command(t, good, "on").StatusCode == http.StatusNoContent
		})
		for name, v := range values(t, h, good) {
			if v != "on" {
				t.Errorf("after restart and on, %s is %s", name, v)
			}
		}
	})
}

// BenchmarkHTTPCommand measures one PUT /switches/on|off through the HTTP
// API (bearer check, store, hub fan-out, mqtt driver, Mosquitto, simulated
// Tasmota plugs and back) for N plugs, and, in the same run, the floor: a
// bare paho client switching N plugs of its own and waiting for the N
// confirmations. The API is called by a bare HTTP/1.1 client, as the floor
// is a bare MQTT client (ns/op; ratio = API/floor), and by Go's net/http
// client (nethttp-ns/op, nethttp-ratio). The sides never share plugs, so
// neither sees the other's traffic, and take turns in blocks
// (mqtttest.BenchBlock), so all run under the same load. The reports
// trailing the hub's last command of a block are handled while the floor's
// block starts, a small bias in the hub's favour. It runs with
// BenchmarkCommand (drivers/mqtt), whose doc comment says how.
func BenchmarkHTTPCommand(b *testing.B) {
	for _, n := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			broker := mqtttest.StartMosquitto(b)
			_, ids, sws := mqtttest.Fleet(b, broker.URL, "hub", n)
			floorTopics, _, _ := mqtttest.Fleet(b, broker.URL, "floor", n)
			h := startE2E(b, "broker: "+broker.URL+"\nclient_id: bench-hub", sws...)
			g := h.grant(b, ids...)
			bare := daemontest.NewBareClient(b, g)
			floor := mqtttest.NewFloor(b, broker.URL, floorTopics)
			put := func(client string, cmd bridge.Command) {
				var status int
				var body string
				if client == "bare" {
					status, body = bare.Command(b, string(cmd))
				} else {
					p := h.Command(b, g, string(cmd))
					status, body = p.StatusCode, p.Body
				}
				if status != http.StatusNoContent {
					b.Fatalf("PUT %s (%s client) = %d %s", cmd, client, status, body)
				}
			}
			block := func(client string) time.Duration {
				return mqtttest.TimeBlock(func(c bridge.Command) { put(client, c) })
			}
			block("bare") // warm-up
			block("net/http")
			floor.Block(b)
			var api, std, fl time.Duration
			for b.Loop() {
				api += block("bare")
				fl += floor.Block(b)
				std += block("net/http")
				fl += floor.Block(b)
			}
			fl /= 2
			ops := float64(b.N * mqtttest.BenchBlock)
			per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / ops }
			b.ReportMetric(per(api), "ns/op")
			b.ReportMetric(per(fl), "floor-ns/op")
			b.ReportMetric(float64(api)/float64(fl), "ratio")
			b.ReportMetric(per(std), "nethttp-ns/op")
			b.ReportMetric(float64(std)/float64(fl), "nethttp-ratio")
		})
	}
}
