package metrics

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// maxReasons caps the distinct reason labels of one metric. Reasons come
// from code, not from clients, but some are sentences: the cap keeps a
// future change from turning them into an unbounded label.
const maxReasons = 24

// otherReason labels every reason past maxReasons.
const otherReason = "other"

// countTimeout bounds the installations query of one scrape.
const countTimeout = 5 * time.Second

func (m *Metrics) initOAuth(f promauto.Factory) {
	m.authGranted = f.NewCounter(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "oauth", Name: "authorizations_granted_total",
		Help: "Authorization requests a user consented to (each creates an installation and a code).",
	})
	m.authDenied = newReasonCounter(f, prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "oauth", Name: "authorizations_denied_total",
		Help: "Authorization requests that ended without consent, by reason.",
	})
	m.tokensIssued = f.NewCounter(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "oauth", Name: "tokens_issued_total",
		Help: "Access tokens issued at the token endpoint.",
	})
	m.tokenFailures = newReasonCounter(f, prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "oauth", Name: "token_failures_total",
		Help: "Token endpoint requests refused for a reason other than client authentication, by OAuth error code.",
	})
	m.clientAuthFailures = newReasonCounter(f, prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "oauth", Name: "client_auth_failures_total",
		Help: "Token endpoint requests whose client authentication failed, by reason.",
	})
	m.apiTokenFailures = newReasonCounter(f, prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "api", Name: "token_failures_total",
		Help: "API requests refused for their bearer token (missing, invalid, forbidden).",
	}, "missing", "invalid", "forbidden")
}

// ObserveOAuth records an OAuth event, for oauth.Server.Observe. Events are
// authorization_granted, authorization_denied, token_issued, token_failed,
// client_auth_failed and api_token_failed; others are ignored.
func (m *Metrics) ObserveOAuth(event, reason string) {
	switch event {
	case "authorization_granted":
		m.authGranted.Inc()
	case "console_login":
		m.ObserveConsole("login", reason)
	case "authorization_denied":
		m.authDenied.inc(reason)
	case "token_issued":
		m.tokensIssued.Inc()
	case "token_failed":
		m.tokenFailures.inc(reason)
	case "client_auth_failed":
		m.clientAuthFailures.inc(reason)
	case "api_token_failed":
		m.apiTokenFailures.inc(reason)
	}
}

// APITokenFailed records a bearer token refused at the installation API,
// for api.Handler.TokenFailed.
func (m *Metrics) APITokenFailed(reason string) { m.apiTokenFailures.inc(reason) }

// reasonCounter is a counter by "reason" whose label values are made
// label-safe and capped in number.
type reasonCounter struct {
	vec  *prometheus.CounterVec
	mu   sync.Mutex
	seen map[string]bool
}

func newReasonCounter(f promauto.Factory, o prometheus.CounterOpts, initial ...string) *reasonCounter {
	c := &reasonCounter{vec: f.NewCounterVec(o, []string{"reason"}), seen: map[string]bool{}}
	for _, r := range initial {
		c.vec.WithLabelValues(c.label(r))
	}
	return c
}

func (c *reasonCounter) inc(reason string) { c.vec.WithLabelValues(c.label(reason)).Inc() }

func (c *reasonCounter) label(reason string) string {
	r := reasonLabel(reason)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.seen[r] {
		if len(c.seen) >= maxReasons {
			return otherReason
		}
		c.seen[r] = true
	}
	return r
}

// reasonLabel turns a reason code or sentence into a short snake_case
// label value: "client authentication failed" → client_authentication_failed.
func reasonLabel(s string) string {
	const maxLen = 48
	var b strings.Builder
	underscore := false
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			if underscore && b.Len() > 0 {
				b.WriteByte('_')
			}
			underscore = false
			b.WriteRune(r)
		default:
			underscore = true
		}
		if b.Len() >= maxLen {
			break
		}
	}
	if b.Len() == 0 {
		return "unknown"
	}
	return b.String()
}

// installationsCollector asks the store how many installations exist at
// scrape time, so the gauge is right after restarts and deletions alike.
type installationsCollector struct {
	count func(context.Context) (int, error)
	desc  *prometheus.Desc
}

func newInstallationsCollector(count func(context.Context) (int, error)) *installationsCollector {
	return &installationsCollector{
		count: count,
		desc: prometheus.NewDesc(prometheus.BuildFQName(namespace, "", "installations"),
			"Installations (an app installed into a location) that exist now.", nil, nil),
	}
}

func (c *installationsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *installationsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), countTimeout)
	defer cancel()
	n, err := c.count(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, fmt.Errorf("counting installations: %w", err))
		return
	}
	ch <- constGauge(c.desc, float64(n))
}
