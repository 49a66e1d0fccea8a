// Package oauth is the platform role of switchbridge: the OAuth 2.0
// authorization server (login, location and switch selection, which installs
// the app; code and token issue), endpoint discovery, and the token check the
// installation API asks of it. It is written here rather than taken from a
// framework, so it enforces the rules such frameworks do: exact redirect-URI
// matching, single-use codes bound to client and redirect URI, hashed secrets
// compared in constant time, and RFC 6749/6750 errors.
package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/bearer"
	"github.com/switchbridge/switchbridge/bridge/store"
)

// maxFormBytes bounds login, consent and token request bodies: they hold a
// few short fields, so anything larger is not a real client.
const maxFormBytes = 64 << 10

// Server serves the platform role's HTTP endpoints.
type Server struct {
	store  *store.DB
	hub    *bridge.Hub
	logger *slog.Logger

	// PublicURL is the base_url advertised by discovery (the hub role's
	// address; one daemon plays both roles by default).
	PublicURL string
	// TokenLifetime is the expires_in of access tokens.
	TokenLifetime time.Duration
	// CodeLifetime bounds authorization codes; never over 24 hours.
	CodeLifetime time.Duration
	// Observe, when set, is told of OAuth events for metrics: event is one of
	// "authorization_granted", "authorization_denied", "token_issued",
	// "token_failed", "client_auth_failed", "api_token_failed", with a reason.
	Observe func(event, reason string)

	sessions *sessions
	throttle *throttle
	grants   *grantCache
	now      func() time.Time
}

// New returns a Server over a store and the hub's locations and switches.
func New(db *store.DB, hub *bridge.Hub, logger *slog.Logger) *Server {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Server{
		store: db, hub: hub, logger: logger,
		TokenLifetime: 90 * 24 * time.Hour,
		CodeLifetime:  10 * time.Minute,
		sessions:      newSessions(),
		throttle:      newThrottle(),
		grants:        newGrantCache(),
		now:           time.Now,
	}
}

// Register adds the platform role's routes to mux.
func (s *Server) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /oauth/authorize", s.handleAuthorize)
	mux.HandleFunc("POST /oauth/authorize", s.handleConsent)
	mux.HandleFunc("POST /oauth/login", s.handleLogin)
	mux.HandleFunc("POST /oauth/logout", s.handleLogout)
	mux.HandleFunc("/oauth/token", s.handleToken)
	mux.HandleFunc("GET /api/apps/endpoints", s.handleEndpoints)
	mux.HandleFunc("GET /api/smartapps/endpoints", s.handleEndpoints) // legacy alias
}

func (s *Server) observe(event, reason string) {
	if s.Observe != nil {
		s.Observe(event, reason)
	}
}

func (s *Server) secure() bool { return strings.HasPrefix(s.PublicURL, "https://") }

// lookupClient is parseAuthorizeRequest's view of the app registry.
func (s *Server) lookupClient(ctx context.Context) func(string) ([]string, bool) {
	return func(id string) ([]string, bool) {
		a, err := s.store.App(ctx, id)
		if err != nil {
			return nil, false
		}
		return a.RedirectURIs, true
	}
}

// ---- authorization endpoint

func (s *Server) handleAuthorize(w http.ResponseWriter, r *http.Request) {
	pageHeaders(w)
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		s.errorPage(w, http.StatusBadRequest, "The authorization request's query string is malformed.")
		return
	}
	req, aerr := parseAuthorizeRequest(q, s.lookupClient(r.Context()))
	if aerr != nil {
		s.authFailed(w, r, aerr)
		return
	}
	id, sess := s.sessions.get(r)
	if sess == nil {
		id, sess = s.sessions.start("", 0)
		setSessionCookie(w, id, s.secure())
	}
	app, err := s.store.App(r.Context(), req.ClientID)
	if err != nil {
		s.internal(w, r, err)
		return
	}
	flash := s.sessions.takeFlash(sess)
	if sess.userID == 0 {
		s.render(w, http.StatusOK, "login", pageData{App: app, Req: req, CSRF: sess.csrf, Error: flash})
		return
	}
	user, err := s.store.UserByID(r.Context(), sess.userID)
	if err != nil {
		s.sessions.end(id)
		s.render(w, http.StatusOK, "login", pageData{App: app, Req: req, CSRF: sess.csrf, Error: "Please log in again."})
		return
	}
	if !app.InstallableBy(user.ID) {
		s.observe("authorization_denied", "unpublished_app")
		s.redirectError(w, r, &authError{Redirect: true, Code: "access_denied",
			Description: "this app is not published; only its developer can install it", req: req})
		return
	}
	s.render(w, http.StatusOK, "consent", pageData{App: app, Req: req, CSRF: sess.csrf, Error: flash, User: user, Locations: s.userLocations(user)})
}

func (s *Server) authFailed(w http.ResponseWriter, r *http.Request, e *authError) {
	s.observe("authorization_denied", e.Code)
	if !e.Redirect {
		s.errorPage(w, http.StatusBadRequest, "This authorization request cannot be completed: "+e.Description+". Nothing was sent to the app.")
		return
	}
	s.redirectError(w, r, e)
}

func (s *Server) redirectError(w http.ResponseWriter, r *http.Request, e *authError) {
	p := url.Values{"error": {e.Code}}
	if e.Description != "" {
		p.Set("error_description", e.Description)
	}
	if e.req.HasState {
		p.Set("state", e.req.State)
	}
	http.Redirect(w, r, redirectWith(e.req.RedirectURI, p), http.StatusSeeOther)
}

// locationView is one location on the consent page.
type locationView struct {
	ID       int64
	Name     string
	Switches []switchView
}

// switchView is one switch on the consent page. Limits says what it cannot
// do, so the user knows before a command answers 501.
type switchView struct {
	ID, Name, Limits string
}

func limits(sw *bridge.Switch) string {
	var can []string
	for _, c := range bridge.Commands {
		if bridge.Supports(sw.Device, c) {
			can = append(can, string(c))
		}
	}
	switch {
	case len(can) == len(bridge.Commands):
		return ""
	case len(can) == 0:
		return "read-only: reports its state, cannot be switched"
	default:
		return "can only be switched " + strings.Join(can, " and ")
	}
}

// userLocations lists the configured locations the user belongs to.
func (s *Server) userLocations(u *bridge.User) []locationView {
	var out []locationView
	for _, l := range s.hub.Locations() {
		if !u.MemberOf(l.ID) {
			continue
		}
		v := locationView{ID: l.ID, Name: l.Name}
		for _, id := range l.Switches {
			if sw, ok := s.hub.Switch(id); ok {
				v.Switches = append(v.Switches, switchView{ID: sw.ID, Name: sw.Name, Limits: limits(sw)})
			}
		}
		out = append(out, v)
	}
	return out
}

// readForm parses a bounded urlencoded body. Query parameters are not
// mixed in: a POST's fields come from its body only.
func readForm(w http.ResponseWriter, r *http.Request) (url.Values, error) {
	ct := r.Header.Get("Content-Type")
	if mt, _, _ := strings.Cut(ct, ";"); strings.TrimSpace(strings.ToLower(mt)) != "application/x-www-form-urlencoded" {
		return nil, fmt.Errorf("the body must be application/x-www-form-urlencoded")
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, fmt.Errorf("the body is larger than %d bytes", maxFormBytes)
		}
		return nil, fmt.Errorf("the body is not a valid form: %v", err)
	}
	return r.PostForm, nil
}

// authParams extracts the authorization request carried in a POSTed form.
func authParams(f url.Values) url.Values {
	q := url.Values{}
	for _, k := range []string{"response_type", "client_id", "scope", "redirect_uri", "state", "code_challenge", "code_challenge_method"} {
		if vs, ok := f[k]; ok {
			q[k] = vs
		}
	}
	return q
}

// postedForm is a login or consent POST that passed the checks every such
// POST needs: a readable bounded form, a valid authorization request in it,
// and the session's CSRF token.
type postedForm struct {
	f         url.Values
	req       *authRequest
	sessionID string
	sess      *session
}

// readPostedForm runs those checks and answers the request itself when one
// fails (ok false).
func (s *Server) readPostedForm(w http.ResponseWriter, r *http.Request) (p postedForm, ok bool) {
	pageHeaders(w)
	f, err := readForm(w, r)
	if err != nil {
		s.errorPage(w, http.StatusBadRequest, "The form could not be read: "+err.Error())
		return p, false
	}
	req, aerr := parseAuthorizeRequest(authParams(f), s.lookupClient(r.Context()))
	if aerr != nil {
		s.authFailed(w, r, aerr)
		return p, false
	}
	id, sess := s.sessions.get(r)
	if !csrfOK(sess, f.Get("csrf")) {
		s.errorPage(w, http.StatusForbidden, "This form has expired or was not sent by this page. Go back and start again from the app.")
		return p, false
	}
	return postedForm{f: f, req: req, sessionID: id, sess: sess}, true
}

func (s *Server) handleLogin(w http.ResponseWriter, r *http.Request) {
	p, ok := s.readPostedForm(w, r)
	if !ok {
		return
	}
	f, req, id, sess := p.f, p.req, p.sessionID, p.sess
	back := "/oauth/authorize?" + req.Query()
	name := f.Get("username")
	nameKey, addrKey := loginKeys(r, name)
	if wait := s.throttle.wait(s.now(), nameKey, addrKey); wait > 0 {
		s.observe("authorization_denied", "login_throttled")
		s.logger.Warn("login refused: too many failed logins", "client_id", req.ClientID, "retry_after_seconds", int(wait.Seconds()+1))
		s.sessions.setFlash(sess, fmt.Sprintf("Too many failed logins. Try again in %d seconds.", int(wait.Seconds()+1)))
		http.Redirect(w, r, back, http.StatusSeeOther)
		return
	}
	var user *bridge.User
	var err error
	var wait time.Duration
	if !s.throttle.check(r, func() {
		// Again, now that this login has its turn: a burst of logins all
		// passed the first check before any of them failed.
		if wait = s.throttle.wait(s.now(), nameKey, addrKey); wait == 0 {
			user, err = s.checkPassword(r.Context(), name, f.Get("password"))
		}
	}) {
		return // the client went away while waiting for a turn
	}
	if wait > 0 {
		s.observe("authorization_denied", "login_throttled")
		s.sessions.setFlash(sess, fmt.Sprintf("Too many failed logins. Try again in %d seconds.", int(wait.Seconds()+1)))
		http.Redirect(w, r, back, http.StatusSeeOther)
		return
	}
	if err != nil {
		s.throttle.fail(s.now(), nameKey, addrKey)
		s.observe("authorization_denied", "bad_login")
		// The typed name is logged only when it is a user: a password typed
		// into the name field must not end up in the log.
		if _, uerr := s.store.UserByName(r.Context(), f.Get("username")); uerr == nil {
			s.logger.Info("login failed", "user", f.Get("username"), "client_id", req.ClientID)
		} else {
			s.logger.Info("login failed for an unknown user name", "client_id", req.ClientID)
		}
		s.sessions.setFlash(sess, "Unknown user or wrong password.")
		http.Redirect(w, r, back, http.StatusSeeOther)
		return
	}
	s.throttle.succeed(nameKey)
	nid, _ := s.sessions.start(id, user.ID)
	setSessionCookie(w, nid, s.secure())
	http.Redirect(w, r, back, http.StatusSeeOther)
}

// dummyHash is compared against when the user does not exist, so a login
// takes as long for an unknown name as for a wrong password.
// It is made on first use, not at start-up: every CLI command imports this
// package, and a bcrypt round is slow on a Pi Zero.
var dummyHash = sync.OnceValue(func() []byte {
	h, _ := bcrypt.GenerateFromPassword([]byte("not a password"), bcrypt.DefaultCost)
	return h
})

func (s *Server) checkPassword(ctx context.Context, name, password string) (*bridge.User, error) {
	if len(password) > 72 || name == "" {
		bcrypt.CompareHashAndPassword(dummyHash(), []byte(password))
		return nil, errors.New("bad credentials")
	}
	u, err := s.store.UserByName(ctx, name)
	if err != nil {
		bcrypt.CompareHashAndPassword(dummyHash(), []byte(password))
		return nil, errors.New("bad credentials")
	}
	if bcrypt.CompareHashAndPassword(u.PasswordHash, []byte(password)) != nil {
		return nil, errors.New("bad credentials")
	}
	return u, nil
}

func (s *Server) handleLogout(w http.ResponseWriter, r *http.Request) {
	pageHeaders(w)
	f, err := readForm(w, r)
	if err != nil {
		s.errorPage(w, http.StatusBadRequest, err.Error())
		return
	}
	id, sess := s.sessions.get(r)
	if !csrfOK(sess, f.Get("csrf")) {
		s.errorPage(w, http.StatusForbidden, "This form has expired or was not sent by this page.")
		return
	}
	s.sessions.end(id)
	req, aerr := parseAuthorizeRequest(authParams(f), s.lookupClient(r.Context()))
	if aerr != nil {
		s.errorPage(w, http.StatusOK, "You are logged out.")
		return
	}
	http.Redirect(w, r, "/oauth/authorize?"+req.Query(), http.StatusSeeOther)
}

// handleConsent takes the user's decision: deny, or install the app into one
// of their locations with the switches they ticked.
func (s *Server) handleConsent(w http.ResponseWriter, r *http.Request) {
	p, ok := s.readPostedForm(w, r)
	if !ok {
		return
	}
	f, req, sess := p.f, p.req, p.sess
	if sess.userID == 0 {
		s.errorPage(w, http.StatusForbidden, "This form has expired or was not sent by this page. Go back and start again from the app.")
		return
	}
	back := "/oauth/authorize?" + req.Query()
	if f.Get("action") == "deny" {
		s.observe("authorization_denied", "user_denied")
		s.redirectError(w, r, &authError{Redirect: true, Code: "access_denied", Description: "the user denied the request", req: req})
		return
	}
	if f.Get("action") != "approve" {
		s.errorPage(w, http.StatusBadRequest, "The form must say approve or deny.")
		return
	}
	ctx := r.Context()
	user, err := s.store.UserByID(ctx, sess.userID)
	if err != nil {
		s.internal(w, r, err)
		return
	}
	app, err := s.store.App(ctx, req.ClientID)
	if err != nil {
		s.internal(w, r, err)
		return
	}
	if !app.InstallableBy(user.ID) {
		s.observe("authorization_denied", "unpublished_app")
		s.redirectError(w, r, &authError{Redirect: true, Code: "access_denied",
			Description: "this app is not published; only its developer can install it", req: req})
		return
	}
	switches, msg := s.selection(user, f)
	if msg != "" {
		s.sessions.setFlash(sess, msg)
		http.Redirect(w, r, back, http.StatusSeeOther)
		return
	}
	locID := mustInt(f.Get("location"))
	in := &bridge.Installation{ClientID: app.ClientID, UserID: user.ID, LocationID: locID, SwitchIDs: switches}
	if err := s.store.Install(ctx, in); err != nil {
		s.internal(w, r, err)
		return
	}
	s.grants.clear() // a reinstall changes what existing tokens grant
	code := NewSecret()
	expires := s.now().Add(s.codeLifetime())
	if err := s.store.CreateCode(ctx, Hash(code), store.Code{ClientID: app.ClientID, RedirectURI: req.RedirectURI,
		InstallationID: in.ID, ExpiresAt: expires, CodeChallenge: req.CodeChallenge}); err != nil {
		s.internal(w, r, err)
		return
	}
	s.observe("authorization_granted", "")
	s.logger.Info("app installed", "client_id", app.ClientID, "installation", in.ID, "user", user.Name, "location", locID, "switches", len(switches))
	params := url.Values{"code": {code}}
	if req.HasState {
		params.Set("state", req.State)
	}
	http.Redirect(w, r, redirectWith(req.RedirectURI, params), http.StatusSeeOther)
}

// selection checks the consent form's location and switches: the location
// must be one of the user's, at least one switch is required, and every
// switch must be in that location. It returns the switch ids in config
// order, or a message for the user.
func (s *Server) selection(u *bridge.User, f url.Values) ([]string, string) {
	locID := mustInt(f.Get("location"))
	if locID <= 0 || !u.MemberOf(locID) {
		return nil, "Choose one of your locations."
	}
	loc, ok := s.hub.Location(locID)
	if !ok {
		return nil, "Choose one of your locations."
	}
	picked := map[string]bool{}
	for _, id := range f["switch"] {
		picked[id] = true
	}
	if len(picked) == 0 {
		return nil, "Select at least one switch the app may control."
	}
	var out []string
	for _, id := range loc.Switches {
		if picked[id] {
			out = append(out, id)
			delete(picked, id)
		}
	}
	if len(picked) > 0 {
		return nil, fmt.Sprintf("Some selected switches are not in %s.", loc.Name)
	}
	return out, ""
}

func mustInt(s string) int64 {
	var n int64
	if len(s) == 0 || len(s) > 18 {
		return 0
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0
		}
		n = n*10 + int64(c-'0')
	}
	return n
}

func (s *Server) codeLifetime() time.Duration {
	if s.CodeLifetime <= 0 || s.CodeLifetime > 24*time.Hour {
		return 24 * time.Hour
	}
	return s.CodeLifetime
}

// ---- token endpoint

type tokenError struct {
	status int
	code   string
	desc   string
	basic  bool   // the client tried HTTP Basic: answer with a Basic challenge
	reason string // a short, bounded cause for metrics; code when empty
}

func (s *Server) handleToken(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Pragma", "no-cache")
	if r.Method != http.MethodPost {
		h.Set("Allow", http.MethodPost)
		writeTokenError(w, &tokenError{status: http.StatusMethodNotAllowed, code: "invalid_request", desc: "the token endpoint takes POST only"})
		return
	}
	if r.URL.RawQuery != "" {
		writeTokenError(w, &tokenError{status: http.StatusBadRequest, code: "invalid_request", desc: "parameters go in the form body, not the query string"})
		return
	}
	f, err := readForm(w, r)
	if err != nil {
		writeTokenError(w, &tokenError{status: http.StatusBadRequest, code: "invalid_request", desc: err.Error()})
		return
	}
	resp, terr := s.token(r, f)
	if terr != nil {
		reason := terr.code
		if terr.reason != "" {
			reason = terr.reason
		}
		if terr.code == "invalid_client" {
			s.observe("client_auth_failed", reason)
		} else {
			s.observe("token_failed", reason)
		}
		writeTokenError(w, terr)
		return
	}
	s.observe("token_issued", "")
	h.Set("Content-Type", "application/json;charset=UTF-8")
	json.NewEncoder(w).Encode(resp)
}

type tokenResponse struct {
	AccessToken string `json:"access_token"`
	ExpiresIn   int64  `json:"expires_in"`
	TokenType   string `json:"token_type"`
	Scope       string `json:"scope"`
}

func (s *Server) token(r *http.Request, f url.Values) (*tokenResponse, *tokenError) {
	bad := func(code, desc string) *tokenError {
		return &tokenError{status: http.StatusBadRequest, code: code, desc: desc}
	}
	for k, vs := range f {
		if len(vs) > 1 {
			return nil, bad("invalid_request", k+" is given more than once")
		}
	}
	// Authenticate the client before looking at the code, so a failed client
	// authentication cannot burn a code.
	app, terr := s.authenticateClient(r, f)
	if terr != nil {
		return nil, terr
	}
	switch gt := f.Get("grant_type"); gt {
	case "authorization_code":
	case "":
		return nil, bad("invalid_request", "grant_type is missing")
	default:
		return nil, bad("unsupported_grant_type", "grant_type must be authorization_code")
	}
	code := f.Get("code")
	if code == "" {
		return nil, bad("invalid_request", "code is missing")
	}
	redirectURI := f.Get("redirect_uri")
	if redirectURI == "" {
		return nil, bad("invalid_request", "redirect_uri is missing")
	}
	token := NewSecret()
	lifetime := s.TokenLifetime
	expires := s.now().Add(lifetime)
	verifier, hasVerifier := f["code_verifier"]
	errWrongClient := errors.New("code was issued to another client")
	errWrongRedirect := errors.New("redirect_uri differs from the one the code was issued for")
	errPKCE := errors.New("code_verifier does not match the code_challenge")
	errNoPKCE := errors.New("code_verifier given, but the authorization request had no code_challenge")
	c, err := s.store.RedeemCode(r.Context(), Hash(code), func(c store.Code) error {
		switch {
		case c.ClientID != app.ClientID:
			return errWrongClient
		case c.RedirectURI != redirectURI:
			return errWrongRedirect
		case c.CodeChallenge == "" && hasVerifier:
			// A verifier without a challenge is a downgrade (RFC 9700 §2.1.1).
			return errNoPKCE
		case c.CodeChallenge != "" && (!hasVerifier || !pkceMatches(verifier[0], c.CodeChallenge)):
			return errPKCE
		}
		return nil
	}, Hash(token), expires)
	switch {
	case errors.Is(err, store.ErrCodeInvalid):
		return nil, bad("invalid_grant", "the code is unknown or expired")
	case errors.Is(err, store.ErrCodeReused):
		s.grants.clear() // the replay revoked a token
		s.logger.Warn("authorization code replayed; its token is revoked", "client_id", app.ClientID)
		return nil, bad("invalid_grant", "the code was used already; the token it issued is revoked")
	case errors.Is(err, errWrongClient), errors.Is(err, errWrongRedirect), errors.Is(err, errPKCE), errors.Is(err, errNoPKCE):
		return nil, bad("invalid_grant", err.Error())
	case err != nil:
		s.logger.Error("redeeming code", "err", err)
		return nil, &tokenError{status: http.StatusInternalServerError, code: "server_error", desc: "internal error"}
	}
	s.logger.Info("token issued", "client_id", app.ClientID, "installation", c.InstallationID)
	return &tokenResponse{AccessToken: token, ExpiresIn: int64(lifetime / time.Second), TokenType: "bearer", Scope: "app"}, nil
}

// authenticateClient checks the client's credentials: HTTP Basic (with the
// id and secret form-urlencoded first, RFC 6749 §2.3.1) or client_id and
// client_secret in the form, not both.
func (s *Server) authenticateClient(r *http.Request, f url.Values) (*bridge.App, *tokenError) {
	_, hasFormSecret := f["client_secret"]
	var id, secret string
	basic := false
	if ah := r.Header.Get("Authorization"); ah != "" {
		user, pass, ok := r.BasicAuth()
		if !ok {
			return nil, &tokenError{status: http.StatusUnauthorized, code: "invalid_client", desc: "the Authorization header is not valid HTTP Basic", basic: true, reason: "malformed_basic"}
		}
		if hasFormSecret {
			return nil, &tokenError{status: http.StatusBadRequest, code: "invalid_request", desc: "use one client authentication method, not both"}
		}
		var err1, err2 error
		id, err1 = url.QueryUnescape(user)
		secret, err2 = url.QueryUnescape(pass)
		if err1 != nil || err2 != nil {
			return nil, &tokenError{status: http.StatusUnauthorized, code: "invalid_client", desc: "the Basic credentials are not form-urlencoded", basic: true, reason: "malformed_basic"}
		}
		if fid := f.Get("client_id"); fid != "" && fid != id {
			return nil, &tokenError{status: http.StatusBadRequest, code: "invalid_request", desc: "client_id differs from the authenticated client"}
		}
		basic = true
	} else {
		id, secret = f.Get("client_id"), f.Get("client_secret")
		if id == "" || secret == "" {
			return nil, &tokenError{status: http.StatusUnauthorized, code: "invalid_client", desc: "client authentication is missing", reason: "missing"}
		}
	}
	fail := &tokenError{status: http.StatusUnauthorized, code: "invalid_client", desc: "client authentication failed", basic: basic, reason: "bad_credentials"}
	if len(id) > maxParamLen || len(secret) > maxParamLen {
		return nil, fail
	}
	app, err := s.store.App(r.Context(), id)
	if err != nil {
		SecretMatches(secret, dummySecretHash) // same work as a known client
		return nil, fail
	}
	if !SecretMatches(secret, app.SecretHash) {
		return nil, fail
	}
	return app, nil
}

var dummySecretHash = Hash("no such client")

func writeTokenError(w http.ResponseWriter, e *tokenError) {
	if e.status == http.StatusUnauthorized {
		if e.basic {
			w.Header().Set("WWW-Authenticate", `Basic realm="switchbridge", charset="UTF-8"`)
		} else {
			w.Header().Set("WWW-Authenticate", `Basic realm="switchbridge"`)
		}
	}
	w.Header().Set("Content-Type", "application/json;charset=UTF-8")
	w.WriteHeader(e.status)
	json.NewEncoder(w).Encode(map[string]string{"error": e.code, "error_description": e.desc})
}

// ---- discovery and the token check

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

// InstallationPath is the path of an installation below base_url.
func InstallationPath(id string) string { return "/api/apps/installations/" + id }

func (s *Server) handleEndpoints(w http.ResponseWriter, r *http.Request) {
	tok, msg := bearer.Token(r)
	if tok == "" {
		s.observe("api_token_failed", "missing")
		bearer.WriteError(w, http.StatusUnauthorized, bearer.MissingCode(r), msg)
		return
	}
	g, err := s.grant(r.Context(), tok)
	if err != nil {
		s.observe("api_token_failed", "invalid")
		bearer.WriteError(w, http.StatusUnauthorized, "invalid_token", bridge.ErrorMessage(err))
		return
	}
	e := Endpoint{}
	e.OAuthClient.ClientID = g.ClientID
	e.Location.ID = g.LocationID
	l, ok := s.hub.Location(g.LocationID)
	if !ok {
		// The location was removed from the config after the install.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		json.NewEncoder(w).Encode(map[string]any{"error": true, "type": "SmartAppException", "status": http.StatusNotFound,
			"message": fmt.Sprintf("location %d of this installation is no longer configured on this hub", g.LocationID)})
		return
	}
	e.Location.Name = l.Name
	e.BaseURL = s.PublicURL
	e.URL = InstallationPath(g.InstallationID)
	e.URI = e.BaseURL + e.URL
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode([]Endpoint{e})
}

// Authorize implements bridge.Authorizer for the installation API.
func (s *Server) Authorize(ctx context.Context, token, installationID string) (*bridge.Grant, error) {
	g, err := s.grant(ctx, token)
	if err != nil {
		return nil, err
	}
	if g.InstallationID != installationID {
		return nil, bridge.Errorf(bridge.EFORBIDDEN, "the access token is not for this installation")
	}
	return g, nil
}

func (s *Server) grant(ctx context.Context, token string) (*bridge.Grant, error) {
	if len(token) > maxParamLen {
		return nil, bridge.Errorf(bridge.EUNAUTHORIZED, "the access token is invalid")
	}
	hash := Hash(token)
	now := s.now()
	if g, ok := s.grants.get(hash, now); ok {
		if !now.Before(g.ExpiresAt) {
			return nil, bridge.Errorf(bridge.EUNAUTHORIZED, "the access token expired")
		}
		return g, nil
	}
	gen := s.grants.generation()
	t, err := s.store.Token(ctx, hash)
	switch {
	case errors.Is(err, store.ErrTokenUnknown):
		return nil, bridge.Errorf(bridge.EUNAUTHORIZED, "the access token is invalid")
	case err != nil:
		return nil, err
	case t.Revoked:
		return nil, bridge.Errorf(bridge.EUNAUTHORIZED, "the access token was revoked")
	case !s.now().Before(t.ExpiresAt):
		return nil, bridge.Errorf(bridge.EUNAUTHORIZED, "the access token expired")
	}
	in, err := s.store.Installation(ctx, t.InstallationID)
	if err != nil {
		if bridge.ErrorCode(err) == bridge.ENOTFOUND {
			return nil, bridge.Errorf(bridge.EUNAUTHORIZED, "the installation of this token is gone")
		}
		return nil, err
	}
	g := &bridge.Grant{
		InstallationID: in.ID, ClientID: in.ClientID, UserID: in.UserID,
		LocationID: in.LocationID, SwitchIDs: in.SwitchIDs, ExpiresAt: t.ExpiresAt,
	}
	s.grants.put(hash, g, now, gen)
	return g, nil
}

func (s *Server) internal(w http.ResponseWriter, r *http.Request, err error) {
	s.logger.Error("oauth request failed", "path", r.URL.Path, "err", err)
	s.errorPage(w, http.StatusInternalServerError, "Something went wrong on the hub. Try again; if it keeps failing, the hub's log says why.")
}
