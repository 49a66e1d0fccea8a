// Package admin is what a platform's owner does from the command line to
// users, apps, installations and hubs, and what an owner reads of the
// audit log, with the rules that come with each
// (names, ids, secrets, which locations exist). It reaches storage only
// through the Store it declares, so the command line never holds a
// storage engine of its own and the engine is chosen in one place.
package admin

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/platform/oauth"
)

// Store is the storage the owner's commands need. Each method returns a
// *bridge.Error with ENOTFOUND or ECONFLICT where the record is missing or
// exists already.
type Store interface {
	CreateUser(ctx context.Context, name string, passwordHash []byte, locations []int64) (*bridge.User, error)
	Users(ctx context.Context) ([]*bridge.User, error)
	UserByName(ctx context.Context, name string) (*bridge.User, error)
	UserByID(ctx context.Context, id int64) (*bridge.User, error)
	SetPassword(ctx context.Context, name string, passwordHash []byte) error
	// SetOwner makes a user an owner, who may use the console, or not.
	SetOwner(ctx context.Context, name string, owner bool) error
	DeleteUser(ctx context.Context, name string) error
	AddUserLocation(ctx context.Context, name string, loc int64) error
	// RemoveUserLocation returns how many installations it uninstalled.
	RemoveUserLocation(ctx context.Context, name string, loc int64) (int, error)

	CreateApp(ctx context.Context, a *bridge.App) error
	App(ctx context.Context, clientID string) (*bridge.App, error)
	Apps(ctx context.Context) ([]*bridge.App, error)
	SetAppPublished(ctx context.Context, clientID string, published bool) error
	SetAppLegacy(ctx context.Context, clientID string, legacy bool) error
	SetAppAccessTokenLifetime(ctx context.Context, clientID string, d time.Duration) error
	SetAppSecret(ctx context.Context, clientID string, secretHash []byte) error
	DeleteApp(ctx context.Context, clientID string) error

	FindInstallations(ctx context.Context, f bridge.InstallationFilter) ([]*bridge.Installation, error)
	Installation(ctx context.Context, id string) (*bridge.Installation, error)
	Uninstall(ctx context.Context, id string) error
	// SetSeeOnly grants one switch of an installation see-only or see
	// and switch.
	SetSeeOnly(ctx context.Context, installationID, switchID string, seeOnly bool) error

	CreateHub(ctx context.Context, h *bridge.RegisteredHub) error
	Hub(ctx context.Context, id string) (*bridge.RegisteredHub, error)
	Hubs(ctx context.Context) ([]*bridge.RegisteredHub, error)
	HubLocation(ctx context.Context, id int64) (*bridge.RemoteLocation, error)
	SetHubSecret(ctx context.Context, id string, hash []byte) error
	// RemoveHub returns how many installations it uninstalled.
	RemoveHub(ctx context.Context, id string) (int, error)
	// ChangeSeq is the newest entry of the change log hubs follow.
	ChangeSeq(ctx context.Context) (int64, error)
}

// Locations says which locations exist: the platform's own (its config's)
// and those its hubs hold.
type Locations interface {
	Location(id int64) (*bridge.Location, bool)
}

// Service applies the owner's commands.
type Service struct {
	Store     Store
	Locations Locations
	// PasswordCost is bcrypt's cost for new passwords; 0 is
	// bcrypt.DefaultCost.
	PasswordCost int
	// AuditLog is the daemon's own audit log, for Audit.
	AuditLog AuditLog
	// Installer applies the install rules (the platform's
	// oauth.Issuer), for ChangeSwitches.
	Installer Installer
}

// Installer records an installation under the install rules of the
// consent page (oauth.Issuer).
type Installer interface {
	Install(ctx context.Context, r oauth.InstallRequest) (*bridge.Installation, error)
}

// ChangeSwitches changes the switches an installation grants, and which
// of them are see-only, under the consent page's rules (the switches in
// its location, the app still installable by its user): what its user
// does on the connected apps page, done by an owner. Tokens issued keep
// working with the new grant.
func (s *Service) ChangeSwitches(ctx context.Context, installationID string, switchIDs, seeOnly []string) (*bridge.Installation, error) {
	if s.Installer == nil {
		return nil, bridge.Errorf(bridge.ENOTIMPLEMENTED, "changing an installation's switches is not available here")
	}
	in, err := s.Store.Installation(ctx, installationID)
	if err != nil {
		return nil, err
	}
	app, err := s.Store.App(ctx, in.ClientID)
	if err != nil {
		return nil, err
	}
	u, err := s.Store.UserByID(ctx, in.UserID)
	if err != nil {
		return nil, err
	}
	out, err := s.Installer.Install(ctx, oauth.InstallRequest{App: app, User: u, LocationID: in.LocationID, SwitchIDs: switchIDs, SeeOnly: seeOnly})
	var ie *oauth.InstallError
	if errors.As(err, &ie) {
		return nil, bridge.Errorf(bridge.EINVALID, "%s", ie.Error())
	}
	return out, err
}

// Password limits: bcrypt reads at most 72 bytes, and a password shorter
// than 4 characters is no password.
const (
	MinPassword = 4
	MaxPassword = 72
)

// CheckUserName refuses a name a login form could not take back.
func CheckUserName(name string) error {
	if name == "" || len(name) > 64 || strings.ContainsAny(name, " \t\r\n") {
		return bridge.Errorf(bridge.EINVALID, "user name %q must be 1-64 characters without spaces", name)
	}
	return nil
}

func (s *Service) hashPassword(pw string) ([]byte, error) {
	switch {
	case len(pw) < MinPassword:
		return nil, bridge.Errorf(bridge.EINVALID, "the password must be at least %d characters", MinPassword)
	case len(pw) > MaxPassword:
		return nil, bridge.Errorf(bridge.EINVALID, "the password must be at most %d bytes (a bcrypt limit)", MaxPassword)
	}
	cost := s.PasswordCost
	if cost == 0 {
		cost = bcrypt.DefaultCost
	}
	return bcrypt.GenerateFromPassword([]byte(pw), cost)
}

// CheckLocations refuses a location that neither the platform nor one of
// its hubs has.
func (s *Service) CheckLocations(ids []int64) error {
	for _, id := range ids {
		if _, ok := s.Locations.Location(id); !ok {
			return bridge.Errorf(bridge.ENOTFOUND, "location %d is neither in the config nor held by a hub of this platform", id)
		}
	}
	return nil
}

// AddUser adds a user who may install apps into locations and, with
// owner, use the console too.
func (s *Service) AddUser(ctx context.Context, name, password string, locations []int64, owner bool) (*bridge.User, error) {
	if err := CheckUserName(name); err != nil {
		return nil, err
	}
	if len(locations) == 0 {
		return nil, bridge.Errorf(bridge.EINVALID, "a user needs at least one location")
	}
	if err := s.CheckLocations(locations); err != nil {
		return nil, err
	}
	hash, err := s.hashPassword(password)
	if err != nil {
		return nil, err
	}
	u, err := s.Store.CreateUser(ctx, name, hash, locations)
	if err != nil || !owner {
		return u, err
	}
	// A second write: should it fail, the user is there without the role,
	// which SetOwner gives again.
	if err := s.Store.SetOwner(ctx, name, true); err != nil {
		return nil, fmt.Errorf("user %q added, but not made an owner (user owner %s on): %w", name, name, err)
	}
	u.Owner = true
	return u, nil
}

// SetOwner lets a user use the console, or only install apps; ENOTFOUND
// for no such user.
func (s *Service) SetOwner(ctx context.Context, name string, owner bool) error {
	return s.Store.SetOwner(ctx, name, owner)
}

// SetPassword sets a user's password; their login sessions end.
func (s *Service) SetPassword(ctx context.Context, name, password string) error {
	hash, err := s.hashPassword(password)
	if err != nil {
		return err
	}
	return s.Store.SetPassword(ctx, name, hash)
}

// DeleteUser deletes a user and what they installed, and returns how many
// installations that was. It is refused while they own apps.
func (s *Service) DeleteUser(ctx context.Context, name string) (int, error) {
	u, err := s.Store.UserByName(ctx, name)
	if err != nil {
		return 0, err
	}
	ins, err := s.Store.FindInstallations(ctx, bridge.InstallationFilter{UserID: u.ID})
	if err != nil {
		return 0, err
	}
	if err := s.Store.DeleteUser(ctx, name); err != nil {
		return 0, err
	}
	return len(ins), nil
}

// LocationChange is one step of ChangeLocations.
type LocationChange struct {
	Location int64
	Added    bool // else removed
	// Uninstalled is, for a removal, how many of the user's installations
	// it ended.
	Uninstalled int
}

// ChangeLocations removes the user from the locations in remove,
// uninstalling what they installed there, and then adds them to those in
// add: "--remove 1 --add 1" ends what was installed there and keeps the
// membership, which is what starting over means. It returns the steps
// done, which are done even when a later one fails.
func (s *Service) ChangeLocations(ctx context.Context, name string, add, remove []int64) ([]LocationChange, error) {
	if err := s.CheckLocations(add); err != nil {
		return nil, err
	}
	if _, err := s.Store.UserByName(ctx, name); err != nil {
		return nil, err
	}
	var done []LocationChange
	for _, l := range remove {
		n, err := s.Store.RemoveUserLocation(ctx, name, l)
		if err != nil {
			return done, err
		}
		done = append(done, LocationChange{Location: l, Uninstalled: n})
	}
	for _, l := range add {
		if err := s.Store.AddUserLocation(ctx, name, l); err != nil {
			return done, err
		}
		done = append(done, LocationChange{Location: l, Added: true})
	}
	return done, nil
}

// AppSpec is a new app.
type AppSpec struct {
	Name         string
	RedirectURIs []string
	Owner        string // a user name
	Published    bool
	RequirePKCE  bool
	Legacy       bool
	// AccessTokenLifetime replaces the platform's token lifetime for the
	// app; 0 keeps it.
	AccessTokenLifetime time.Duration
}

// CreateApp registers an app and returns it with its client secret, which
// is stored only hashed: this is the one time it is known.
func (s *Service) CreateApp(ctx context.Context, spec AppSpec) (*bridge.App, string, error) {
	if strings.TrimSpace(spec.Name) == "" {
		return nil, "", bridge.Errorf(bridge.EINVALID, "an app needs a name that is not blank")
	}
	if len(spec.RedirectURIs) == 0 {
		return nil, "", bridge.Errorf(bridge.EINVALID, "an app needs at least one redirect URI")
	}
	for _, u := range spec.RedirectURIs {
		if err := oauth.ValidRedirectURI(u); err != nil {
			return nil, "", bridge.Errorf(bridge.EINVALID, "%v", err)
		}
	}
	if err := CheckLifetime(spec.AccessTokenLifetime); err != nil {
		return nil, "", err
	}
	owner, err := s.Store.UserByName(ctx, spec.Owner)
	if err != nil {
		return nil, "", fmt.Errorf("owner: %w", err)
	}
	secret := oauth.NewSecret()
	app := &bridge.App{ClientID: oauth.NewClientID(), Name: spec.Name, SecretHash: oauth.Hash(secret), RedirectURIs: spec.RedirectURIs,
		OwnerID: owner.ID, Published: spec.Published, RequirePKCE: spec.RequirePKCE, Legacy: spec.Legacy, AccessTokenLifetime: spec.AccessTokenLifetime}
	if err := s.Store.CreateApp(ctx, app); err != nil {
		return nil, "", err
	}
	return app, secret, nil
}

// CheckLifetime refuses an access-token lifetime that is not a whole
// number of seconds of at least one (expires_in counts seconds); 0 means
// the platform's default.
func CheckLifetime(d time.Duration) error {
	if d != 0 && (d < time.Second || d%time.Second != 0) {
		return bridge.Errorf(bridge.EINVALID, "%s is not a lifetime: a whole number of seconds, at least 1s (examples: 90s, 1h, 2160h)", d)
	}
	return nil
}

// ParseLifetime reads an access-token lifetime as an owner types it: a
// Go duration such as 90s, 1h or 2160h, a whole number of seconds of at
// least one; "" or "default" is 0, the platform's oauth.token_lifetime.
func ParseLifetime(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	if v == "" || v == "default" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d == 0 || CheckLifetime(d) != nil {
		return 0, bridge.Errorf(bridge.EINVALID, "%q is not a lifetime: a whole number of seconds, at least 1s (examples: 90s, 1h, 2160h)", v)
	}
	return d, nil
}

// SetAppAccessTokenLifetime sets the lifetime of the app's access tokens
// issued from now on; 0 returns to the platform's default.
func (s *Service) SetAppAccessTokenLifetime(ctx context.Context, clientID string, d time.Duration) error {
	if err := CheckLifetime(d); err != nil {
		return err
	}
	return s.Store.SetAppAccessTokenLifetime(ctx, clientID, d)
}

// RotateAppSecret gives an app a new secret, returned this once; the old
// one stops working at once.
func (s *Service) RotateAppSecret(ctx context.Context, clientID string) (string, error) {
	secret := oauth.NewSecret()
	if err := s.Store.SetAppSecret(ctx, clientID, oauth.Hash(secret)); err != nil {
		return "", err
	}
	return secret, nil
}

// DeleteApp deletes an app, uninstalling it everywhere, and returns how
// many installations that was.
func (s *Service) DeleteApp(ctx context.Context, clientID string) (int, error) {
	ins, err := s.Store.FindInstallations(ctx, bridge.InstallationFilter{ClientID: clientID})
	if err != nil {
		return 0, err
	}
	if err := s.Store.DeleteApp(ctx, clientID); err != nil {
		return 0, err
	}
	return len(ins), nil
}

// CheckHubURL checks a hub's public URL (its server.public_url) and returns
// it without a trailing slash.
func CheckHubURL(raw string) (string, error) {
	u, err := url.Parse(strings.TrimRight(raw, "/"))
	switch {
	case err != nil:
		return "", bridge.Errorf(bridge.EINVALID, "%q is not a valid URL", raw)
	case (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return "", bridge.Errorf(bridge.EINVALID, "%q is not a valid URL for a hub: want an absolute http or https URL such as https://hub.example.net:8443", raw)
	case u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		return "", bridge.Errorf(bridge.EINVALID, "%q is not a valid URL for a hub: it must have no path, user, query or fragment", raw)
	}
	return u.String(), nil
}

// AddHub registers a hub and returns it with its secret, stored only
// hashed: this is the one time it is known.
func (s *Service) AddHub(ctx context.Context, name, baseURL string) (*bridge.RegisteredHub, string, error) {
	if strings.TrimSpace(name) == "" || len(name) > 64 {
		return nil, "", bridge.Errorf(bridge.EINVALID, "a hub's name must be 1-64 characters")
	}
	base, err := CheckHubURL(baseURL)
	if err != nil {
		return nil, "", err
	}
	secret := oauth.NewSecret()
	h := &bridge.RegisteredHub{ID: newHubID(), Name: name, BaseURL: base, SecretHash: oauth.Hash(secret)}
	if err := s.Store.CreateHub(ctx, h); err != nil {
		return nil, "", err
	}
	return h, secret, nil
}

// RotateHubSecret gives a hub a new secret, returned this once; the old one
// stops working at once.
func (s *Service) RotateHubSecret(ctx context.Context, id string) (string, error) {
	secret := oauth.NewSecret()
	if err := s.Store.SetHubSecret(ctx, id, oauth.Hash(secret)); err != nil {
		return "", err
	}
	return secret, nil
}

func newHubID() string {
	var b [8]byte
	rand.Read(b[:])
	return "hub-" + hex.EncodeToString(b[:])
}
