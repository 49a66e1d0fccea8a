package metrics

import (
	"net/url"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Directions of MQTTMessage.
const (
	MQTTIn  = "in"  // a message the hub received
	MQTTOut = "out" // a message the hub published
)

func (m *Metrics) initMQTT(f promauto.Factory) {
	m.mqttConnected = f.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Subsystem: "mqtt", Name: "connected",
		Help: "Whether the hub is connected to its MQTT broker (1) or not (0).",
	}, []string{"broker"})
	m.mqttReconnects = f.NewCounter(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "mqtt", Name: "reconnects_total",
		Help: "Attempts to reconnect to the MQTT broker after the connection was lost.",
	})
	m.mqttMessages = f.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "mqtt", Name: "messages_total",
		Help: "MQTT messages received (in) and published (out) by the hub.",
	}, []string{"direction"})
	m.mqttMessages.WithLabelValues(MQTTIn)
	m.mqttMessages.WithLabelValues(MQTTOut)
}

// MQTTConnected records that the connection to broker came up or went
// down. Only the latest broker is exported, so a config change does not
// leave a stale series behind.
func (m *Metrics) MQTTConnected(broker string, up bool) {
	b := brokerLabel(broker)
	m.mqttMu.Lock()
	defer m.mqttMu.Unlock()
	m.mqttConnected.Reset()
	m.mqttConnected.WithLabelValues(b).Set(boolValue(up))
}

// MQTTReconnect records one attempt to reconnect after a lost connection.
func (m *Metrics) MQTTReconnect() { m.mqttReconnects.Inc() }

// MQTTMessage records one message; direction is MQTTIn or MQTTOut, and any
// other value is ignored so it cannot become a label.
func (m *Metrics) MQTTMessage(direction string) {
	if direction == MQTTIn || direction == MQTTOut {
		m.mqttMessages.WithLabelValues(direction).Inc()
	}
}

// brokerLabel drops anything but scheme, host and path from a broker URL,
// so credentials or query options never reach a label.
func brokerLabel(broker string) string {
	u, err := url.Parse(broker)
	if err != nil || u.Host == "" {
		// "embedded", or not a URL at all: keep only the harmless word.
		if broker == "embedded" {
			return broker
		}
		return "unknown"
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}
