package daemon_test

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/bridge/daemon"
	"github.com/switchbridge/switchbridge/bridge/daemon/daemontest"
	"github.com/switchbridge/switchbridge/bridge/infra/certs/certstest"
	"github.com/switchbridge/switchbridge/bridge/infra/logtest"
	"github.com/switchbridge/switchbridge/bridge/platform/oauth"
	"github.com/switchbridge/switchbridge/bridge/store"
	"github.com/switchbridge/switchbridge/drivers/builtin"
)

// tryLogin opens the login page in b, logs in, and returns the page the
// hub sends the browser to: the consent page, or the login page again
// with a message.
func tryLogin(t *testing.T, b *daemontest.Browser, authURL, user, pw string) string {
	t.Helper()
	p := b.Get(t, authURL)
	form := daemontest.AuthFields(mustParse(t, authURL).Query())
	form.Set("csrf", p.CSRF(t))
	form.Set("username", user)
	form.Set("password", pw)
	p = b.Post(t, "/oauth/login", form)
	if p.StatusCode != http.StatusSeeOther {
		t.Fatalf("login answered %d, want 303:\n%s", p.StatusCode, p.Body)
	}
	return b.Get(t, p.Header.Get("Location")).Body
}

const (
	consented = "Allow Test app"
	throttled = "Too many failed logins"
	wrongPw   = "wrong password"
)

// TestAttackerElsewhereDoesNotLockTheUserOut: wrong passwords for alice
// from one address slow that address only; alice logs in at once from
// another.
func TestAttackerElsewhereDoesNotLockTheUserOut(t *testing.T) {
	f := newFixture(t)
	h := f.hub
	authURL := h.OAuthConfig(f.app).AuthCodeURL("s")
	attacker := h.NewBrowser(daemontest.From("127.0.0.2"))
	for i := 0; i < 5; i++ {
		if body := tryLogin(t, attacker, authURL, "alice", "guess"); !strings.Contains(body, wrongPw) {
			t.Fatalf("guess %d: %.300s", i, body)
		}
	}
	if body := tryLogin(t, attacker, authURL, "alice", "guess"); !strings.Contains(body, throttled) {
		t.Fatalf("the attacker is not slowed after 5 failures:\n%.300s", body)
	}
	// Even the right password waits at the attacker's address.
	if body := tryLogin(t, attacker, authURL, "alice", "alice-pw"); !strings.Contains(body, throttled) {
		t.Errorf("the attacker's address got through its delay")
	}
	if body := tryLogin(t, h.NewBrowser(), authURL, "alice", "alice-pw"); !strings.Contains(body, consented) {
		t.Errorf("alice is locked out from her own address by failures elsewhere:\n%.300s", body)
	}
}

// TestTrustedProxyForwardedAddresses: behind a trusted proxy, clients are
// told apart by X-Forwarded-For (the right-most untrusted entry), and an
// IPv6 client counts by its /64.
func TestTrustedProxyForwardedAddresses(t *testing.T) {
	h := daemontest.StartWith(t, daemontest.Options{Config: hubConfig, Server: "  trusted_proxies: [127.0.0.1]\n"})
	alice := h.AddUser(t, "alice", "alice-pw", 1)
	app := h.AddApp(t, alice, true, redirect)
	authURL := h.OAuthConfig(app).AuthCodeURL("s")
	via := func(xff string) *daemontest.Browser {
		return h.NewBrowser(daemontest.WithHeader("X-Forwarded-For", xff))
	}

	for i := 0; i < 5; i++ {
		tryLogin(t, via("198.51.100.7"), authURL, "alice", "guess")
	}
	if body := tryLogin(t, via("198.51.100.7"), authURL, "alice", "guess"); !strings.Contains(body, throttled) {
		t.Fatalf("198.51.100.7 is not slowed after 5 failures")
	}
	// An entry the attacker wrote in front of the proxy's changes nothing.
	if body := tryLogin(t, via("198.51.100.8, 198.51.100.7"), authURL, "alice", "guess"); !strings.Contains(body, throttled) {
		t.Errorf("a spoofed X-Forwarded-For entry escaped the delay")
	}
	if body := tryLogin(t, via("198.51.100.8"), authURL, "alice", "alice-pw"); !strings.Contains(body, consented) {
		t.Errorf("another client behind the proxy is locked out:\n%.300s", body)
	}

	// IPv6: one /64 is one client.
	for i := 0; i < 5; i++ {
		tryLogin(t, via(fmt.Sprintf("2001:db8:1:2::%x", i+1)), authURL, "alice", "guess")
	}
	if body := tryLogin(t, via("2001:db8:1:2:ffff:ffff:ffff:ffff"), authURL, "alice", "alice-pw"); !strings.Contains(body, throttled) {
		t.Errorf("another address of the same /64 escaped the delay")
	}
	if body := tryLogin(t, via("2001:db8:1:3::1"), authURL, "alice", "alice-pw"); !strings.Contains(body, consented) {
		t.Errorf("the next /64 is slowed too:\n%.300s", body)
	}
}

// TestForwardedHeadersFromUntrustedPeersAreIgnored: a client that is not a
// trusted proxy cannot pick its address by sending X-Forwarded-For or
// Forwarded: every guess counts against the address it connects from.
func TestForwardedHeadersFromUntrustedPeersAreIgnored(t *testing.T) {
	h := daemontest.StartWith(t, daemontest.Options{Config: hubConfig, Server: "  trusted_proxies: [127.0.0.9]\n"})
	alice := h.AddUser(t, "alice", "alice-pw", 1)
	app := h.AddApp(t, alice, true, redirect)
	authURL := h.OAuthConfig(app).AuthCodeURL("s")
	for i := 0; i < 5; i++ {
		hdr := "X-Forwarded-For"
		val := fmt.Sprintf("203.0.113.%d", i+1)
		if i%2 == 1 {
			hdr, val = "Forwarded", "for="+val
		}
		tryLogin(t, h.NewBrowser(daemontest.WithHeader(hdr, val)), authURL, "alice", "guess")
	}
	if body := tryLogin(t, h.NewBrowser(daemontest.WithHeader("X-Forwarded-For", "203.0.113.99")), authURL, "alice", "alice-pw"); !strings.Contains(body, throttled) {
		t.Errorf("rotating X-Forwarded-For from an untrusted peer escaped the delay")
	}
	if body := tryLogin(t, h.NewBrowser(daemontest.From("127.0.0.3")), authURL, "alice", "alice-pw"); !strings.Contains(body, consented) {
		t.Errorf("alice from another address is slowed:\n%.300s", body)
	}
}

// TestSessionFloodKeepsLoginsInProgress: a flood of authorization requests
// from one address (each a visitor who is not logged in) does not push out
// the login forms open at another. The flood is kept short for the race
// detector's sake; that visitors leave no session behind at all, which is
// why no flood size can push one out, is TestVisitorsKeepNoSessions in
// package oauth.
func TestSessionFloodKeepsLoginsInProgress(t *testing.T) {
	f := newFixture(t)
	h := f.hub
	authURL := h.OAuthConfig(f.app).AuthCodeURL("s")
	const inProgress = 20
	type open struct {
		b    *daemontest.Browser
		csrf string
	}
	var forms []open
	for range inProgress {
		b := h.NewBrowser()
		forms = append(forms, open{b, b.Get(t, authURL).CSRF(t)})
	}

	const flood, workers = 600, 3
	tr := &http.Transport{
		DialContext:         (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}).DialContext,
		MaxIdleConnsPerHost: workers,
	}
	defer tr.CloseIdleConnections()
	flooder := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < flood; i += workers {
				resp, err := flooder.Get(authURL)
				if err != nil {
					errs <- err
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					errs <- fmt.Errorf("flood request answered %d", resp.StatusCode)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	for i, o := range forms {
		form := daemontest.AuthFields(mustParse(t, authURL).Query())
		form.Set("csrf", o.csrf)
		form.Set("username", "bob")
		form.Set("password", "bob-pw")
		p := o.b.Post(t, "/oauth/login", form)
		if p.StatusCode != http.StatusSeeOther {
			t.Fatalf("login form %d, opened before the flood, answered %d:\n%.300s", i, p.StatusCode, p.Body)
		}
		if body := o.b.Get(t, p.Header.Get("Location")).Body; !strings.Contains(body, consented) {
			t.Fatalf("login form %d did not log in:\n%.300s", i, body)
		}
	}
}

// anyJar keeps every cookie the hub sets and sends them all back, Secure
// or not: the hub below says https but the test talks plain HTTP to it.
type anyJar struct {
	mu sync.Mutex
	m  map[string]*http.Cookie
}

func (j *anyJar) SetCookies(_ *url.URL, cs []*http.Cookie) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, c := range cs {
		if c.MaxAge < 0 {
			delete(j.m, c.Name)
			continue
		}
		j.m[c.Name] = c
	}
}

func (j *anyJar) Cookies(*url.URL) []*http.Cookie {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []*http.Cookie
	for _, c := range j.m {
		out = append(out, c)
	}
	return out
}

// TestHTTPSCookies: a public_url whose scheme is https in any case gives
// Secure __Host- cookies on Path=/ without Domain, and logging out clears
// the session cookie.
func TestHTTPSCookies(t *testing.T) {
	h := daemontest.StartWith(t, daemontest.Options{Config: hubConfig, Server: "  public_url: HTTPS://Hub.Example\n"})
	alice := h.AddUser(t, "alice", "alice-pw", 1)
	app := h.AddApp(t, alice, true, redirect)
	base := "http://" + h.Addr().String()
	authURL := strings.Replace(h.OAuthConfig(app).AuthCodeURL("s"), "HTTPS://Hub.Example", base, 1)
	b := h.NewBrowser()
	jar := &anyJar{m: map[string]*http.Cookie{}}
	b.Jar = jar
	get := func(u string) *daemontest.Page {
		if strings.HasPrefix(u, "/") {
			u = base + u
		}
		resp, err := b.Client.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return &daemontest.Page{Response: resp, Body: string(body)}
	}
	post := func(path string, form url.Values) *daemontest.Page {
		resp, err := b.Client.PostForm(base+path, form)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return &daemontest.Page{Response: resp, Body: string(body)}
	}
	hostCookie := func(what string, p *daemontest.Page) *http.Cookie {
		t.Helper()
		for _, c := range p.Cookies() {
			if c.Name == "__Host-switchbridge_session" {
				if !c.Secure || c.Path != "/" || c.Domain != "" || !c.HttpOnly {
					t.Errorf("%s: session cookie %s, want Secure, HttpOnly, Path=/ and no Domain", what, c)
				}
				return c
			}
			if strings.Contains(c.Name, "session") {
				t.Errorf("%s: cookie %s without the __Host- prefix", what, c)
			}
		}
		return nil
	}
	p := get(authURL)
	if hostCookie("login page", p) == nil {
		t.Fatalf("login page set no __Host- session cookie: %v", p.Header["Set-Cookie"])
	}
	form := daemontest.AuthFields(mustParse(t, authURL).Query())
	form.Set("csrf", p.CSRF(t))
	form.Set("username", "alice")
	form.Set("password", "alice-pw")
	p = post("/oauth/login", form)
	if p.StatusCode != http.StatusSeeOther || hostCookie("login", p) == nil {
		t.Fatalf("login = %d, cookies %v", p.StatusCode, p.Header["Set-Cookie"])
	}
	consent := get(p.Header.Get("Location"))
	if !strings.Contains(consent.Body, consented) {
		t.Fatalf("no consent page after logging in:\n%.300s", consent.Body)
	}
	lf := daemontest.AuthFields(mustParse(t, authURL).Query())
	lf.Set("csrf", consent.CSRF(t))
	p = post("/oauth/logout", lf)
	c := hostCookie("logout", p)
	if c == nil || c.MaxAge >= 0 || !strings.Contains(strings.Join(p.Header["Set-Cookie"], "\n"), "Max-Age=0") {
		t.Fatalf("logout did not clear the session cookie: %v", p.Header["Set-Cookie"])
	}
	if body := get(p.Header.Get("Location")).Body; !strings.Contains(body, `action="/oauth/login"`) {
		t.Errorf("still logged in after logging out")
	}
}

// TestHTTPCookiesAndLogout: over plain http the session cookie is not
// Secure, and logging out clears it too.
func TestHTTPCookiesAndLogout(t *testing.T) {
	f := newFixture(t)
	h := f.hub
	authURL := h.OAuthConfig(f.app).AuthCodeURL("s")
	b := h.NewBrowser()
	consent := b.Login(t, authURL, "alice", "alice-pw")
	lf := daemontest.AuthFields(mustParse(t, authURL).Query())
	lf.Set("csrf", consent.CSRF(t))
	p := b.Post(t, "/oauth/logout", lf)
	var cleared bool
	for _, c := range p.Cookies() {
		if c.Name == "switchbridge_session" {
			cleared = c.MaxAge < 0 && c.Path == "/" && !c.Secure
		}
	}
	if !cleared {
		t.Errorf("logout did not clear the session cookie: %v", p.Header["Set-Cookie"])
	}
}

// TestWarnsWhenHTTPSIsBypassable: with an https public_url (a proxy's) the
// hub warns at start when its own plain-HTTP listener is reachable from
// other machines; with an http one, that logins cross the network in
// plain HTTP; with none, or a loopback one, that clients elsewhere are
// given an address they cannot use.
func TestWarnsWhenHTTPSIsBypassable(t *testing.T) {
	pair := certstest.NewCA(t).NewPair(t, 1)
	tlsKeys := fmt.Sprintf(", tls: {cert_file: %q, key_file: %q}", pair.CertFile, pair.KeyFile)
	for _, c := range []struct {
		listen, publicURL, tls   string
		warn, plain, unreachable bool
	}{
		{"0.0.0.0:0", "HTTPS://hub.example", "", true, false, false},
		{"127.0.0.1:0", "https://hub.example", "", false, false, false},
		{"0.0.0.0:0", "http://hub.example", "", false, true, false},
		{"0.0.0.0:0", "https://hub.example", tlsKeys, false, false, false}, // the hub's own TLS: nothing to bypass
		{"0.0.0.0:0", "", "", false, true, true},
		{"0.0.0.0:0", "http://127.0.0.1:8080", "", false, true, true},
		{"127.0.0.1:0", "", "", false, false, false},
	} {
		var logs logtest.Buffer
		text := fmt.Sprintf("server: {listen: %q, public_url: %q, metrics_listen: \"off\"%s}\ndata_dir: %q\n%s", c.listen, c.publicURL, c.tls, t.TempDir(), hubConfig)
		cfg, err := config.Load("test.yaml", config.Text(text))
		if err != nil {
			t.Fatal(err)
		}
		d, err := daemon.Open(context.Background(), cfg, builtin.Registry(), slog.New(slog.NewTextHandler(&logs, nil)))
		if err != nil {
			t.Fatal(err)
		}
		d.Close()
		if got := strings.Contains(logs.String(), "clients on the network can bypass the proxy"); got != c.warn {
			t.Errorf("listen %s, public_url %s: warned %v, want %v\n%s", c.listen, c.publicURL, got, c.warn, logs.String())
		}
		if got := strings.Contains(logs.String(), "reaches the network over plain HTTP"); got != c.plain {
			t.Errorf("listen %s, public_url %s: warned of plain HTTP %v, want %v\n%s", c.listen, c.publicURL, got, c.plain, logs.String())
		}
		if got := strings.Contains(logs.String(), "set public_url to the address clients use"); got != c.unreachable {
			t.Errorf("listen %s, public_url %s: warned of public_url %v, want %v\n%s", c.listen, c.publicURL, got, c.unreachable, logs.String())
		}
	}
}

// TestSwitchMovedByReloadLeavesTheGrant: an installation reaches only the
// switches of its location. A reload that moves a granted switch into
// another location makes it answer like a removed switch (404 naming it),
// and nothing is commanded; so does the user leaving the location.
func TestSwitchMovedByReloadLeavesTheGrant(t *testing.T) {
	f := newFixture(t)
	h := f.hub
	g := h.Authorize(t, f.app, "alice", "alice-pw", 1, "kitchen", "hall")
	if p := h.Command(t, g, "on"); p.StatusCode != http.StatusNoContent {
		t.Fatalf("PUT on = %d %s", p.StatusCode, p.Body)
	}
	// kitchen moves from Home (1) to Garage (2).
	next := strings.Replace(hubConfig, "      - {id: kitchen, name: Kitchen light, driver: virtual, initial: off}\n", "", 1)
	next = strings.Replace(next, "      - {id: garage-light, name: Garage light, driver: virtual}\n",
		"      - {id: garage-light, name: Garage light, driver: virtual}\n      - {id: kitchen, name: Kitchen light, driver: virtual, initial: off}\n", 1)
	cfg, err := config.Load("next.yaml", config.Text("server: {listen: 127.0.0.1:0, metrics_listen: \"off\"}\ndata_dir: "+h.DataDir+"\n"+next))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Reload(context.Background(), cfg); err != nil {
		t.Fatalf("reload: %v", err)
	}
	if sw := mustSwitch(t, h, "kitchen"); sw.LocationID != 2 {
		t.Fatalf("kitchen is in location %d after the reload", sw.LocationID)
	}
	before := mustSwitch(t, h, "kitchen").Device.State().Value
	p := h.Call(t, http.MethodGet, g.URI+"/switches", g.Token.AccessToken)
	if p.StatusCode != http.StatusNotFound || !strings.Contains(p.Body, "kitchen") || strings.Contains(p.Body, "hall") {
		t.Errorf("list with a switch moved away = %d %s, want 404 naming kitchen", p.StatusCode, p.Body)
	}
	assertErrorBody(t, p, http.StatusNotFound)
	p = h.Command(t, g, "off")
	if p.StatusCode != http.StatusNotFound || !strings.Contains(p.Body, "kitchen") {
		t.Errorf("command with a switch moved away = %d %s, want 404 naming kitchen", p.StatusCode, p.Body)
	}
	if after := mustSwitch(t, h, "kitchen").Device.State().Value; after != before {
		t.Errorf("the moved switch was commanded through the old installation: %s -> %s", before, after)
	}
	if v := mustSwitch(t, h, "hall").Device.State().Value; v != bridge.On {
		t.Errorf("hall = %s: a refused command actuated a switch", v)
	}

	// The user leaves location 1: the installation reaches nothing.
	g2 := h.Authorize(t, f.app, "alice", "alice-pw", 2, "garage-light")
	if p := h.Command(t, g2, "on"); p.StatusCode != http.StatusNoContent {
		t.Fatalf("PUT on in Garage = %d %s", p.StatusCode, p.Body)
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(h.DataDir, store.FileName)+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`DELETE FROM user_locations WHERE user_id = ? AND location_id = 2`, f.alice.ID); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2100 * time.Millisecond) // the grant cache's lifetime: another process changed the database
	p = h.Command(t, g2, "off")
	if p.StatusCode != http.StatusNotFound || !strings.Contains(p.Body, "garage-light") {
		t.Errorf("command after the user left the location = %d %s, want 404 naming garage-light", p.StatusCode, p.Body)
	}
	if v := mustSwitch(t, h, "garage-light").Device.State().Value; v != bridge.On {
		t.Errorf("garage-light = %s: commanded for a user who left its location", v)
	}
}

// TestContentLengthWithTransferEncoding: a request with both is refused
// with 400 and its connection closed, so a request smuggled in its body is
// never served.
func TestContentLengthWithTransferEncoding(t *testing.T) {
	h := daemontest.Start(t, hubConfig)
	conn, err := net.Dial("tcp", h.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "POST /oauth/token HTTP/1.1\r\nHost: hub\r\nContent-Type: application/x-www-form-urlencoded\r\n"+
		"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /api/apps/endpoints HTTP/1.1\r\nHost: hub\r\n\r\n")
	r := bufio.NewReader(conn)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !resp.Close {
		t.Errorf("CL+TE answered %d (close %v), want 400 and the connection closed", resp.StatusCode, resp.Close)
	}
	if rest, err := io.ReadAll(r); err != nil || len(rest) != 0 {
		t.Errorf("after the 400 the connection went on: %q %v", rest, err)
	}
}

// TestAPIAnswersAreNotSniffed: every JSON answer of the API, discovery
// and the token endpoint carries X-Content-Type-Options: nosniff.
func TestAPIAnswersAreNotSniffed(t *testing.T) {
	f := newFixture(t)
	h := f.hub
	g := h.Authorize(t, f.app, "alice", "alice-pw", 1, "kitchen")
	for what, p := range map[string]*daemontest.Page{
		"list":               h.Call(t, http.MethodGet, g.URI+"/switches", g.Token.AccessToken),
		"unknown path":       h.Call(t, http.MethodGet, g.URI+"/nope", g.Token.AccessToken),
		"no token":           h.Call(t, http.MethodGet, g.URI+"/switches", ""),
		"discovery":          h.Call(t, http.MethodGet, h.URL+"/api/apps/endpoints", g.Token.AccessToken),
		"discovery no token": h.Call(t, http.MethodGet, h.URL+"/api/apps/endpoints", ""),
		"token endpoint":     h.Call(t, http.MethodGet, h.URL+"/oauth/token", ""),
	} {
		if got := p.Header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%s (%d): X-Content-Type-Options = %q", what, p.StatusCode, got)
		}
	}
}

// TestAuthorizationResponsesNameTheIssuer: the code and every error sent
// back to the client carry iss, the hub's public URL (RFC 9207).
func TestAuthorizationResponsesNameTheIssuer(t *testing.T) {
	f := newFixture(t)
	h := f.hub
	cfg := h.OAuthConfig(f.app)
	authURL := cfg.AuthCodeURL("s")
	b := h.NewBrowser()
	consent := b.Login(t, authURL, "alice", "alice-pw")
	if !strings.Contains(consent.Body, "sent back to <strong>client.example</strong>") {
		t.Errorf("the consent page does not name the host the user goes back to")
	}
	p := b.Consent(t, consent, authURL, 1, "kitchen")
	deny := daemontest.AuthFields(mustParse(t, authURL).Query())
	deny.Set("csrf", consent.CSRF(t))
	deny.Set("action", "deny")
	bad := mustParse(t, authURL)
	q := bad.Query()
	q.Set("response_type", "token")
	bad.RawQuery = q.Encode()
	for what, p := range map[string]*daemontest.Page{
		"code":                      p,
		"access_denied":             b.Post(t, "/oauth/authorize", deny),
		"unsupported_response_type": h.NewBrowser().Get(t, bad.String()),
	} {
		loc := mustParse(t, p.Header.Get("Location"))
		if p.StatusCode != http.StatusSeeOther || loc.Query().Get("iss") != h.URL {
			t.Errorf("%s: %d %s, want iss=%s", what, p.StatusCode, loc, h.URL)
		}
	}
}

// TestPKCEOnlyApp: an app registered as PKCE-only cannot be authorized
// without a challenge, and its codes are not redeemed without a verifier.
func TestPKCEOnlyApp(t *testing.T) {
	f := newFixture(t)
	h := f.hub
	a := daemontest.App{ClientID: oauth.NewClientID(), Secret: oauth.NewSecret(), RedirectURIs: []string{redirect}}
	if err := h.Accounts.CreateApp(context.Background(), &bridge.App{ClientID: a.ClientID, Name: "Test app", SecretHash: oauth.Hash(a.Secret),
		RedirectURIs: a.RedirectURIs, OwnerID: f.alice.ID, Published: true, RequirePKCE: true}); err != nil {
		t.Fatal(err)
	}
	cfg := h.OAuthConfig(a)
	p := h.NewBrowser().Get(t, cfg.AuthCodeURL("s"))
	if loc := mustParse(t, p.Header.Get("Location")); p.StatusCode != http.StatusSeeOther || loc.Query().Get("error") != "invalid_request" ||
		!strings.Contains(loc.Query().Get("error_description"), "PKCE") {
		t.Errorf("authorization without PKCE = %d %s, want invalid_request back to the client", p.StatusCode, loc)
	}
	verifier := oauth2.GenerateVerifier()
	authURL := cfg.AuthCodeURL("s", oauth2.S256ChallengeOption(verifier))
	b := h.NewBrowser()
	consent := b.Login(t, authURL, "alice", "alice-pw")
	code := mustParse(t, b.Consent(t, consent, authURL, 1, "kitchen").Header.Get("Location")).Query().Get("code")
	tok, err := cfg.Exchange(context.Background(), code, oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatalf("PKCE flow of a PKCE-only app: %v", err)
	}

	// A code without a challenge (issued before the app was made
	// PKCE-only) is refused at the token endpoint.
	eps := h.Endpoints(t, tok.AccessToken)
	id := strings.TrimPrefix(eps[0].URL, "/api/apps/installations/")
	plain := oauth.NewSecret()
	if err := h.Accounts.CreateCode(context.Background(), oauth.Hash(plain), bridge.AuthCode{ClientID: a.ClientID, RedirectURI: redirect,
		InstallationID: id, ExpiresAt: time.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	_, err = cfg.Exchange(context.Background(), plain)
	assertOAuthError(t, err, "invalid_grant")
}

// TestPasswordSprayFromOneAddressIsSlowed: one address failing across many
// user names is slowed for every name, the right password of another user
// included; another address is not.
func TestPasswordSprayFromOneAddressIsSlowed(t *testing.T) {
	h := daemontest.StartWith(t, daemontest.Options{Config: hubConfig, Server: "  trusted_proxies: [127.0.0.1]\n"})
	alice := h.AddUser(t, "alice", "alice-pw", 1)
	h.AddUser(t, "bob", "bob-pw", 1)
	app := h.AddApp(t, alice, true, redirect)
	authURL := h.OAuthConfig(app).AuthCodeURL("s")
	via := func(xff string) *daemontest.Browser {
		return h.NewBrowser(daemontest.WithHeader("X-Forwarded-For", xff))
	}
	const addrFree = 10 // the address's allowance across names
	for i := range addrFree {
		if body := tryLogin(t, via("198.51.100.7"), authURL, fmt.Sprintf("user%d", i), "guess"); !strings.Contains(body, wrongPw) {
			t.Fatalf("guess %d: %.300s", i, body)
		}
	}
	if body := tryLogin(t, via("198.51.100.7"), authURL, "bob", "bob-pw"); !strings.Contains(body, throttled) {
		t.Errorf("after %d names failed from one address, another user's login from it is not slowed:\n%.300s", addrFree, body)
	}
	if body := tryLogin(t, via("198.51.100.8"), authURL, "bob", "bob-pw"); !strings.Contains(body, consented) {
		t.Errorf("bob from another address is slowed:\n%.300s", body)
	}
}

// TestManyAddressesGuessingOneUser: one guess each from many addresses
// uses up the user name's allowance: logins as alice from browsers that
// never logged in as her then wait, but the browser she logged in from
// before gets in at once, even from an attacking address.
func TestManyAddressesGuessingOneUser(t *testing.T) {
	h := daemontest.StartWith(t, daemontest.Options{Config: hubConfig, Server: "  trusted_proxies: [127.0.0.1]\n"})
	alice := h.AddUser(t, "alice", "alice-pw", 1)
	h.AddUser(t, "bob", "bob-pw", 1)
	app := h.AddApp(t, alice, true, redirect)
	authURL := h.OAuthConfig(app).AuthCodeURL("s")
	via := func(xff string) *daemontest.Browser {
		return h.NewBrowser(daemontest.WithHeader("X-Forwarded-For", xff))
	}
	// Alice's browser, at home: a successful login leaves a device cookie.
	home := via("203.0.113.5")
	if body := tryLogin(t, home, authURL, "alice", "alice-pw"); !strings.Contains(body, consented) {
		t.Fatalf("alice's first login:\n%.300s", body)
	}
	loginURL := mustParse(t, h.URL+"/oauth/login")
	var device []*http.Cookie
	for _, c := range home.Jar.Cookies(loginURL) {
		if strings.HasSuffix(c.Name, "_device") {
			device = append(device, c)
		}
	}
	if len(device) != 1 {
		t.Errorf("no device cookie after a login: %v", home.Jar.Cookies(loginURL))
	}

	const userFree, addresses = 10, 30
	checked := 0
	for i := range addresses {
		switch body := tryLogin(t, via(fmt.Sprintf("198.51.100.%d", i+1)), authURL, "alice", "guess"); {
		case strings.Contains(body, wrongPw):
			checked++
		case !strings.Contains(body, throttled):
			t.Fatalf("guess %d: %.300s", i, body)
		}
	}
	if checked != userFree {
		t.Errorf("%d addresses got %d password checks for one user, want %d", addresses, checked, userFree)
	}
	if body := tryLogin(t, via("192.0.2.50"), authURL, "alice", "alice-pw"); !strings.Contains(body, throttled) {
		t.Errorf("a browser that never logged in as alice is not slowed once her name's allowance is spent")
	}
	if body := tryLogin(t, via("192.0.2.51"), authURL, "bob", "bob-pw"); !strings.Contains(body, consented) {
		t.Errorf("bob is slowed by the guesses at alice:\n%.300s", body)
	}
	// Her browser later (its session gone, the device cookie kept), even
	// from one of the attacking addresses.
	again := via("198.51.100.1")
	again.Jar.SetCookies(loginURL, device)
	if body := tryLogin(t, again, authURL, "alice", "alice-pw"); !strings.Contains(body, consented) {
		t.Errorf("alice is locked out of the browser she logged in from before:\n%.300s", body)
	}
	// The device cookie is alice's only: it does not help a guess at bob.
	thief := via("198.51.100.2")
	thief.Jar.SetCookies(loginURL, device)
	for range 5 { // bob's allowance at one address
		tryLogin(t, thief, authURL, "bob", "guess")
	}
	if body := tryLogin(t, thief, authURL, "bob", "bob-pw"); !strings.Contains(body, throttled) {
		t.Errorf("alice's device cookie exempts logins as bob")
	}
}
