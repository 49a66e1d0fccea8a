package democlient

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/switchbridge/switchbridge/bridge/wire"
)

func TestHomeShowsOnlyItsOwnNotices(t *testing.T) {
	c := New(Options{ClientID: "x", AuthURL: "http://127.0.0.1:1", RedirectURL: "http://127.0.0.1:1" + CallbackPath})
	mux := http.NewServeMux()
	c.Register(mux)
	get := func(u string) string {
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, httptest.NewRequest(http.MethodGet, u, nil))
		return w.Body.String()
	}
	// Text in the URL is never shown.
	if body := get("/demo/?error=" + url.QueryEscape("Call +1 555 0100 now") + "&notice=made-up"); strings.Contains(body, "555") || strings.Contains(body, `id="error"`) {
		t.Errorf("the page shows text it did not make:\n%s", body)
	}
	// A callback whose state does not match leaves a notice, shown once.
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, httptest.NewRequest(http.MethodGet, CallbackPath+"?code=x&state=y", nil))
	loc := w.Header().Get("Location")
	if w.Code != http.StatusSeeOther || !strings.HasPrefix(loc, "/demo/?notice=") {
		t.Fatalf("callback without a matching state = %d %s", w.Code, loc)
	}
	if body := get(loc); !strings.Contains(body, "did not match a request from this browser") {
		t.Errorf("notice not shown:\n%s", body)
	}
	if body := get(loc); strings.Contains(body, `id="error"`) {
		t.Error("a notice was shown twice")
	}
}

func TestDisconnectNeedsCSRF(t *testing.T) {
	c := New(Options{ClientID: "x", AuthURL: "http://127.0.0.1:1"})
	c.sessions["sid"] = &grant{token: "t", csrf: "good"}
	mux := http.NewServeMux()
	c.Register(mux)
	post := func(csrf string) {
		r := httptest.NewRequest(http.MethodPost, "/demo/disconnect", strings.NewReader("csrf="+csrf))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.AddCookie(&http.Cookie{Name: sessionCookie, Value: "sid"})
		mux.ServeHTTP(httptest.NewRecorder(), r)
	}
	post("forged")
	if _, ok := c.sessions["sid"]; !ok {
		t.Fatal("a forged disconnect ended the session")
	}
	post("good")
	if _, ok := c.sessions["sid"]; ok {
		t.Error("disconnect with the page's CSRF token kept the session")
	}
}

// The demo client's pages carry the security headers of the hub's own
// pages (nosniff, base-uri 'none' and the rest), from the same helper,
// with its one script allowed.
func TestPagesCarryThePageHeaders(t *testing.T) {
	c := New(Options{ClientID: "x", AuthURL: "http://127.0.0.1:1", RedirectURL: "http://127.0.0.1:1" + CallbackPath})
	mux := http.NewServeMux()
	c.Register(mux)
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/demo/", nil))
	want := httptest.NewRecorder()
	wire.PageHeaders(want)
	for k := range want.Header() {
		if k == "Content-Security-Policy" {
			// The hub's policy, and the page's one script, from this
			// client, which may open only the client's event stream.
			// Only its style differs: the demo keeps its page's inline
			// style, which the hub's own pages no longer have.
			csp := w.Header().Get(k)
			for _, d := range append(strings.Split(want.Header().Get(k), "; "), "script-src 'self'", "connect-src 'self'") {
				if strings.HasPrefix(d, "style-src ") {
					d = "style-src 'unsafe-inline'"
				}
				if !strings.Contains(csp, d) {
					t.Errorf("%s = %q, lacks %q", k, csp, d)
				}
			}
			continue
		}
		if got := w.Header().Get(k); got != want.Header().Get(k) {
			t.Errorf("%s = %q, want %q as the hub's pages", k, got, want.Header().Get(k))
		}
	}
	for k, v := range map[string]string{"X-Content-Type-Options": "nosniff", "Content-Security-Policy": "base-uri 'none'"} {
		if !strings.Contains(w.Header().Get(k), v) {
			t.Errorf("%s = %q, want %q", k, w.Header().Get(k), v)
		}
	}
}
