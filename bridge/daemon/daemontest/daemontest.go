// Package daemontest starts a real hub in a test, on a loopback port with its
// own data directory, and drives the OAuth flow against it the way a browser
// and a third-party client would: login and consent over HTTP with a cookie
// jar, the token exchange with golang.org/x/oauth2.
package daemontest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
	"golang.org/x/oauth2"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/certs/certstest"
	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/bridge/daemon"
	"github.com/switchbridge/switchbridge/bridge/oauth"
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

	tb   testing.TB
	stop context.CancelFunc
	done chan error
}

// Options are what a test may change of the config Start writes and of the
// hub it runs; the zero value is Start's.
type Options struct {
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
	// Logger receives the hub's log, as in production; nil discards it.
	Logger *slog.Logger
}

// Start runs a hub on body, a config without server and data_dir keys (Start
// adds them: a free loopback port, metrics off, a fresh data directory). It
// stops the hub when the test ends.
func Start(tb testing.TB, body string) *Harness {
	tb.Helper()
	return StartWith(tb, body, Options{})
}

// StartIn is Start with a given data directory (to restart a hub on the
// same data) and driver registry.
func StartIn(tb testing.TB, dataDir, body string, reg drivers.Registry) *Harness {
	tb.Helper()
	return StartWith(tb, body, Options{DataDir: dataDir, Registry: reg})
}

// StartLogged is Start logging to logger, as the daemon does in
// production (Start discards the log, as does a nil logger): benchmarks
// time what a user runs.
func StartLogged(tb testing.TB, body string, logger *slog.Logger) *Harness {
	tb.Helper()
	return StartWith(tb, body, Options{Logger: logger})
}

// StartTLS is Start serving HTTPS with the certificate and key of pair;
// the Harness's Client trusts roots.
func StartTLS(tb testing.TB, body string, pair certstest.Pair, roots *x509.CertPool) *Harness {
	tb.Helper()
	return StartWith(tb, body, Options{TLS: &pair, Roots: roots})
}

// TLSClient is a client that trusts roots only.
func TLSClient(roots *x509.CertPool) *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
}

// StartWithServer is Start with more keys of the server section: server
// holds them as indented lines, e.g. "  trusted_proxies: [127.0.0.1]\n".
func StartWithServer(tb testing.TB, server, body string) *Harness {
	tb.Helper()
	return StartWith(tb, body, Options{Server: server})
}

// StartWithMetrics is Start with the metrics listener on a free loopback
// port (Daemon.MetricsAddr).
func StartWithMetrics(tb testing.TB, body string) *Harness {
	tb.Helper()
	return StartWith(tb, body, Options{Metrics: true})
}

// StartWithDrivers is StartWithMetrics with a given driver registry, for
// a test driver's settings and metrics.
func StartWithDrivers(tb testing.TB, body string, reg drivers.Registry) *Harness {
	tb.Helper()
	return StartWith(tb, body, Options{Metrics: true, Registry: reg})
}

// StartWith runs a hub on body with the given options.
func StartWith(tb testing.TB, body string, o Options) *Harness {
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
	text := fmt.Sprintf("server:\n  listen: 127.0.0.1:0\n  metrics_listen: %s\n%sdata_dir: %q\n%s", metricsListen, server, o.DataDir, body)
	cfg, err := config.Parse([]byte(text), "test.yaml")
	if err != nil {
		tb.Fatalf("config: %v", err)
	}
	d, err := daemon.Open(context.Background(), cfg, o.Registry, o.Logger)
	if err != nil {
		tb.Fatalf("daemon.Open: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &Harness{Daemon: d, URL: d.PublicURL(), DataDir: o.DataDir, Client: http.DefaultClient, tb: tb, stop: cancel, done: make(chan error, 1)}
	if o.Roots != nil {
		h.Client = TLSClient(o.Roots)
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

// Stop shuts the hub down and closes it; calling it twice is harmless.
func (h *Harness) Stop() {
	if h.stop == nil {
		return
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

// AddUser creates a user who belongs to the given locations.
func (h *Harness) AddUser(tb testing.TB, name, password string, locations ...int64) *bridge.User {
	tb.Helper()
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		tb.Fatal(err)
	}
	u, err := h.Store.CreateUser(context.Background(), name, hash, locations)
	if err != nil {
		tb.Fatalf("add user %s: %v", name, err)
	}
	return u
}

// App is a registered client.
type App struct {
	ClientID, Secret string
	RedirectURIs     []string
}

// AddApp registers an app owned by owner.
func (h *Harness) AddApp(tb testing.TB, owner *bridge.User, published bool, redirectURIs ...string) App {
	tb.Helper()
	a := App{ClientID: oauth.NewClientID(), Secret: oauth.NewSecret(), RedirectURIs: redirectURIs}
	err := h.Store.CreateApp(context.Background(), &bridge.App{
		ClientID: a.ClientID, Name: "Test app", SecretHash: oauth.Hash(a.Secret),
		RedirectURIs: redirectURIs, OwnerID: owner.ID, Published: published,
	})
	if err != nil {
		tb.Fatal(err)
	}
	return a
}

// OAuthConfig is the x/oauth2 client config of app against this hub.
func (h *Harness) OAuthConfig(a App) *oauth2.Config {
	return &oauth2.Config{
		ClientID: a.ClientID, ClientSecret: a.Secret, RedirectURL: a.RedirectURIs[0], Scopes: []string{"app"},
		Endpoint: oauth2.Endpoint{AuthURL: h.URL + "/oauth/authorize", TokenURL: h.URL + "/oauth/token"},
	}
}

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
		base, ok := rt.(*http.Transport)
		if !ok {
			base = http.DefaultTransport.(*http.Transport)
		}
		t := base.Clone()
		extra := http.Header{}
		for _, o := range opts {
			o(t, extra)
		}
		rt = headerAdder{t, extra}
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

// Consent submits the consent form for a location and switches and returns
// the hub's answer (a 303 to the client's redirect URI on success).
func (b *Browser) Consent(tb testing.TB, consent *Page, authorizeURL string, location int64, switches ...string) *Page {
	tb.Helper()
	form := AuthFields(mustQuery(tb, authorizeURL))
	form.Set("csrf", consent.CSRF(tb))
	form.Set("action", "approve")
	form.Set("location", fmt.Sprint(location))
	for _, s := range switches {
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

// Grant is the outcome of a whole authorization: the token and the
// installation URI from discovery.
type Grant struct {
	Token *oauth2.Token
	URI   string
	// Config is the app's client configuration the grant was made with,
	// to refresh its token.
	Config *oauth2.Config
}

// Authorize runs the whole flow for app as user: authorization request,
// login, consent for location and switches, code exchange with x/oauth2,
// discovery. It fails the test on any unexpected answer.
func (h *Harness) Authorize(tb testing.TB, a App, user, password string, location int64, switches ...string) Grant {
	tb.Helper()
	cfg := h.OAuthConfig(a)
	code := h.Code(tb, a, user, password, location, switches...)
	tok, err := cfg.Exchange(context.WithValue(context.Background(), oauth2.HTTPClient, h.Client), code)
	if err != nil {
		tb.Fatalf("exchange: %v", err)
	}
	eps := h.Endpoints(tb, tok.AccessToken)
	if len(eps) != 1 {
		tb.Fatalf("discovery returned %d records, want 1", len(eps))
	}
	return Grant{Token: tok, URI: eps[0].URI, Config: cfg}
}

// Code runs the authorization for app as user up to the code the consent
// sends back to the client (without PKCE), and returns it unexchanged.
func (h *Harness) Code(tb testing.TB, a App, user, password string, location int64, switches ...string) string {
	tb.Helper()
	cfg := h.OAuthConfig(a)
	state := "st-" + oauth.NewSecret()[:10]
	authURL := cfg.AuthCodeURL(state)
	b := h.NewBrowser()
	consent := b.Login(tb, authURL, user, password)
	p := b.Consent(tb, consent, authURL, location, switches...)
	if p.StatusCode != http.StatusSeeOther {
		tb.Fatalf("consent answered %d, want 303\n%s", p.StatusCode, p.Body)
	}
	cb, err := url.Parse(p.Header.Get("Location"))
	if err != nil {
		tb.Fatal(err)
	}
	if got := cb.Query().Get("state"); got != state {
		tb.Fatalf("state came back as %q, want %q", got, state)
	}
	code := cb.Query().Get("code")
	if code == "" {
		tb.Fatalf("no code on the redirect: %s", cb)
	}
	return code
}

// Endpoints calls discovery with a token.
func (h *Harness) Endpoints(tb testing.TB, token string) []oauth.Endpoint {
	tb.Helper()
	resp := h.Call(tb, http.MethodGet, h.URL+"/api/apps/endpoints", token)
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("discovery answered %d: %s", resp.StatusCode, resp.Body)
	}
	var eps []oauth.Endpoint
	if err := json.Unmarshal([]byte(resp.Body), &eps); err != nil {
		tb.Fatal(err)
	}
	return eps
}

// Call makes one API request with a bearer token ("" for none).
func (h *Harness) Call(tb testing.TB, method, u, token string) *Page {
	tb.Helper()
	if token != "" {
		token = "Bearer " + token
	}
	return h.CallAuth(tb, method, u, token)
}

// CallAuth makes one API request with an Authorization header ("" for
// none).
func (h *Harness) CallAuth(tb testing.TB, method, u, authorization string) *Page {
	tb.Helper()
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		tb.Fatal(err)
	}
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := h.Client.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	return readPage(tb, resp)
}

// Switch is one entry of GET /switches.
type Switch struct {
	ID        string  `json:"id"`
	Name      string  `json:"name"`
	Value     *string `json:"value"`
	Available bool    `json:"available"`
}

// List calls GET <uri>/switches and decodes it.
func (h *Harness) List(tb testing.TB, g Grant) []Switch {
	tb.Helper()
	p := h.Call(tb, http.MethodGet, g.URI+"/switches", g.Token.AccessToken)
	if p.StatusCode != http.StatusOK {
		tb.Fatalf("GET /switches answered %d: %s", p.StatusCode, p.Body)
	}
	var out []Switch
	if err := json.Unmarshal([]byte(p.Body), &out); err != nil {
		tb.Fatalf("GET /switches body %q: %v", p.Body, err)
	}
	return out
}

// Command calls PUT <uri>/switches/<cmd> and returns the answer.
func (h *Harness) Command(tb testing.TB, g Grant, cmd string) *Page {
	tb.Helper()
	return h.Call(tb, http.MethodPut, g.URI+"/switches/"+cmd, g.Token.AccessToken)
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

// InstallationID is the id of the installation at a grant's URI.
func (g Grant) InstallationID() string {
	return g.URI[strings.LastIndex(g.URI, "/")+1:]
}
