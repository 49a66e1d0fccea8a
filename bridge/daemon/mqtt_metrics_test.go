package daemon_test

import (
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge/daemon/daemontest"
	"github.com/switchbridge/switchbridge/drivers/mqtt/mqtttest"
)

// TestMQTTMetrics runs a hub with its metrics listener against a real
// Mosquitto and a simulated Tasmota plug, and checks the MQTT metrics
// follow the connection: up, messages both ways, down when the broker
// dies, a reconnect when it is back.
func TestMQTTMetrics(t *testing.T) {
	b := mqtttest.StartMosquitto(t)
	mqtttest.NewTasmota(t, b.URL, mqtttest.TasmotaOptions{Topic: "plug"})
	h := daemontest.StartWith(t, daemontest.Options{Metrics: true, Config: "mqtt:\n  broker: " + b.URL + "\n  client_id: metrics-hub\n" +
		"locations:\n  - id: 1\n    name: Home\n    switches:\n      - {id: plug, name: Plug, driver: mqtt, profile: tasmota, topic: plug}\n"})
	series := func(name string) float64 {
		resp, err := http.Get("http://" + h.MetricsAddr().String() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindSubmatch(body)
		if m == nil {
			return -1
		}
		v, _ := strconv.ParseFloat(string(m[1]), 64)
		return v
	}
	eventually := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 10 s", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	connected := `switchbridge_mqtt_connected{broker="` + b.URL + `"}`
	eventually("connected", func() bool { return series(connected) == 1 })
	eventually("the plug's state received", func() bool {
		return series(`switchbridge_mqtt_messages_total{direction="in"}`) > 0 &&
			series(`switchbridge_switch_state{location="1",switch="plug"}`) >= 0
	})
	if out := series(`switchbridge_mqtt_messages_total{direction="out"}`); out < 1 {
		t.Errorf("messages out = %v, want the start-up state query at least", out)
	}
	b.Stop()
	eventually("down after the broker died", func() bool { return series(connected) == 0 })
	b.Start()
	eventually("up again", func() bool { return series(connected) == 1 })
	if r := series(`switchbridge_mqtt_reconnects_total`); r < 1 {
		t.Errorf("reconnects = %v after a broker restart", r)
	}
}
