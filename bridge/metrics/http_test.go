package metrics_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/switchbridge/switchbridge/bridge/metrics"
)

const installationID = "3f2b8c1e-9a4d-4e5f-8b6a-1c2d3e4f5a6b"

// mustServeMux mounts handlers on the hub's real patterns and serves them,
// instrumented, on loopback.
func mustServeMux(tb testing.TB, m *metrics.Metrics) *httptest.Server {
	tb.Helper()
	mux := http.NewServeMux()
	ok := func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "[]") }
	mux.HandleFunc("/api/apps/installations/{id}/{path...}", ok)
	mux.HandleFunc("GET /oauth/authorize", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
	})
	mux.HandleFunc("POST /oauth/login", func(w http.ResponseWriter, r *http.Request) {
		// Writes nothing: an empty 200.
	})
	mux.HandleFunc("GET /events", func(w http.ResponseWriter, r *http.Request) {
		f, isFlusher := w.(http.Flusher)
		if !isFlusher {
			http.Error(w, "no flusher", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusAccepted)
		io.WriteString(w, "tick")
		f.Flush()
		if err := http.NewResponseController(w).Flush(); err != nil {
			tb.Errorf("ResponseController.Flush through the wrapper: %v", err)
		}
	})
	srv := httptest.NewServer(m.Instrument(mux))
	tb.Cleanup(srv.Close)
	return srv
}

func do(tb testing.TB, srv *httptest.Server, method, path string) int {
	tb.Helper()
	req, err := http.NewRequest(method, srv.URL+path, nil)
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer secret-token-123")
	resp, err := srv.Client().Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func TestInstrumentLabelsByPattern(t *testing.T) {
	m := metrics.New(metrics.Options{})
	srv := mustServeMux(t, m)

	for _, c := range []struct {
		method, path string
		status       int
	}{
		{"GET", "/api/apps/installations/" + installationID + "/switches", 200},
		{"PUT", "/api/apps/installations/" + installationID + "/switches/on", 200},
		{"GET", "/api/apps/installations/" + installationID + "/switches", 200},
		{"BREW", "/api/apps/installations/" + installationID + "/switches", 200},
		{"GET", "/oauth/authorize?client_id=app&redirect_uri=x", 401},
		{"POST", "/oauth/login", 200},
		{"GET", "/oauth/login", 405},
		{"GET", "/no/such/" + installationID, 404},
		{"GET", "/events", 202},
	} {
		if got := do(t, srv, c.method, c.path); got != c.status {
			t.Fatalf("%s %s: status %d, want %d", c.method, c.path, got, c.status)
		}
	}

	want := `
# HELP switchbridge_http_requests_total HTTP requests served, by ServeMux route pattern, method and status code.
# TYPE switchbridge_http_requests_total counter
switchbridge_http_requests_total{code="200",method="GET",route="/api/apps/installations/{id}/{path...}"} 2
switchbridge_http_requests_total{code="200",method="OTHER",route="/api/apps/installations/{id}/{path...}"} 1
switchbridge_http_requests_total{code="200",method="POST",route="/oauth/login"} 1
switchbridge_http_requests_total{code="200",method="PUT",route="/api/apps/installations/{id}/{path...}"} 1
switchbridge_http_requests_total{code="202",method="GET",route="/events"} 1
switchbridge_http_requests_total{code="401",method="GET",route="/oauth/authorize"} 1
switchbridge_http_requests_total{code="404",method="GET",route="unmatched"} 1
switchbridge_http_requests_total{code="405",method="GET",route="unmatched"} 1
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "switchbridge_http_requests_total"); err != nil {
		t.Error(err)
	}

	var total uint64
	for _, s := range family(t, m, "switchbridge_http_request_duration_seconds").GetMetric() {
		total += s.GetHistogram().GetSampleCount()
	}
	if total != 9 {
		t.Errorf("request_duration_seconds counted %d requests, want 9", total)
	}

	// Nothing a client sent in the path or headers may become a label value.
	for _, name := range []string{"switchbridge_http_requests_total", "switchbridge_http_request_duration_seconds"} {
		for _, s := range family(t, m, name).GetMetric() {
			for _, v := range labels(s) {
				if strings.Contains(v, installationID) || strings.Contains(v, "secret") || strings.Contains(v, "client_id") {
					t.Errorf("%s has a label value from the request: %q", name, v)
				}
			}
		}
	}
}
