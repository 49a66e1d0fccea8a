package daemon_test

import (
	"context"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/console"
	"github.com/switchbridge/switchbridge/bridge/daemon/daemontest"
	"github.com/switchbridge/switchbridge/bridge/hub/webhook"
	"github.com/switchbridge/switchbridge/bridge/infra/logtest"
	"github.com/switchbridge/switchbridge/bridge/platform/oauth"
	"github.com/switchbridge/switchbridge/bridge/store"
)

// The owner's console's rules at the HTTP level, against a real daemon:
// every console path refuses a user who is not an owner, an ended
// session and a form without this session's CSRF token or from another
// origin, and such a request changes nothing in the store; every answer
// carries the policy that forbids inline script and style and framing;
// names with markup are text. The daemon's log is scanned for the tests'
// secrets (daemontest.Start), and the console's addresses too. The parts
// that need a browser (framing, markup in a real page, the webhooks and
// audit pages' actions) are in console_security_browser_test.go.

// consoleSecConfig has a switch whose name is markup.
const consoleSecConfig = `
locations:
  - id: 1
    name: Home
    switches:
      - {id: kitchen, name: "Kitchen <script>alert('switch')</script>", driver: virtual, initial: off}
      - {id: hall, name: Hall lamp, driver: virtual, initial: on}
`

// Names with markup in them: each must be shown as text.
const (
	evilSwitch = `Kitchen <script>alert('switch')</script>`
	evilUser   = `mallory<script>alert('user')</script>`
	evilApp    = `Lights <script>alert('app')</script>`
	malloryPW  = "mallory-pw-1"
	// Passwords of the owner olivia and of nico, who is not one.
	secOwnerPW = "olivia-sec-pw-1"
	secOtherPW = "nico-sec-pw-1"
)

// secHub is a single box with an owner (olivia), a user who is not one
// (nico), a user and an app whose names are markup, an installation of
// that app with two webhooks, and audit records of an app's command and
// of a console's.
type secHub struct {
	*daemontest.Harness
	olivia, mallory *bridge.User
	app             daemontest.App
	grant           daemontest.Grant
	hooks           []string // webhook ids: active, disabled
}

func startSecHub(t *testing.T) *secHub {
	t.Helper()
	h := &secHub{Harness: daemontest.Start(t, consoleSecConfig)}
	ctx := context.Background()
	a := h.Platform.Admin
	a.PasswordCost = 4 // bcrypt.MinCost: the tests log in many times
	for _, pw := range []string{secOwnerPW, secOtherPW, malloryPW} {
		logtest.NoteSecret(pw)
	}
	var err error
	if h.olivia, err = a.AddUser(ctx, "olivia", secOwnerPW, []int64{1}, true); err != nil {
		t.Fatal(err)
	}
	if _, err := a.AddUser(ctx, "nico", secOtherPW, []int64{1}, false); err != nil {
		t.Fatal(err)
	}
	if h.mallory, err = a.AddUser(ctx, evilUser, malloryPW, []int64{1}, false); err != nil {
		t.Fatal(err)
	}
	h.app = daemontest.App{ClientID: oauth.NewClientID(), Secret: oauth.NewSecret(), RedirectURIs: []string{"http://127.0.0.1:9/cb"}}
	logtest.NoteSecret(h.app.Secret)
	if err := h.Accounts.CreateApp(ctx, &bridge.App{ClientID: h.app.ClientID, Name: evilApp, SecretHash: oauth.Hash(h.app.Secret),
		RedirectURIs: h.app.RedirectURIs, OwnerID: h.olivia.ID, Published: true}); err != nil {
		t.Fatal(err)
	}
	h.grant = h.Authorize(t, h.app, evilUser, malloryPW, 1, "kitchen", "hall")
	// Webhooks as the store keeps them: the receivers' confirmation is
	// the webhook service's tests' (webhooks_test.go).
	for i, u := range []string{"https://receiver.example/hooks/a", "https://gone.example/hooks/b"} {
		w := &bridge.Webhook{ID: fmt.Sprintf("wh_console_%d", i), InstallationID: h.grant.InstallationID(), URL: u, Secret: webhook.NewSecret()}
		logtest.NoteSecret(w.Secret)
		if err := h.HubStore.AddWebhook(ctx, w, webhook.MaxPerInstallation); err != nil {
			t.Fatal(err)
		}
		h.hooks = append(h.hooks, w.ID)
	}
	if err := h.HubStore.DisableWebhook(ctx, h.hooks[1], "the receiver answered 410 Gone"); err != nil {
		t.Fatal(err)
	}
	if p := h.Command(t, h.grant, "on"); p.StatusCode != http.StatusNoContent {
		t.Fatalf("the app's command: %d %s", p.StatusCode, p.Body)
	}
	// A command from the console, as the switches page sends it.
	cctx := bridge.WithSender(ctx, bridge.Sender{Installation: "console", UserID: h.olivia.ID, RequestID: "console-request-1"})
	if err := h.Switchboard.CommandIn(cctx, 1, []string{"hall"}, bridge.CommandOff); err != nil {
		t.Fatal(err)
	}
	h.waitAudit(t, 3)
	return h
}

// waitAudit waits until the audit log holds n records: a command's records
// reach the database with the value writer's next batch.
func (h *secHub) waitAudit(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		recs, err := h.HubStore.Audit(context.Background(), bridge.AuditFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the audit log holds %d records after 10 s, want %d", len(recs), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// state is what a console action could change, as the store and the
// switches have it.
func (h *secHub) state(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	var b strings.Builder
	us, err := h.Accounts.Users(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range us {
		fmt.Fprintf(&b, "user %s owner=%v locations=%v password=%x\n", u.Name, u.Owner, u.Locations, u.PasswordHash)
	}
	apps, err := h.Accounts.Apps(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range apps {
		fmt.Fprintf(&b, "app %s %q published=%v legacy=%v secret=%x uris=%v\n", a.ClientID, a.Name, a.Published, a.Legacy, a.SecretHash, a.RedirectURIs)
	}
	ins, err := h.Accounts.Installations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range ins {
		fmt.Fprintf(&b, "installation %s switches=%v see-only=%v\n", in.ID, in.SwitchIDs, in.SeeOnly)
	}
	if live, err := h.Accounts.GrantLive(ctx, h.grant.InstallationID(), time.Now()); err != nil || !live {
		fmt.Fprintf(&b, "the grant is not live: %v\n", err)
	}
	ws, err := h.HubStore.Webhooks(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		fmt.Fprintf(&b, "webhook %s disabled=%q\n", w.ID, w.DisabledReason)
	}
	hubs, err := h.Accounts.Hubs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range hubs {
		fmt.Fprintf(&b, "hub %s\n", x.Name)
	}
	for _, s := range h.Switchboard.Switches() {
		fmt.Fprintf(&b, "switch %s %s\n", s.ID, s.Device.State().Value)
	}
	return b.String()
}

// unchanged fails the test when the state is not before's.
func (h *secHub) unchanged(t *testing.T, what, before string) {
	t.Helper()
	if after := h.state(t); after != before {
		t.Fatalf("%s changed the store:\nbefore:\n%s\nafter:\n%s", what, before, after)
	}
}

// consoleLogin logs user in through the console's login form and
// returns the browser and the CSRF token of the session's forms (read
// off the connected apps page, which anyone logged in sees).
func (h *secHub) consoleLogin(t *testing.T, user, password string) (*daemontest.Browser, string) {
	t.Helper()
	b := h.NewBrowser()
	p := b.Get(t, "/console/")
	if p.StatusCode != http.StatusOK || !strings.Contains(p.Body, `name="return" value="console"`) {
		t.Fatalf("/console/ without a login: %d\n%s", p.StatusCode, p.Body)
	}
	p = b.Post(t, "/oauth/login", url.Values{"return": {"console"}, "next": {"/console/"}, "csrf": {p.CSRF(t)},
		"username": {user}, "password": {password}})
	if p.StatusCode != http.StatusSeeOther || p.Header.Get("Location") != "/console/" {
		t.Fatalf("the console's login: %d to %q\n%s", p.StatusCode, p.Header.Get("Location"), p.Body)
	}
	return b, b.Get(t, "/oauth/apps").CSRF(t)
}

// post sends a form to a path of the hub as a page of origin would, with
// the browser's cookies: no Origin header when origin is "", a Referer
// when referer is set.
func (h *secHub) post(t *testing.T, b *daemontest.Browser, path string, form url.Values, origin, referer string) *daemontest.Page {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.URL+path, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	if referer != "" {
		req.Header.Set("Referer", referer)
	}
	resp, err := b.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return &daemontest.Page{Response: resp, Body: string(body)}
}

// consoleForm is a form of a console page, filled in as a person would:
// its hidden fields, and something in each field to type or tick.
type consoleForm struct {
	action string
	fields url.Values // without csrf
}

var (
	hrefRE   = regexp.MustCompile(`href="(/console/[^"#]*)"`)
	formRE   = regexp.MustCompile(`(?s)<form method="post" action="(/console/[^"]*)"[^>]*>(.*?)</form>`)
	inputRE  = regexp.MustCompile(`<input ([^>]*)>`)
	attrRE   = regexp.MustCompile(`([a-z-]+)="([^"]*)"`)
	selectRE = regexp.MustCompile(`(?s)<select [^>]*name="([^"]+)"[^>]*>.*?<option value="([^"]*)"`)
)

// crawl opens every console page an owner's pages link to, from the
// overview, and returns their addresses (one per path) and every form
// they hold. Each must answer the owner 200.
func (h *secHub) crawl(t *testing.T, b *daemontest.Browser) (pages []string, forms []consoleForm) {
	t.Helper()
	seen := map[string]bool{"/console/": true}
	queue := []string{"/console/"}
	formSeen := map[string]bool{}
	for len(queue) > 0 && len(pages) < 100 {
		u := queue[0]
		queue = queue[1:]
		pages = append(pages, u)
		p := b.Get(t, u)
		if p.StatusCode != http.StatusOK {
			t.Fatalf("the owner's GET %s: %d\n%s", u, p.StatusCode, p.Body)
		}
		for _, m := range hrefRE.FindAllStringSubmatch(p.Body, -1) {
			link := html.UnescapeString(m[1])
			path, _, _ := strings.Cut(link, "?")
			if strings.HasPrefix(path, console.Path+"static/") || seen[path] {
				continue
			}
			seen[path] = true
			queue = append(queue, link)
		}
		for _, m := range formRE.FindAllStringSubmatch(p.Body, -1) {
			f := consoleForm{action: html.UnescapeString(m[1]), fields: url.Values{}}
			for _, in := range inputRE.FindAllStringSubmatch(m[2], -1) {
				a := map[string]string{}
				for _, kv := range attrRE.FindAllStringSubmatch(in[1], -1) {
					a[kv[1]] = html.UnescapeString(kv[2])
				}
				name := a["name"]
				switch {
				case name == "" || name == "csrf":
				case a["type"] == "hidden" || a["type"] == "checkbox" || a["type"] == "radio":
					f.fields.Add(name, a["value"])
				case a["type"] == "password":
					f.fields.Set(name, "a-new-password-1")
				case a["type"] == "number":
					f.fields.Set(name, "1")
				case a["type"] == "url":
					f.fields.Set(name, "https://app.example/cb")
				default:
					f.fields.Set(name, "newname")
				}
			}
			for _, s := range selectRE.FindAllStringSubmatch(m[2], -1) {
				f.fields.Set(s[1], html.UnescapeString(s[2]))
			}
			if key := f.action + "?" + f.fields.Encode(); !formSeen[key] {
				formSeen[key] = true
				forms = append(forms, f)
			}
		}
	}
	return pages, forms
}

// wantPolicy fails unless an answer carries the console's policy: no
// inline script or style, no eval, never framed.
func wantPolicy(t *testing.T, what string, p *daemontest.Page) {
	t.Helper()
	csp := p.Header.Get("Content-Security-Policy")
	if csp == "" || strings.Contains(csp, "'unsafe-inline'") || strings.Contains(csp, "'unsafe-eval'") || !strings.Contains(csp, "frame-ancestors 'none'") ||
		!strings.Contains(csp, "default-src 'none'") {
		t.Errorf("%s: Content-Security-Policy %q", what, csp)
	}
	if got := p.Header.Get("X-Frame-Options"); got != "DENY" {
		t.Errorf("%s: X-Frame-Options %q, want DENY", what, got)
	}
	if got := p.Header.Get("X-Content-Type-Options"); got != "nosniff" {
		t.Errorf("%s: X-Content-Type-Options %q, want nosniff", what, got)
	}
}

// isLoginForm reports whether a page is the console's login form.
func isLoginForm(p *daemontest.Page) bool {
	return p.StatusCode == http.StatusOK && strings.Contains(p.Body, `action="/oauth/login"`) && strings.Contains(p.Body, `name="return" value="console"`)
}

// TestConsoleSecurity: who may use the console and how its forms are
// checked, each refusal checked in the store; the headers of every
// answer; names as text; no secret in an address.
func TestConsoleSecurity(t *testing.T) {
	h := startSecHub(t)
	owner, csrf := h.consoleLogin(t, "olivia", secOwnerPW)
	pages, forms := h.crawl(t, owner)
	for _, want := range []string{"/console/webhooks", "/console/audit", "/console/users"} {
		if !slices.ContainsFunc(pages, func(p string) bool { return strings.HasPrefix(p, want) }) {
			t.Fatalf("the console's pages do not link to %s: %q", want, pages)
		}
	}
	for _, want := range []string{"/console/webhooks/disable", "/console/webhooks/enable", "/console/users/add"} {
		if !slices.ContainsFunc(forms, func(f consoleForm) bool { return f.action == want }) {
			t.Fatalf("the console's pages have no form for %s", want)
		}
	}
	t.Logf("%d pages, %d forms", len(pages), len(forms))
	// refused posts every form with the token (none when "") from origin
	// (and referer), and wants 403 and no change.
	refused := func(t *testing.T, what string, b *daemontest.Browser, token, origin, referer string) {
		t.Helper()
		before := h.state(t)
		for _, f := range forms {
			v := url.Values{}
			for k, x := range f.fields {
				v[k] = x
			}
			if token != "" {
				v.Set("csrf", token)
			}
			p := h.post(t, b, f.action, v, origin, referer)
			if p.StatusCode != http.StatusForbidden {
				t.Errorf("%s: POST %s answered %d, want 403", what, f.action, p.StatusCode)
			}
			wantPolicy(t, what+": POST "+f.action, p)
		}
		h.unchanged(t, what, before)
	}

	t.Run("NotAnOwner", func(t *testing.T) {
		nico, nicoCSRF := h.consoleLogin(t, "nico", secOtherPW)
		for _, u := range pages {
			p := nico.Get(t, u)
			if p.StatusCode != http.StatusForbidden {
				t.Errorf("nico's GET %s: %d, want 403", u, p.StatusCode)
			}
			wantPolicy(t, "nico's GET "+u, p)
			for _, private := range []string{"receiver.example", "console-request-1", h.app.ClientID} {
				if strings.Contains(p.Body, private) {
					t.Errorf("nico's GET %s shows %q", u, private)
				}
			}
		}
		refused(t, "nico's own form", nico, nicoCSRF, h.URL, "")
	})

	t.Run("CSRF", func(t *testing.T) {
		_, other := h.consoleLogin(t, "olivia", secOwnerPW) // another session of the same owner
		_, nicoCSRF := h.consoleLogin(t, "nico", secOtherPW)
		if other == csrf {
			t.Fatal("two sessions have one CSRF token")
		}
		refused(t, "no token", owner, "", h.URL, "")
		refused(t, "a wrong token", owner, otherLast(csrf), h.URL, "")
		refused(t, "a token cut short", owner, csrf[:len(csrf)/2], h.URL, "")
		refused(t, "another session's token", owner, other, h.URL, "")
		refused(t, "another user's token", owner, nicoCSRF, h.URL, "")
	})

	t.Run("CrossOrigin", func(t *testing.T) {
		refused(t, "Origin http://evil.example", owner, csrf, "http://evil.example", "")
		refused(t, "Origin null", owner, csrf, "null", "")
		u, _ := url.Parse(h.URL)
		port, _ := strconv.Atoi(u.Port())
		refused(t, "another port of the hub's host", owner, csrf, fmt.Sprintf("http://%s:%d", u.Hostname(), port+1), "")
		refused(t, "a Referer of another origin", owner, csrf, "", "http://evil.example/page")
	})

	// The control: a form with the session's token from this origin does
	// change the store, so the refusals above are the checks' doing.
	t.Run("Control", func(t *testing.T) {
		before := h.state(t)
		p := h.post(t, owner, "/console/webhooks/disable", url.Values{"csrf": {csrf}, "id": {h.hooks[0]}}, h.URL, "")
		if p.StatusCode != http.StatusSeeOther {
			t.Fatalf("disable with the session's token: %d\n%s", p.StatusCode, p.Body)
		}
		wantPolicy(t, "the redirect after a form", p)
		w, err := h.HubStore.Webhook(context.Background(), h.hooks[0])
		if err != nil || w.DisabledReason != console.OwnerDisabledReason {
			t.Fatalf("after disable the webhook is %+v, %v", w, err)
		}
		if a := h.Call(t, http.MethodGet, h.grant.URI+"/webhooks", h.grant.Token.AccessToken); !strings.Contains(a.Body, `"state":"disabled"`) ||
			!strings.Contains(a.Body, console.OwnerDisabledReason) {
			t.Errorf("the app's API lists its webhooks as %s", a.Body)
		}
		if p := h.post(t, owner, "/console/webhooks/enable", url.Values{"csrf": {csrf}, "id": {h.hooks[0]}}, "", ""); p.StatusCode != http.StatusSeeOther {
			t.Fatalf("enable, from a form without Origin (not a browser's cross-site form): %d", p.StatusCode)
		}
		h.unchanged(t, "disabling and enabling again", before)
	})

	t.Run("EndedSession", func(t *testing.T) {
		for _, how := range []string{"logged out", "expired"} {
			b, tok := h.consoleLogin(t, "olivia", secOwnerPW)
			if p := b.Get(t, "/console/webhooks"); p.StatusCode != http.StatusOK {
				t.Fatalf("before it ends, the session gets %d", p.StatusCode)
			}
			switch how {
			case "logged out":
				p := h.post(t, b, "/oauth/logout", url.Values{"return": {"console"}, "next": {"/console/"}, "csrf": {tok}}, h.URL, "")
				if p.StatusCode != http.StatusSeeOther {
					t.Fatalf("logout: %d\n%s", p.StatusCode, p.Body)
				}
			case "expired":
				h.expire(t, b)
			}
			for _, u := range pages {
				p := b.Get(t, u)
				if !isLoginForm(p) {
					t.Errorf("%s: GET %s answered %d, not the login form", how, u, p.StatusCode)
				}
				wantPolicy(t, how+": GET "+u, p)
			}
			refused(t, how, b, tok, h.URL, "")
		}
	})

	t.Run("Headers", func(t *testing.T) {
		for _, u := range pages {
			wantPolicy(t, "the owner's GET "+u, owner.Get(t, u))
		}
		for _, c := range []struct {
			path   string
			status int
		}{
			{"/console/static/console.css", http.StatusOK},
			{"/console/static/console.js", http.StatusOK},
			{"/console/static/nothing.js", http.StatusNotFound},
			{"/console/no-such-page", http.StatusNotFound},
			{"/console/audit?since=yesterday", http.StatusBadRequest},
		} {
			p := owner.Get(t, c.path)
			if p.StatusCode != c.status {
				t.Errorf("GET %s: %d, want %d", c.path, p.StatusCode, c.status)
			}
			wantPolicy(t, "GET "+c.path, p)
		}
		req, _ := http.NewRequest(http.MethodPost, h.URL+"/console/users/add", strings.NewReader(`{"csrf":"x"}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := owner.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		p := &daemontest.Page{Response: resp, Body: string(body)}
		if p.StatusCode != http.StatusBadRequest {
			t.Errorf("a JSON body: %d, want 400", p.StatusCode)
		}
		wantPolicy(t, "a JSON body", p)
		login := h.NewBrowser().Get(t, "/console/audit")
		if !isLoginForm(login) {
			t.Fatalf("the console without a login: %d", login.StatusCode)
		}
		wantPolicy(t, "the login form", login)
		if strings.Contains(login.Body, "<style") || !strings.Contains(login.Body, `href="`+oauth.StylesheetPath+`"`) {
			t.Error("the login form has an inline style, or no stylesheet")
		}
		css := h.NewBrowser().Get(t, oauth.StylesheetPath)
		if css.StatusCode != http.StatusOK || !strings.HasPrefix(css.Header.Get("Content-Type"), "text/css") || !strings.Contains(css.Body, "button") {
			t.Errorf("GET %s: %d %q", oauth.StylesheetPath, css.StatusCode, css.Header.Get("Content-Type"))
		}
		wantPolicy(t, "the login pages' stylesheet", css)
	})

	t.Run("NamesAreText", func(t *testing.T) {
		for _, c := range []struct {
			path  string
			names []string
		}{
			{"/console/audit", []string{evilSwitch, evilUser, evilApp, "console (user olivia)"}},
			{"/console/webhooks", []string{evilApp, "receiver.example"}},
			{"/console/users", []string{evilUser}},
		} {
			p := owner.Get(t, c.path)
			if strings.Contains(p.Body, "<script>alert(") {
				t.Errorf("GET %s holds a name's markup as markup", c.path)
			}
			for _, n := range c.names {
				if !strings.Contains(p.Body, html.EscapeString(n)) {
					t.Errorf("GET %s does not show %q as text", c.path, n)
				}
			}
		}
	})

	// No address the console made holds a secret: its links, its forms'
	// actions, its redirects.
	t.Run("NoSecretInAnAddress", func(t *testing.T) {
		addrs := slices.Clone(pages)
		for _, f := range forms {
			addrs = append(addrs, f.action)
		}
		p := h.post(t, owner, "/console/webhooks/disable", url.Values{"csrf": {csrf}, "id": {"wh_none"}}, h.URL, "")
		addrs = append(addrs, p.Header.Get("Location"))
		for _, l := range logtest.Leaks(strings.Join(addrs, "\n")) {
			t.Errorf("a console address holds a secret (%s): %s", logtest.Redact(l.Secret), l.Line)
		}
	})
}

// otherLast is tok with its last character changed.
func otherLast(tok string) string {
	last := byte('A')
	if tok[len(tok)-1] == 'A' {
		last = 'B'
	}
	return tok[:len(tok)-1] + string(last)
}

// expire ends b's session in the store as its time would: its expiry is
// past.
func (h *secHub) expire(t *testing.T, b *daemontest.Browser) {
	t.Helper()
	u, _ := url.Parse(h.URL + "/")
	var id string
	for _, c := range b.Jar.Cookies(u) {
		if c.Name == "switchbridge_session" {
			id = c.Value
		}
	}
	res, err := h.Store.ExecContext(context.Background(), `UPDATE login_sessions SET expires_at = ? WHERE hash = ?`,
		store.Millis(time.Now().Add(-time.Second)), oauth.Hash(id))
	if n, _ := res.RowsAffected(); err != nil || n != 1 {
		t.Fatalf("expiring the session: %v, %d rows", err, n)
	}
}
