package oauth

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
)

// Locations is where the install rules look a location and its switches
// up: the hub's configured table (bridge.Switchboard implements it).
type Locations interface {
	Location(id int64) (*bridge.Location, bool)
}

// IssuerStore is the storage an Issuer writes.
type IssuerStore interface {
	Installations
	Codes
	Tokens
}

// Issuer is the one place that installs apps and issues what reaches an
// installation: the code the consent page sends back to the client, the
// access and refresh tokens the token endpoint exchanges it (or a refresh
// token) for, and the token the CLI's install hands a developer. It holds
// the install rules, so every way in applies them alike, and the lifetimes
// of what it issues.
type Issuer struct {
	// TokenLifetime is the lifetime (expires_in) of access tokens, for
	// apps that have none of their own (bridge.App.AccessTokenLifetime).
	TokenLifetime time.Duration
	// CodeLifetime bounds authorization codes; never over
	// bridge.MaxCodeLifetime.
	CodeLifetime time.Duration

	store     IssuerStore
	locations Locations
	now       func() time.Time
}

// NewIssuer returns an Issuer that records into st and checks locations
// against locations, with the default lifetimes.
func NewIssuer(st IssuerStore, locations Locations) *Issuer {
	return &Issuer{
		TokenLifetime: bridge.DefaultTokenLifetime,
		CodeLifetime:  bridge.DefaultCodeLifetime,
		store:         st,
		locations:     locations,
		now:           time.Now,
	}
}

// Why the install rules refuse an install. Install's errors wrap one of
// them, so a caller can word the refusal for its user (the consent page asks
// to choose again); the error's own text names the ids, for the CLI and the
// log.
var (
	ErrNotInstallable  = errors.New("the app is not published; only its developer can install it")
	ErrNotDeveloper    = errors.New("only the app's developer may install it without the OAuth flow")
	ErrUnknownLocation = errors.New("the location is not configured on this hub")
	ErrNotMember       = errors.New("the user does not belong to the location")
	ErrNoSwitch        = errors.New("no switch selected")
	ErrSwitchElsewhere = errors.New("a selected switch is not in the location")
	// ErrSeeOnlyNotSelected is a switch granted see-only that is not
	// among the selected switches.
	ErrSeeOnlyNotSelected = errors.New("a see-only switch is not selected")
)

// InstallError is an install the rules refuse: Reason is one of the Err
// values above.
type InstallError struct {
	Reason error
	msg    string
}

func (e *InstallError) Error() string { return e.msg }

func (e *InstallError) Unwrap() error { return e.Reason }

func refuse(reason error, format string, args ...any) error {
	return &InstallError{Reason: reason, msg: fmt.Sprintf(format, args...)}
}

// InstallRequest is a user installing an app into one of their locations
// with some of its switches.
type InstallRequest struct {
	App        *bridge.App
	User       *bridge.User
	LocationID int64
	SwitchIDs  []string
	// SeeOnly are those of SwitchIDs the app may see but not switch.
	SeeOnly []string
}

// Install applies the install rules and records the installation: the app
// is published or the user is its developer; the location is configured
// and the user belongs to it; at least one switch is selected, and each is
// in that location, and each see-only one is among them. The switches keep
// the order given, repeats dropped. A refusal is an *InstallError.
func (i *Issuer) Install(ctx context.Context, r InstallRequest) (*bridge.Installation, error) {
	if !r.App.InstallableBy(r.User.ID) {
		return nil, refuse(ErrNotInstallable, "app %s is not published; only its developer can install it", r.App.ClientID)
	}
	loc, ok := i.locations.Location(r.LocationID)
	if !ok || r.LocationID <= 0 {
		return nil, refuse(ErrUnknownLocation, "location %d is not configured on this hub", r.LocationID)
	}
	if !r.User.MemberOf(loc.ID) {
		return nil, refuse(ErrNotMember, "user %s does not belong to location %d", r.User.Name, loc.ID)
	}
	if len(r.SwitchIDs) == 0 {
		return nil, refuse(ErrNoSwitch, "select at least one switch")
	}
	inLoc := make(map[string]bool, len(loc.Switches))
	for _, id := range loc.Switches {
		inLoc[id] = true
	}
	seen := make(map[string]bool, len(r.SwitchIDs))
	var ids []string
	for _, id := range r.SwitchIDs {
		if !inLoc[id] {
			return nil, refuse(ErrSwitchElsewhere, "switch %q is not in location %d (%s)", id, loc.ID, loc.Name)
		}
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	var seeOnly []string
	for _, id := range r.SeeOnly {
		if !seen[id] {
			return nil, refuse(ErrSeeOnlyNotSelected, "switch %q is see-only but not selected", id)
		}
		if !slices.Contains(seeOnly, id) {
			seeOnly = append(seeOnly, id)
		}
	}
	in := &bridge.Installation{ClientID: r.App.ClientID, UserID: r.User.ID, LocationID: loc.ID, SwitchIDs: ids, SeeOnly: seeOnly}
	if err := i.store.Install(ctx, in); err != nil {
		return nil, err
	}
	return in, nil
}

// IssueCode issues an authorization code for an installation the user just
// made, bound to the client, its redirect URI and its PKCE challenge ("" for
// none). It returns the code; only its hash is kept.
func (i *Issuer) IssueCode(ctx context.Context, in *bridge.Installation, redirectURI, codeChallenge string) (string, error) {
	code := NewSecret()
	err := i.store.CreateCode(ctx, Hash(code), bridge.AuthCode{ClientID: in.ClientID, RedirectURI: redirectURI,
		InstallationID: in.ID, ExpiresAt: i.now().Add(i.codeLifetime()), CodeChallenge: codeChallenge})
	if err != nil {
		return "", err
	}
	return code, nil
}

func (i *Issuer) codeLifetime() time.Duration {
	if i.CodeLifetime <= 0 || i.CodeLifetime > bridge.MaxCodeLifetime {
		return bridge.MaxCodeLifetime
	}
	return i.CodeLifetime
}

// IssuedToken is an access token, and the refresh token issued with it
// ("" for none), as the client receives them; only their hashes are kept.
type IssuedToken struct {
	Token        string
	RefreshToken string
	ExpiresIn    time.Duration
	ExpiresAt    time.Time
}

// AccessTokenLifetime is the lifetime of app's access tokens: its own, or
// the hub's.
func (i *Issuer) AccessTokenLifetime(app *bridge.App) time.Duration {
	if app.AccessTokenLifetime > 0 {
		return app.AccessTokenLifetime
	}
	return i.TokenLifetime
}

// newTokens makes an access token for app, and a refresh token when
// refresh is set, with the hashes the store keeps of them.
func (i *Issuer) newTokens(app *bridge.App, refresh bool) (IssuedToken, bridge.TokenPair) {
	now := i.now()
	life := i.AccessTokenLifetime(app)
	t := IssuedToken{Token: NewSecret(), ExpiresIn: life, ExpiresAt: now.Add(life)}
	p := bridge.TokenPair{AccessHash: Hash(t.Token), AccessExpiresAt: t.ExpiresAt}
	if refresh {
		t.RefreshToken = NewSecret()
		p.RefreshHash, p.RefreshExpiresAt = Hash(t.RefreshToken), now.Add(bridge.RefreshLifetime)
	}
	return t, p
}

// InstallForDeveloper installs an app without the OAuth flow and issues an
// access token for the installation: for the app's developer only (others
// install it through the OAuth flow), under the same rules as Install.
func (i *Issuer) InstallForDeveloper(ctx context.Context, r InstallRequest) (*bridge.Installation, IssuedToken, error) {
	if r.App.OwnerID != r.User.ID {
		return nil, IssuedToken{}, refuse(ErrNotDeveloper,
			"install is for an app's developer: %s does not own app %s (others install it through the OAuth flow)", r.User.Name, r.App.ClientID)
	}
	in, err := i.Install(ctx, r)
	if err != nil {
		return nil, IssuedToken{}, err
	}
	// No refresh token: the developer pastes the access token into their
	// client, and installs again for a new one.
	t, _ := i.newTokens(r.App, false)
	if err := i.store.CreateToken(ctx, Hash(t.Token), in.ID, t.ExpiresAt); err != nil {
		return nil, IssuedToken{}, err
	}
	return in, t, nil
}

// grantRefused is a code the token endpoint must refuse as invalid_grant
// for what it is bound to; its text is the error_description.
type grantRefused struct{ msg string }

func (e *grantRefused) Error() string { return e.msg }

// Redeem exchanges an authorization code for an access and a refresh
// token, once: the code must have been issued to app for redirectURI, and
// the PKCE verifier (hasVerifier says whether the request carried one) must
// match the code's challenge. It returns the tokens and what the code was
// bound to. Errors: a *grantRefused for a code bound otherwise,
// bridge.ErrCodeInvalid for an unknown or expired one, bridge.ErrCodeReused
// for a replay (which revoked the installation's grant).
func (i *Issuer) Redeem(ctx context.Context, app *bridge.App, code, redirectURI, verifier string, hasVerifier bool) (IssuedToken, *bridge.AuthCode, error) {
	t, pair := i.newTokens(app, true)
	c, err := i.store.RedeemCode(ctx, Hash(code), func(c bridge.AuthCode) error {
		switch {
		case c.ClientID != app.ClientID:
			return &grantRefused{"code was issued to another client"}
		case c.RedirectURI != redirectURI:
			return &grantRefused{"redirect_uri differs from the one the code was issued for"}
		case c.CodeChallenge == "" && app.RequirePKCE:
			// A code from before the app was made PKCE-only.
			return &grantRefused{"this app must use PKCE, but the code was issued without a code_challenge"}
		case c.CodeChallenge == "" && hasVerifier:
			// A verifier without a challenge is a downgrade (RFC 9700 §2.1.1).
			return &grantRefused{"code_verifier given, but the authorization request had no code_challenge"}
		case c.CodeChallenge != "" && (!hasVerifier || !pkceMatches(verifier, c.CodeChallenge)):
			return &grantRefused{"code_verifier does not match the code_challenge"}
		}
		return nil
	}, pair)
	if err != nil {
		return IssuedToken{}, nil, err
	}
	return t, c, nil
}

// Refresh exchanges a refresh token of app for a new access token and a
// new refresh token (RFC 6749 §6), spending the one given (RFC 9700
// §4.14.2). It returns the tokens and what the spent one was bound to.
// Errors: a *grantRefused for another client's token (left unspent),
// bridge.ErrRefreshInvalid for an unknown, expired or revoked one,
// bridge.ErrRefreshReused for one spent before (which revoked the
// installation's grant).
func (i *Issuer) Refresh(ctx context.Context, app *bridge.App, refreshToken string) (IssuedToken, *bridge.RefreshToken, error) {
	t, pair := i.newTokens(app, true)
	rt, err := i.store.Refresh(ctx, Hash(refreshToken), func(rt bridge.RefreshToken) error {
		if rt.ClientID != app.ClientID {
			return &grantRefused{"the refresh token was issued to another client"}
		}
		return nil
	}, pair)
	if err != nil {
		return IssuedToken{}, nil, err
	}
	return t, rt, nil
}

// Revoke revokes a token of app (RFC 7009): an access token alone; a
// refresh token with its installation's grant, every access and refresh
// token of it. Another client's token, or an unknown one, revokes nothing.
func (i *Issuer) Revoke(ctx context.Context, app *bridge.App, token string) (bridge.Revoked, error) {
	return i.store.RevokeToken(ctx, Hash(token), app.ClientID)
}
