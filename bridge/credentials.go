package bridge

import (
	"errors"
	"time"
)

// Lifetimes of what the platform issues, unless the config says otherwise.
const (
	DefaultTokenLifetime = 90 * 24 * time.Hour
	DefaultCodeLifetime  = 10 * time.Minute
	// MaxCodeLifetime is the spec's limit on an authorization code.
	MaxCodeLifetime = 24 * time.Hour
	// RefreshLifetime bounds a refresh token. Each refresh hands out a
	// new one, so a client that refreshes at least once a year keeps its
	// grant; one that stops must send its user through consent again.
	RefreshLifetime = 365 * 24 * time.Hour
)

// AuthCode is what an authorization code is bound to. The code itself is
// never kept, only its hash.
type AuthCode struct {
	ClientID       string
	RedirectURI    string
	InstallationID string
	ExpiresAt      time.Time
	CodeChallenge  string // PKCE S256 challenge, "" when none
}

// AccessToken is what an access token is bound to. The token itself is
// never kept, only its hash.
type AccessToken struct {
	InstallationID string
	ExpiresAt      time.Time
	Revoked        bool
}

// TokenGrant is an access token with everything the token check needs to
// know about it, read together so that a change made by any process (a
// revocation, an uninstall, a membership removed) counts at the next
// request.
type TokenGrant struct {
	AccessToken
	// Installation is the token's installation with its switches.
	Installation Installation
	// Member is whether the installing user still belongs to the
	// installation's location.
	Member bool
	// Legacy is whether the token's app may send it in the query string.
	Legacy bool
}

// TokenPair is what the store keeps of tokens just issued together: their
// hashes and expiry times. RefreshHash is nil when no refresh token was
// issued.
type TokenPair struct {
	AccessHash       []byte
	AccessExpiresAt  time.Time
	RefreshHash      []byte
	RefreshExpiresAt time.Time
}

// RefreshToken is what a refresh token is bound to. The token itself is
// never kept, only its hash.
type RefreshToken struct {
	InstallationID string
	ClientID       string
	ExpiresAt      time.Time
}

// Revoked says what a revocation request found: nothing (an unknown token,
// or another client's), an access token, or a refresh token and with it
// its installation's grant.
type Revoked int

// What a revocation found.
const (
	RevokedNothing Revoked = iota
	RevokedAccessToken
	RevokedGrant
)

// Errors of code redemption, refresh and token lookup, whatever keeps the
// codes and tokens.
var (
	ErrCodeInvalid  = errors.New("authorization code is unknown or expired")
	ErrCodeReused   = errors.New("authorization code was used already; the token it issued is revoked")
	ErrTokenUnknown = errors.New("access token is unknown")
	// ErrRefreshInvalid is a refresh token that is unknown, expired or
	// revoked.
	ErrRefreshInvalid = errors.New("refresh token is unknown, expired or revoked")
	// ErrRefreshReused is a refresh token presented after it was spent: it
	// may have been stolen, so its installation's grant is revoked (RFC
	// 9700 §4.14.2).
	ErrRefreshReused = errors.New("refresh token was used already; every token of its grant is revoked")
)
