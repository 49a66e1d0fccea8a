package metrics

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// UnmatchedRoute is the route label of a request no ServeMux pattern
// matched (404, 405), so unknown paths never become label values.
const UnmatchedRoute = "unmatched"

// otherMethod labels any method outside the standard set, so a client
// cannot invent label values.
const otherMethod = "OTHER"

func (m *Metrics) initHTTP(f promauto.Factory) {
	m.httpRequests = f.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "http", Name: "requests_total",
		Help: "HTTP requests served, by ServeMux route pattern, method and status code.",
	}, []string{"route", "method", "code"})
	m.httpDuration = f.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Subsystem: "http", Name: "request_duration_seconds",
		Help:    "Time to serve an HTTP request, by ServeMux route pattern and method.",
		Buckets: prometheus.DefBuckets,
	}, []string{"route", "method"})
	m.httpConnsOpen = f.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace, Subsystem: "http", Name: "connections_open",
		Help: "API connections open now; server.max_connections caps them.",
	})
	m.httpConnsRejected = f.NewCounter(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "http", Name: "connections_rejected_total",
		Help: "API connections answered 503 (or closed) because server.max_connections were open.",
	})
}

// ConnOpened counts an API connection accepted.
func (m *Metrics) ConnOpened() { m.httpConnsOpen.Inc() }

// ConnClosed counts an API connection closed.
func (m *Metrics) ConnClosed() { m.httpConnsOpen.Dec() }

// ConnRejected counts a connection refused past server.max_connections.
func (m *Metrics) ConnRejected() { m.httpConnsRejected.Inc() }

// Instrument counts and times the requests next serves.
//
// next must be the *http.ServeMux itself, or a handler that passes it the
// same *http.Request: the mux records the matched pattern in that request's
// Pattern field, which Instrument reads once next returns. The route label
// is that pattern without its method (the method has a label of its own),
// so /api/apps/installations/<id>/switches is counted under
// /api/apps/installations/{id}/{path...}. A request that matched no
// pattern is counted under UnmatchedRoute.
func (m *Metrics) Instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		o := m.httpSeries(routeOf(r), methodOf(r.Method), sw.statusCode())
		o.requests.Inc()
		o.duration.Observe(time.Since(start).Seconds())
	})
}

// httpKey is one series of the HTTP metrics: a route, a method and a
// status code, all from bounded sets (the mux's patterns, methodOf, the
// codes the hub answers with).
type httpKey struct {
	route, method string
	code          int
}

// httpObservers are the request counter and duration histogram of one
// httpKey.
type httpObservers struct {
	requests prometheus.Counter
	duration prometheus.Observer
}

// httpSeries returns the series of a request, looked up in the
// vectors once and then kept: a vector's lookup hashes every label value
// and takes its lock, for every request.
func (m *Metrics) httpSeries(route, method string, code int) *httpObservers {
	k := httpKey{route, method, code}
	if o, ok := m.httpCache.Load(k); ok {
		return o.(*httpObservers)
	}
	o := &httpObservers{
		requests: m.httpRequests.WithLabelValues(route, method, strconv.Itoa(code)),
		duration: m.httpDuration.WithLabelValues(route, method),
	}
	m.httpCache.Store(k, o)
	return o
}

// routeOf turns the pattern the mux matched into a route label.
func routeOf(r *http.Request) string {
	// For CONNECT the mux may report a redirect target, which is a raw path.
	if r.Pattern == "" || r.Method == http.MethodConnect {
		return UnmatchedRoute
	}
	p := r.Pattern
	// Patterns are "[METHOD ][HOST]/[PATH]"; only a method is followed by
	// blanks.
	if i := strings.IndexAny(p, " \t"); i >= 0 {
		p = strings.TrimLeft(p[i:], " \t")
	}
	return p
}

func methodOf(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return otherMethod
}

// statusWriter remembers the status code a handler sent.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	// 1xx other than 101 are interim responses; the final status follows.
	if w.code == 0 && (code >= 200 || code == http.StatusSwitchingProtocols) {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush keeps streaming handlers working through the wrapper for callers
// that assert http.Flusher rather than use http.ResponseController.
func (w *statusWriter) Flush() {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	// net/http's own writer flushes; a wrapper may need the controller to
	// find one beneath it.
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
		return
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) statusCode() int {
	if w.code == 0 {
		// A handler that wrote nothing sent an empty 200.
		return http.StatusOK
	}
	return w.code
}
