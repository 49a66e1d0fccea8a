package api

import (
	"context"
	"encoding/json"
	"github.com/switchbridge/switchbridge/bridge/infra/clocktest"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/wire"
)

// tokens is an Authorizer with one token per installation.
type tokens map[string]string // token → installation id

func (ts tokens) Authorize(_ context.Context, token, installationID string) (*bridge.Grant, error) {
	id, ok := ts[token]
	switch {
	case !ok:
		return nil, bridge.Errorf(bridge.EUNAUTHORIZED, "unknown token")
	case id != installationID:
		return nil, bridge.Errorf(bridge.EFORBIDDEN, "token of another installation")
	}
	return &bridge.Grant{InstallationID: id, LocationID: 1, SwitchIDs: []string{"lamp"}}, nil
}

// limitedAPI serves the API for installations A and B with limit on a
// stepped clock.
func limitedAPI(t *testing.T, limit RateLimit) (*Handler, *httptest.Server, *clocktest.Clock) {
	t.Helper()
	hub, err := bridge.NewSwitchboard([]bridge.Location{{ID: 1, Name: "Home", Switches: []string{"lamp"}}},
		[]*bridge.Switch{{ID: "lamp", Name: "Lamp", Driver: "test", LocationID: 1, Device: lamp{}}}, bridge.SwitchboardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktest.New()
	h := New(hub, tokens{"tok-a": "A", "tok-b": "B"}, nil, Options{RateLimit: &limit, Now: clk.Now})
	mux := http.NewServeMux()
	h.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return h, srv, clk
}

func call(t *testing.T, srv *httptest.Server, method, path, token string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// rateHeaders is the three X-RateLimit headers of an answer.
func rateHeaders(r *http.Response) [3]string {
	return [3]string{r.Header.Get("X-RateLimit-Limit"), r.Header.Get("X-RateLimit-Remaining"), r.Header.Get("X-RateLimit-Reset")}
}

// Every answer to a request whose token is good for the installation
// carries the headers, whatever its status; each such request counts.
func TestRateLimitHeadersOnEveryAnswer(t *testing.T) {
	_, srv, clk := limitedAPI(t, RateLimit{Requests: 10, Per: time.Minute})
	const uri = "/api/apps/installations/A"
	for i, c := range []struct {
		method, path string
		status       int
	}{
		{http.MethodGet, uri + "/switches", http.StatusOK},
		{http.MethodHead, uri + "/switches", http.StatusOK},
		{http.MethodGet, uri + "/switches/lamp", http.StatusOK},
		{http.MethodGet, uri + "/switches/other", http.StatusNotFound},
		{http.MethodPut, uri + "/switches/on", http.StatusNoContent},
		{http.MethodPut, uri + "/switches/dim", http.StatusBadRequest},
		{http.MethodDelete, uri + "/switches", http.StatusMethodNotAllowed},
		{http.MethodGet, uri + "/nothing", http.StatusNotFound},
		{http.MethodGet, "/api/smartapps/installations/A/switches", http.StatusOK},
	} {
		clk.Add(time.Second)
		r := call(t, srv, c.method, c.path, "tok-a")
		if r.StatusCode != c.status {
			t.Fatalf("%s %s = %d, want %d", c.method, c.path, r.StatusCode, c.status)
		}
		// The window started at the first request; one second passes
		// before each.
		want := [3]string{"10", strconv.Itoa(10 - i - 1), strconv.Itoa(60 - i)}
		if got := rateHeaders(r); got != want {
			t.Errorf("%s %s: X-RateLimit Limit/Remaining/Reset = %v, want %v", c.method, c.path, got, want)
		}
	}
}

// Past the limit: 429 with Retry-After and the SmartAppException body,
// and the handler is not reached; the next window serves again. Other
// installations are counted apart.
func TestRateLimitRefusesAndRecovers(t *testing.T) {
	h, srv, clk := limitedAPI(t, RateLimit{Requests: 3, Per: time.Minute})
	const list = "/api/apps/installations/A/switches"
	for range 3 {
		if r := call(t, srv, http.MethodGet, list, "tok-a"); r.StatusCode != http.StatusOK {
			t.Fatalf("within the limit: %d", r.StatusCode)
		}
	}
	clk.Add(20*time.Second + 300*time.Millisecond)
	for _, method := range []string{http.MethodGet, http.MethodPut} {
		path := list
		if method == http.MethodPut {
			path += "/on"
		}
		r := call(t, srv, method, path, "tok-a")
		if r.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("%s past the limit = %d, want 429", method, r.StatusCode)
		}
		if got := r.Header.Get("Retry-After"); got != "40" {
			t.Errorf("Retry-After = %q, want 40 (seconds, rounded up)", got)
		}
		if got, want := rateHeaders(r), [3]string{"3", "0", "40"}; got != want {
			t.Errorf("headers = %v, want %v", got, want)
		}
		var body wire.ErrorBody
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			t.Fatal(err)
		}
		if !body.Error || body.Type != "SmartAppException" || body.Status != 429 || body.Message == "" {
			t.Errorf("body = %+v, want a SmartAppException with status 429", body)
		}
	}

	// Another installation has its own count.
	if r := call(t, srv, http.MethodGet, "/api/apps/installations/B/switches", "tok-b"); r.StatusCode != http.StatusOK || r.Header.Get("X-RateLimit-Remaining") != "2" {
		t.Errorf("installation B = %d, remaining %q; want 200 and 2", r.StatusCode, r.Header.Get("X-RateLimit-Remaining"))
	}

	// Refused requests do not push the window back.
	clk.Add(40 * time.Second)
	r := call(t, srv, http.MethodGet, list, "tok-a")
	if r.StatusCode != http.StatusOK {
		t.Fatalf("in the next window = %d, want 200", r.StatusCode)
	}
	if got, want := rateHeaders(r), [3]string{"3", "2", "60"}; got != want {
		t.Errorf("headers in the next window = %v, want %v", got, want)
	}

	// Windows that ended are swept: once both are over, the next request
	// leaves only its own.
	clk.Add(2 * time.Minute)
	call(t, srv, http.MethodGet, list, "tok-a")
	h.limiter.mu.Lock()
	n := len(h.limiter.windows)
	h.limiter.mu.Unlock()
	if n != 1 {
		t.Errorf("%d windows kept, want 1 (B's ended)", n)
	}
}

// Requests whose token is not good for the installation are not counted,
// so nobody can use up an installation's requests without its token, and
// bogus installation ids add nothing to the limiter.
func TestRateLimitCountsOnlyAuthorizedRequests(t *testing.T) {
	h, srv, _ := limitedAPI(t, RateLimit{Requests: 2, Per: time.Minute})
	for i := range 50 {
		for _, c := range []struct {
			path, token string
			status      int
		}{
			{"/api/apps/installations/A/switches", "", http.StatusUnauthorized},
			{"/api/apps/installations/A/switches", "bogus", http.StatusUnauthorized},
			{"/api/apps/installations/A/switches", "tok-b", http.StatusForbidden},
			{"/api/apps/installations/x" + strconv.Itoa(i) + "/switches", "tok-a", http.StatusForbidden},
		} {
			r := call(t, srv, http.MethodGet, c.path, c.token)
			if r.StatusCode != c.status {
				t.Fatalf("%s with %q = %d, want %d", c.path, c.token, r.StatusCode, c.status)
			}
			if got := rateHeaders(r); got != ([3]string{}) {
				t.Fatalf("%s with %q carries rate headers %v", c.path, c.token, got)
			}
		}
	}
	h.limiter.mu.Lock()
	n := len(h.limiter.windows)
	h.limiter.mu.Unlock()
	if n != 0 {
		t.Errorf("%d windows after refused requests, want 0", n)
	}
	if r := call(t, srv, http.MethodGet, "/api/apps/installations/A/switches", "tok-a"); r.StatusCode != http.StatusOK || r.Header.Get("X-RateLimit-Remaining") != "1" {
		t.Errorf("A's own request = %d, remaining %q; want 200 and 1", r.StatusCode, r.Header.Get("X-RateLimit-Remaining"))
	}
}

// With the limit off, nothing is counted and no header is sent.
func TestRateLimitOff(t *testing.T) {
	_, srv, _ := limitedAPI(t, RateLimit{})
	for range 300 {
		r := call(t, srv, http.MethodGet, "/api/apps/installations/A/switches", "tok-a")
		if r.StatusCode != http.StatusOK || rateHeaders(r) != ([3]string{}) {
			t.Fatalf("with no limit: %d, headers %v", r.StatusCode, rateHeaders(r))
		}
	}
}

// A per-switch cap answers 429 through the same table, with Retry-After
// and the switch named in the failures.
func TestChangeCapIs429(t *testing.T) {
	hub, err := bridge.NewSwitchboard([]bridge.Location{{ID: 1, Name: "Home", Switches: []string{"lamp"}}},
		[]*bridge.Switch{{ID: "lamp", Name: "Lamp", Driver: "test", LocationID: 1, Device: lamp{},
			MaxChanges: &bridge.ChangeLimit{Burst: 1, Per: 90 * time.Second}}}, bridge.SwitchboardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h := New(hub, tokens{"tok-a": "A"}, nil, Options{})
	rec := httptest.NewRecorder()
	for range 2 {
		rec = httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPut, "/api/apps/installations/A/switches/on", nil)
		req.SetPathValue("id", "A")
		req.Header.Set("Authorization", "Bearer tok-a")
		h.ServeHTTP(rec, req)
	}
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "90" {
		t.Fatalf("second command = %d, Retry-After %q; want 429 and 90", rec.Code, rec.Header().Get("Retry-After"))
	}
	var body wire.ErrorBody
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	if len(body.Failures) != 1 || body.Failures[0].SwitchID != "lamp" || body.Failures[0].Reason != "rate_limited" || body.Status != 429 {
		t.Errorf("body = %+v, want lamp rate_limited", body)
	}
	if rec.Header().Get("X-RateLimit-Remaining") != "248" {
		t.Errorf("X-RateLimit-Remaining = %q, want 248 of the default 250", rec.Header().Get("X-RateLimit-Remaining"))
	}
}
