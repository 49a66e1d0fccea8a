package mqtt

import (
	"net/url"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchbridge/switchbridge/drivers"
)

// Directions of observer.message.
const (
	dirIn  = "in"  // a message the hub received
	dirOut = "out" // a message the hub published
)

// observer is told of the broker connection and its traffic. The driver's
// is its metrics; a test puts its own in to learn when the client connects.
type observer interface {
	connected(broker string, up bool) // on connect (true) and on loss (false)
	// gone is told when the driver closes: a hub without MQTT switches
	// any more (a reload took them all away, or it stops) has no broker
	// to be connected to, so the series goes, unless a newer driver
	// reported since.
	gone()
	reconnect()                  // each reconnection attempt
	message(direction string)    // dirIn per message received, dirOut per publish
	brokerRefusal(reason string) // the embedded broker refused something (a refused* reason)
	// brokerRunning is told when the embedded broker b starts (true) and
	// stops (false).
	brokerRunning(b *embeddedBroker, running bool)
}

// metrics are the driver's Prometheus metrics. Registered through
// drivers.Env.Metrics, which prefixes switchbridge_mqtt_, they are exported
// as switchbridge_mqtt_connected, _reconnects_total, _messages_total,
// _broker_refusals_total and _broker_clients.
type metrics struct {
	up         *prometheus.GaugeVec
	reconnects prometheus.Counter
	messages   *prometheus.CounterVec
	refusals   *prometheus.CounterVec
	clients    *brokerClients
	// in and out are messages' two series, looked up once: a command
	// counts three messages (its publish and the plug's two reports), and
	// a lookup in the vector hashes the label and takes its lock.
	in, out prometheus.Counter
}

// connectedMu makes connected's reset-and-set one step. It is one for all
// drivers because a reload builds a driver again on the gauge the previous
// one registered, and the two may report at once while one closes and the
// other opens. connectedBy is the metrics of the driver that set the gauge
// last: only that one's gone takes the series away.
var (
	connectedMu sync.Mutex
	connectedBy *metrics
)

// newMetrics registers the driver's metrics on reg, or takes the ones a
// driver built before it (an earlier config, before a reload) registered
// there, so counters run on.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{}
	var err error
	if m.up, err = drivers.RegisterCollector(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "connected",
		Help: "Whether the hub is connected to its MQTT broker (1) or not (0).",
	}, []string{"broker"})); err != nil {
		return nil, err
	}
	if m.reconnects, err = drivers.RegisterCollector(reg, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "reconnects_total",
		Help: "Attempts to reconnect to the MQTT broker after the connection was lost.",
	})); err != nil {
		return nil, err
	}
	if m.messages, err = drivers.RegisterCollector(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "messages_total",
		Help: "MQTT messages received (in) and published (out) by the hub.",
	}, []string{"direction"})); err != nil {
		return nil, err
	}
	if m.refusals, err = drivers.RegisterCollector(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "broker_refusals_total",
		Help: "What the embedded MQTT broker refused to a client or connection beyond its bounds, by reason.",
	}, []string{"reason"})); err != nil {
		return nil, err
	}
	if m.clients, err = drivers.RegisterCollector(reg, &brokerClients{desc: prometheus.NewDesc("broker_clients",
		"Clients connected to the embedded MQTT broker (plugs, bridges, onboarding devices; not the hub's own); no series while no embedded broker runs.",
		nil, nil)}); err != nil {
		return nil, err
	}
	// Both directions from the start: a rate over a series that appears
	// only with the first message misses that message. So every reason.
	m.in = m.messages.WithLabelValues(dirIn)
	m.out = m.messages.WithLabelValues(dirOut)
	for _, r := range refusalReasons {
		m.refusals.WithLabelValues(r)
	}
	return m, nil
}

// connected records that the connection to broker came up or went down.
// Only the latest broker is exported, so a config change does not leave a
// stale series behind.
func (m *metrics) connected(broker string, up bool) {
	b := brokerLabel(broker)
	v := 0.0
	if up {
		v = 1
	}
	connectedMu.Lock()
	defer connectedMu.Unlock()
	m.up.Reset()
	m.up.WithLabelValues(b).Set(v)
	connectedBy = m
}

func (m *metrics) gone() {
	connectedMu.Lock()
	defer connectedMu.Unlock()
	if connectedBy == m {
		m.up.Reset()
		connectedBy = nil
	}
}

// reconnect records one attempt to reconnect after a lost connection.
func (m *metrics) reconnect() { m.reconnects.Inc() }

// message records one message; direction is dirIn or dirOut, and any other
// value is ignored so it cannot become a label.
func (m *metrics) message(direction string) {
	switch direction {
	case dirIn:
		m.in.Inc()
	case dirOut:
		m.out.Inc()
	}
}

// brokerRefusal counts one refusal of the embedded broker; a reason not
// in refusalReasons is ignored so it cannot become a label.
func (m *metrics) brokerRefusal(reason string) {
	if slices.Contains(refusalReasons, reason) {
		m.refusals.WithLabelValues(reason).Inc()
	}
}

// brokerRunning notes the embedded broker the clients are counted of:
// the one that started last, until it stops.
func (m *metrics) brokerRunning(b *embeddedBroker, running bool) {
	if running {
		m.clients.b.Store(b)
	} else {
		m.clients.b.CompareAndSwap(b, nil)
	}
}

// brokerClients exports the embedded broker's connected clients, counted
// when scraped: the broker counts them itself, and a gauge kept beside
// it could only drift from its count.
type brokerClients struct {
	desc *prometheus.Desc
	// b is the running broker, nil when none runs. One for every driver
	// (a reload builds the driver again on the collector the previous
	// one registered), so the broker of the driver that opened last.
	b atomic.Pointer[embeddedBroker]
}

func (c *brokerClients) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *brokerClients) Collect(ch chan<- prometheus.Metric) {
	if b := c.b.Load(); b != nil {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(b.hook.pluggedIn(false)))
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
