package daemontest

// Users, apps and the authorization flow: what a test sets up in the
// store, and the whole OAuth flow as a third-party client runs it.

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
	"golang.org/x/oauth2"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/infra/logtest"
	"github.com/switchbridge/switchbridge/bridge/platform/oauth"
)

// AddUser creates a user who belongs to the given locations.
func (h *Harness) AddUser(tb testing.TB, name, password string, locations ...int64) *bridge.User {
	tb.Helper()
	logtest.NoteSecret(password)
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		tb.Fatal(err)
	}
	u, err := h.Accounts.CreateUser(context.Background(), name, hash, locations)
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
	logtest.NoteSecret(a.Secret)
	err := h.Accounts.CreateApp(context.Background(), &bridge.App{
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

// InstallationID is the id of the installation at a grant's URI.
func (g Grant) InstallationID() string {
	return g.URI[strings.LastIndex(g.URI, "/")+1:]
}
