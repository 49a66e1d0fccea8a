package daemon_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
	"golang.org/x/oauth2"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/bridge/daemon/daemontest"
	"github.com/switchbridge/switchbridge/bridge/store"
)

// hubConfig has two locations; the doorbell supports only "on" and the
// broken switch fails every command. Webhooks may reach the tests'
// receivers on loopback besides public addresses (the default).
const hubConfig = `
webhooks:
  allow: [public, 127.0.0.1]
oauth:
  code_lifetime: 1m
locations:
  - id: 1
    name: Home
    switches:
      - {id: kitchen, name: Kitchen light, driver: virtual, initial: off}
      - {id: hall, name: Hall lamp, driver: virtual, initial: on}
      - {id: doorbell, name: Doorbell chime, driver: virtual, commands: [on]}
      - {id: broken, name: Broken plug, driver: virtual, fail: true}
  - id: 2
    name: Garage
    switches:
      - {id: garage-light, name: Garage light, driver: virtual}
`

type fixture struct {
	hub   *daemontest.Harness
	alice *bridge.User
	bob   *bridge.User
	app   daemontest.App
}

const redirect = "https://client.example/cb"

func newFixture(t *testing.T) *fixture {
	t.Helper()
	h := daemontest.Start(t, hubConfig)
	f := &fixture{hub: h}
	f.alice = h.AddUser(t, "alice", "alice-pw", 1, 2)
	f.bob = h.AddUser(t, "bob", "bob-pw", 2)
	f.app = h.AddApp(t, f.alice, true, redirect, "http://127.0.0.1:9/other")
	return f
}

func value(s daemontest.Switch) string {
	if s.Value == nil {
		return "<nil>"
	}
	return *s.Value
}

func TestWholeFlow(t *testing.T) {
	f := newFixture(t)
	h := f.hub
	g := h.Authorize(t, f.app, "alice", "alice-pw", 1, "kitchen", "hall")

	if g.Token.TokenType != "bearer" {
		t.Errorf("token_type = %q, want bearer", g.Token.TokenType)
	}
	if g.Token.Expiry.IsZero() {
		t.Error("token response had no expires_in")
	}

	// Discovery: exactly the spec's record.
	p := h.Call(t, http.MethodGet, h.URL+"/api/apps/endpoints", g.Token.AccessToken)
	var raw []map[string]any
	if err := json.Unmarshal([]byte(p.Body), &raw); err != nil || len(raw) != 1 {
		t.Fatalf("discovery body %s: %v", p.Body, err)
	}
	rec := raw[0]
	keys := []string{}
	for k := range rec {
		keys = append(keys, k)
	}
	if len(rec) != 5 {
		t.Errorf("endpoint record has keys %v, want oauthClient, location, uri, base_url, url", keys)
	}
	if rec["oauthClient"].(map[string]any)["clientId"] != f.app.ClientID {
		t.Errorf("oauthClient = %v", rec["oauthClient"])
	}
	loc := rec["location"].(map[string]any)
	if loc["id"] != float64(1) || loc["name"] != "Home" {
		t.Errorf("location = %v, want id 1 (a number) and name Home", loc)
	}
	url := rec["url"].(string)
	if !strings.HasPrefix(url, "/api/apps/installations/") || rec["base_url"] != h.URL || rec["uri"] != h.URL+url {
		t.Errorf("uri/base_url/url = %v / %v / %v", rec["uri"], rec["base_url"], url)
	}

	// List: only the selected switches, in config order.
	list := h.List(t, g)
	if len(list) != 2 || list[0].Name != "Kitchen light" || value(list[0]) != "off" || list[1].Name != "Hall lamp" || value(list[1]) != "on" {
		t.Fatalf("list = %+v", list)
	}

	// On, then off: 204 and the switches follow.
	for _, cmd := range []string{"on", "off"} {
		p := h.Command(t, g, cmd)
		if p.StatusCode != http.StatusNoContent || p.Body != "" {
			t.Fatalf("PUT %s = %d %q, want 204 and no body", cmd, p.StatusCode, p.Body)
		}
		for _, s := range h.List(t, g) {
			if value(s) != cmd {
				t.Errorf("after %s, %s is %s", cmd, s.Name, value(s))
			}
		}
	}
	// A switch the installation was not granted is untouched.
	if st := mustSwitch(t, h, "garage-light").Device.State(); st.Value != bridge.Off {
		t.Errorf("garage-light changed to %s", st.Value)
	}

	// Any other command: 400 with the spec's message, nothing actuated.
	p = h.Command(t, g, "toggle")
	if p.StatusCode != http.StatusBadRequest || !strings.Contains(p.Body, "not valid for all the switches") {
		t.Errorf("PUT toggle = %d %s", p.StatusCode, p.Body)
	}
	assertErrorBody(t, p, http.StatusBadRequest)

	// The legacy aliases reach the same installation and discovery.
	legacy := strings.Replace(g.URI, "/api/apps/", "/api/smartapps/", 1)
	if p := h.Call(t, http.MethodGet, legacy+"/switches", g.Token.AccessToken); p.StatusCode != http.StatusOK || !strings.Contains(p.Body, "Kitchen light") {
		t.Errorf("legacy installation path = %d %s", p.StatusCode, p.Body)
	}
	if p := h.Call(t, http.MethodGet, h.URL+"/api/smartapps/endpoints", g.Token.AccessToken); p.StatusCode != http.StatusOK || !strings.Contains(p.Body, `"url":"/api/apps/installations/`) {
		t.Errorf("legacy discovery = %d %s", p.StatusCode, p.Body)
	}

	// HEAD answers like GET, without a body; an encoded '/' does not split a
	// segment; PUT through the legacy path works too.
	if p := h.Call(t, http.MethodHead, g.URI+"/switches", g.Token.AccessToken); p.StatusCode != http.StatusOK || p.Body != "" {
		t.Errorf("HEAD /switches = %d %q", p.StatusCode, p.Body)
	}
	if p := h.Call(t, http.MethodPut, g.URI+"/switches%2Fon", g.Token.AccessToken); p.StatusCode != http.StatusNotFound {
		t.Errorf("PUT /switches%%2Fon = %d, want 404", p.StatusCode)
	}
	if p := h.Call(t, http.MethodPut, legacy+"/switches/on", g.Token.AccessToken); p.StatusCode != http.StatusNoContent {
		t.Errorf("PUT through the legacy path = %d", p.StatusCode)
	}

	// Unknown app path and wrong method.
	if p := h.Call(t, http.MethodGet, g.URI+"/lights", g.Token.AccessToken); p.StatusCode != http.StatusNotFound {
		t.Errorf("GET /lights = %d", p.StatusCode)
	}
	if p := h.Call(t, http.MethodPost, g.URI+"/switches", g.Token.AccessToken); p.StatusCode != http.StatusMethodNotAllowed || p.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST /switches = %d Allow=%q", p.StatusCode, p.Header.Get("Allow"))
	}
}

// TestGetOneSwitch covers GET /switches/:id, the row beside PUT
// /switches/:command: one selected switch as {name, value}, 404 for a switch
// the installation was not granted (even one the hub has) or does not exist.
func TestGetOneSwitch(t *testing.T) {
	f := newFixture(t)
	h := f.hub
	g := h.Authorize(t, f.app, "alice", "alice-pw", 1, "kitchen", "hall")

	p := h.Call(t, http.MethodGet, g.URI+"/switches/hall", g.Token.AccessToken)
	if body, n := lastSeenStripped(p.Body); p.StatusCode != http.StatusOK || n != 1 || body != `{"id":"hall","name":"Hall lamp","value":"on","available":true}`+"\n" {
		t.Fatalf("GET /switches/hall = %d %q", p.StatusCode, p.Body)
	}
	if p.Header.Get("Content-Type") != "application/json" {
		t.Errorf("Content-Type = %q", p.Header.Get("Content-Type"))
	}
	if p := h.Command(t, g, "off"); p.StatusCode != http.StatusNoContent {
		t.Fatalf("PUT off = %d %s", p.StatusCode, p.Body)
	}
	if p := h.Call(t, http.MethodGet, g.URI+"/switches/hall", g.Token.AccessToken); !strings.Contains(p.Body, `"value":"off"`) {
		t.Errorf("after off, GET /switches/hall = %d %s", p.StatusCode, p.Body)
	}
	for _, id := range []string{"garage-light", "no-such-switch", "on"} {
		p := h.Call(t, http.MethodGet, g.URI+"/switches/"+id, g.Token.AccessToken)
		if p.StatusCode != http.StatusNotFound {
			t.Errorf("GET /switches/%s = %d %s, want 404", id, p.StatusCode, p.Body)
		}
		assertErrorBody(t, p, http.StatusNotFound)
		if strings.Contains(p.Body, "Garage") {
			t.Errorf("404 for %s leaks a switch the installation may not see: %s", id, p.Body)
		}
	}
	// The command row still answers PUT, and other methods get 405 naming both.
	p = h.Call(t, http.MethodDelete, g.URI+"/switches/hall", g.Token.AccessToken)
	if p.StatusCode != http.StatusMethodNotAllowed || p.Header.Get("Allow") != "GET, HEAD, PUT" {
		t.Errorf("DELETE /switches/hall = %d Allow=%q", p.StatusCode, p.Header.Get("Allow"))
	}
}

func assertErrorBody(t *testing.T, p *daemontest.Page, status int) {
	t.Helper()
	var body struct {
		Error   bool   `json:"error"`
		Type    string `json:"type"`
		Message string `json:"message"`
		Status  int    `json:"status"`
	}
	if err := json.Unmarshal([]byte(p.Body), &body); err != nil {
		t.Fatalf("error body %q: %v", p.Body, err)
	}
	if !body.Error || body.Type != "SmartAppException" || body.Message == "" || body.Status != status {
		t.Errorf("error body = %+v", body)
	}
}

func mustSwitch(t *testing.T, h *daemontest.Harness, id string) *bridge.Switch {
	t.Helper()
	s, ok := h.Switchboard.Switch(id)
	if !ok {
		t.Fatalf("no switch %s", id)
	}
	return s
}

func TestUnsupportedCommandActuatesNothing(t *testing.T) {
	f := newFixture(t)
	h := f.hub
	g := h.Authorize(t, f.app, "alice", "alice-pw", 1, "kitchen", "doorbell")
	if p := h.Command(t, g, "on"); p.StatusCode != http.StatusNoContent {
		t.Fatalf("PUT on = %d %s", p.StatusCode, p.Body)
	}
	p := h.Command(t, g, "off")
	if p.StatusCode != http.StatusNotImplemented {
		t.Fatalf("PUT off with a switch lacking off = %d %s, want 501", p.StatusCode, p.Body)
	}
	assertErrorBody(t, p, http.StatusNotImplemented)
	if !strings.Contains(p.Body, `"id":"doorbell"`) {
		t.Errorf("501 body does not name the doorbell: %s", p.Body)
	}
	// The 501 precheck runs before any device: kitchen is still on.
	for _, s := range h.List(t, g) {
		if value(s) != "on" {
			t.Errorf("%s is %s after a refused off; nothing may be actuated", s.Name, value(s))
		}
	}
}

func TestPartialFailureNamesTheFailedSwitch(t *testing.T) {
	f := newFixture(t)
	h := f.hub
	g := h.Authorize(t, f.app, "alice", "alice-pw", 1, "kitchen", "broken")
	p := h.Command(t, g, "on")
	if p.StatusCode != http.StatusBadGateway {
		t.Fatalf("PUT on with a failing switch = %d %s, want 502", p.StatusCode, p.Body)
	}
	var body struct {
		Failures []bridge.Failure `json:"failures"`
	}
	json.Unmarshal([]byte(p.Body), &body)
	if len(body.Failures) != 1 || body.Failures[0].SwitchID != "broken" || body.Failures[0].Reason != bridge.FailError {
		t.Errorf("failures = %+v", body.Failures)
	}
	// The other switch stays as commanded.
	if st := mustSwitch(t, h, "kitchen").Device.State(); st.Value != bridge.On {
		t.Errorf("kitchen = %s, want on", st.Value)
	}
}

func TestRedirectURIMustMatchExactly(t *testing.T) {
	f := newFixture(t)
	h := f.hub
	cases := []string{
		redirect + "/extra",                   // extra path
		redirect + "/",                        // trailing slash
		"https://CLIENT.example/cb",           // host case
		"HTTPS://client.example/cb",           // scheme case
		"https://client.example/CB",           // path case
		redirect + "?x=1",                     // added query
		"https://client.example@evil.test/cb", // userinfo trick
		"https://evil.test@client.example/cb", // userinfo on the right host
		"https://client.example:8443/cb",      // other port
		"https://client.example:443/cb",       // default port spelled out
		"https://client.example/%63b",         // percent-encoding
		"https://client.example/cb#frag",      // fragment
		"https://client.example/./cb",         // dot segment
		"http://client.example/cb",            // scheme downgrade
		"",                                    // empty
	}
	for _, ru := range cases {
		t.Run(ru, func(t *testing.T) {
			q := url.Values{"response_type": {"code"}, "client_id": {f.app.ClientID}, "scope": {"app"}, "state": {"s1"}}
			if ru != "" {
				q.Set("redirect_uri", ru)
			}
			p := h.NewBrowser().Get(t, "/oauth/authorize?"+q.Encode())
			if p.StatusCode != http.StatusBadRequest {
				t.Errorf("status = %d, want 400 error page", p.StatusCode)
			}
			if loc := p.Header.Get("Location"); loc != "" {
				t.Errorf("redirected to %q; an unvalidated redirect URI must never be followed", loc)
			}
			if !strings.Contains(p.Body, "redirect_uri") {
				t.Errorf("error page does not say what is wrong: %s", p.Body)
			}
		})
	}
	// And unknown, missing or duplicated client ids never redirect either.
	for name, q := range map[string]url.Values{
		"unknown client": {"response_type": {"code"}, "client_id": {"nope"}, "scope": {"app"}, "redirect_uri": {redirect}},
		"missing client": {"response_type": {"code"}, "scope": {"app"}, "redirect_uri": {redirect}},
		"two client ids": {"response_type": {"code"}, "client_id": {f.app.ClientID, f.app.ClientID}, "scope": {"app"}, "redirect_uri": {redirect}},
		"two redirects":  {"response_type": {"code"}, "client_id": {f.app.ClientID}, "scope": {"app"}, "redirect_uri": {redirect, redirect}},
	} {
		p := h.NewBrowser().Get(t, "/oauth/authorize?"+q.Encode())
		if p.StatusCode != http.StatusBadRequest || p.Header.Get("Location") != "" {
			t.Errorf("%s: status %d, Location %q; want a 400 page", name, p.StatusCode, p.Header.Get("Location"))
		}
	}
}

func TestAuthorizeErrorsRedirectPerRFC6749(t *testing.T) {
	f := newFixture(t)
	h := f.hub
	base := func() url.Values {
		return url.Values{"response_type": {"code"}, "client_id": {f.app.ClientID}, "scope": {"app"}, "redirect_uri": {redirect}, "state": {"xyz"}}
	}
	cases := []struct {
		name string
		edit func(url.Values)
		want string
	}{
		{"missing response_type", func(q url.Values) { q.Del("response_type") }, "invalid_request"},
		{"token response_type", func(q url.Values) { q.Set("response_type", "token") }, "unsupported_response_type"},
		{"missing scope", func(q url.Values) { q.Del("scope") }, "invalid_request"},
		{"other scope", func(q url.Values) { q.Set("scope", "admin") }, "invalid_scope"},
		{"duplicate scope", func(q url.Values) { q["scope"] = []string{"app", "app"} }, "invalid_request"},
		{"duplicate response_type", func(q url.Values) { q["response_type"] = []string{"code", "code"} }, "invalid_request"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q := base()
			c.edit(q)
			p := h.NewBrowser().Get(t, "/oauth/authorize?"+q.Encode())
			if p.StatusCode != http.StatusSeeOther {
				t.Fatalf("status %d, want a redirect", p.StatusCode)
			}
			loc, _ := url.Parse(p.Header.Get("Location"))
			if got := loc.Scheme + "://" + loc.Host + loc.Path; got != redirect {
				t.Errorf("redirected to %s", got)
			}
			if loc.Query().Get("error") != c.want || loc.Query().Get("state") != "xyz" {
				t.Errorf("redirect query = %v, want error=%s and state=xyz", loc.Query(), c.want)
			}
			if loc.Query().Has("code") {
				t.Error("an error redirect carried a code")
			}
		})
	}
}

func TestDenyRedirectsAccessDenied(t *testing.T) {
	f := newFixture(t)
	h := f.hub
	cfg := h.OAuthConfig(f.app)
	authURL := cfg.AuthCodeURL("st8")
	b := h.NewBrowser()
	consent := b.Login(t, authURL, "alice", "alice-pw")
	form := daemontest.AuthFields(mustParse(t, authURL).Query())
	form.Set("csrf", consent.CSRF(t))
	form.Set("action", "deny")
	p := b.Post(t, "/oauth/authorize", form)
	loc := mustParse(t, p.Header.Get("Location"))
	if p.StatusCode != http.StatusSeeOther || loc.Query().Get("error") != "access_denied" || loc.Query().Get("state") != "st8" {
		t.Errorf("deny = %d %s", p.StatusCode, loc)
	}
	if n, _ := h.Accounts.CountInstallations(context.Background()); n != 0 {
		t.Errorf("deny installed the app (%d installations)", n)
	}
}

func mustParse(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestPagesAreHardened(t *testing.T) {
	f := newFixture(t)
	h := f.hub
	authURL := h.OAuthConfig(f.app).AuthCodeURL("s")
	b := h.NewBrowser()
	p := b.Get(t, authURL)
	hardened := func(what string, p *daemontest.Page) {
		t.Helper()
		for k, want := range map[string]string{
			"X-Frame-Options":         "DENY",
			"Referrer-Policy":         "no-referrer",
			"Content-Security-Policy": "frame-ancestors 'none'",
			"Cache-Control":           "no-store",
		} {
			if got := p.Header.Get(k); !strings.Contains(got, want) {
				t.Errorf("%s: %s = %q, want %q", what, k, got, want)
			}
		}
	}
	hardened("login page", p)
	hardened("error page", h.NewBrowser().Get(t, "/oauth/authorize?client_id=nope"))
	var session *http.Cookie
	for _, c := range p.Cookies() {
		if c.Name == "switchbridge_session" {
			session = c
		}
	}
	if session == nil || !session.HttpOnly || session.SameSite != http.SameSiteLaxMode {
		t.Fatalf("session cookie = %+v, want HttpOnly and SameSite=Lax", session)
	}

	// A login POST without the page's CSRF token is refused.
	form := daemontest.AuthFields(mustParse(t, authURL).Query())
	form.Set("username", "alice")
	form.Set("password", "alice-pw")
	if p := b.Post(t, "/oauth/login", form); p.StatusCode != http.StatusForbidden {
		t.Errorf("login without csrf = %d, want 403", p.StatusCode)
	}
	form.Set("csrf", "forged")
	if p := b.Post(t, "/oauth/login", form); p.StatusCode != http.StatusForbidden {
		t.Errorf("login with a forged csrf = %d, want 403", p.StatusCode)
	}

	// A wrong password: 303 back to the login page with a message.
	form.Set("csrf", p.CSRF(t))
	form.Set("password", "wrong")
	p2 := b.Post(t, "/oauth/login", form)
	if p2.StatusCode != http.StatusSeeOther {
		t.Fatalf("bad login = %d, want 303", p2.StatusCode)
	}
	if p3 := b.Get(t, p2.Header.Get("Location")); !strings.Contains(p3.Body, "wrong password") {
		t.Errorf("login page after a bad password does not say so")
	}

	// The consent form refuses a forged CSRF token, and the login rotated
	// the session (the anonymous CSRF token no longer works).
	oldCSRF := p.CSRF(t)
	consent := b.Login(t, authURL, "alice", "alice-pw")
	cf := daemontest.AuthFields(mustParse(t, authURL).Query())
	cf.Set("action", "approve")
	cf.Set("location", "1")
	cf.Set("switch", "kitchen")
	cf.Set("csrf", oldCSRF)
	if p := b.Post(t, "/oauth/authorize", cf); p.StatusCode != http.StatusForbidden {
		t.Errorf("consent with the pre-login csrf = %d, want 403", p.StatusCode)
	}
	hardened("consent page", consent)
	hardened("403 answer to a POST", b.Post(t, "/oauth/authorize", cf))
	// The consent page lists only alice's locations, and says which switch
	// cannot do everything.
	if !strings.Contains(consent.Body, "Install into Home") || !strings.Contains(consent.Body, "Install into Garage") {
		t.Errorf("consent page misses a location of alice's")
	}
	if !strings.Contains(consent.Body, "Doorbell chime <span class=\"note\">(can only be switched on)</span>") {
		t.Errorf("consent page does not say the doorbell can only be switched on")
	}
}

func TestUserCannotSelectOutsideTheirLocations(t *testing.T) {
	f := newFixture(t)
	h := f.hub
	authURL := h.OAuthConfig(f.app).AuthCodeURL("s")
	cases := []struct {
		name     string
		location int64
		switches []string
		msg      string
	}{
		{"another user's location", 1, []string{"kitchen"}, "Choose one of your locations"},
		{"switch outside the location", 2, []string{"garage-light", "kitchen"}, "not in Garage"},
		{"no switch", 2, nil, "at least one switch"},
		{"unknown switch", 2, []string{"nope"}, "not in Garage"},
		{"location that does not exist", 99, []string{"garage-light"}, "Choose one of your locations"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := h.NewBrowser()
			consent := b.Login(t, authURL, "bob", "bob-pw")
			if strings.Contains(consent.Body, "Install into Home") {
				t.Error("bob's consent page offers Home, which he does not belong to")
			}
			p := b.Consent(t, consent, authURL, c.location, c.switches...)
			if p.StatusCode != http.StatusSeeOther || strings.HasPrefix(p.Header.Get("Location"), redirect) {
				t.Fatalf("status %d to %q; want 303 back to the consent page", p.StatusCode, p.Header.Get("Location"))
			}
			back := b.Get(t, p.Header.Get("Location"))
			if !strings.Contains(back.Body, c.msg) {
				t.Errorf("page after refusal does not say %q", c.msg)
			}
			if n, _ := h.Accounts.CountInstallations(context.Background()); n != 0 {
				t.Errorf("%d installations created", n)
			}
		})
	}
}

func TestUnpublishedAppOnlyForItsOwner(t *testing.T) {
	f := newFixture(t)
	h := f.hub
	private := h.AddApp(t, f.alice, false, redirect)
	// Bob may not install alice's unpublished app.
	authURL := h.OAuthConfig(private).AuthCodeURL("s")
	b := h.NewBrowser()
	p := b.Get(t, authURL)
	form := daemontest.AuthFields(mustParse(t, authURL).Query())
	form.Set("csrf", p.CSRF(t))
	form.Set("username", "bob")
	form.Set("password", "bob-pw")
	p = b.Post(t, "/oauth/login", form)
	p = b.Get(t, p.Header.Get("Location"))
	loc := mustParse(t, p.Header.Get("Location"))
	if p.StatusCode != http.StatusSeeOther || loc.Query().Get("error") != "access_denied" {
		t.Errorf("bob installing an unpublished app = %d %s, want access_denied", p.StatusCode, loc)
	}
	// Alice, its developer, may.
	g := h.Authorize(t, private, "alice", "alice-pw", 2, "garage-light")
	if len(h.List(t, g)) != 1 {
		t.Error("owner's installation of the unpublished app does not list its switch")
	}
}

func TestCodeIsSingleUseAndReplayRevokes(t *testing.T) {
	f := newFixture(t)
	h := f.hub
	cfg := h.OAuthConfig(f.app)
	code := authorizeCode(t, h, cfg, "alice", "alice-pw", 1, "kitchen")
	tok, err := cfg.Exchange(context.Background(), code)
	if err != nil {
		t.Fatal(err)
	}
	uri := h.Endpoints(t, tok.AccessToken)[0].URI
	g := daemontest.Grant{Token: tok, URI: uri}
	if len(h.List(t, g)) != 1 {
		t.Fatal("token does not work")
	}
	_, err = cfg.Exchange(context.Background(), code)
	assertOAuthError(t, err, "invalid_grant")
	// The replay revoked what the first use issued.
	if p := h.Call(t, http.MethodGet, uri+"/switches", tok.AccessToken); p.StatusCode != http.StatusUnauthorized {
		t.Errorf("token after code replay = %d, want 401", p.StatusCode)
	}
}

func authorizeCode(t *testing.T, h *daemontest.Harness, cfg *oauth2.Config, user, pw string, loc int64, switches ...string) string {
	t.Helper()
	authURL := cfg.AuthCodeURL("s")
	b := h.NewBrowser()
	consent := b.Login(t, authURL, user, pw)
	p := b.Consent(t, consent, authURL, loc, switches...)
	code := mustParse(t, p.Header.Get("Location")).Query().Get("code")
	if code == "" {
		t.Fatalf("no code: %d %s", p.StatusCode, p.Header.Get("Location"))
	}
	if len(code) < 43 { // 256 bits in base64url
		t.Errorf("code %q is shorter than 128 bits of randomness allow", code)
	}
	return code
}

func assertOAuthError(t *testing.T, err error, code string) {
	t.Helper()
	re, ok := err.(*oauth2.RetrieveError)
	if !ok {
		t.Fatalf("err = %v, want an OAuth error %s", err, code)
	}
	if re.ErrorCode != code {
		t.Errorf("error = %q (%s), want %q", re.ErrorCode, re.ErrorDescription, code)
	}
	if re.Response.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("token error without Cache-Control: no-store")
	}
}

func TestConcurrentRedemptionHasOneWinner(t *testing.T) {
	f := newFixture(t)
	h := f.hub
	cfg := h.OAuthConfig(f.app)
	code := authorizeCode(t, h, cfg, "alice", "alice-pw", 1, "kitchen")
	const n = 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	var winner string
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if tok, err := cfg.Exchange(context.Background(), code); err == nil {
				mu.Lock()
				wins++
				winner = tok.AccessToken
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if wins != 1 {
		t.Errorf("%d of %d concurrent redemptions won, want exactly 1", wins, n)
	}
	// The others were second uses of the code, so the winner's token is
	// revoked (RFC 6749 §4.1.2), as the API reference says.
	if p := h.Call(t, http.MethodGet, h.URL+"/api/apps/endpoints", winner); p.StatusCode != http.StatusUnauthorized || !strings.Contains(p.Header.Get("WWW-Authenticate"), "revoked") {
		t.Errorf("winning token after concurrent replays = %d %q, want 401 revoked", p.StatusCode, p.Header.Get("WWW-Authenticate"))
	}
}

func TestCodeIsBoundToClientAndRedirect(t *testing.T) {
	f := newFixture(t)
	h := f.hub
	other := h.AddApp(t, f.alice, true, redirect)
	cfg := h.OAuthConfig(f.app)
	code := authorizeCode(t, h, cfg, "alice", "alice-pw", 1, "kitchen")

	// Another client cannot redeem it.
	_, err := h.OAuthConfig(other).Exchange(context.Background(), code)
	assertOAuthError(t, err, "invalid_grant")
	// A failed client authentication does not burn it.
	bad := *cfg
	bad.ClientSecret = "wrong"
	_, err = bad.Exchange(context.Background(), code)
	assertOAuthError(t, err, "invalid_client")
	// Nor does the other registered redirect URI; the one used must be given.
	wrong := *cfg
	wrong.RedirectURL = f.app.RedirectURIs[1]
	_, err = wrong.Exchange(context.Background(), code)
	assertOAuthError(t, err, "invalid_grant")
	// The right client, secret and redirect URI still get the token.
	if _, err := cfg.Exchange(context.Background(), code); err != nil {
		t.Fatalf("rightful exchange after the failures: %v", err)
	}
}

func TestTokenEndpointRules(t *testing.T) {
	f := newFixture(t)
	h := f.hub
	post := func(form url.Values, basicUser, basicPass string) *daemontest.Page {
		req, _ := http.NewRequest(http.MethodPost, h.URL+"/oauth/token", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if basicUser != "" {
			req.SetBasicAuth(basicUser, basicPass)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		p := &daemontest.Page{Response: resp}
		var sb strings.Builder
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			sb.Write(buf[:n])
			if err != nil {
				break
			}
		}
		resp.Body.Close()
		p.Body = sb.String()
		return p
	}
	errOf := func(p *daemontest.Page) string {
		var e struct {
			Error string `json:"error"`
		}
		json.Unmarshal([]byte(p.Body), &e)
		return e.Error
	}
	cfg := h.OAuthConfig(f.app)

	// GET is refused.
	resp, err := http.Get(h.URL + "/oauth/token")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("GET /oauth/token = %d (Cache-Control %q)", resp.StatusCode, resp.Header.Get("Cache-Control"))
	}

	// Basic credentials are URL-decoded (RFC 6749 §2.3.1): a client id with a
	// percent-encoded '-' authenticates.
	code := authorizeCode(t, h, cfg, "alice", "alice-pw", 1, "kitchen")
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirect}}
	encodedID := strings.Replace(f.app.ClientID, "-", "%2D", 1)
	p := post(form, encodedID, f.app.Secret)
	if p.StatusCode != http.StatusOK {
		t.Fatalf("Basic with a URL-encoded id = %d %s", p.StatusCode, p.Body)
	}
	var tr map[string]any
	json.Unmarshal([]byte(p.Body), &tr)
	if tr["token_type"] != "bearer" || tr["scope"] != "app" || tr["expires_in"] == nil || tr["access_token"] == "" {
		t.Errorf("token response = %v", tr)
	}
	if p.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("token response Cache-Control = %q", p.Header.Get("Cache-Control"))
	}

	// Client credentials in the form work too.
	code = authorizeCode(t, h, cfg, "alice", "alice-pw", 1, "kitchen")
	form = url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirect}, "client_id": {f.app.ClientID}, "client_secret": {f.app.Secret}}
	if p := post(form, "", ""); p.StatusCode != http.StatusOK {
		t.Errorf("form client auth = %d %s", p.StatusCode, p.Body)
	}

	code = authorizeCode(t, h, cfg, "alice", "alice-pw", 1, "kitchen")
	good := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirect}}
	cases := []struct {
		name       string
		form       url.Values
		user, pass string
		status     int
		err        string
	}{
		{"wrong Basic secret", good, f.app.ClientID, "nope", 401, "invalid_client"},
		{"unknown client", good, "who", "nope", 401, "invalid_client"},
		{"no client auth", good, "", "", 401, "invalid_client"},
		{"Basic and a different form secret", with(good, "client_secret", "other"), f.app.ClientID, f.app.Secret, 400, "invalid_request"},
		{"Basic and a different form client", with(with(good, "client_id", "other"), "client_secret", f.app.Secret), f.app.ClientID, f.app.Secret, 400, "invalid_request"},
		{"other grant type", with(good, "grant_type", "password"), f.app.ClientID, f.app.Secret, 400, "unsupported_grant_type"},
		{"missing code", without(good, "code"), f.app.ClientID, f.app.Secret, 400, "invalid_request"},
		{"missing redirect_uri", without(good, "redirect_uri"), f.app.ClientID, f.app.Secret, 400, "invalid_request"},
		{"duplicated code", url.Values{"grant_type": {"authorization_code"}, "code": {code, code}, "redirect_uri": {redirect}}, f.app.ClientID, f.app.Secret, 400, "invalid_request"},
		{"unknown code", with(good, "code", "nope"), f.app.ClientID, f.app.Secret, 400, "invalid_grant"},
	}
	for _, c := range cases {
		p := post(c.form, c.user, c.pass)
		if p.StatusCode != c.status || errOf(p) != c.err {
			t.Errorf("%s: %d %s, want %d %s", c.name, p.StatusCode, p.Body, c.status, c.err)
		}
		if c.status == 401 && !strings.HasPrefix(p.Header.Get("WWW-Authenticate"), "Basic") {
			t.Errorf("%s: 401 without a Basic challenge", c.name)
		}
		if p.Header.Get("Cache-Control") != "no-store" {
			t.Errorf("%s: no Cache-Control: no-store", c.name)
		}
	}
	// None of those burnt the code. Basic with the same credentials in the
	// form too, as clients of the original platform send them, is accepted.
	both := with(with(good, "client_id", f.app.ClientID), "client_secret", f.app.Secret)
	if p := post(both, f.app.ClientID, f.app.Secret); p.StatusCode != http.StatusOK {
		t.Errorf("code after refused attempts, Basic and form credentials = %d %s", p.StatusCode, p.Body)
	}

	// A huge body is refused with a clear error, not read whole.
	huge := url.Values{"grant_type": {"authorization_code"}, "code": {strings.Repeat("a", 200<<10)}}
	if p := post(huge, f.app.ClientID, f.app.Secret); p.StatusCode != http.StatusBadRequest || !strings.Contains(p.Body, "larger than") {
		t.Errorf("huge body = %d %s", p.StatusCode, p.Body)
	}
}

func with(v url.Values, k, val string) url.Values {
	out := url.Values{}
	for kk, vv := range v {
		out[kk] = append([]string(nil), vv...)
	}
	out.Set(k, val)
	return out
}

func without(v url.Values, k string) url.Values {
	out := with(v, "x", "")
	out.Del("x")
	out.Del(k)
	return out
}

func TestBearerRules(t *testing.T) {
	f := newFixture(t)
	h := f.hub
	a := h.Authorize(t, f.app, "alice", "alice-pw", 1, "kitchen")
	b := h.Authorize(t, f.app, "bob", "bob-pw", 2, "garage-light")

	checks := []struct {
		name      string
		method    string
		url       string
		token     string
		status    int
		challenge string
	}{
		{"no token", "GET", a.URI + "/switches", "", 401, `Bearer realm="switchbridge"`},
		{"unknown token", "GET", a.URI + "/switches", "garbage", 401, `error="invalid_token"`},
		{"token in query string", "GET", a.URI + "/switches?access_token=" + a.Token.AccessToken, "", 400, `error="invalid_request"`},
		{"unknown token in query string", "GET", a.URI + "/switches?access_token=garbage", "", 401, `error="invalid_token"`},
		{"another scheme", "GET", a.URI + "/switches", "basic:dXNlcjpwYXNz", 401, `Bearer realm="switchbridge"`},
		{"malformed bearer", "GET", a.URI + "/switches", "bearer:a b", 400, `error="invalid_request"`},
		{"A's token on B", "GET", b.URI + "/switches", a.Token.AccessToken, 403, `error="insufficient_scope"`},
		{"A's token commanding B", "PUT", b.URI + "/switches/on", a.Token.AccessToken, 403, `error="insufficient_scope"`},
		{"discovery without token", "GET", h.URL + "/api/apps/endpoints", "", 401, `Bearer realm="switchbridge"`},
		{"discovery with query token", "GET", h.URL + "/api/apps/endpoints?access_token=" + a.Token.AccessToken, "", 400, `error="invalid_request"`},
		{"discovery by client id", "GET", h.URL + "/api/smartapps/endpoints/" + f.app.ClientID, a.Token.AccessToken, 404, ""},
		{"unknown installation", "GET", h.URL + "/api/apps/installations/nope/switches", a.Token.AccessToken, 403, `error="insufficient_scope"`},
		{"header and query token", "GET", a.URI + "/switches?access_token=" + a.Token.AccessToken, a.Token.AccessToken, 400, `error="invalid_request"`},
	}
	for _, c := range checks {
		p := h.CallAuth(t, c.method, c.url, authHeader(c.token))
		if p.StatusCode != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, p.StatusCode, p.Body, c.status)
		}
		ch := p.Header.Get("WWW-Authenticate")
		if !strings.Contains(ch, c.challenge) {
			t.Errorf("%s: WWW-Authenticate = %q, want it to contain %q", c.name, ch, c.challenge)
		}
		if c.status == 401 && strings.HasPrefix(c.challenge, "Bearer") && ch != c.challenge {
			// RFC 6750 §3.1: no error code without credentials.
			t.Errorf("%s: WWW-Authenticate = %q, want exactly %q", c.name, ch, c.challenge)
		}
	}
	// Bob's switch was not touched by A's attempt.
	if st := mustSwitch(t, h, "garage-light").Device.State(); st.Value != bridge.Off {
		t.Errorf("garage-light = %s after a refused cross-installation command", st.Value)
	}
}

// authHeader is the Authorization header of a test case's token: "" for
// none, "scheme:credentials" for another scheme, else a bearer token.
func authHeader(token string) string {
	if scheme, cred, ok := strings.Cut(token, ":"); ok {
		return scheme + " " + cred
	}
	if token == "" {
		return ""
	}
	return "Bearer " + token
}

func TestExpiredTokenAndCode(t *testing.T) {
	h := daemontest.Start(t, strings.Replace(hubConfig, "code_lifetime: 1m", "code_lifetime: 1s\n  token_lifetime: 1s", 1))
	alice := h.AddUser(t, "alice", "alice-pw", 1)
	app := h.AddApp(t, alice, true, redirect)
	cfg := h.OAuthConfig(app)
	g := h.Authorize(t, app, "alice", "alice-pw", 1, "kitchen")
	if time.Until(g.Token.Expiry) > 2*time.Second {
		t.Errorf("expires_in does not follow token_lifetime: expiry %s", g.Token.Expiry)
	}
	code := authorizeCode(t, h, cfg, "alice", "alice-pw", 1, "kitchen")
	time.Sleep(1100 * time.Millisecond) // both lifetimes are 1s
	p := h.Call(t, http.MethodGet, g.URI+"/switches", g.Token.AccessToken)
	if p.StatusCode != http.StatusUnauthorized || !strings.Contains(p.Header.Get("WWW-Authenticate"), "expired") {
		t.Errorf("expired token = %d %q", p.StatusCode, p.Header.Get("WWW-Authenticate"))
	}
	_, err := cfg.Exchange(context.Background(), code)
	assertOAuthError(t, err, "invalid_grant")
}

func TestReinstallKeepsOneInstallation(t *testing.T) {
	f := newFixture(t)
	h := f.hub
	g1 := h.Authorize(t, f.app, "alice", "alice-pw", 1, "kitchen")
	g2 := h.Authorize(t, f.app, "alice", "alice-pw", 1, "kitchen", "hall")
	if g1.URI != g2.URI {
		t.Errorf("authorizing the same app into the same location again made a second installation: %s vs %s", g1.URI, g2.URI)
	}
	if n := len(h.List(t, g1)); n != 2 {
		t.Errorf("older token sees %d switches, want the new selection of 2", n)
	}
}

func TestEverythingSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	h := daemontest.StartWith(t, daemontest.Options{Config: hubConfig, DataDir: dir})
	bob := h.AddUser(t, "bob", "bob-pw", 2)
	app := h.AddApp(t, bob, false, redirect)
	g := h.Authorize(t, app, "bob", "bob-pw", 2, "garage-light")
	if p := h.Command(t, g, "on"); p.StatusCode != http.StatusNoContent {
		t.Fatalf("on = %d", p.StatusCode)
	}
	h.Stop()

	h2 := daemontest.StartWith(t, daemontest.Options{Config: hubConfig, DataDir: dir})
	if h2.URL != h.URL {
		// A new port: the installation URI moves with base_url.
		g.URI = strings.Replace(g.URI, h.URL, h2.URL, 1)
	}
	list := h2.List(t, g)
	if len(list) != 1 || value(list[0]) != "on" {
		t.Errorf("after restart: %+v, want the token to work and garage-light restored to on", list)
	}
	if eps := h2.Endpoints(t, g.Token.AccessToken); len(eps) != 1 || eps[0].OAuthClient.ClientID != app.ClientID {
		t.Errorf("discovery after restart = %+v", eps)
	}
}

// TestCommandIsStoredBeforeItIsAnswered checks, right after each 204,
// what a restarted process would find: the database with the value
// journal replayed over it. The background writer gathers values for half
// a second, so only the write-through of a command can pass this.
func TestCommandIsStoredBeforeItIsAnswered(t *testing.T) {
	f := newFixture(t)
	h := f.hub
	g := h.Authorize(t, f.app, "alice", "alice-pw", 2, "garage-light")
	other, err := store.Open(context.Background(), h.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for _, cmd := range []string{"on", "off", "on"} {
		if p := h.Command(t, g, cmd); p.StatusCode != http.StatusNoContent {
			t.Fatalf("PUT %s = %d", cmd, p.StatusCode)
		}
		vals, err := other.SwitchValues(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		journal, err := store.ReadJournal(h.DataDir)
		if err != nil {
			t.Fatal(err)
		}
		got := vals["garage-light"]
		for _, v := range journal {
			if v.SwitchID == "garage-light" {
				got = v.Value // replayed in order, the last one wins
			}
		}
		if got != bridge.Value(cmd) {
			t.Fatalf("after PUT %s answered 204, a restart would find %q", cmd, got)
		}
	}
}

func TestLoginThrottling(t *testing.T) {
	f := newFixture(t)
	h := f.hub
	authURL := h.OAuthConfig(f.app).AuthCodeURL("s")
	b := h.NewBrowser()
	login := func(user, pw string) string {
		p := b.Get(t, authURL)
		form := daemontest.AuthFields(mustParse(t, authURL).Query())
		form.Set("csrf", p.CSRF(t))
		form.Set("username", user)
		form.Set("password", pw)
		p = b.Post(t, "/oauth/login", form)
		return b.Get(t, p.Header.Get("Location")).Body
	}
	for i := 0; i < 5; i++ {
		if body := login("alice", "guess"); !strings.Contains(body, "wrong password") {
			t.Fatalf("attempt %d: %s", i, body)
		}
	}
	// Locked: even the right password is refused now.
	if body := login("alice", "alice-pw"); !strings.Contains(body, "Too many failed logins") || strings.Contains(body, "Allow Test app") {
		t.Errorf("sixth attempt with the right password got through the lock:\n%s", body)
	}
	// Another user from the same address is not locked out.
	if body := h.NewBrowser().Login(t, authURL, "bob", "bob-pw").Body; !strings.Contains(body, "Allow Test app") {
		t.Errorf("bob was locked out by alice's failures")
	}
}

func TestPKCE(t *testing.T) {
	f := newFixture(t)
	h := f.hub
	cfg := h.OAuthConfig(f.app)
	codeFor := func(opts ...oauth2.AuthCodeOption) string {
		authURL := cfg.AuthCodeURL("s", opts...)
		b := h.NewBrowser()
		consent := b.Login(t, authURL, "alice", "alice-pw")
		p := b.Consent(t, consent, authURL, 1, "kitchen")
		code := mustParse(t, p.Header.Get("Location")).Query().Get("code")
		if code == "" {
			t.Fatalf("no code: %d %s", p.StatusCode, p.Header.Get("Location"))
		}
		return code
	}
	ctx := context.Background()
	verifier := oauth2.GenerateVerifier()
	code := codeFor(oauth2.S256ChallengeOption(verifier))

	_, err := cfg.Exchange(ctx, code)
	assertOAuthError(t, err, "invalid_grant") // no verifier
	_, err = cfg.Exchange(ctx, code, oauth2.VerifierOption(oauth2.GenerateVerifier()))
	assertOAuthError(t, err, "invalid_grant") // another verifier
	tok, err := cfg.Exchange(ctx, code, oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatalf("exchange with the right verifier after refused ones: %v", err)
	}
	if eps := h.Endpoints(t, tok.AccessToken); len(eps) != 1 {
		t.Errorf("PKCE token does not work: %v", eps)
	}

	// A verifier for a code issued without a challenge is a downgrade.
	code = codeFor()
	_, err = cfg.Exchange(ctx, code, oauth2.VerifierOption(verifier))
	assertOAuthError(t, err, "invalid_grant")

	// plain, or a malformed challenge, is refused at the authorization.
	for name, q := range map[string]url.Values{
		"plain":        {"code_challenge": {verifier}, "code_challenge_method": {"plain"}},
		"no method":    {"code_challenge": {verifier}},
		"short":        {"code_challenge": {"abc"}, "code_challenge_method": {"S256"}},
		"no challenge": {"code_challenge_method": {"S256"}},
	} {
		u := mustParse(t, cfg.AuthCodeURL("s"))
		v := u.Query()
		for k, vs := range q {
			v[k] = vs
		}
		u.RawQuery = v.Encode()
		p := h.NewBrowser().Get(t, u.String())
		if loc := mustParse(t, p.Header.Get("Location")); p.StatusCode != http.StatusSeeOther || loc.Query().Get("error") != "invalid_request" {
			t.Errorf("%s: %d %s, want a redirect with invalid_request", name, p.StatusCode, loc)
		}
	}
}

// TestOversizedHeadersAreRefused: the server caps header size (a bearer
// token and a few cookies fit many times over).
func TestOversizedHeadersAreRefused(t *testing.T) {
	h := daemontest.Start(t, hubConfig)
	req, _ := http.NewRequest(http.MethodGet, h.URL+"/api/apps/endpoints", nil)
	req.Header.Set("Authorization", "Bearer "+strings.Repeat("x", 64<<10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("64 KiB of headers = %d, want 431", resp.StatusCode)
	}
}

// TestLoginBurstCannotOutrunTheLock fires a burst of wrong logins at once:
// password checks run two at a time, and each re-checks the lock when its
// turn comes, so only a handful of guesses are ever checked.
func TestLoginBurstCannotOutrunTheLock(t *testing.T) {
	f := newFixture(t)
	h := f.hub
	// A real-cost hash, as user add makes: checks slow enough for a burst
	// to queue behind them.
	hash, _ := bcrypt.GenerateFromPassword([]byte("carol-pw"), bcrypt.DefaultCost)
	if _, err := h.Accounts.CreateUser(context.Background(), "carol", hash, []int64{1}); err != nil {
		t.Fatal(err)
	}
	authURL := h.OAuthConfig(f.app).AuthCodeURL("s")
	const n = 16
	results := make(chan string, n)
	var wg sync.WaitGroup
	for range n {
		b := h.NewBrowser()
		p := b.Get(t, authURL) // sessions and CSRF tokens first, then the burst
		form := daemontest.AuthFields(mustParse(t, authURL).Query())
		form.Set("csrf", p.CSRF(t))
		form.Set("username", "carol")
		form.Set("password", "guess")
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := b.Client.PostForm(h.URL+"/oauth/login", form)
			if err != nil {
				results <- err.Error()
				return
			}
			resp.Body.Close()
			next, err := b.Client.Get(h.URL + resp.Header.Get("Location"))
			if err != nil {
				results <- err.Error()
				return
			}
			body, _ := io.ReadAll(next.Body)
			next.Body.Close()
			results <- string(body)
		}()
	}
	wg.Wait()
	close(results)
	checked, throttled := 0, 0
	for body := range results {
		switch {
		case strings.Contains(body, "wrong password"):
			checked++
		case strings.Contains(body, "Too many failed logins"):
			throttled++
		default:
			t.Errorf("unexpected answer: %.200s", body)
		}
	}
	// 5 failures lock the name; at most one more check was already running.
	if checked > 6 || checked+throttled != n {
		t.Errorf("%d passwords checked, %d throttled, of %d: a burst outran the lock", checked, throttled, n)
	}
}

// TestDiscoveryErrorIsTheAPIErrorBody: discovery (the platform role)
// answers its errors with the installation API's body, so a client parses
// one shape. A reload that removes an installation's location makes
// discovery 404 naming it; the installation API answers that installation
// with the same body.
func TestDiscoveryErrorIsTheAPIErrorBody(t *testing.T) {
	f := newFixture(t)
	h := f.hub
	g := h.Authorize(t, f.app, "alice", "alice-pw", 2, "garage-light")
	next := hubConfig[:strings.Index(hubConfig, "  - id: 2\n")]
	cfg, err := config.Load("next.yaml", config.Text("server: {listen: 127.0.0.1:0, metrics_listen: \"off\"}\ndata_dir: "+h.DataDir+"\n"+next))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Reload(context.Background(), cfg); err != nil {
		t.Fatalf("reload: %v", err)
	}
	p := h.Call(t, http.MethodGet, h.URL+"/api/apps/endpoints", g.Token.AccessToken)
	if p.StatusCode != http.StatusNotFound || !strings.Contains(p.Body, "location 2") {
		t.Fatalf("discovery after its location went = %d %s, want 404 naming location 2", p.StatusCode, p.Body)
	}
	assertErrorBody(t, p, http.StatusNotFound)
	p = h.Call(t, http.MethodGet, g.URI+"/switches", g.Token.AccessToken)
	if p.StatusCode != http.StatusNotFound {
		t.Fatalf("API after its location went = %d %s, want 404", p.StatusCode, p.Body)
	}
	assertErrorBody(t, p, http.StatusNotFound)
}

// TestOneSwitchCommand covers PUT /switches/:id/:command and the id and
// available fields of switch objects: the one switch is commanded under the
// group command's rules, and a switch not granted is 404 whether or not the
// hub has it.
func TestOneSwitchCommand(t *testing.T) {
	f := newFixture(t)
	h := f.hub
	g := h.Authorize(t, f.app, "alice", "alice-pw", 1, "kitchen", "hall", "doorbell", "broken")

	list := h.List(t, g)
	if len(list) != 4 || list[0].ID != "kitchen" || list[1].ID != "hall" || !list[0].Available || !list[1].Available {
		t.Fatalf("list = %+v, want ids and available", list)
	}
	if p := h.Call(t, http.MethodPut, g.URI+"/switches/kitchen/on", g.Token.AccessToken); p.StatusCode != http.StatusNoContent || p.Body != "" {
		t.Fatalf("PUT /switches/kitchen/on = %d %q, want 204", p.StatusCode, p.Body)
	}
	if v := mustSwitch(t, h, "kitchen").Device.State().Value; v != bridge.On {
		t.Errorf("kitchen = %s after PUT /switches/kitchen/on", v)
	}
	if p := h.Call(t, http.MethodPut, g.URI+"/switches/hall/off", g.Token.AccessToken); p.StatusCode != http.StatusNoContent {
		t.Fatalf("PUT /switches/hall/off = %d %s", p.StatusCode, p.Body)
	}
	// Only the named switch moved.
	if v := mustSwitch(t, h, "kitchen").Device.State().Value; v != bridge.On {
		t.Errorf("kitchen = %s after PUT /switches/hall/off", v)
	}
	for _, c := range []struct {
		path   string
		status int
		body   string
	}{
		{"/switches/kitchen/toggle", http.StatusBadRequest, "not valid for all the switches"},
		{"/switches/garage-light/on", http.StatusNotFound, ""}, // the hub has it; not granted
		{"/switches/no-such/on", http.StatusNotFound, ""},
		{"/switches/doorbell/off", http.StatusNotImplemented, `"id":"doorbell"`},
		{"/switches/broken/on", http.StatusBadGateway, `"id":"broken"`},
	} {
		p := h.Call(t, http.MethodPut, g.URI+c.path, g.Token.AccessToken)
		if p.StatusCode != c.status || !strings.Contains(p.Body, c.body) {
			t.Errorf("PUT %s = %d %s, want %d with %q", c.path, p.StatusCode, p.Body, c.status, c.body)
		}
		assertErrorBody(t, p, c.status)
		if strings.Contains(p.Body, "Garage") {
			t.Errorf("PUT %s leaks a switch the installation may not see: %s", c.path, p.Body)
		}
	}
	if st := mustSwitch(t, h, "garage-light").Device.State(); st.Value != bridge.Off {
		t.Errorf("garage-light changed to %s", st.Value)
	}
	if p := h.Call(t, http.MethodGet, g.URI+"/switches/kitchen/on", g.Token.AccessToken); p.StatusCode != http.StatusMethodNotAllowed || p.Header.Get("Allow") != "PUT" {
		t.Errorf("GET /switches/kitchen/on = %d Allow=%q, want 405 PUT", p.StatusCode, p.Header.Get("Allow"))
	}
}

// lastSeenStripped is a JSON answer with each switch's last_seen taken
// out (its time differs from run to run), and how many there were.
func lastSeenStripped(body string) (string, int) {
	re := regexp.MustCompile(`,"last_seen":"[^"]+"`)
	return re.ReplaceAllString(body, ""), len(re.FindAllString(body, -1))
}
