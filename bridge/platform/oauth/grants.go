package oauth

// The token check: what a bearer token grants, for the installation API
// and discovery.

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/wire"
	"github.com/switchbridge/switchbridge/bridge/wire/bearer"
)

// Authorize implements bridge.Authorizer for the installation API. The
// refusal of a token the source does not hold matches
// bridge.ErrTokenUnknown.
func (s *Server) Authorize(ctx context.Context, token, installationID string) (*bridge.Grant, error) {
	g, err := s.grant(ctx, token)
	if err != nil {
		return nil, err
	}
	if g.InstallationID != installationID {
		return nil, bridge.Errorf(bridge.EFORBIDDEN, "the access token is not for this installation")
	}
	// An installation in a location one of the platform's hubs holds is
	// served by that hub, not here: say where, rather than let the
	// platform's own switches answer that the installation's are gone.
	if s.Hubs != nil && !s.hasLocation(g.LocationID) {
		hl, ok, err := s.Hubs.HubLocation(ctx, g.LocationID)
		if err != nil {
			return nil, err
		}
		if ok {
			return nil, bridge.Errorf(bridge.ENOTFOUND, "installation %s is in location %d (%s), which hub %q serves: call it at %s, not at the platform",
				g.InstallationID, g.LocationID, hl.Name, hl.HubName, hl.BaseURL+wire.InstallationPath(g.InstallationID))
		}
	}
	return g, nil
}

// hasLocation reports whether the location is the daemon's own. A hub's
// token check (bridge/link) runs without switches of its own here.
func (s *Server) hasLocation(id int64) bool {
	if s.hub == nil {
		return false
	}
	_, ok := s.hub.Location(id)
	return ok
}

func (s *Server) grant(ctx context.Context, token string) (*bridge.Grant, error) {
	if len(token) > maxParamLen {
		return nil, bridge.Errorf(bridge.EUNAUTHORIZED, "the access token is invalid")
	}
	hash := Hash(token)
	now := s.now()
	// Read first: whatever is read after it reflects at least every
	// removal that moved it (see grantcache.go).
	access, err := s.granted.AccessGeneration(ctx)
	if err != nil {
		return nil, err
	}
	if g, ok := s.grants.get(hash, now, access); ok {
		if !now.Before(g.ExpiresAt) {
			return nil, bridge.Errorf(bridge.EUNAUTHORIZED, "the access token expired")
		}
		s.used(ctx, g, now)
		return g, nil
	}
	gen := s.grants.generation()
	t, err := s.granted.TokenGrant(ctx, hash)
	switch {
	case errors.Is(err, bridge.ErrTokenUnknown):
		return nil, unknownToken{bridge.Errorf(bridge.EUNAUTHORIZED, "the access token is invalid")}
	case err != nil:
		return nil, err
	case t.Revoked:
		return nil, bridge.Errorf(bridge.EUNAUTHORIZED, "the access token was revoked")
	case !s.now().Before(t.ExpiresAt):
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
	s.grants.put(hash, g, now, gen, access)
	s.used(ctx, g, now)
	return g, nil
}

// unknownToken is the refusal of a token the source does not hold: 401
// invalid_token as any refusal, and it matches bridge.ErrTokenUnknown
// (errors.Is). A hub's check (bridge/link) thus tells a token its replica
// may not hold yet from one it holds revoked or expired by the very read
// that refused it: a second read could find a token the replica took in
// meanwhile, and the refusal would then stand for a token it holds.
type unknownToken struct{ refusal *bridge.Error }

func (e unknownToken) Error() string   { return e.refusal.Error() }
func (e unknownToken) Unwrap() []error { return []error{e.refusal, bridge.ErrTokenUnknown} }

// used tells Used, when set, that an installation's token was accepted,
// unless it came in the query string for an app that is not legacy: that
// request is answered 400, and is no use of the app.
func (s *Server) used(ctx context.Context, g *bridge.Grant, at time.Time) {
	if s.Used != nil && (g.Legacy || !bearer.InQuery(ctx)) {
		s.Used(g.InstallationID, at)
	}
}
