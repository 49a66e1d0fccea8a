package oauth

// Discovery: GET /api/apps/endpoints tells a client where its
// installation lives.

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/wire"
	"github.com/switchbridge/switchbridge/bridge/wire/bearer"
)

// Endpoint is one record of GET /api/apps/endpoints, as the spec's table.
type Endpoint struct {
	OAuthClient struct {
		ClientID string `json:"clientId"`
	} `json:"oauthClient"`
	Location struct {
		ID   int64  `json:"id"`
		Name string `json:"name"`
	} `json:"location"`
	URI     string `json:"uri"`
	BaseURL string `json:"base_url"`
	URL     string `json:"url"`
}

func (s *Server) handleEndpoints(w http.ResponseWriter, r *http.Request) {
	g, ok := s.discoveryGrant(w, r)
	if ok {
		s.writeEndpoints(w, r, g)
	}
}

// handleClientEndpoints is the original platform's discovery by client id,
// GET /api/smartapps/endpoints/<clientId>, for legacy apps only. It
// answers for the token's own client; any other client id is not found,
// so a token tells nothing about other clients.
func (s *Server) handleClientEndpoints(w http.ResponseWriter, r *http.Request) {
	g, ok := s.discoveryGrant(w, r)
	if !ok {
		return
	}
	if !g.Legacy || r.PathValue("clientId") != g.ClientID {
		wire.WriteError(w, http.StatusNotFound, "no endpoints for this client id", nil)
		return
	}
	s.writeEndpoints(w, r, g)
}

// discoveryGrant checks a discovery request's token and answers the
// request itself when it fails.
func (s *Server) discoveryGrant(w http.ResponseWriter, r *http.Request) (*bridge.Grant, bool) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	tok, inQuery, problem := bearer.Token(r)
	if problem != nil {
		s.observe("api_token_failed", "missing")
		problem.Write(w)
		return nil, false
	}
	ctx := r.Context()
	if inQuery {
		ctx = bearer.FromQuery(ctx)
	}
	g, err := s.check.Grant(ctx, tok)
	switch code := bridge.ErrorCode(err); {
	case err == nil:
	case code == bridge.ENOTFOUND:
		wire.WriteError(w, http.StatusNotFound, bridge.ErrorMessage(err), nil)
		return nil, false
	case code == bridge.EUNAUTHORIZED:
		s.observe("api_token_failed", "invalid")
		bearer.WriteError(w, http.StatusUnauthorized, "invalid_token", bridge.ErrorMessage(err))
		return nil, false
	default:
		s.logger.Error("discovery failed", "err", err)
		wire.WriteErrorOf(w, err)
		return nil, false
	}
	if inQuery && !g.Legacy {
		s.observe("api_token_failed", "missing")
		bearer.QueryRefused.Write(w)
		return nil, false
	}
	return g, true
}

func (s *Server) writeEndpoints(w http.ResponseWriter, r *http.Request, g *bridge.Grant) {
	e := Endpoint{}
	e.OAuthClient.ClientID = g.ClientID
	e.Location.ID = g.LocationID
	e.BaseURL = s.opts.PublicURL
	if l, ok := s.hub.Location(g.LocationID); ok {
		e.Location.Name = l.Name
	} else if hl, ok, err := s.hubLocation(r, g.LocationID); err != nil {
		s.logger.Error("discovery failed", "err", err)
		wire.WriteErrorOf(w, err)
		return
	} else if ok {
		// One of the platform's hubs holds the location: the client
		// calls that hub.
		e.Location.Name, e.BaseURL = hl.Name, hl.BaseURL
	} else {
		// The location was removed from the config after the install.
		wire.WriteError(w, http.StatusNotFound, fmt.Sprintf("location %d of this installation is no longer configured on this hub", g.LocationID), nil)
		return
	}
	e.URL = wire.InstallationPath(g.InstallationID)
	e.URI = e.BaseURL + e.URL
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode([]Endpoint{e})
}

// hubLocation looks a location up among the platform's hubs.
func (s *Server) hubLocation(r *http.Request, id int64) (HubLocation, bool, error) {
	if s.opts.Hubs == nil {
		return HubLocation{}, false, nil
	}
	return s.opts.Hubs.HubLocation(r.Context(), id)
}
