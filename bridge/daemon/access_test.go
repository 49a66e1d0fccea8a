package daemon_test

import (
	"context"
	"errors"
	"github.com/switchbridge/switchbridge/bridge/platform/accounts"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
	"golang.org/x/oauth2"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/daemon/daemontest"
	"github.com/switchbridge/switchbridge/bridge/store"
)

// This file covers taking access back: the connected apps page (remove,
// change switches) and removals made by another process on the same
// database, as the owner's commands are. Every check that a token stops
// working uses it just before the removal, so a cached grant would be
// served if the removal left a cache window.

// wantStatus calls uri with token and wants status.
func wantStatus(t *testing.T, h *daemontest.Harness, what, method, uri, token string, status int) {
	t.Helper()
	if p := h.Call(t, method, uri, token); p.StatusCode != status {
		t.Errorf("%s: %s %s answered %d %s, want %d", what, method, uri, p.StatusCode, p.Body, status)
	}
}

// wantWorks and wantStopped check a grant's token at the installation API
// and discovery.
func wantWorks(t *testing.T, h *daemontest.Harness, what string, g daemontest.Grant) {
	t.Helper()
	wantStatus(t, h, what, http.MethodGet, g.URI+"/switches", g.Token.AccessToken, http.StatusOK)
	wantStatus(t, h, what, http.MethodGet, h.URL+"/api/apps/endpoints", g.Token.AccessToken, http.StatusOK)
}

// wantStopped checks that a grant's access token is refused everywhere
// and that its refresh token gets no new one.
func wantStopped(t *testing.T, h *daemontest.Harness, what string, g daemontest.Grant) {
	t.Helper()
	wantStatus(t, h, what, http.MethodGet, g.URI+"/switches", g.Token.AccessToken, http.StatusUnauthorized)
	wantStatus(t, h, what, http.MethodPut, g.URI+"/switches/on", g.Token.AccessToken, http.StatusUnauthorized)
	wantStatus(t, h, what, http.MethodGet, h.URL+"/api/apps/endpoints", g.Token.AccessToken, http.StatusUnauthorized)
	if g.Token.RefreshToken == "" || g.Config == nil {
		t.Fatalf("%s: the grant has no refresh token to try", what)
	}
	stale := &oauth2.Token{AccessToken: g.Token.AccessToken, RefreshToken: g.Token.RefreshToken, Expiry: time.Now().Add(-time.Minute)}
	tok, err := g.Config.TokenSource(context.Background(), stale).Token()
	var re *oauth2.RetrieveError
	// invalid_client when the app itself is gone.
	if !errors.As(err, &re) || (re.ErrorCode != "invalid_grant" && re.ErrorCode != "invalid_client") {
		t.Errorf("%s: refreshing answered %v (token %v), want invalid_grant", what, err, tok != nil)
	}
}

func TestConnectedAppsPageRemove(t *testing.T) {
	f := newFixture(t)
	h := f.hub
	home := h.Authorize(t, f.app, "alice", "alice-pw", 1, "kitchen", "hall")
	garage := h.Authorize(t, f.app, "alice", "alice-pw", 2, "garage-light")
	bobs := h.Authorize(t, f.app, "bob", "bob-pw", 2, "garage-light")

	// Nobody logged in: the page is its login form, and its POSTs refuse.
	anon := h.NewBrowser()
	if p := anon.Get(t, "/oauth/apps"); p.StatusCode != http.StatusOK || strings.Contains(p.Body, home.InstallationID()) {
		t.Fatalf("/oauth/apps without a login: %d\n%s", p.StatusCode, p.Body)
	}
	if p := anon.Post(t, "/oauth/apps/remove", url.Values{"installation": {home.InstallationID()}, "csrf": {"x"}}); p.StatusCode != http.StatusForbidden {
		t.Errorf("remove without a login answered %d", p.StatusCode)
	}
	if p := anon.Get(t, "/oauth/apps/switches?installation="+home.InstallationID()); p.StatusCode != http.StatusSeeOther || p.Header.Get("Location") != "/oauth/apps" {
		t.Errorf("change switches without a login answered %d to %q", p.StatusCode, p.Header.Get("Location"))
	}

	b := h.NewBrowser()
	page := b.ConnectedApps(t, "alice", "alice-pw")
	for k, want := range map[string]string{
		"X-Frame-Options": "DENY", "Cache-Control": "no-store", "Referrer-Policy": "no-referrer", "X-Content-Type-Options": "nosniff",
	} {
		if got := page.Header.Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	if csp := page.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
	for _, want := range []string{
		`id="app-` + home.InstallationID() + `"`, `id="app-` + garage.InstallationID() + `"`,
		"<h2>Test app</h2>", `<dd class="location">Home</dd>`, `<dd class="switches">Kitchen light, Hall lamp</dd>`,
		`<dd class="location">Garage</dd>`, `<dd class="switches">Garage light</dd>`,
	} {
		if !strings.Contains(page.Body, want) {
			t.Errorf("the page lacks %s:\n%s", want, page.Body)
		}
	}
	if strings.Contains(page.Body, bobs.InstallationID()) {
		t.Errorf("alice's page shows bob's installation")
	}
	csrf := page.CSRF(t)

	// Last used: the grants were used by Authorize's discovery; the time
	// reaches the page once the write behind the requests is done.
	var lastUsed string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		in, err := h.Accounts.Installation(context.Background(), home.InstallationID())
		if err != nil {
			t.Fatal(err)
		}
		if !in.LastUsedAt.IsZero() {
			lastUsed = in.LastUsedAt.Local().Format("2 Jan 2006 15:04")
			break
		}
	}
	if lastUsed == "" {
		t.Fatal("the last use of the installation was never recorded")
	}
	if p := b.Get(t, "/oauth/apps"); !strings.Contains(p.Body, `<dd class="last-used">`+lastUsed+`</dd>`) {
		t.Errorf("the page does not show the last use %s:\n%s", lastUsed, p.Body)
	}

	// A POST without the page's CSRF token changes nothing.
	if p := b.Post(t, "/oauth/apps/remove", url.Values{"installation": {home.InstallationID()}}); p.StatusCode != http.StatusForbidden {
		t.Errorf("remove without the CSRF token answered %d", p.StatusCode)
	}
	wantWorks(t, h, "after a refused remove", home)
	// Bob's installation is not alice's to remove, and the answer does
	// not tell her it exists.
	p := b.Post(t, "/oauth/apps/remove", url.Values{"installation": {bobs.InstallationID()}, "csrf": {csrf}})
	if p.StatusCode != http.StatusSeeOther {
		t.Errorf("removing another user's installation answered %d", p.StatusCode)
	}
	if p := b.Get(t, "/oauth/apps"); !strings.Contains(p.Body, "That app is not connected (any more).") {
		t.Errorf("removing bob's installation said:\n%s", p.Body)
	}
	wantWorks(t, h, "bob's grant after alice tried to remove it", bobs)

	// Remove: the token stops at once, everywhere, and the grant is gone.
	wantWorks(t, h, "before the remove", home)
	p = b.Post(t, "/oauth/apps/remove", url.Values{"installation": {home.InstallationID()}, "csrf": {csrf}})
	if p.StatusCode != http.StatusSeeOther || p.Header.Get("Location") != "/oauth/apps" {
		t.Fatalf("remove answered %d to %q, want 303 to /oauth/apps", p.StatusCode, p.Header.Get("Location"))
	}
	if got := p.Header.Get("Cache-Control"); got != "no-store" {
		t.Errorf("the POST's answer has Cache-Control %q", got)
	}
	wantStopped(t, h, "after the remove", home)
	wantWorks(t, h, "alice's other installation", garage)
	wantWorks(t, h, "bob's installation", bobs)
	if _, err := h.Accounts.Installation(context.Background(), home.InstallationID()); bridge.ErrorCode(err) != bridge.ENOTFOUND {
		t.Errorf("the removed installation is still stored: %v", err)
	}
	p = b.Get(t, "/oauth/apps")
	if strings.Contains(p.Body, home.InstallationID()) || !strings.Contains(p.Body, garage.InstallationID()) {
		t.Errorf("after the remove the page shows:\n%s", p.Body)
	}
	if !strings.Contains(p.Body, "Test app is removed from Home: its access ended.") {
		t.Errorf("the page does not say what was removed:\n%s", p.Body)
	}
	// Discovery of the other installation lists it alone.
	if eps := h.Endpoints(t, garage.Token.AccessToken); len(eps) != 1 || eps[0].URI != garage.URI {
		t.Errorf("discovery after the remove: %+v", eps)
	}

	// Logging out from the page leads back to its login form.
	p = b.Post(t, "/oauth/logout", url.Values{"return": {"apps"}, "csrf": {csrf}})
	if p.StatusCode != http.StatusSeeOther || p.Header.Get("Location") != "/oauth/apps" {
		t.Errorf("logout answered %d to %q", p.StatusCode, p.Header.Get("Location"))
	}
	if p := b.Get(t, "/oauth/apps"); strings.Contains(p.Body, garage.InstallationID()) {
		t.Error("the page still lists installations after logout")
	}
}

func TestConnectedAppsPageChangeSwitches(t *testing.T) {
	f := newFixture(t)
	h := f.hub
	g := h.Authorize(t, f.app, "alice", "alice-pw", 1, "kitchen", "hall")
	id := g.InstallationID()
	if got := names(h.List(t, g)); got != "Kitchen light,Hall lamp" {
		t.Fatalf("before: %s", got)
	}
	if p := h.Command(t, g, "off"); p.StatusCode >= 300 {
		t.Fatalf("off before the change: %d %s", p.StatusCode, p.Body)
	}

	b := h.NewBrowser()
	csrf := b.ConnectedApps(t, "alice", "alice-pw").CSRF(t)
	form := b.Get(t, "/oauth/apps/switches?installation="+id)
	if form.StatusCode != http.StatusOK || form.Header.Get("X-Frame-Options") != "DENY" || form.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("the change page answered %d %v", form.StatusCode, form.Header)
	}
	for _, want := range []string{
		`value="kitchen" checked>`, `value="hall" checked>`, `value="doorbell">`, `name="installation" value="` + id + `"`,
	} {
		if !strings.Contains(form.Body, want) {
			t.Errorf("the change page lacks %s:\n%s", want, form.Body)
		}
	}
	if strings.Contains(form.Body, "garage-light") {
		t.Error("the change page offers a switch of another location")
	}
	change := func(switches ...string) *daemontest.Page {
		t.Helper()
		return b.Post(t, "/oauth/apps/switches", url.Values{"installation": {id}, "csrf": {csrf}, "switch": switches})
	}

	// Refusals keep the installation as it was.
	for _, c := range []struct {
		switches []string
		msg      string
	}{
		{nil, "Select at least one switch the app may control."},
		{[]string{"kitchen", "garage-light"}, "Some selected switches are not in Home."},
	} {
		p := change(c.switches...)
		if p.StatusCode != http.StatusSeeOther || p.Header.Get("Location") != "/oauth/apps/switches?installation="+id {
			t.Errorf("%v: answered %d to %q", c.switches, p.StatusCode, p.Header.Get("Location"))
		}
		if p := b.Get(t, p.Header.Get("Location")); !strings.Contains(p.Body, c.msg) {
			t.Errorf("%v: the change page does not say %q:\n%s", c.switches, c.msg, p.Body)
		}
		if got := names(h.List(t, g)); got != "Kitchen light,Hall lamp" {
			t.Errorf("after a refused change (%v) the token grants %s", c.switches, got)
		}
	}
	if p := b.Post(t, "/oauth/apps/switches", url.Values{"installation": {id}, "switch": {"doorbell"}}); p.StatusCode != http.StatusForbidden {
		t.Errorf("a change without the CSRF token answered %d", p.StatusCode)
	}

	// The change: same installation, same URI, same token, new switches,
	// at once.
	p := change("kitchen", "doorbell")
	if p.StatusCode != http.StatusSeeOther || p.Header.Get("Location") != "/oauth/apps" {
		t.Fatalf("change answered %d to %q", p.StatusCode, p.Header.Get("Location"))
	}
	if got := names(h.List(t, g)); got != "Kitchen light,Doorbell chime" {
		t.Errorf("after the change the token grants %s, want Kitchen light,Doorbell chime", got)
	}
	if eps := h.Endpoints(t, g.Token.AccessToken); len(eps) != 1 || eps[0].URI != g.URI {
		t.Errorf("discovery after the change: %+v, want the same URI %s", eps, g.URI)
	}
	if p := b.Get(t, "/oauth/apps"); !strings.Contains(p.Body, "Test app now controls Kitchen light, Doorbell chime in Home.") ||
		!strings.Contains(p.Body, `<dd class="switches">Kitchen light, Doorbell chime</dd>`) {
		t.Errorf("the page after the change:\n%s", p.Body)
	}
	// Hall is no longer the app's to switch.
	if p := h.Command(t, g, "on"); p.StatusCode >= 300 {
		t.Fatalf("on after the change: %d %s", p.StatusCode, p.Body)
	}
	if sw, _ := h.Switchboard.Switch("hall"); sw.Device.State().Value != bridge.Off {
		t.Errorf("the hall lamp, no longer granted, was switched to %s", sw.Device.State().Value)
	}

	// The OAuth consent page for the same app ticks what it has now.
	consent := h.NewBrowser().Login(t, h.OAuthConfig(f.app).AuthCodeURL("st"), "alice", "alice-pw")
	for _, want := range []string{`id="sw-1-kitchen" name="switch" value="kitchen" checked>`, `id="sw-1-doorbell" name="switch" value="doorbell" checked>`,
		`id="sw-1-hall" name="switch" value="hall">`, `href="/oauth/apps"`} {
		if !strings.Contains(consent.Body, want) {
			t.Errorf("the consent page lacks %s", want)
		}
	}
}

// names joins the names of a switch list.
func names(list []daemontest.Switch) string {
	var out []string
	for _, s := range list {
		out = append(out, s.Name)
	}
	return strings.Join(out, ",")
}

// Removals made through another handle on the same database, as the
// owner's commands make them from their own process, end access in the
// running daemon at once: its grant cache follows the store's access
// generation.
func TestRemovalsByAnotherProcessEndAccessAtOnce(t *testing.T) {
	f := newFixture(t)
	h := f.hub
	ctx := context.Background()
	other, err := store.Open(ctx, h.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	carol := h.AddUser(t, "carol", "carol-pw", 1, 2)
	app2 := h.AddApp(t, carol, true, redirect)

	for _, c := range []struct {
		name   string
		grant  func() daemontest.Grant
		remove func(g daemontest.Grant) error
	}{
		{"uninstall", func() daemontest.Grant { return h.Authorize(t, f.app, "alice", "alice-pw", 1, "kitchen") },
			func(g daemontest.Grant) error { return accounts.New(other).Uninstall(ctx, g.InstallationID()) }},
		{"membership ended", func() daemontest.Grant { return h.Authorize(t, f.app, "carol", "carol-pw", 1, "hall") },
			func(daemontest.Grant) error {
				_, err := accounts.New(other).RemoveUserLocation(ctx, "carol", 1)
				return err
			}},
		{"app deleted", func() daemontest.Grant { return h.Authorize(t, app2, "bob", "bob-pw", 2, "garage-light") },
			func(daemontest.Grant) error { return accounts.New(other).DeleteApp(ctx, app2.ClientID) }},
		{"user deleted", func() daemontest.Grant { return h.Authorize(t, f.app, "bob", "bob-pw", 2, "garage-light") },
			func(daemontest.Grant) error { return accounts.New(other).DeleteUser(ctx, "bob") }},
	} {
		g := c.grant()
		wantWorks(t, h, c.name+": before", g)
		if err := c.remove(g); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		wantStopped(t, h, c.name+": right after", g)
	}
	// What was not removed still works.
	g := h.Authorize(t, f.app, "alice", "alice-pw", 2, "garage-light")
	wantWorks(t, h, "an untouched installation", g)
}

// TestLoginSessionsEndWithTheirUser: a login session of a user who is
// deleted does not pass to the next user created (who must not inherit
// the deleted user's id), and changing a password ends that user's
// sessions, whichever process changes it.
func TestLoginSessionsEndWithTheirUser(t *testing.T) {
	h := daemontest.Start(t, hubConfig)
	ctx := context.Background()
	alice := h.AddUser(t, "alice", "alice-pw", 1)
	bob := h.AddUser(t, "bob", "bob-pw", 2) // the newest user
	app := h.AddApp(t, alice, true, redirect)

	bobs := h.NewBrowser()
	bobs.ConnectedApps(t, "bob", "bob-pw")
	other, err := store.Open(ctx, h.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := accounts.New(other).DeleteUser(ctx, "bob"); err != nil {
		t.Fatal(err)
	}
	carol := h.AddUser(t, "carol", "carol-pw", 2)
	if carol.ID == bob.ID {
		t.Fatalf("carol was given deleted bob's id %d", bob.ID)
	}
	g := h.Authorize(t, app, "carol", "carol-pw", 2, "garage-light")
	p := bobs.Get(t, "/oauth/apps")
	if !strings.Contains(p.Body, `name="return" value="apps"`) || strings.Contains(p.Body, g.InstallationID()) {
		t.Errorf("deleted bob's session, after carol was added, shows:\n%s", p.Body)
	}
	if p := bobs.Post(t, "/oauth/apps/remove", url.Values{"installation": {g.InstallationID()}, "csrf": {"x"}}); p.StatusCode == http.StatusSeeOther {
		if _, err := h.Accounts.Installation(ctx, g.InstallationID()); err != nil {
			t.Errorf("deleted bob's session removed carol's installation")
		}
	}
	wantWorks(t, h, "carol's installation", g)

	// A password change ends the user's sessions.
	alices := h.NewBrowser()
	alices.ConnectedApps(t, "alice", "alice-pw")
	hash, err := bcrypt.GenerateFromPassword([]byte("new-pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	if err := accounts.New(other).SetPassword(ctx, "alice", hash); err != nil {
		t.Fatal(err)
	}
	if p := alices.Get(t, "/oauth/apps"); !strings.Contains(p.Body, `name="return" value="apps"`) || strings.Contains(p.Body, "<h1>Connected apps</h1>") {
		t.Errorf("alice's session outlived her password change:\n%s", p.Body)
	}
	h.NewBrowser().ConnectedApps(t, "alice", "new-pw")
}
