package replica

// The hub's token check: it answers from the replica, syncs on a miss, and
// tells a token it cannot confirm yet from one that is gone.

import (
	"context"
	"errors"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/access"
)

// Authorizer is the token check of a hub: it answers from the replica,
// as a single daemon answers from its records. On a miss (an installation
// or a token hash the replica does not hold) it asks Sync, when set, for
// the platform's latest changes and checks once more: a token issued a
// moment ago works at once. A miss the sync could not settle (the link
// down or slow, and the platform has not said this hub holds nothing) is
// 503 with Retry-After: the token may be one the platform issued a moment
// ago, and a 401 or 404 would tell the client it is gone for good. A miss
// the sync settled is what a single daemon answers: 401 invalid_token for
// a token the hub does not know (an installation deleted at the platform,
// another hub's), 403 for a token of another installation. A miss the
// replica's tombstones settle (an installation or a token the platform
// deleted from it) is answered so at once, without a sync: a revoked
// token is refused however slow or down the link.
type Authorizer struct {
	opts  AuthorizerOptions
	check *access.Check
	src   Source
}

// unconfirmedRetry is the Retry-After of a token the hub cannot confirm
// yet.
const unconfirmedRetry = 5 * time.Second

// Source is the replica as the hub's token check reads it.
type Source interface {
	access.GrantSource
	// Installation returns ENOTFOUND when the hub holds no such
	// installation.
	Installation(ctx context.Context, id string) (*bridge.Installation, error)
	// InstallationGone and TokenGone read the replica's tombstones: what
	// the platform deleted from it within the time a token of it could
	// live, and has not sent again.
	InstallationGone(ctx context.Context, id string) (bool, error)
	TokenGone(ctx context.Context, hash []byte) (bool, error)
}

// NewAuthorizer returns the hub's token check over its replica.
func NewAuthorizer(src Source, opts AuthorizerOptions) *Authorizer {
	a := &Authorizer{opts: opts, check: access.New(src), src: src}
	a.check.Used = opts.Used
	return a
}

// AuthorizerOptions is what the token check asks of the link; every field
// may be nil.
type AuthorizerOptions struct {
	// Sync brings the replica up to date now; it reports whether it did.
	Sync func(ctx context.Context) bool
	// Settled reports whether the replica is known to hold all there is
	// (Follower.Settled), so a miss needs no sync to be final. Nil: never.
	Settled func() bool
	// Used is told each time a token of an installation is accepted.
	Used func(installationID string, at time.Time)
}

// Authorize implements bridge.Authorizer.
func (a *Authorizer) Authorize(ctx context.Context, token, installationID string) (*bridge.Grant, error) {
	tried, synced := false, false
	sync := func() bool {
		if tried || a.opts.Sync == nil {
			return false
		}
		tried = true
		synced = a.opts.Sync(ctx)
		return synced
	}
	// unconfirmed: a miss no sync settled.
	unconfirmed := func() bool {
		return a.opts.Sync != nil && !synced && (a.opts.Settled == nil || !a.opts.Settled())
	}
	// A token of another installation is refused at once, whatever the
	// installation asked for: whether that one is in the replica, gone,
	// or would take a sync to know, must not show in the answer's status
	// or time to a client that holds a token.
	if g, err := a.check.Grant(ctx, token); err == nil && g.InstallationID != installationID {
		return nil, bridge.Errorf(bridge.EFORBIDDEN, "the access token is not for this installation")
	}
	for {
		_, err := a.src.Installation(ctx, installationID)
		if err != nil && bridge.ErrorCode(err) != bridge.ENOTFOUND {
			return nil, err
		}
		missing := err != nil
		// gone: a miss the replica's tombstones settle, whatever the
		// link's state. Read after the miss: a tombstone that the same
		// batch removed (the record sent again) is not found then, and
		// the miss syncs as any other.
		gone := false
		if missing {
			if gone, err = a.src.InstallationGone(ctx, installationID); err != nil {
				return nil, err
			}
			if !gone && sync() {
				continue
			}
		}
		g, err := a.check.Authorize(ctx, token, installationID)
		// A miss is what the check's own read found. A second read may
		// find the token the long poll applied in between, and the
		// check's refusal would stand: a 401 for a token the platform
		// issued a moment ago.
		if errors.Is(err, bridge.ErrTokenUnknown) && len(token) <= maxTokenLen {
			if !gone {
				var gerr error
				if gone, gerr = a.src.TokenGone(ctx, access.Hash(token)); gerr != nil {
					return nil, gerr
				}
			}
			if !gone && sync() {
				continue
			}
			missing = true
		}
		if err != nil && missing && !gone && unconfirmed() {
			return nil, &bridge.Error{Code: bridge.EUNAVAILABLE, RetryAfter: unconfirmedRetry,
				Message: "this hub cannot confirm the token yet: its link to the platform is down or slow; try again shortly"}
		}
		return g, err
	}
}

// maxTokenLen bounds the tokens worth a sync: the platform's are far
// shorter.
const maxTokenLen = 512

// Forget drops cached grants: call it when the replica changed.
func (a *Authorizer) Forget() { a.check.Forget() }
