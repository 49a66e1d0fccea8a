// Built without the race detector, as browser_test.go is (chromedp races
// internally); make test runs the TestBrowser tests in a step of their own.

//go:build !race

package daemon_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"golang.org/x/oauth2"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/daemon/daemontest"
	"github.com/switchbridge/switchbridge/bridge/infra/logtest"
	"github.com/switchbridge/switchbridge/bridge/platform/oauth"
)

// The console's pages of the platform's records (apps, installations,
// hubs) in Chromium against a real single box: each action through its
// page, its effect checked through the store, the OAuth flow and the
// installation API.

// consoleRedirectURI is the redirect URI of the apps the console tests
// create: the flow reads the code from the redirect, which nothing
// serves.
const consoleRedirectURI = "http://127.0.0.1:9/cb"

// secretShown is the one secret the page shows, which the test's logs
// must then never hold.
func (p *consolePage) secretShown() string {
	p.t.Helper()
	if n := p.count("main .secret-value"); n != 1 {
		p.fatalf("the page shows %d secrets, want 1", n)
	}
	s := p.text("main .secret-value")
	logtest.NoteSecret(s)
	return s
}

// ageLogin makes every login session's password older than the console's
// re-authentication window, as five minutes and more of use would.
func ageLogin(t *testing.T, h *consoleHub) {
	t.Helper()
	if _, err := h.Store.ExecContext(context.Background(), `UPDATE login_sessions SET created_at = created_at - ?`,
		(10 * time.Minute).Milliseconds()); err != nil {
		t.Fatal(err)
	}
}

// TestBrowserConsoleApps: an owner creates an app at the console, its
// secret shown once, and that client id and secret complete a real OAuth
// flow whose token switches; the installation is seen, made see-only
// (a command to the switch is then 403) and revoked (its token then
// 401); the app is unpublished, made legacy, its secret rotated (only
// after the password is typed again, once the last time is older than
// five minutes) and deleted. The app's name is markup, rendered as text.
func TestBrowserConsoleApps(t *testing.T) {
	exe := findBrowser(t)
	h := startConsoleHub(t, consoleTestConfig)
	browser := startBrowserFor(t, exe, consoleTestTimeout)
	ctx := context.Background()
	api := daemontest.Remote(strings.TrimRight(h.PublicURL(), "/")).Checked(t)
	p := newConsolePage(t, browser, h)
	dl := p.answerDialogs()

	// Create: the secret on the answer, once, and only its hash stored.
	const evil = `<img src=x onerror=alert(1)>`
	p.openConsole("/console/apps", "olivia", ownerPassword)
	p.do("fill in a new app",
		chromedp.SendKeys(chromedp.ID("app-name"), evil),
		chromedp.SendKeys(chromedp.ID("app-uris"), consoleRedirectURI),
		chromedp.Click(chromedp.ID("app-published")))
	notice, problem := p.submit("create the app", `form[action="/console/apps/create"] button[type=submit]`)
	secret := p.secretShown()
	apps, err := h.Accounts.Apps(ctx)
	if err != nil || len(apps) != 1 {
		t.Fatalf("after creating one app the store holds %d, %v", len(apps), err)
	}
	a := apps[0]
	if problem != "" || !strings.Contains(notice, a.ClientID) {
		p.fatalf("creating an app: notice %q, error %q; want its client id %s", notice, problem, a.ClientID)
	}
	if a.Name != evil || !a.Published || a.Legacy || a.RequirePKCE || !slices.Equal(a.RedirectURIs, []string{consoleRedirectURI}) {
		t.Errorf("the stored app: %+v", a)
	}
	if !bytes.Equal(a.SecretHash, oauth.Hash(secret)) {
		t.Fatal("the secret the page showed is not the one stored (hashed)")
	}
	if !strings.Contains(p.text("main .secret"), a.ClientID) {
		t.Errorf("the secret is not shown with its app's client id: %q", p.text("main .secret"))
	}
	p.checkPage("apps-secret")
	p.openConsole("/console/apps", "olivia", ownerPassword)
	if n := p.count("main .secret-value"); n != 0 || strings.Contains(p.text("body"), secret) {
		p.fatalf("the apps page shows the secret again (%d secret boxes)", n)
	}
	if n := p.count("main img"); n != 0 {
		p.fatalf("the app's name became %d img elements", n)
	}
	if !strings.Contains(p.text(fmt.Sprintf("tr[data-app=%q]", a.ClientID)), evil) {
		p.fatalf("the apps table does not show the name %q as text", evil)
	}
	p.checkPage("apps")

	// The client id and secret complete the flow; the token switches.
	app := daemontest.App{ClientID: a.ClientID, Secret: secret, RedirectURIs: []string{consoleRedirectURI}}
	g := api.Authorize(t, app, "olivia", ownerPassword, 1, "kitchen", "hall")
	if r := api.Command(t, g, "on"); r.StatusCode != http.StatusNoContent {
		t.Fatalf("the app's token: PUT /switches/on = %d %s", r.StatusCode, r.Body)
	}
	if v := hubValues(t, h.Daemon); v["kitchen"] != bridge.On || v["hall"] != bridge.On {
		t.Fatalf("after the app's command: %v, want kitchen and hall on", v)
	}

	// The installation: listed under its app, then see-only, then
	// switchable again.
	in := g.InstallationID()
	row := fmt.Sprintf("tr[data-installation=%q]", in)
	p.openConsole("/console/installations?app="+a.ClientID, "olivia", ownerPassword)
	if got := p.text(row); !strings.Contains(got, evil) || !strings.Contains(got, "olivia") || !strings.Contains(got, "Home (1)") ||
		!strings.Contains(got, "kitchen") || strings.Contains(got, "(see-only)") {
		p.fatalf("the installation's row says %q", got)
	}
	p.checkPage("installations")
	notice, problem = p.submit("make kitchen see-only", row+` li[data-switch="kitchen"] button`)
	if problem != "" || !strings.Contains(notice, "kitchen is see-only") {
		p.fatalf("making kitchen see-only: notice %q, error %q", notice, problem)
	}
	if got := p.text(row + ` li[data-switch="kitchen"]`); !strings.Contains(got, "(see-only)") {
		p.fatalf("kitchen's entry after see-only says %q", got)
	}
	if stored, err := h.Accounts.Installation(ctx, in); err != nil || !slices.Equal(stored.SeeOnly, []string{"kitchen"}) {
		t.Fatalf("the stored installation's see-only switches: %v, %v; want kitchen", stored, err)
	}
	seeOnlyRefusal(t, "PUT /switches/kitchen/off, kitchen see-only", api.Call(t, http.MethodPut, g.URI+"/switches/kitchen/off", g.Token.AccessToken), "kitchen")
	if r := api.Call(t, http.MethodPut, g.URI+"/switches/hall/off", g.Token.AccessToken); r.StatusCode != http.StatusNoContent {
		t.Errorf("PUT /switches/hall/off, hall still switchable: %d %s", r.StatusCode, r.Body)
	}
	notice, problem = p.submit("let the app switch kitchen again", row+` li[data-switch="kitchen"] button`)
	if problem != "" || !strings.Contains(notice, "can be seen and switched") {
		p.fatalf("making kitchen switchable: notice %q, error %q", notice, problem)
	}
	if p.location().RawQuery != "app="+a.ClientID {
		t.Errorf("after an action the page is %s, want the filter kept", p.location())
	}
	if r := api.Call(t, http.MethodPut, g.URI+"/switches/kitchen/off", g.Token.AccessToken); r.StatusCode != http.StatusNoContent {
		t.Errorf("PUT /switches/kitchen/off, kitchen switchable again: %d %s", r.StatusCode, r.Body)
	}

	// Change the switches it grants: hall no longer, garage's light is
	// not offered (another location); the token sees only kitchen then.
	if n := p.count(row + ` input[id^="grant-"][value="garage-light"]`); n != 0 {
		p.fatalf("the change form offers a switch of another location")
	}
	p.do("untick hall", chromedp.Click(chromedp.CSS(row+` input[id^="grant-"][value="hall"]`)))
	notice, problem = p.submit("change the installation's switches", row+` form[action="/console/installations/switches"] button`)
	if problem != "" || !strings.Contains(notice, "Changed the switches") {
		p.fatalf("changing the switches: notice %q, error %q", notice, problem)
	}
	if stored, err := h.Accounts.Installation(ctx, in); err != nil || !slices.Equal(stored.SwitchIDs, []string{"kitchen"}) {
		t.Fatalf("the stored installation after the change: %v, %v; want kitchen alone", stored, err)
	}
	if r := api.Call(t, http.MethodGet, g.URI+"/switches", g.Token.AccessToken); r.StatusCode != http.StatusOK || strings.Contains(string(r.Body), "Hall") {
		t.Errorf("GET /switches after hall was taken away: %d %s", r.StatusCode, r.Body)
	}
	p.do("untick every switch", chromedp.Click(chromedp.CSS(row+` input[id^="grant-"][value="kitchen"]`)))
	if _, problem = p.submit("grant no switch", row+` form[action="/console/installations/switches"] button`); !strings.Contains(problem, "at least one switch") {
		p.fatalf("a change to no switch: the page says %q, want the consent page's rule", problem)
	}

	// The filter: by user, and a user who is not there said so.
	p.openConsole("/console/installations?user=nico", "olivia", ownerPassword)
	if n := p.count("tr[data-installation]"); n != 0 {
		p.fatalf("nico's installations: %d rows, want none", n)
	}
	if status := p.navigate(p.base + "/console/installations?user=zed"); status != http.StatusNotFound || !strings.Contains(p.optText("main .error"), "zed") {
		p.fatalf("the installations of a user who is not there: HTTP %d, error %q", status, p.optText("main .error"))
	}

	// Revoke: the token is refused at once.
	p.openConsole("/console/installations", "olivia", ownerPassword)
	notice, problem = p.submit("revoke the installation", row+` form[action="/console/installations/revoke"] button`)
	if problem != "" || !strings.Contains(notice, "no longer work") {
		p.fatalf("revoking: notice %q, error %q", notice, problem)
	}
	if r := api.Call(t, http.MethodGet, g.URI+"/switches", g.Token.AccessToken); r.StatusCode != http.StatusUnauthorized && r.StatusCode != http.StatusForbidden {
		t.Fatalf("the revoked installation's token: GET /switches = %d, want 401 or 403", r.StatusCode)
	}
	if _, err := h.Accounts.Installation(ctx, in); bridge.ErrorCode(err) != bridge.ENOTFOUND {
		t.Errorf("the revoked installation in the store: %v, want ENOTFOUND", err)
	}

	// Publish and legacy, each through the store's flag.
	appRow := fmt.Sprintf("tr[data-app=%q]", a.ClientID)
	p.openConsole("/console/apps", "olivia", ownerPassword)
	notice, problem = p.submit("unpublish the app", appRow+` form[action="/console/apps/publish"] button`)
	if stored, _ := h.Accounts.App(ctx, a.ClientID); problem != "" || stored.Published || !strings.Contains(notice, "unpublished") {
		p.fatalf("unpublishing: notice %q, error %q, published %v", notice, problem, stored.Published)
	}
	notice, problem = p.submit("turn legacy on", appRow+` form[action="/console/apps/legacy"] button`)
	if stored, _ := h.Accounts.App(ctx, a.ClientID); problem != "" || !stored.Legacy || !strings.Contains(notice, "query string") {
		p.fatalf("legacy on: notice %q, error %q, legacy %v", notice, problem, stored.Legacy)
	}

	// Rotate, with the password typed more than five minutes ago: the
	// password form, no secret and nothing rotated; then, typed again,
	// the new secret.
	ageLogin(t, h)
	p.follow("rotate the secret with an old login", chromedp.Click(chromedp.CSS(appRow+` form[action="/console/apps/rotate"] button`)))
	if p.text("main h1") != "Confirm it is you" || p.count(".secret-value") != 0 {
		p.fatalf("rotating with a password typed 10 minutes ago: the page is %q with %d secrets, want the password asked", p.text("main h1"), p.count(".secret-value"))
	}
	if stored, _ := h.Accounts.App(ctx, a.ClientID); !bytes.Equal(stored.SecretHash, oauth.Hash(secret)) {
		t.Fatal("the secret was rotated before the password was typed again")
	}
	if got := p.value("#username"); got != "olivia" {
		p.fatalf("the password form is for %q, want olivia", got)
	}
	p.do("type the password again", chromedp.SendKeys(chromedp.ID("password"), ownerPassword))
	if u := p.follow("confirm the password", chromedp.Click(chromedp.ID("login"))); u.Path != "/console/apps" || p.count(".secret-value") != 0 {
		p.fatalf("the password typed again led to %s with %d secrets, want the apps page and none", u, p.count(".secret-value"))
	}
	notice, problem = p.submit("rotate the secret", appRow+` form[action="/console/apps/rotate"] button`)
	fresh := p.secretShown()
	if problem != "" || !strings.Contains(notice, "no longer works") || fresh == secret {
		p.fatalf("rotating: notice %q, error %q, the same secret %v", notice, problem, fresh == secret)
	}
	if stored, _ := h.Accounts.App(ctx, a.ClientID); !bytes.Equal(stored.SecretHash, oauth.Hash(fresh)) {
		t.Fatal("the rotated secret the page showed is not the one stored")
	}
	code := api.Code(t, app, "olivia", ownerPassword, 1, "kitchen")
	if _, err := api.OAuthConfig(app).Exchange(context.WithValue(ctx, oauth2.HTTPClient, api.Client), code); err == nil {
		t.Fatal("the old secret still exchanges a code after the rotation")
	}
	app.Secret = fresh
	g = api.Authorize(t, app, "olivia", ownerPassword, 1, "kitchen")

	// A rule of the admin service, in its own words.
	p.openConsole("/console/apps", "olivia", ownerPassword)
	p.do("fill in an app with a lifetime of 1.5 s",
		chromedp.SendKeys(chromedp.ID("app-name"), "Half seconds"),
		chromedp.SendKeys(chromedp.ID("app-uris"), consoleRedirectURI),
		chromedp.SendKeys(chromedp.ID("app-lifetime"), "1.5s"))
	if _, problem = p.submit("create the app", `form[action="/console/apps/create"] button[type=submit]`); !strings.Contains(problem, "is not a lifetime") {
		p.fatalf("a lifetime of 1.5 s: the page says %q, want the admin service's rule", problem)
	}
	if n := p.count("main .secret-value"); n != 0 {
		p.fatalf("a refused app showed %d secrets", n)
	}

	// Delete: the confirmation counts what it ends; the token stops.
	notice, problem = p.submit("delete the app", appRow+` form[action="/console/apps/delete"] button`)
	if problem != "" || !strings.Contains(notice, "1 installation uninstalled") {
		p.fatalf("deleting the app: notice %q, error %q", notice, problem)
	}
	if _, err := h.Accounts.App(ctx, a.ClientID); bridge.ErrorCode(err) != bridge.ENOTFOUND {
		t.Errorf("the deleted app in the store: %v", err)
	}
	if r := api.Call(t, http.MethodGet, g.URI+"/switches", g.Token.AccessToken); r.StatusCode != http.StatusUnauthorized && r.StatusCode != http.StatusForbidden {
		t.Errorf("the deleted app's token: GET /switches = %d, want 401 or 403", r.StatusCode)
	}
	got := dl.confirmations()
	wantConfirm := []string{"Revoke installation " + in, "Give " + evil + " a new client secret", "Give " + evil, "Delete " + evil + "? It ends 1 installation:"}
	if len(got) != len(wantConfirm) {
		t.Fatalf("the page asked %q, want %d confirmations", got, len(wantConfirm))
	}
	for i, w := range wantConfirm {
		if !strings.HasPrefix(got[i], w) {
			t.Errorf("confirmation %d asked %q, want it to begin %q", i, got[i], w)
		}
	}
}

// TestBrowserConsoleHubs: an owner adds a hub at the console, its secret
// shown once and stored hashed; the list shows its link as hub list
// does; its secret is rotated; a base URL the admin service refuses is
// refused in its words; the hub is removed, which the store's hub list
// then lacks.
func TestBrowserConsoleHubs(t *testing.T) {
	exe := findBrowser(t)
	h := startConsoleHub(t, consoleTestConfig)
	browser := startBrowserFor(t, exe, consoleTestTimeout)
	ctx := context.Background()
	p := newConsolePage(t, browser, h)
	dl := p.answerDialogs()

	p.openConsole("/console/hubs", "olivia", ownerPassword)
	p.do("fill in a new hub", chromedp.SendKeys(chromedp.ID("hub-name"), "barn"), chromedp.SendKeys(chromedp.ID("hub-url"), "https://barn.example:8443/"))
	notice, problem := p.submit("add the hub", `form[action="/console/hubs/add"] button[type=submit]`)
	secret := p.secretShown()
	states, err := h.Platform.Admin.HubStates(ctx, time.Now())
	if err != nil || len(states) != 1 {
		t.Fatalf("after adding one hub the store lists %d, %v", len(states), err)
	}
	hub := states[0]
	if problem != "" || !strings.Contains(notice, hub.ID) || !strings.Contains(notice, "platform.secret_file") {
		p.fatalf("adding a hub: notice %q, error %q", notice, problem)
	}
	if hub.Name != "barn" || hub.BaseURL != "https://barn.example:8443" || hub.Link != "never" || !bytes.Equal(hub.SecretHash, oauth.Hash(secret)) {
		t.Fatalf("the stored hub: %+v, link %s; want barn at https://barn.example:8443 holding the shown secret's hash, never seen", hub.RegisteredHub, hub.Link)
	}
	p.checkPage("hubs-secret")

	// The hub calls and reports a location: the list shows it up.
	if err := h.Accounts.SetInventory(ctx, hub.ID, "9.8.7", []bridge.RemoteLocation{{ID: 7, Name: "Barn"}}, nil); err != nil {
		t.Fatal(err)
	}
	row := fmt.Sprintf("tr[data-hub=%q]", hub.ID)
	p.openConsole("/console/hubs", "olivia", ownerPassword)
	if got := p.text(row); !strings.Contains(got, "Barn (7)") || !strings.Contains(got, "9.8.7") || p.text(row+` [data-field="link"]`) != "up" {
		p.fatalf("the hub's row after it called: %q, link %q", got, p.text(row+` [data-field="link"]`))
	}
	p.checkPage("hubs")

	notice, problem = p.submit("rotate the hub's secret", row+` form[action="/console/hubs/rotate"] button`)
	fresh := p.secretShown()
	if problem != "" || fresh == secret || !strings.Contains(notice, "no longer works") {
		p.fatalf("rotating the hub's secret: notice %q, error %q, the same secret %v", notice, problem, fresh == secret)
	}
	if stored, err := h.Accounts.Hub(ctx, hub.ID); err != nil || !bytes.Equal(stored.SecretHash, oauth.Hash(fresh)) {
		t.Fatalf("the rotated hub secret is not the one stored: %v", err)
	}

	p.openConsole("/console/hubs", "olivia", ownerPassword)
	p.do("fill in a hub at an ftp URL", chromedp.SendKeys(chromedp.ID("hub-name"), "loft"), chromedp.SendKeys(chromedp.ID("hub-url"), "ftp://loft.example"))
	if _, problem = p.submit("add the hub", `form[action="/console/hubs/add"] button[type=submit]`); !strings.Contains(problem, "not a valid URL for a hub") {
		p.fatalf("a hub at an ftp URL: the page says %q, want the admin service's rule", problem)
	}

	notice, problem = p.submit("remove the hub", row+` form[action="/console/hubs/remove"] button`)
	if problem != "" || !strings.Contains(notice, "Removed hub barn") || !strings.Contains(notice, "0 installations") {
		p.fatalf("removing the hub: notice %q, error %q", notice, problem)
	}
	if states, err := h.Platform.Admin.HubStates(ctx, time.Now()); err != nil || len(states) != 0 {
		t.Fatalf("after removing the hub the store lists %d hubs, %v", len(states), err)
	}
	if got := dl.confirmations(); len(got) != 2 || !strings.HasPrefix(got[0], "Give hub barn a new secret") || !strings.HasPrefix(got[1], "Remove hub barn? It uninstalls 0 installations") {
		t.Errorf("the hubs page asked %q", got)
	}
}
