package oauth

import (
	"context"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/access"
)

// The storage the platform role needs, declared here and implemented by an
// adapter (bridge/platform/accounts), so each part holds only what it reads or writes:
// login reads Users, every request reads Apps, the Issuer writes
// Installations, Codes and Tokens, the token check reads an
// access.GrantSource, and the connected apps page reads and removes a
// user's installations (Connected), and the login pages keep their
// sessions, signing key and failed logins (LoginSessions, SigningKeys,
// LoginFailures).

// Users finds accounts: login by name, a session by id.
type Users interface {
	// UserByID and UserByName return ENOTFOUND when there is no such user.
	UserByID(ctx context.Context, id int64) (*bridge.User, error)
	UserByName(ctx context.Context, name string) (*bridge.User, error)
}

// Apps finds registered clients.
type Apps interface {
	// App returns ENOTFOUND for an unknown client id.
	App(ctx context.Context, clientID string) (*bridge.App, error)
}

// Installations records installs. Installing the same app into the same
// location of the same user again updates that installation (same id, the
// new switch selection); Install fills in its id and times.
type Installations interface {
	Install(ctx context.Context, in *bridge.Installation) error
}

// Codes keeps authorization codes by their hash.
type Codes interface {
	CreateCode(ctx context.Context, hash []byte, c bridge.AuthCode) error
	// RedeemCode exchanges a code for tokens (issued) at most once,
	// atomically: check sees what the code is bound to and may refuse it,
	// leaving it unused. A code redeemed before is bridge.ErrCodeReused,
	// and its installation's grant is revoked; an unknown or expired one
	// is bridge.ErrCodeInvalid.
	RedeemCode(ctx context.Context, codeHash []byte, check func(bridge.AuthCode) error, issued bridge.TokenPair) (*bridge.AuthCode, error)
}

// Tokens keeps access and refresh tokens by their hash: those issued
// without a code (the developer's install), refreshed, and revoked.
type Tokens interface {
	CreateToken(ctx context.Context, hash []byte, installationID string, expires time.Time) error
	// Refresh spends a refresh token for tokens (issued) at most once,
	// atomically: check sees what the token is bound to and may refuse it,
	// leaving it unspent. A token spent before is bridge.ErrRefreshReused,
	// and its installation's grant is revoked; an unknown, expired or
	// revoked one is bridge.ErrRefreshInvalid.
	Refresh(ctx context.Context, refreshHash []byte, check func(bridge.RefreshToken) error, issued bridge.TokenPair) (*bridge.RefreshToken, error)
	// RevokeToken revokes an access token of client clientID, or with a
	// refresh token of that client its installation's grant; any other
	// token revokes nothing.
	RevokeToken(ctx context.Context, hash []byte, clientID string) (bridge.Revoked, error)
}

// Connected is what the connected apps page reads and removes: the
// installations a user made.
type Connected interface {
	// Installation returns ENOTFOUND when there is no such installation.
	Installation(ctx context.Context, id string) (*bridge.Installation, error)
	// InstallationsOf lists a user's installations, oldest first.
	InstallationsOf(ctx context.Context, userID int64) ([]*bridge.Installation, error)
	// Uninstall deletes an installation and everything issued for it, and
	// moves the access generation; ENOTFOUND when there is none.
	Uninstall(ctx context.Context, id string) error
}

// The login pages' state is kept in the database, not in a process: a
// platform may be several processes behind one address with no sticky
// sessions, and a user who logs in through one must be logged in at the
// next, a logout through one must end the session at all of them, and
// failed logins must count together wherever they land. The rules
// (lifetimes, bounds, delays) are this package's; the store keeps rows.

// LoginSessions keeps logged-in sessions by the hash of their cookie
// (Hash): the cookie itself is never stored.
type LoginSessions interface {
	// StartLoginSession stores s under hash. In the same transaction it
	// ends the session stored under replaced (when not nil), drops the
	// sessions expired at s.Created, and makes room: the user's oldest
	// sessions go until fewer than perUser are left, then the oldest of
	// all until fewer than total are. ENOTFOUND when the user is gone.
	StartLoginSession(ctx context.Context, hash []byte, s bridge.LoginSession, replaced []byte, perUser, total int) error
	// LoginSession returns the session stored under hash, expired or not;
	// ENOTFOUND when there is none.
	LoginSession(ctx context.Context, hash []byte) (*bridge.LoginSession, error)
	// EndLoginSession deletes a session; one that is not there is no
	// error.
	EndLoginSession(ctx context.Context, hash []byte) error
}

// SigningKeys keeps the keys every process signs with.
type SigningKeys interface {
	// SigningKey returns the key stored under name, storing fresh first
	// when there is none: processes that ask at once all get the same key.
	SigningKey(ctx context.Context, name string, fresh []byte) ([]byte, error)
}

// LoginFailures counts failed logins per throttling key. A key names a
// user or an address, so it arrives here as a keyed hash.
type LoginFailures interface {
	// LoginFailures returns each key's failures at or after since, in
	// order; a zero count for a key with none.
	LoginFailures(ctx context.Context, since time.Time, keys ...[]byte) ([]bridge.FailureCount, error)
	// ChargeLoginFailure reads each key's failures at or after since and,
	// when allow accepts them, counts one failure at at against each key,
	// as one step no other login (of any process) can come between: it
	// returns the counts read and whether it counted. A key whose last
	// failure was before since starts over. It keeps at most about
	// maxKeys keys, those whose last failure is oldest going first.
	ChargeLoginFailure(ctx context.Context, at, since time.Time, maxKeys int, allow func([]bridge.FailureCount) bool, keys ...[]byte) ([]bridge.FailureCount, bool, error)
	// UndoLoginFailure takes back the failure counted at at against key,
	// whose count was before: the key is as it was when nothing was
	// counted against it since, else one failure fewer.
	UndoLoginFailure(ctx context.Context, at time.Time, key []byte, before bridge.FailureCount) error
	// ForgetLoginFailures drops the keys' failures.
	ForgetLoginFailures(ctx context.Context, keys ...[]byte) error
}

// Store is all of the above: what one daemon playing both roles hands to
// New.
type Store interface {
	Users
	Apps
	Installations
	Codes
	Tokens
	access.GrantSource
	Connected
	LoginSessions
	SigningKeys
	LoginFailures
}
