package metrics

import (
	"context"
	"time"

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

// webhookMetrics are the webhooks' deliveries.
type webhookMetrics struct {
	deliveries *prometheus.CounterVec
}

func (m *Metrics) initWebhooks(f promauto.Factory) {
	m.webhooks.deliveries = f.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "webhook", Name: "deliveries_total",
		Help: "Webhook delivery attempts by outcome: ok, failed (retried), gone (410: disabled), expired (failing for a day: disabled).",
	}, []string{"outcome"})
	for _, o := range []string{"ok", "failed", "gone", "expired"} {
		m.webhooks.deliveries.WithLabelValues(o)
	}
}

// WebhookDelivery counts one delivery attempt's outcome.
func (m *Metrics) WebhookDelivery(outcome string) {
	m.webhooks.deliveries.WithLabelValues(outcome).Inc()
}

// WatchWebhookOutbox exports the outbox's depth and the age of its oldest
// delivery, read from outbox at scrape time.
func (m *Metrics) WatchWebhookOutbox(outbox func(context.Context) (int, time.Time, error)) {
	m.reg.MustRegister(&outboxCollector{outbox: outbox})
}

var (
	outboxDepthDesc = prometheus.NewDesc(namespace+"_webhook_outbox_depth", "Webhook deliveries waiting in the outbox.", nil, nil)
	outboxAgeDesc   = prometheus.NewDesc(namespace+"_webhook_outbox_oldest_age_seconds", "How long the oldest waiting webhook delivery has waited (0 when none waits).", nil, nil)
)

type outboxCollector struct {
	outbox func(context.Context) (int, time.Time, error)
}

func (c *outboxCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- outboxDepthDesc
	ch <- outboxAgeDesc
}

func (c *outboxCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	n, oldest, err := c.outbox(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(outboxDepthDesc, err)
		return
	}
	age := 0.0
	if !oldest.IsZero() {
		age = max(time.Since(oldest).Seconds(), 0)
	}
	ch <- prometheus.MustNewConstMetric(outboxDepthDesc, prometheus.GaugeValue, float64(n))
	ch <- prometheus.MustNewConstMetric(outboxAgeDesc, prometheus.GaugeValue, age)
}
