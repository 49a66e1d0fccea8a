// Package daemontest starts a real hub in a test, on a loopback port with its
// own data directory, and drives the OAuth flow against it the way a browser
// and a third-party client would: login and consent over HTTP with a cookie
// jar, the token exchange with golang.org/x/oauth2.
package daemontest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
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
	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/bridge/daemon"
	"github.com/switchbridge/switchbridge/bridge/oauth"
	"github.com/switchbridge/switchbridge/drivers"
	"github.com/switchbridge/switchbridge/drivers/builtin"
)

// Hub is a running daemon.
type Hub struct {
	*daemon.Daemon
	URL     string // public URL, e.g. http://127.0.0.1:41234
	DataDir string

	tb   testing.TB
	stop context.CancelFunc
	done chan error
}

// Start runs a hub on body, a config without server and data_dir keys (Start
// adds them: a free loopback port, metrics off, a fresh data directory). It
// stops the hub when the test ends.
func Start(tb testing.TB, body string) *Hub {
	tb.Helper()
	return StartIn(tb, tb.TempDir(), body, builtin.Registry())
}

// StartIn is Start with a given data directory (to restart a hub on the
// same data) and driver registry.
func StartIn(tb testing.TB, dataDir, body string, reg drivers.Registry) *Hub {
	tb.Helper()
	return start(tb, dataDir, body, reg, `"off"`)
}

// StartWithMetrics is Start with the metrics listener on a free loopback
// port (Daemon.MetricsAddr).
func StartWithMetrics(tb testing.TB, body string) *Hub {
	tb.Helper()
	return start(tb, tb.TempDir(), body, nil, "127.0.0.1:0")
}

func start(tb testing.TB, dataDir, body string, reg drivers.Registry, metricsListen string) *Hub {
	tb.Helper()
	if reg == nil {
		reg = builtin.Registry()
	}
	text := fmt.Sprintf("server:\n  listen: 127.0.0.1:0\n  metrics_listen: %s\ndata_dir: %q\n%s", metricsListen, dataDir, body)
	cfg, err := config.Parse([]byte(text), "test.yaml")
	if err != nil {
		tb.Fatalf("config: %v", err)
	}
	d, err := daemon.Open(context.Background(), cfg, reg, nil)
	if err != nil {
		tb.Fatalf("daemon.Open: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &Hub{Daemon: d, URL: d.PublicURL(), DataDir: dataDir, tb: tb, stop: cancel, done: make(chan error, 1)}
	go func() { h.done <- d.Serve(ctx) }()
	tb.Cleanup(h.Stop)
	return h
}

// Stop shuts the hub down and closes it; calling it twice is harmless.
func (h *Hub) Stop() {
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
func (h *Hub) AddUser(tb testing.TB, name, password string, locations ...int64) *bridge.User {
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
func (h *Hub) AddApp(tb testing.TB, owner *bridge.User, published bool, redirectURIs ...string) App {
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
func (h *Hub) OAuthConfig(a App) *oauth2.Config {
	return &oauth2.Config{
		ClientID: a.ClientID, ClientSecret: a.Secret, RedirectURL: a.RedirectURIs[0], Scopes: []string{"app"},
		Endpoint: oauth2.Endpoint{AuthURL: h.URL + "/oauth/authorize", TokenURL: h.URL + "/oauth/token"},
	}
}

// Browser is a user agent with a cookie jar that does not follow redirects,
// so a test sees every hop.
type Browser struct {
	*http.Client
	hub *Hub
}

// NewBrowser returns a fresh browser.
func (h *Hub) NewBrowser() *Browser {
	jar, _ := cookiejar.New(nil)
	return &Browser{hub: h, Client: &http.Client{
		Jar:           jar,
		Timeout:       30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
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
}

// Authorize runs the whole flow for app as user: authorization request,
// login, consent for location and switches, code exchange with x/oauth2,
// discovery. It fails the test on any unexpected answer.
func (h *Hub) Authorize(tb testing.TB, a App, user, password string, location int64, switches ...string) Grant {
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
	tok, err := cfg.Exchange(context.Background(), code)
	if err != nil {
		tb.Fatalf("exchange: %v", err)
	}
	eps := h.Endpoints(tb, tok.AccessToken)
	if len(eps) != 1 {
		tb.Fatalf("discovery returned %d records, want 1", len(eps))
	}
	return Grant{Token: tok, URI: eps[0].URI}
}

// Endpoints calls discovery with a token.
func (h *Hub) Endpoints(tb testing.TB, token string) []oauth.Endpoint {
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
func (h *Hub) Call(tb testing.TB, method, u, token string) *Page {
	tb.Helper()
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		tb.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	return readPage(tb, resp)
}

// Switch is one entry of GET /switches.
type Switch struct {
	Name  string  `json:"name"`
	Value *string `json:"value"`
}

// List calls GET <uri>/switches and decodes it.
func (h *Hub) List(tb testing.TB, g Grant) []Switch {
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
func (h *Hub) Command(tb testing.TB, g Grant, cmd string) *Page {
	tb.Helper()
	return h.Call(tb, http.MethodPut, g.URI+"/switches/"+cmd, g.Token.AccessToken)
}
