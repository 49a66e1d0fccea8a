package oauth

// The token check of the installation API and discovery: bridge/access's,
// with the platform's rule for the installations its hubs serve.

import (
	"context"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/wire"
)

// Authorize implements bridge.Authorizer for the installation API: the
// token check (bridge/access), and an installation in a location one of
// the platform's hubs holds is sent to that hub. The refusal of a token
// the source does not hold matches bridge.ErrTokenUnknown.
func (s *Server) Authorize(ctx context.Context, token, installationID string) (*bridge.Grant, error) {
	g, err := s.check.Authorize(ctx, token, installationID)
	if err != nil {
		return nil, err
	}
	// An installation in a location one of the platform's hubs holds is
	// served by that hub, not here: say where, rather than let the
	// platform's own switches answer that the installation's are gone.
	if s.opts.Hubs != nil && !s.hasLocation(g.LocationID) {
		hl, ok, err := s.opts.Hubs.HubLocation(ctx, g.LocationID)
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

// hasLocation reports whether the location is the daemon's own.
func (s *Server) hasLocation(id int64) bool {
	if s.hub == nil {
		return false
	}
	_, ok := s.hub.Location(id)
	return ok
}

// ForgetGrants drops the cached grants, so that the next check of every
// token reads its source again.
func (s *Server) ForgetGrants() { s.check.Forget() }

// noteUsed passes the use of an installation's token the check accepted
// on to Used, when set.
func (s *Server) noteUsed(installationID string, at time.Time) {
	if s.opts.Used != nil {
		s.opts.Used(installationID, at)
	}
}
