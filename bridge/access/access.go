// Package access is the token check: what a bearer token grants, read
// from a GrantSource and cached while the access generation stands. Both
// roles run it: a platform over its records (bridge/platform/oauth), a
// hub over its replica of them (bridge/hub/replica).
package access

import (
	"context"
	"crypto/sha256"
	"errors"
	"strings"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/wire/bearer"
)

// GrantSource is what the token check reads: "is this token valid for
// installation X, and which switches does it grant?" needs the token's
// record, its installation, whether the installing user still belongs to
// its location, and whether its app is legacy. It is all a hub needs of the
// platform's data, so a hub that keeps a replica of its platform can answer
// it from there.
//
// A revocation, an uninstall or a removed membership, made by this process
// or by another one on the same database (the CLI), must count at the next
// request: the grant cache (grantcache.go) serves a grant only while
// AccessGeneration has not moved since it was read.
type GrantSource interface {
	// TokenGrant returns bridge.ErrTokenUnknown for a hash never issued
	// or whose installation is gone.
	TokenGrant(ctx context.Context, hash []byte) (*bridge.TokenGrant, error)
	// AccessGeneration is a counter that moves with every change that
	// takes access away or changes a grant, made by any process: a token's
	// revocation or deletion, an installation's removal or new switches,
	// an ended membership, an app's legacy mode turned off. The grant
	// cache serves a grant only while it has not moved since the grant was
	// read.
	AccessGeneration(ctx context.Context) (int64, error)
}

// Hash is how a high-entropy secret is stored and looked up: a token is
// found by its hash. A fast hash is right here: the secrets are 256-bit
// random, so there is nothing to guess.
func Hash(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

// maxTokenLen bounds the tokens worth a look: as long as any OAuth
// parameter the platform takes, and far longer than the tokens it issues.
const maxTokenLen = 2048

// Check answers what a bearer token grants, from a GrantSource.
type Check struct {
	// Used, when set, is told each time a token of an installation is
	// accepted, on the request's path: it must not block.
	Used func(installationID string, at time.Time)

	src    GrantSource
	grants *grantCache
	now    func() time.Time
}

// New returns the token check over src.
func New(src GrantSource) *Check {
	return &Check{src: src, grants: newGrantCache(), now: time.Now}
}

// Forget drops the cached grants, so that the next check of every token
// reads its source again: call it when this process changed what a grant
// holds (the source moves the access generation as well, for every
// process).
func (c *Check) Forget() { c.grants.clear() }

// Authorize returns what token grants when it is a token of installation
// installationID: EFORBIDDEN for another installation's. The refusal of a
// token the source does not hold matches bridge.ErrTokenUnknown.
func (c *Check) Authorize(ctx context.Context, token, installationID string) (*bridge.Grant, error) {
	g, err := c.Grant(ctx, token)
	if err != nil {
		return nil, err
	}
	if g.InstallationID != installationID {
		return nil, bridge.Errorf(bridge.EFORBIDDEN, "the access token is not for this installation")
	}
	return g, nil
}

// Grant returns what token grants: EUNAUTHORIZED for an unknown, revoked
// or expired token (matching bridge.ErrTokenUnknown for one the source
// does not hold), ENOTFOUND when its user no longer belongs to the
// installation's location.
func (c *Check) Grant(ctx context.Context, token string) (*bridge.Grant, error) {
	if len(token) > maxTokenLen {
		return nil, bridge.Errorf(bridge.EUNAUTHORIZED, "the access token is invalid")
	}
	hash := Hash(token)
	now := c.now()
	// Read first: whatever is read after it reflects at least every
	// removal that moved it (see grantcache.go).
	access, err := c.src.AccessGeneration(ctx)
	if err != nil {
		return nil, err
	}
	if g, ok := c.grants.get(hash, now, access); ok {
		if !now.Before(g.ExpiresAt) {
			return nil, bridge.Errorf(bridge.EUNAUTHORIZED, "the access token expired")
		}
		c.used(ctx, g, now)
		return g, nil
	}
	gen := c.grants.generation()
	t, err := c.src.TokenGrant(ctx, hash)
	switch {
	case errors.Is(err, bridge.ErrTokenUnknown):
		return nil, unknownToken{bridge.Errorf(bridge.EUNAUTHORIZED, "the access token is invalid")}
	case err != nil:
		return nil, err
	case t.Revoked:
		return nil, bridge.Errorf(bridge.EUNAUTHORIZED, "the access token was revoked")
	case !c.now().Before(t.ExpiresAt):
		return nil, bridge.Errorf(bridge.EUNAUTHORIZED, "the access token expired")
	}
	in := &t.Installation
	// The user installed the app into one of their locations; should they
	// no longer belong to it, the installation reaches none of its switches.
	if !t.Member {
		return nil, bridge.Errorf(bridge.ENOTFOUND, "switches no longer available to this installation: %s (its user no longer belongs to location %d)",
			strings.Join(in.SwitchIDs, ", "), in.LocationID)
	}
	g := &bridge.Grant{
		InstallationID: in.ID, ClientID: in.ClientID, UserID: in.UserID,
		LocationID: in.LocationID, SwitchIDs: in.SwitchIDs, SeeOnly: in.SeeOnly, ExpiresAt: t.ExpiresAt, Legacy: t.Legacy,
	}
	c.grants.put(hash, g, now, gen, access)
	c.used(ctx, g, now)
	return g, nil
}

// unknownToken is the refusal of a token the source does not hold: 401
// invalid_token as any refusal, and it matches bridge.ErrTokenUnknown
// (errors.Is). A hub's check (bridge/hub/replica) thus tells a token its
// replica may not hold yet from one it holds revoked or expired by the
// very read that refused it: a second read could find a token the replica
// took in meanwhile, and the refusal would then stand for a token it
// holds.
type unknownToken struct{ refusal *bridge.Error }

func (e unknownToken) Error() string   { return e.refusal.Error() }
func (e unknownToken) Unwrap() []error { return []error{e.refusal, bridge.ErrTokenUnknown} }

// used tells Used, when set, that an installation's token was accepted,
// unless it came in the query string for an app that is not legacy: that
// request is answered 400, and is no use of the app.
func (c *Check) used(ctx context.Context, g *bridge.Grant, at time.Time) {
	if c.Used != nil && (g.Legacy || !bearer.InQuery(ctx)) {
		c.Used(g.InstallationID, at)
	}
}
