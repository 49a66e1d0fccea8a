package metrics_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/switchbridge/switchbridge/bridge/infra/version"
	"github.com/switchbridge/switchbridge/bridge/metrics"
)

func TestOAuthEvents(t *testing.T) {
	m := metrics.New(metrics.Options{
		Installations: func(context.Context) (int, error) { return 3, nil },
	})
	for _, e := range [][2]string{
		{"authorization_granted", ""},
		{"authorization_granted", ""},
		{"authorization_denied", "user_denied"},
		{"authorization_denied", "bad_login"},
		{"authorization_denied", "bad_login"},
		{"token_issued", ""},
		{"token_failed", "invalid_grant"},
		{"client_auth_failed", "client authentication failed"},
		{"client_auth_failed", "the Authorization header is not valid HTTP Basic"},
		{"api_token_failed", "missing"},
		{"no_such_event", "ignored"},
	} {
		m.ObserveOAuth(e[0], e[1])
	}
	m.APITokenFailed("invalid")
	m.APITokenFailed("invalid")

	want := `
# HELP switchbridge_api_token_failures_total API requests refused for their bearer token (missing, invalid, forbidden).
# TYPE switchbridge_api_token_failures_total counter
switchbridge_api_token_failures_total{reason="forbidden"} 0
switchbridge_api_token_failures_total{reason="invalid"} 2
switchbridge_api_token_failures_total{reason="missing"} 1
# HELP switchbridge_installations Installations (an app installed into a location) that exist now.
# TYPE switchbridge_installations gauge
switchbridge_installations 3
# HELP switchbridge_oauth_authorizations_denied_total Authorization requests that ended without consent, by reason.
# TYPE switchbridge_oauth_authorizations_denied_total counter
switchbridge_oauth_authorizations_denied_total{reason="bad_login"} 2
switchbridge_oauth_authorizations_denied_total{reason="user_denied"} 1
# HELP switchbridge_oauth_authorizations_granted_total Authorization requests a user consented to (each creates an installation and a code).
# TYPE switchbridge_oauth_authorizations_granted_total counter
switchbridge_oauth_authorizations_granted_total 2
# HELP switchbridge_oauth_client_auth_failures_total Token endpoint requests whose client authentication failed, by reason.
# TYPE switchbridge_oauth_client_auth_failures_total counter
switchbridge_oauth_client_auth_failures_total{reason="client_authentication_failed"} 1
switchbridge_oauth_client_auth_failures_total{reason="the_authorization_header_is_not_valid_http_basic"} 1
# HELP switchbridge_oauth_token_failures_total Token endpoint requests refused for a reason other than client authentication, by OAuth error code.
# TYPE switchbridge_oauth_token_failures_total counter
switchbridge_oauth_token_failures_total{reason="invalid_grant"} 1
# HELP switchbridge_oauth_tokens_issued_total Access tokens issued at the token endpoint.
# TYPE switchbridge_oauth_tokens_issued_total counter
switchbridge_oauth_tokens_issued_total 1
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want),
		"switchbridge_api_token_failures_total", "switchbridge_installations",
		"switchbridge_oauth_authorizations_denied_total", "switchbridge_oauth_authorizations_granted_total",
		"switchbridge_oauth_client_auth_failures_total", "switchbridge_oauth_token_failures_total",
		"switchbridge_oauth_tokens_issued_total"); err != nil {
		t.Error(err)
	}
}

func TestReasonsAreBounded(t *testing.T) {
	m := metrics.New(metrics.Options{})
	for i := range 200 {
		m.ObserveOAuth("token_failed", fmt.Sprintf("reason %d", i))
	}
	n := countSeries(t, m, "switchbridge_oauth_token_failures_total")
	if n < 2 || n > 32 {
		t.Errorf("200 distinct reasons made %d series, want a small bounded number", n)
	}
	var other float64
	for _, s := range family(t, m, "switchbridge_oauth_token_failures_total").GetMetric() {
		if labels(s)["reason"] == "other" {
			other = s.GetCounter().GetValue()
		}
	}
	if want := float64(200 - (n - 1)); other != want {
		t.Errorf(`reason="other" = %g, want %g (every reason past the cap)`, other, want)
	}
}

// mustScrape fetches the metrics page the way Prometheus does.
func mustScrape(tb testing.TB, m *metrics.Metrics) []byte {
	tb.Helper()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/metrics")
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("GET /metrics: %s\n%s", resp.Status, body)
	}
	return body
}

// mustFullMetrics drives every hook so every family has samples.
func mustFullMetrics(tb testing.TB, count func(context.Context) (int, error)) *metrics.Metrics {
	tb.Helper()
	h := mustTestHub(tb)
	m := metrics.New(metrics.Options{Switches: h.Switchboard, Installations: count})
	h.observedBy(m.ObserveCommand)
	runScript(tb, h)
	srv := mustServeMux(tb, m)
	do(tb, srv, "GET", "/api/apps/installations/"+installationID+"/switches")
	do(tb, srv, "GET", "/nope")
	for _, e := range []string{"authorization_granted", "authorization_denied", "token_issued", "token_failed", "client_auth_failed", "api_token_failed"} {
		m.ObserveOAuth(e, "invalid_request")
	}
	return m
}

func TestScrapeOverHTTP(t *testing.T) {
	m := mustFullMetrics(t, func(context.Context) (int, error) { return 7, nil })
	body := string(mustScrape(t, m))
	for _, want := range []string{
		`switchbridge_http_requests_total{code="200",method="GET",route="/api/apps/installations/{id}/{path...}"} 1`,
		`switchbridge_switch_commands_total{outcome="timeout",switch="fan"} 1`,
		`switchbridge_switch_state{location="1",switch="lamp"} 0`,
		`switchbridge_installations 7`,
		"go_goroutines ",
		"process_cpu_seconds_total ",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("scrape lacks %q", want)
		}
	}

	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET / on the metrics listener: %s, want 404", resp.Status)
	}
}

func TestScrapeSurvivesAFailingCount(t *testing.T) {
	var logs bytes.Buffer
	h := mustTestHub(t)
	m := metrics.New(metrics.Options{
		Switches:      h.Switchboard,
		Installations: func(context.Context) (int, error) { return 0, errors.New("database is locked") },
		Logger:        slog.New(slog.NewTextHandler(&logs, nil)),
	})
	body := string(mustScrape(t, m))
	if strings.Contains(body, "switchbridge_installations ") {
		t.Error("a failed count still exported switchbridge_installations")
	}
	if !strings.Contains(body, `switchbridge_switch_available{location="1",switch="lamp"} 1`) {
		t.Error("a failed count hid the other metrics")
	}
	if !strings.Contains(logs.String(), "database is locked") {
		t.Errorf("the failure was not logged; log: %q", logs.String())
	}
	if !strings.Contains(string(mustScrape(t, m)), `promhttp_metric_handler_errors_total{cause="gathering"} 1`) {
		t.Error("the failed scrape was not counted in promhttp_metric_handler_errors_total")
	}
}

func TestLint(t *testing.T) {
	m := mustFullMetrics(t, func(context.Context) (int, error) { return 1, nil })
	problems, err := testutil.GatherAndLint(m.Registry())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

// TestPromtool runs Prometheus's own checker on a scrape. Debian's
// prometheus package provides promtool; without it the test skips, except
// under CI where a skipped check would hide a regression.
func TestPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool not found; install Debian's prometheus package")
		}
		t.Skip("promtool not found; install Debian's prometheus package")
	}
	m := mustFullMetrics(t, func(context.Context) (int, error) { return 1, nil })
	body := mustScrape(t, m)
	if !bytes.Contains(body, []byte("switchbridge_switch_command_duration_seconds_bucket")) {
		t.Fatal("the scrape lacks the command histogram; nothing worth checking")
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(body)
	out, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

// TestBuildInfo: the metric names the build version.Get describes.
func TestBuildInfo(t *testing.T) {
	m := metrics.New(metrics.Options{})
	v := version.Get()
	want := fmt.Sprintf(`
# HELP switchbridge_build_info Always 1; the labels name the running build: its version, commit and Go release.
# TYPE switchbridge_build_info gauge
switchbridge_build_info{commit=%q,goversion=%q,version=%q} 1
`, v.Commit, v.Go, v.Version)
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "switchbridge_build_info"); err != nil {
		t.Error(err)
	}
}
