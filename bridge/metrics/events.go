package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// eventMetrics are the installation API's event streams.
type eventMetrics struct {
	streamsOpen prometheus.Gauge
	eventsSent  *prometheus.CounterVec
}

func (m *Metrics) initEvents(f promauto.Factory) {
	m.events.streamsOpen = f.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace, Subsystem: "api", Name: "event_streams_open",
		Help: "Event streams (GET <uri>/events) open now.",
	})
	m.events.eventsSent = f.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "api", Name: "events_sent_total",
		Help: "Events written to event streams, by kind (snapshot, switch).",
	}, []string{"kind"})
	for _, k := range []string{"snapshot", "switch"} {
		m.events.eventsSent.WithLabelValues(k)
	}
}

// StreamsChanged counts event streams opened (+1) and closed (-1).
func (m *Metrics) StreamsChanged(delta int) { m.events.streamsOpen.Add(float64(delta)) }

// EventSent counts one event written to a stream.
func (m *Metrics) EventSent(kind string) { m.events.eventsSent.WithLabelValues(kind).Inc() }
