// Package bridge holds switchbridge's domain: switches and their values,
// locations, users, apps, installations and the Hub that runs a command across
// the switches an installation grants. It knows nothing of HTTP, SQL or MQTT;
// the adapter packages beside it (store, oauth, api) and the drivers speak it.
package bridge

import (
	"context"
	"fmt"
	"time"
)

// Value is the state of a switch as the API reports it.
type Value string

// The two values a switch can have. The zero Value means "not known yet"
// (a plug that has not reported since the hub started and has no stored state).
const (
	On  Value = "on"
	Off Value = "off"
)

// ParseValue accepts exactly "on" or "off".
func ParseValue(s string) (Value, error) {
	switch Value(s) {
	case On, Off:
		return Value(s), nil
	}
	return "", Errorf(EINVALID, "%q is not a switch value (want on or off)", s)
}

// Command is what PUT <installation>/switches/:command asks of every switch.
type Command string

// The commands of the spec.
const (
	CommandOn  Command = "on"
	CommandOff Command = "off"
)

// Commands lists every command the API knows, in a stable order.
var Commands = []Command{CommandOn, CommandOff}

// ParseCommand accepts "on" and "off"; anything else is EINVALID with the
// message the spec asks for.
func ParseCommand(s string) (Command, error) {
	switch Command(s) {
	case CommandOn, CommandOff:
		return Command(s), nil
	}
	return "", Errorf(EINVALID, "command %q is not valid for all the switches (valid: on, off)", s)
}

// Value is the switch value the command leads to.
func (c Command) Value() Value {
	if c == CommandOn {
		return On
	}
	return Off
}

// State is what the hub knows of one switch right now.
type State struct {
	Value Value // "" when not known
	// Available is true only while the hub has heard from the device
	// since the driver opened and knows of nothing that makes it
	// unreachable: a device the hub has not heard from is not claimed.
	Available bool
	Updated   time.Time // when Value was last learnt; zero when never
	// LastSeen is when the device last gave a sign of itself (a message it
	// sent, a read of its line, a command it took); zero when never.
	LastSeen time.Time
	// Reading is what the device last measured; nil for a device that
	// has no meter or has not reported one since the hub started.
	Reading *Reading
}

// Device is one switch's hardware as a driver exposes it. State never blocks:
// it answers from what the driver last learnt.
type Device interface {
	State() State
}

// Commander is the optional interface of a Device that can be commanded.
// Do returns when the device has confirmed the command, or with an error; it
// never blocks past ctx. A Device that cannot run cmd returns an error that
// wraps errors.ErrUnsupported.
type Commander interface {
	Do(ctx context.Context, cmd Command) error
}

// CommandSupporter is the optional interface of a Commander that supports
// only some commands, so the hub can refuse a command before touching any
// device. A Commander without it supports every command.
type CommandSupporter interface {
	Supports(cmd Command) bool
}

// Supports reports whether d can run cmd.
func Supports(d Device, cmd Command) bool {
	c, ok := d.(Commander)
	if !ok {
		return false
	}
	if s, ok := c.(CommandSupporter); ok {
		return s.Supports(cmd)
	}
	return true
}

// Switch is one configured switch: where it is, what it is called and the
// device that drives it.
type Switch struct {
	ID         string
	Name       string
	Driver     string
	LocationID int64
	Device     Device
	// MaxChanges, when set, is the configured cap on how often the device
	// may be commanded, in place of its driver's default (a zero
	// ChangeLimit: no cap). Nil leaves the driver's default; see Limit.
	MaxChanges *ChangeLimit
	// Confirm asks the owner's console to ask before it switches the
	// switch: a relay whose switching matters (a pump, a heater).
	Confirm bool
}

// Location is a grouping of switches, as configured.
type Location struct {
	ID       int64
	Name     string
	Switches []string // switch ids, in config order
}

// User is an account on the platform: someone who can log in and install
// apps into the locations they belong to.
type User struct {
	ID           int64
	Name         string
	PasswordHash []byte
	Locations    []int64
	CreatedAt    time.Time
	// Owner lets the user use the console, the owner's web pages; a user
	// who is not an owner only installs apps.
	Owner bool
}

// MemberOf reports whether the user belongs to location id.
func (u *User) MemberOf(id int64) bool {
	for _, l := range u.Locations {
		if l == id {
			return true
		}
	}
	return false
}

// App is a third-party client registered for OAuth.
type App struct {
	ClientID     string
	Name         string
	SecretHash   []byte
	RedirectURIs []string
	OwnerID      int64
	Published    bool
	// RequirePKCE makes the app PKCE-only: an authorization request
	// without an S256 code_challenge is refused, and so is a code
	// redeemed without a verifier.
	RequirePKCE bool
	// Legacy lets the app's clients, written for the original platform,
	// send their access token in the query string and call discovery by
	// client id. Off by default: a token in a URL ends up in logs and
	// browser histories.
	Legacy bool
	// AccessTokenLifetime is the lifetime of the app's access tokens; zero
	// means the hub's oauth.token_lifetime.
	AccessTokenLifetime time.Duration
	CreatedAt           time.Time
}

// HasRedirectURI reports whether uri equals a registered redirect URI, by
// exact string comparison (no normalisation: a trailing slash, a case change
// or an added query string is a different URI).
func (a *App) HasRedirectURI(uri string) bool {
	for _, r := range a.RedirectURIs {
		if r == uri {
			return true
		}
	}
	return false
}

// InstallableBy reports whether user may install the app: anyone when it is
// published, only its owner (the developer) while it is not.
func (a *App) InstallableBy(userID int64) bool {
	return a.Published || a.OwnerID == userID
}

// Installation is an app installed into one location of one user, with the
// switches the user selected for it.
type Installation struct {
	ID         string
	ClientID   string
	UserID     int64
	LocationID int64
	SwitchIDs  []string
	// SeeOnly are those of SwitchIDs the user let the app see but not
	// switch; the others it may also switch.
	SeeOnly   []string
	CreatedAt time.Time
	UpdatedAt time.Time
	// LastUsedAt is when one of its tokens last reached the hub, to within
	// a minute; zero when none has yet.
	LastUsedAt time.Time
}

// InstallationFilter narrows a search for installations; a zero field
// matches all.
type InstallationFilter struct {
	UserID   int64
	ClientID string
}

// Grant is what a valid access token allows: one installation and its
// switches. It is the whole of what the hub role learns from the platform.
type Grant struct {
	InstallationID string
	ClientID       string
	UserID         int64
	LocationID     int64
	SwitchIDs      []string
	// SeeOnly are those of SwitchIDs the app may see (lists, reads,
	// events, webhooks) but not command.
	SeeOnly   []string
	ExpiresAt time.Time
	// Legacy is whether the token's app is a legacy app, which may send
	// the token in the query string.
	Legacy bool
}

// MaySwitch reports whether the grant lets its app command the switch, one
// of its SwitchIDs: true unless the user granted it see-only.
func (g *Grant) MaySwitch(id string) bool { return !IsSeeOnly(g.SeeOnly, id) }

// IsSeeOnly reports whether id is among seeOnly, the see-only switches of a
// grant or installation.
func IsSeeOnly(seeOnly []string, id string) bool {
	for _, s := range seeOnly {
		if s == id {
			return true
		}
	}
	return false
}

// Authorizer is the seam between the hub role and the platform role: the hub
// asks whether a bearer token is valid for an installation and which switches
// it grants. It returns EUNAUTHORIZED for a missing, unknown or expired token
// and EFORBIDDEN for a token of another installation.
type Authorizer interface {
	Authorize(ctx context.Context, token, installationID string) (*Grant, error)
}

// String makes a switch readable in logs.
func (s *Switch) String() string { return fmt.Sprintf("%s (%s)", s.ID, s.Name) }
