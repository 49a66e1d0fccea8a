package mqtt

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/switchbridge/switchbridge/drivers"
	"github.com/switchbridge/switchbridge/drivers/mqtt/mqtttest"
)

// newWithMetrics is New on reg the way drivers.Build scopes it.
func newWithMetrics(t *testing.T, reg prometheus.Registerer, settings string) *driver {
	t.Helper()
	d, err := New(drivers.Env{Settings: mustNode(t, settings), Metrics: prometheus.WrapRegistererWithPrefix("switchbridge_mqtt_", reg)})
	if err != nil {
		t.Fatal(err)
	}
	return d.(*driver)
}

// The metrics keep the names, help and labels they had in bridge/metrics;
// the broker label carries no credentials; an unknown direction is no label.
func TestMetricsHooks(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	d := newWithMetrics(t, reg, "broker: tcp://broker.lan:1883")
	d.obs.connected("tcp://hub:s3cret@broker.lan:1883", true)
	d.obs.reconnect()
	d.obs.reconnect()
	for range 3 {
		d.obs.message(dirIn)
	}
	d.obs.message(dirOut)
	d.obs.message("sideways")
	d.obs.brokerRefusal(refusedPassword)
	d.obs.brokerRefusal(refusedSubscription)
	d.obs.brokerRefusal(refusedSubscription)
	d.obs.brokerRefusal("no such reason")

	want := `
# HELP switchbridge_mqtt_broker_refusals_total What the embedded MQTT broker refused to a client or connection beyond its bounds, by reason.
# TYPE switchbridge_mqtt_broker_refusals_total counter
switchbridge_mqtt_broker_refusals_total{reason="client_id"} 0
switchbridge_mqtt_broker_refusals_total{reason="filter_too_long"} 0
switchbridge_mqtt_broker_refusals_total{reason="handshake_address"} 0
switchbridge_mqtt_broker_refusals_total{reason="handshake_evicted"} 0
switchbridge_mqtt_broker_refusals_total{reason="login_clients"} 0
switchbridge_mqtt_broker_refusals_total{reason="login_throttled"} 0
switchbridge_mqtt_broker_refusals_total{reason="max_clients"} 0
switchbridge_mqtt_broker_refusals_total{reason="onboarding_closed"} 0
switchbridge_mqtt_broker_refusals_total{reason="retained_share"} 0
switchbridge_mqtt_broker_refusals_total{reason="subscription_bound"} 2
switchbridge_mqtt_broker_refusals_total{reason="wrong_password"} 1
# HELP switchbridge_mqtt_connected Whether the hub is connected to its MQTT broker (1) or not (0).
# TYPE switchbridge_mqtt_connected gauge
switchbridge_mqtt_connected{broker="tcp://broker.lan:1883"} 1
# HELP switchbridge_mqtt_messages_total MQTT messages received (in) and published (out) by the hub.
# TYPE switchbridge_mqtt_messages_total counter
switchbridge_mqtt_messages_total{direction="in"} 3
switchbridge_mqtt_messages_total{direction="out"} 1
# HELP switchbridge_mqtt_reconnects_total Attempts to reconnect to the MQTT broker after the connection was lost.
# TYPE switchbridge_mqtt_reconnects_total counter
switchbridge_mqtt_reconnects_total 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}

	// A new broker replaces the old series rather than adding one.
	d.obs.connected("embedded", false)
	want = `
# HELP switchbridge_mqtt_connected Whether the hub is connected to its MQTT broker (1) or not (0).
# TYPE switchbridge_mqtt_connected gauge
switchbridge_mqtt_connected{broker="embedded"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "switchbridge_mqtt_connected"); err != nil {
		t.Error(err)
	}
}

// A reload builds the driver again on the same registerer: it takes the
// collectors already there, so counters run on instead of the build
// failing on a duplicate registration or starting again from zero.
func TestMetricsSurviveARebuild(t *testing.T) {
	reg := prometheus.NewRegistry()
	first := newWithMetrics(t, reg, "broker: tcp://127.0.0.1:9")
	first.obs.reconnect()
	first.obs.message(dirOut)
	second := newWithMetrics(t, reg, "broker: tcp://127.0.0.1:10")
	second.obs.reconnect()
	if got := testutil.ToFloat64(second.obs.(*metrics).reconnects); got != 2 {
		t.Errorf("reconnects after a rebuild = %v, want 2 (1 before, 1 after)", got)
	}
	want := `
# HELP switchbridge_mqtt_messages_total MQTT messages received (in) and published (out) by the hub.
# TYPE switchbridge_mqtt_messages_total counter
switchbridge_mqtt_messages_total{direction="in"} 0
switchbridge_mqtt_messages_total{direction="out"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "switchbridge_mqtt_messages_total"); err != nil {
		t.Error(err)
	}

	// The connection's series belongs to the driver that reported last:
	// the one a reload replaced closes without taking it away; the last
	// one's close (no MQTT switch any more) does, so a hub without a
	// broker shows none rather than a stale "not connected".
	connected := func(want string) {
		t.Helper()
		if want != "" {
			want = "# HELP switchbridge_mqtt_connected Whether the hub is connected to its MQTT broker (1) or not (0).\n" +
				"# TYPE switchbridge_mqtt_connected gauge\n" + want + "\n"
		}
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "switchbridge_mqtt_connected"); err != nil {
			t.Error(err)
		}
	}
	first.obs.connected("tcp://127.0.0.1:9", true)
	second.obs.connected("tcp://127.0.0.1:10", true)
	first.obs.gone()
	connected(`switchbridge_mqtt_connected{broker="tcp://127.0.0.1:10"} 1`)
	second.obs.gone()
	connected("")
}

// TestBrokerClientsMetric: switchbridge_mqtt_broker_clients counts the
// embedded broker's clients, the hub's own not among them, while the
// broker runs, and has no series once it stopped.
func TestBrokerClientsMetric(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	addr := fmt.Sprintf("127.0.0.1:%d", mqtttest.FreePort(t))
	d := newWithMetrics(t, reg, "broker: embedded\nlisten: "+addr)
	if err := d.Add(drivers.Spec{ID: "esp", Name: "ESP", LocationID: 1, Options: mustNode(t, "{profile: esphome, prefix: node, object_id: relay}")}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := d.Open(ctx); err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	clients := func(n int) string {
		return fmt.Sprintf(`
# HELP switchbridge_mqtt_broker_clients Clients connected to the embedded MQTT broker (plugs, bridges, onboarding devices; not the hub's own); no series while no embedded broker runs.
# TYPE switchbridge_mqtt_broker_clients gauge
switchbridge_mqtt_broker_clients %d
`, n)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(clients(0)), "switchbridge_mqtt_broker_clients"); err != nil {
		t.Errorf("with the hub's own client alone: %v", err)
	}
	c := paho.NewClient(paho.NewClientOptions().AddBroker("tcp://" + addr).SetClientID("esp-node"))
	if tok := c.Connect(); !tok.WaitTimeout(3*time.Second) || tok.Error() != nil {
		t.Fatalf("a plug could not connect: %v", tok.Error())
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(clients(1)), "switchbridge_mqtt_broker_clients"); err != nil {
		t.Errorf("with a plug connected: %v", err)
	}
	c.Disconnect(0)
	eventually(t, 3*time.Second, "the plug's leaving counted", func() bool {
		return testutil.GatherAndCompare(reg, strings.NewReader(clients(0)), "switchbridge_mqtt_broker_clients") == nil
	})
	d.Close()
	if n, err := testutil.GatherAndCount(reg, "switchbridge_mqtt_broker_clients"); err != nil || n != 0 {
		t.Errorf("after the broker stopped: %d series (%v), want none", n, err)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}
