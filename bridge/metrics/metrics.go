// Package metrics exports the hub's Prometheus metrics: HTTP requests,
// device commands, switch states, OAuth events, event streams and installations, next to
// the Go and process collectors, on a registry of its own that is served on
// the metrics listener. Drivers register their own metrics on the same
// registry (drivers.Env.Metrics).
package metrics

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/infra/version"
)

const namespace = "switchbridge"

// scrapeTimeout bounds one scrape, including the installations count that
// runs a query: a scrape that hangs on a busy disk answers 503 rather than
// piling up.
const scrapeTimeout = 10 * time.Second

// SwitchSource is where the per-switch gauges come from at scrape time.
// *bridge.Switchboard is one; asking it on every scrape means a config reload needs
// no bookkeeping here.
type SwitchSource interface {
	Switches() []*bridge.Switch
	Locations() []*bridge.Location
}

// Options says where the scrape-time metrics come from.
type Options struct {
	// Switches feeds switchbridge_switch_state and _available and
	// switchbridge_location_info; nil exports none of them.
	Switches SwitchSource
	// Installations counts the installations that exist now, normally
	// (*store.DB).CountInstallations; nil exports no installations gauge.
	Installations func(context.Context) (int, error)
	// Logger receives errors met while serving a scrape; nil discards them.
	Logger *slog.Logger
}

// Metrics owns the registry and every switchbridge metric. Its methods are
// the hooks the rest of the hub calls; all are safe for concurrent use.
type Metrics struct {
	reg     *prometheus.Registry
	handler http.Handler

	httpRequests *prometheus.CounterVec
	httpDuration *prometheus.HistogramVec
	httpCache    sync.Map // httpKey: *httpObservers
	// API connections: open now, and refused past the cap.
	httpConnsOpen     prometheus.Gauge
	httpConnsRejected prometheus.Counter

	commands        *prometheus.CounterVec
	commandDuration *prometheus.HistogramVec
	commandCache    sync.Map // commandKey: *commandObservers

	authGranted        prometheus.Counter
	authDenied         *reasonCounter
	tokensIssued       prometheus.Counter
	tokenFailures      *reasonCounter
	clientAuthFailures *reasonCounter
	apiTokenFailures   *reasonCounter

	consoleActions *prometheus.CounterVec

	events   eventMetrics
	webhooks webhookMetrics
}

// New builds the metrics on a fresh registry holding the Go and process
// collectors.
func New(o Options) *Metrics {
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	if o.Switches != nil {
		reg.MustRegister(newSwitchCollector(o.Switches))
	}
	if o.Installations != nil {
		reg.MustRegister(newInstallationsCollector(o.Installations))
	}
	f := promauto.With(reg)
	m := &Metrics{reg: reg}
	initBuildInfo(f)
	m.initHTTP(f)
	m.initCommands(f)
	m.initOAuth(f)
	m.initConsole(f)
	m.initEvents(f)
	m.initWebhooks(f)

	scrape := promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog: promLogger{logger},
		// One failing collector (say, the store is locked) must not hide
		// every other metric; promhttp_metric_handler_errors_total counts it.
		ErrorHandling: promhttp.ContinueOnError,
		Registry:      reg,
		Timeout:       scrapeTimeout,
		// Two scrapers at once share one collection instead of doubling the
		// work on a Pi.
		CoalesceGather: true,
	})
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.InstrumentMetricHandler(reg, scrape))
	m.handler = mux
	return m
}

// initBuildInfo exports switchbridge_build_info: always 1, with the
// running build as labels, so a dashboard can show (and join on) the
// version each hub runs, as Prometheus' own *_build_info metrics do.
func initBuildInfo(f promauto.Factory) {
	v := version.Get()
	f.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace,
		Name:      "build_info",
		Help:      "Always 1; the labels name the running build: its version, commit and Go release.",
		ConstLabels: prometheus.Labels{
			"version":   v.Version,
			"commit":    v.Commit,
			"goversion": v.Go,
		},
	}).Set(1)
}

// WatchSwitches exports the per-switch gauges of src from now on. It is
// for a hub built after the metrics (the drivers register theirs while
// they are built, before the hub exists); call it at most once, and only when
// Options.Switches was nil.
func (m *Metrics) WatchSwitches(src SwitchSource) {
	m.reg.MustRegister(newSwitchCollector(src))
}

// Registry is the registry every metric lives on, for the drivers'
// collectors (drivers.Env.Metrics) or gathering in tests.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics at GET /metrics (and 404 elsewhere), for the
// metrics listener.
func (m *Metrics) Handler() http.Handler { return m.handler }

// promLogger adapts slog to promhttp's Println logger.
type promLogger struct{ l *slog.Logger }

func (p promLogger) Println(v ...any) { p.l.Warn("serving metrics", "err", fmt.Sprint(v...)) }
