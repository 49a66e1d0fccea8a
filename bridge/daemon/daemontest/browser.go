package daemontest

// Browser: a user agent with a cookie jar, for the login, consent and
// connected apps pages.

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Browser is a user agent with a cookie jar that does not follow redirects,
// so a test sees every hop.
type Browser struct {
	*http.Client
	hub *Harness
}

// BrowserOption changes where a browser's requests come from or what they
// carry.
type BrowserOption func(t *http.Transport, header http.Header)

// From makes a browser connect from a loopback address of its own
// (127.0.0.2, …), so the hub sees another client address.
func From(ip string) BrowserOption {
	return func(t *http.Transport, _ http.Header) {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
		t.DialContext = d.DialContext
	}
}

// WithHeader adds a header to every request of a browser, as a reverse
// proxy in front of the hub would (X-Forwarded-For).
func WithHeader(k, v string) BrowserOption {
	return func(_ *http.Transport, h http.Header) { h.Add(k, v) }
}

// NewBrowser returns a fresh browser.
func (h *Harness) NewBrowser(opts ...BrowserOption) *Browser {
	jar, _ := cookiejar.New(nil)
	rt := h.Client.Transport // nil: http.DefaultTransport
	if len(opts) > 0 {
		t := transportOf(rt).Clone()
		extra := http.Header{}
		for _, o := range opts {
			o(t, extra)
		}
		rt = SecretRecorder{headerAdder{t, extra}}
		if h.Contract != nil {
			rt = h.Contract.Transport(rt)
		}
	}
	return &Browser{hub: h, Client: &http.Client{
		Jar:           jar,
		Transport:     rt,
		Timeout:       30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

type headerAdder struct {
	rt     http.RoundTripper
	header http.Header
}

func (a headerAdder) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(a.header) > 0 {
		r = r.Clone(r.Context())
		for k, vs := range a.header {
			r.Header[k] = append(r.Header[k], vs...)
		}
	}
	return a.rt.RoundTrip(r)
}

// Page is a fetched response with its body read.
type Page struct {
	*http.Response
	Body string
}

// Get fetches a URL (relative to the hub when it starts with /).
func (b *Browser) Get(tb testing.TB, u string) *Page {
	tb.Helper()
	if strings.HasPrefix(u, "/") {
		u = b.hub.URL + u
	}
	resp, err := b.Client.Get(u)
	if err != nil {
		tb.Fatal(err)
	}
	return readPage(tb, resp)
}

// Post submits a form to a hub path.
func (b *Browser) Post(tb testing.TB, path string, form url.Values) *Page {
	tb.Helper()
	resp, err := b.Client.PostForm(b.hub.URL+path, form)
	if err != nil {
		tb.Fatal(err)
	}
	return readPage(tb, resp)
}

func readPage(tb testing.TB, resp *http.Response) *Page {
	tb.Helper()
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return &Page{Response: resp, Body: string(body)}
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// CSRF returns the CSRF token of a page's forms.
func (p *Page) CSRF(tb testing.TB) string {
	tb.Helper()
	m := csrfRE.FindStringSubmatch(p.Body)
	if m == nil {
		tb.Fatalf("no csrf field in page (status %d):\n%s", p.StatusCode, p.Body)
	}
	return m[1]
}

// Login opens an authorize URL, logs in, and returns the consent page.
func (b *Browser) Login(tb testing.TB, authorizeURL, user, password string) *Page {
	tb.Helper()
	p := b.Get(tb, authorizeURL)
	if p.StatusCode != http.StatusOK || !strings.Contains(p.Body, `action="/oauth/login"`) {
		tb.Fatalf("authorize did not show the login page: %d\n%s", p.StatusCode, p.Body)
	}
	q := mustQuery(tb, authorizeURL)
	form := AuthFields(q)
	form.Set("csrf", p.CSRF(tb))
	form.Set("username", user)
	form.Set("password", password)
	p = b.Post(tb, "/oauth/login", form)
	if p.StatusCode != http.StatusSeeOther {
		tb.Fatalf("login answered %d, want 303\n%s", p.StatusCode, p.Body)
	}
	return b.Get(tb, p.Header.Get("Location"))
}

// SeeOnly marks a switch given to Consent or Authorize to be granted
// see-only: the consent form ticks it and its "see only" box.
func SeeOnly(id string) string { return seeOnlyMark + id }

// seeOnlyMark cannot begin a switch id (config.SwitchIDPattern).
const seeOnlyMark = "see-only:"

// Consent submits the consent form for a location and switches (those
// wrapped in SeeOnly granted see-only) and returns the hub's answer (a 303
// to the client's redirect URI on success).
func (b *Browser) Consent(tb testing.TB, consent *Page, authorizeURL string, location int64, switches ...string) *Page {
	tb.Helper()
	form := AuthFields(mustQuery(tb, authorizeURL))
	form.Set("csrf", consent.CSRF(tb))
	form.Set("action", "approve")
	form.Set("location", fmt.Sprint(location))
	for _, s := range switches {
		if id, ok := strings.CutPrefix(s, seeOnlyMark); ok {
			if !strings.Contains(consent.Body, `name="see_only" value="`+id+`"`) {
				tb.Fatalf("the consent page offers no see-only choice for %s", id)
			}
			form.Add("see_only", id)
			s = id
		}
		form.Add("switch", s)
	}
	return b.Post(tb, "/oauth/authorize", form)
}

// AuthFields copies the authorization request parameters into a form.
func AuthFields(q url.Values) url.Values {
	f := url.Values{}
	for _, k := range []string{"response_type", "client_id", "scope", "redirect_uri", "state", "code_challenge", "code_challenge_method"} {
		if vs, ok := q[k]; ok {
			f[k] = append([]string(nil), vs...)
		}
	}
	return f
}

func mustQuery(tb testing.TB, u string) url.Values {
	tb.Helper()
	pu, err := url.Parse(u)
	if err != nil {
		tb.Fatal(err)
	}
	return pu.Query()
}

// ConnectedApps logs in on the connected apps page (/oauth/apps, whose
// login form carries no authorization request) and returns the page.
func (b *Browser) ConnectedApps(tb testing.TB, user, password string) *Page {
	tb.Helper()
	p := b.Get(tb, "/oauth/apps")
	if p.StatusCode != http.StatusOK || !strings.Contains(p.Body, `name="return" value="apps"`) {
		tb.Fatalf("/oauth/apps did not show its login form: %d\n%s", p.StatusCode, p.Body)
	}
	p = b.Post(tb, "/oauth/login", url.Values{"return": {"apps"}, "csrf": {p.CSRF(tb)}, "username": {user}, "password": {password}})
	if p.StatusCode != http.StatusSeeOther || p.Header.Get("Location") != "/oauth/apps" {
		tb.Fatalf("login on the connected apps page answered %d to %q, want 303 to /oauth/apps\n%s", p.StatusCode, p.Header.Get("Location"), p.Body)
	}
	p = b.Get(tb, "/oauth/apps")
	if p.StatusCode != http.StatusOK || !strings.Contains(p.Body, "<h1>Connected apps</h1>") {
		tb.Fatalf("after login /oauth/apps answered %d\n%s", p.StatusCode, p.Body)
	}
	return p
}
