// Package oauth is the platform role of switchbridge: the OAuth 2.0
// authorization server (login, location and switch selection, which installs
// the app; code and token issue, refresh and revocation; its RFC 8414
// metadata), endpoint discovery, and the token check the installation API
// asks of it. It is written here rather than taken from a
// framework, so it enforces the rules such frameworks do: exact redirect-URI
// matching, single-use codes bound to client and redirect URI, hashed secrets
// compared in constant time, and RFC 6749/6750 errors.
package oauth

import (
	"context"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/access"
	"github.com/switchbridge/switchbridge/bridge/infra/clientaddr"
	"github.com/switchbridge/switchbridge/bridge/wire"
)

// Server serves the platform role's HTTP endpoints.
type Server struct {
	users     Users
	apps      Apps
	check     *access.Check
	connected Connected
	hub       *bridge.Switchboard
	logger    *slog.Logger

	// Issuer installs apps and issues codes and tokens; its lifetimes are
	// the config's.
	Issuer *Issuer

	opts Options

	sessions *sessions // logged-in sessions, the login form's CSRF and flash messages
	throttle *throttle
	now      func() time.Time
	// compareHash, when set, checks a password in place of bcrypt's
	// CompareHashAndPassword (tests count the checks through it).
	compareHash func(hash, password []byte) error
	// spoofWarned is set once the log said that forwarding headers arrive
	// from a peer that is not a trusted proxy.
	spoofWarned atomic.Bool
}

// Options is what a Server is built with; every field may be left zero.
type Options struct {
	// PublicURL is the base_url advertised by discovery (the hub role's
	// address; one daemon plays both roles by default). It is also the
	// issuer: the iss of every authorization response (RFC 9207).
	PublicURL string
	// Hubs, when set, is the platform's registry of hubs: their locations
	// are offered on the consent page beside this daemon's own, and
	// discovery sends an installation's client to the hub that holds its
	// location. Nil for a daemon without hubs.
	Hubs HubDirectory
	// TrustedProxies are the peers whose X-Forwarded-For or Forwarded
	// header names the client, for login throttling.
	TrustedProxies []netip.Prefix
	// Observe, when set, is told of OAuth events for metrics: event is one of
	// "authorization_granted", "authorization_denied", "token_issued",
	// "token_failed", "client_auth_failed", "api_token_failed", with a reason,
	// and "console_login" (ok or refused) for a login to the console.
	Observe func(event, reason string)
	// Used, when set, is told each time a token of an installation is
	// accepted, on the request's path: it must not block (the daemon's
	// store.UsageWriter notes it in memory and writes behind).
	Used func(installationID string, at time.Time)
	// Locations, when set, are the locations installs may use in place of
	// the hub's own: with hubs, the platform's directory, which holds the
	// hubs' locations too.
	Locations Locations
	// TokenLifetime and CodeLifetime are the Issuer's; its defaults when 0.
	TokenLifetime, CodeLifetime time.Duration
	// HubRecords, when set, are the webhooks and the audit log of this
	// process's own hub (a single box), which the connected apps page
	// shows beside each installation in its locations.
	HubRecords HubRecords
}

// New returns a Server over a store and the hub's locations and switches.
func New(st Store, hub *bridge.Switchboard, logger *slog.Logger, opts Options) *Server {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	key := &signingKey{store: st}
	s := &Server{
		users: st, apps: st, check: access.New(st), connected: st, hub: hub, logger: logger,
		opts:     opts,
		Issuer:   NewIssuer(st, hub),
		sessions: newSessions(st, key, logger),
		throttle: newThrottle(st, key),
		now:      time.Now,
	}
	if opts.Locations != nil {
		s.Issuer = NewIssuer(st, opts.Locations)
	}
	if opts.TokenLifetime > 0 {
		s.Issuer.TokenLifetime = opts.TokenLifetime
	}
	if opts.CodeLifetime > 0 {
		s.Issuer.CodeLifetime = opts.CodeLifetime
	}
	s.check.Used = s.noteUsed
	return s
}

// Register adds the platform role's routes to mux.
func (s *Server) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /oauth/authorize", s.handleAuthorize)
	mux.HandleFunc("POST /oauth/authorize", s.handleConsent)
	mux.HandleFunc("POST /oauth/login", s.handleLogin)
	mux.HandleFunc("POST /oauth/logout", s.handleLogout)
	mux.HandleFunc("GET "+StylesheetPath, serveStylesheet)
	mux.HandleFunc("/oauth/token", s.handleToken)
	mux.HandleFunc("/oauth/revoke", s.handleRevoke)
	mux.HandleFunc("GET "+MetadataPath, s.handleMetadata)
	mux.HandleFunc("GET /api/apps/endpoints", s.handleEndpoints)
	mux.HandleFunc("GET /api/smartapps/endpoints", s.handleEndpoints) // legacy alias
	s.registerApps(mux)
	mux.HandleFunc("GET /api/smartapps/endpoints/{clientId}", s.handleClientEndpoints)
}

func (s *Server) observe(event, reason string) {
	if s.opts.Observe != nil {
		s.opts.Observe(event, reason)
	}
}

// secure reports whether the hub is reached over https, from the parsed
// scheme (so HTTPS://… counts): its cookies are then Secure and __Host-.
func (s *Server) secure() bool {
	u, err := url.Parse(s.opts.PublicURL)
	return err == nil && u.Scheme == "https"
}

// lookupClient is parseAuthorizeRequest's view of the app registry.
func (s *Server) lookupClient(ctx context.Context) func(string) (*bridge.App, error) {
	return func(id string) (*bridge.App, error) { return s.apps.App(ctx, id) }
}

// clientKey is the throttling key of the request's client address.
func (s *Server) clientKey(r *http.Request) string {
	if !s.spoofWarned.Load() {
		if peer, ignored := clientaddr.Ignored(r, s.opts.TrustedProxies); ignored && s.spoofWarned.CompareAndSwap(false, true) {
			s.logger.Warn("a request carries X-Forwarded-For or Forwarded from a peer that is not in server.trusted_proxies: "+
				"the header is ignored and logins are throttled by the peer's address; if the peer is your reverse proxy, list it", "peer", peer.String())
		}
	}
	return clientaddr.Key(r, s.opts.TrustedProxies)
}

func (s *Server) internal(w http.ResponseWriter, r *http.Request, err error) {
	s.logger.Error("oauth request failed", "path", bridge.Untrusted(r.URL.Path), "err", err)
	if wire.StatusOf(err) == http.StatusServiceUnavailable {
		// The store is away for a moment (its database restarting).
		wire.SetRetryAfter(w.Header(), err)
		s.errorPage(w, http.StatusServiceUnavailable, "The service is unavailable for a moment. Try again shortly.")
		return
	}
	s.errorPage(w, http.StatusInternalServerError, "Something went wrong on the hub. Try again; if it keeps failing, the hub's log says why.")
}
