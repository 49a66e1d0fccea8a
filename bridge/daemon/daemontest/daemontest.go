// Package daemontest starts a real hub in a test, on a loopback port with its
// own data directory, and drives the OAuth flow against it the way a browser
// and a third-party client would: login and consent over HTTP with a cookie
// jar, the token exchange with golang.org/x/oauth2. Every answer of the hub
// to a path of the OpenAPI document is checked against it (Contract). It
// also holds the leak test's script (RunLeakScript), which a single box
// and a platform with a hub run alike.
package daemontest

// This file holds the harness: starting a hub with its options, and
// stopping it.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/bridge/daemon"
	"github.com/switchbridge/switchbridge/bridge/infra/certs/certstest"
	"github.com/switchbridge/switchbridge/bridge/infra/logtest"
	"github.com/switchbridge/switchbridge/drivers"
	"github.com/switchbridge/switchbridge/drivers/builtin"
)

// Harness is a running daemon with the helpers a test drives it by: users,
// apps, browsers, the OAuth flow and API calls.
type Harness struct {
	*daemon.Daemon
	URL     string // public URL, e.g. http://127.0.0.1:41234
	DataDir string
	// Client is what API calls, browsers and the token exchange use: one
	// that trusts the hub's test CA when it serves TLS.
	Client *http.Client
	// Contract checks every answer of the hub to Client and browsers
	// against the OpenAPI document (nil for benchmarks and Remote).
	Contract *Contract

	tb      testing.TB
	stop    context.CancelFunc
	done    chan error
	watched *logtest.Buffer // the log scanned for secrets; nil for benchmarks
}

// Options are what a test may change of the config StartWith writes and
// of the hub it runs.
type Options struct {
	// Config is the config without server and data_dir keys, which
	// StartWith adds: a free loopback port, metrics off, a fresh data
	// directory.
	Config string
	// DataDir is the data directory (to restart a hub on the same data); a
	// fresh one when empty.
	DataDir string
	// Registry is the drivers; the built-in ones when nil.
	Registry drivers.Registry
	// Metrics puts the metrics listener on a free loopback port
	// (Daemon.MetricsAddr); it is off otherwise.
	Metrics bool
	// Server holds more keys of the server section as indented lines,
	// e.g. "  trusted_proxies: [127.0.0.1]\n".
	Server string
	// TLS serves HTTPS with this certificate and key; the Harness's Client
	// then trusts Roots.
	TLS   *certstest.Pair
	Roots *x509.CertPool
	// TLSKeys are more keys of server.tls, e.g. "hsts_max_age: 1h".
	TLSKeys string
	// Logger receives the hub's log, as in production (benchmarks time
	// what a user runs); nil discards it.
	Logger *slog.Logger
}

// Start runs a hub on body, a config without server and data_dir keys:
// StartWith(tb, Options{Config: body}), the common case.
func Start(tb testing.TB, body string) *Harness {
	tb.Helper()
	return StartWith(tb, Options{Config: body})
}

// StartWith runs a hub with the given options. It stops the hub when the
// test ends.
func StartWith(tb testing.TB, o Options) *Harness {
	tb.Helper()
	if o.Registry == nil {
		o.Registry = builtin.Registry()
	}
	if o.DataDir == "" {
		o.DataDir = tb.TempDir()
	}
	metricsListen := `"off"`
	if o.Metrics {
		metricsListen = "127.0.0.1:0"
	}
	server := ""
	if o.Server != "" {
		server = strings.TrimRight(o.Server, "\n") + "\n"
	}
	if o.TLS != nil {
		more := ""
		if o.TLSKeys != "" {
			more = ", " + o.TLSKeys
		}
		server += fmt.Sprintf("  tls: {cert_file: %q, key_file: %q%s}\n", o.TLS.CertFile, o.TLS.KeyFile, more)
	}
	text := fmt.Sprintf("server:\n  listen: 127.0.0.1:0\n  metrics_listen: %s\n%sdata_dir: %q\n%s", metricsListen, server, o.DataDir, o.Config)
	cfg, err := config.Load("test.yaml", config.Text(text))
	if err != nil {
		tb.Fatalf("config: %v", err)
	}
	// A test's hub logs everything, debug included, to a log scanned for
	// the test's secrets once the hub has stopped (logtest.Watch, before
	// the Cleanup that stops it). Benchmarks keep the log they ask for.
	logger := o.Logger
	var watched *logtest.Buffer
	if _, bench := tb.(*testing.B); !bench {
		watched = logtest.Watched(tb, "the hub (its log or metrics)")
		var h slog.Handler = slog.NewTextHandler(watched, &slog.HandlerOptions{Level: slog.LevelDebug})
		if logger != nil {
			h = slog.NewMultiHandler(logger.Handler(), h)
		}
		logger = slog.New(h)
	}
	d, err := daemon.Open(context.Background(), cfg, o.Registry, logger)
	if err != nil {
		tb.Fatalf("daemon.Open: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &Harness{Daemon: d, URL: d.PublicURL(), DataDir: o.DataDir, Client: http.DefaultClient, tb: tb, stop: cancel, done: make(chan error, 1), watched: watched}
	if o.Roots != nil {
		h.Client = TLSClient(o.Roots)
	}
	if _, bench := tb.(*testing.B); !bench {
		h.checkContract(tb)
	}
	go func() { h.done <- d.Serve(ctx) }()
	tb.Cleanup(h.Stop)
	return h
}

// Remote is a Harness for a hub running in another process (the real
// binary) at url: only its HTTP helpers (browsers, the OAuth flow, API
// calls) work; it has no Daemon and nothing to stop.
func Remote(url string) *Harness {
	return &Harness{URL: url, Client: http.DefaultClient}
}

// Checked puts the OpenAPI validator between the harness's clients and
// its hub (StartWith does for the hubs it starts) and fails tb at its end
// with every answer that did not conform: for a Remote hub, the real
// binary, alone or as a platform's hub.
func (h *Harness) Checked(tb testing.TB) *Harness {
	tb.Helper()
	h.checkContract(tb)
	return h
}

// Stop shuts the hub down and closes it; calling it twice is harmless.
func (h *Harness) Stop() {
	if h.stop == nil {
		return
	}
	if a := h.Daemon.MetricsAddr(); a != nil && h.watched != nil {
		// The metrics as they are at the end, scanned with the log.
		if resp, err := http.Get("http://" + a.String() + "/metrics"); err == nil {
			io.Copy(h.watched, resp.Body)
			resp.Body.Close()
		}
	}
	h.stop()
	h.stop = nil
	if err := <-h.done; err != nil {
		h.tb.Errorf("serve: %v", err)
	}
	if err := h.Daemon.Close(); err != nil {
		h.tb.Errorf("close: %v", err)
	}
}

// TLSClient is a client that trusts roots only.
func TLSClient(roots *x509.CertPool) *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: SecretRecorder{&http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}}
}
