package daemon_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/daemon/daemontest"
	"github.com/switchbridge/switchbridge/bridge/platform/oauth"
)

// TestPlatformConsentOffersHubLocations: the platform's consent page lists
// a hub's location with its switches, marks it offline when the hub has
// not called lately, installs into it, and discovery sends the client to
// that hub; a location no hub holds is refused.
func TestPlatformConsentOffersHubLocations(t *testing.T) {
	h := daemontest.Start(t, hubConfig)
	ctx := context.Background()
	hub := &bridge.RegisteredHub{ID: "hub-barn", Name: "barn", BaseURL: "http://barn.example:8080", SecretHash: oauth.Hash("s")}
	if err := h.Accounts.CreateHub(ctx, hub); err != nil {
		t.Fatal(err)
	}
	err := h.Accounts.SetInventory(ctx, hub.ID, "v", []bridge.RemoteLocation{{ID: 20, Name: "Barn", Switches: []bridge.RemoteSwitch{
		{ID: "barn-light", Name: "Barn light", Commands: bridge.Commands},
		{ID: "bell", Name: "Barn bell", Commands: []bridge.Command{bridge.CommandOn}},
	}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Last seen a minute ago: offline.
	if err := h.Accounts.TouchHub(ctx, hub.ID, 0, time.Now().Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	u := h.AddUser(t, "alice", "pw-alice", 1, 20, 30)
	app := h.AddApp(t, u, true, "https://client.example/cb")
	cfg := h.OAuthConfig(app)
	authURL := cfg.AuthCodeURL("s1")
	b := h.NewBrowser()
	consent := b.Login(t, authURL, "alice", "pw-alice")
	for _, want := range []string{"Install into Barn", "Barn light", "Barn bell <span class=\"note\">(can only be switched on)", `id="offline-20"`, "The hub barn that holds Barn is offline"} {
		if !strings.Contains(consent.Body, want) {
			t.Errorf("consent page lacks %q", want)
		}
	}
	if strings.Contains(consent.Body, "Install into 30") || strings.Contains(consent.Body, `value="30"`) {
		t.Error("a location nobody holds is offered")
	}
	if p := b.Consent(t, consent, authURL, 30, "x"); p.StatusCode != http.StatusSeeOther || strings.Contains(p.Header.Get("Location"), "code=") {
		t.Errorf("install into a location nobody holds: %d %s", p.StatusCode, p.Header.Get("Location"))
	}
	if p := b.Consent(t, consent, authURL, 20, "elsewhere"); strings.Contains(p.Header.Get("Location"), "code=") {
		t.Errorf("a switch not in the hub's location was accepted")
	}
	g := h.Authorize(t, app, "alice", "pw-alice", 20, "bell")
	if !strings.HasPrefix(g.URI, hub.BaseURL+"/api/apps/installations/") {
		t.Errorf("discovery sent the client to %s, want hub barn", g.URI)
	}
	// The platform's own location still has the platform's base_url.
	own := h.Authorize(t, app, "alice", "pw-alice", 1, "kitchen")
	if !strings.HasPrefix(own.URI, h.URL+"/") {
		t.Errorf("own location's URI %s", own.URI)
	}

	// The connected apps page names the hub's location and switches, and
	// changes the switches of an installation on the hub.
	apps := h.NewBrowser()
	page := apps.ConnectedApps(t, "alice", "pw-alice")
	for _, want := range []string{"Barn", "Barn bell"} {
		if !strings.Contains(page.Body, want) {
			t.Errorf("connected apps page lacks %q:\n%s", want, page.Body)
		}
	}
	if strings.Contains(page.Body, "no longer on this hub") {
		t.Errorf("connected apps page takes the hub's location for a removed one:\n%s", page.Body)
	}
	id := g.InstallationID()
	form := apps.Get(t, "/oauth/apps/switches?installation="+id)
	if form.StatusCode != http.StatusOK || !strings.Contains(form.Body, `value="bell" checked>`) || !strings.Contains(form.Body, `value="barn-light">`) {
		t.Fatalf("change page for a hub's installation: %d\n%s", form.StatusCode, form.Body)
	}
	p := apps.Post(t, "/oauth/apps/switches", url.Values{"installation": {id}, "csrf": {page.CSRF(t)}, "switch": {"barn-light", "bell"}})
	if p.StatusCode != http.StatusSeeOther || p.Header.Get("Location") != "/oauth/apps" {
		t.Fatalf("changing a hub installation's switches: %d %q", p.StatusCode, p.Header.Get("Location"))
	}
	in, err := h.Accounts.Installation(ctx, id)
	if err != nil || strings.Join(in.SwitchIDs, ",") != "barn-light,bell" {
		t.Errorf("after the change the installation is %+v %v", in, err)
	}
}

// TestPlatformSendsHubInstallationsToTheirHub: a client that calls the
// platform for an installation one of its hubs serves is told which hub
// serves it and where, not that its switches are gone; the platform's own
// installations are answered as before.
func TestPlatformSendsHubInstallationsToTheirHub(t *testing.T) {
	h := daemontest.Start(t, hubConfig)
	ctx := context.Background()
	hub := &bridge.RegisteredHub{ID: "hub-barn", Name: "barn", BaseURL: "http://barn.example:8080", SecretHash: oauth.Hash("s")}
	if err := h.Accounts.CreateHub(ctx, hub); err != nil {
		t.Fatal(err)
	}
	err := h.Accounts.SetInventory(ctx, hub.ID, "v", []bridge.RemoteLocation{{ID: 20, Name: "Barn", Switches: []bridge.RemoteSwitch{
		{ID: "barn-light", Name: "Barn light", Commands: bridge.Commands},
	}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Accounts.TouchHub(ctx, hub.ID, 0, time.Now()); err != nil {
		t.Fatal(err)
	}
	u := h.AddUser(t, "alice", "pw-alice", 1, 20)
	app := h.AddApp(t, u, true, "https://client.example/cb")
	g := h.Authorize(t, app, "alice", "pw-alice", 20, "barn-light")
	atPlatform := h.URL + strings.TrimPrefix(g.URI, hub.BaseURL)
	want := `which hub \"barn\" serves: call it at ` + g.URI + `, not at the platform`
	for _, c := range []struct{ method, path string }{{http.MethodGet, "/switches"}, {http.MethodGet, "/switches/barn-light"}, {http.MethodPut, "/switches/on"}} {
		p := h.Call(t, c.method, atPlatform+c.path, g.Token.AccessToken)
		if p.StatusCode != http.StatusNotFound || !strings.Contains(p.Body, want) || strings.Contains(p.Body, "no longer configured") {
			t.Errorf("%s %s at the platform = %d %s, want 404 naming the hub (%s)", c.method, c.path, p.StatusCode, p.Body, want)
		}
	}
	own := h.Authorize(t, app, "alice", "pw-alice", 1, "kitchen")
	if p := h.Call(t, http.MethodGet, own.URI+"/switches", own.Token.AccessToken); p.StatusCode != http.StatusOK {
		t.Errorf("the platform's own installation: %d %s", p.StatusCode, p.Body)
	}
}
