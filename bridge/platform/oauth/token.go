package oauth

// The token endpoint (client authentication, the code exchange, refresh)
// and the revocation endpoint.

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/wire"
)

type tokenError struct {
	status int
	code   string
	desc   string
	basic  bool   // the client tried HTTP Basic: answer with a Basic challenge
	reason string // a short, bounded cause for metrics; code when empty
	cause  error  // the store's error behind a 503, for its Retry-After
}

// clientRequest reads a request to the token or the revocation endpoint
// up to an authenticated client: a POST with a bounded form body, no
// query string, no parameter twice, and valid client credentials. It sets
// the headers both endpoints answer with.
func (s *Server) clientRequest(w http.ResponseWriter, r *http.Request, endpoint string) (url.Values, *bridge.App, *tokenError) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Pragma", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	if r.Method != http.MethodPost {
		h.Set("Allow", http.MethodPost)
		return nil, nil, &tokenError{status: http.StatusMethodNotAllowed, code: "invalid_request", desc: "the " + endpoint + " endpoint takes POST only"}
	}
	if r.URL.RawQuery != "" {
		return nil, nil, &tokenError{status: http.StatusBadRequest, code: "invalid_request", desc: "parameters go in the form body, not the query string"}
	}
	f, err := readForm(w, r)
	if err != nil {
		return nil, nil, &tokenError{status: http.StatusBadRequest, code: "invalid_request", desc: err.Error()}
	}
	for k, vs := range f {
		if len(vs) > 1 {
			return nil, nil, &tokenError{status: http.StatusBadRequest, code: "invalid_request", desc: k + " is given more than once"}
		}
	}
	// Authenticate the client before looking at the code or token, so a
	// failed client authentication cannot burn a code or spend a token.
	app, terr := s.authenticateClient(r, f)
	if terr != nil {
		return nil, nil, terr
	}
	return f, app, nil
}

// failed counts a refused token or revocation request and answers it.
func (s *Server) failed(w http.ResponseWriter, terr *tokenError) {
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
}

func (s *Server) handleToken(w http.ResponseWriter, r *http.Request) {
	f, app, terr := s.clientRequest(w, r, "token")
	if terr == nil {
		var resp *tokenResponse
		if resp, terr = s.token(r, f, app); terr == nil {
			s.observe("token_issued", "")
			w.Header().Set("Content-Type", "application/json;charset=UTF-8")
			json.NewEncoder(w).Encode(resp)
			return
		}
	}
	s.failed(w, terr)
}

type tokenResponse struct {
	AccessToken  string `json:"access_token"`
	ExpiresIn    int64  `json:"expires_in"`
	TokenType    string `json:"token_type"`
	Scope        string `json:"scope"`
	RefreshToken string `json:"refresh_token,omitempty"`
}

func newTokenResponse(t IssuedToken) *tokenResponse {
	return &tokenResponse{AccessToken: t.Token, ExpiresIn: int64(t.ExpiresIn / time.Second), TokenType: "bearer", Scope: "app", RefreshToken: t.RefreshToken}
}

func badRequest(code, desc string) *tokenError {
	return &tokenError{status: http.StatusBadRequest, code: code, desc: desc}
}

// serverError logs an error of the store and answers it: 503
// temporarily_unavailable with Retry-After when the store says it is away
// for a moment (its database restarting), else 500 server_error.
func (s *Server) serverError(what string, err error) *tokenError {
	s.logger.Error(what, "err", err)
	if wire.StatusOf(err) == http.StatusServiceUnavailable {
		return &tokenError{status: http.StatusServiceUnavailable, code: "temporarily_unavailable", desc: bridge.ErrorMessage(err), cause: err}
	}
	return &tokenError{status: http.StatusInternalServerError, code: "server_error", desc: "internal error"}
}

func (s *Server) token(r *http.Request, f url.Values, app *bridge.App) (*tokenResponse, *tokenError) {
	switch gt := f.Get("grant_type"); gt {
	case "authorization_code":
		return s.exchangeCode(r, f, app)
	case "refresh_token":
		return s.refresh(r, f, app)
	case "":
		return nil, badRequest("invalid_request", "grant_type is missing")
	default:
		return nil, badRequest("unsupported_grant_type", "grant_type must be authorization_code or refresh_token")
	}
}

func (s *Server) exchangeCode(r *http.Request, f url.Values, app *bridge.App) (*tokenResponse, *tokenError) {
	code := f.Get("code")
	if code == "" {
		return nil, badRequest("invalid_request", "code is missing")
	}
	redirectURI := f.Get("redirect_uri")
	if redirectURI == "" {
		return nil, badRequest("invalid_request", "redirect_uri is missing")
	}
	_, hasVerifier := f["code_verifier"]
	t, c, err := s.Issuer.Redeem(r.Context(), app, code, redirectURI, f.Get("code_verifier"), hasVerifier)
	var refused *grantRefused
	switch {
	case errors.Is(err, bridge.ErrCodeInvalid):
		return nil, badRequest("invalid_grant", "the code is unknown or expired")
	case errors.Is(err, bridge.ErrCodeReused):
		s.logger.Warn("authorization code replayed; the installation's tokens are revoked", "client_id", app.ClientID)
		return nil, &tokenError{status: http.StatusBadRequest, code: "invalid_grant", reason: "code_reused",
			desc: "the code was used already; every token issued for it is revoked"}
	case errors.As(err, &refused):
		return nil, badRequest("invalid_grant", refused.Error())
	case err != nil:
		return nil, s.serverError("redeeming code", err)
	}
	s.logger.Info("token issued", "client_id", app.ClientID, "installation", c.InstallationID)
	return newTokenResponse(t), nil
}

// refresh is the refresh_token grant (RFC 6749 §6): a new access token and
// a new refresh token for one that is spent by it.
func (s *Server) refresh(r *http.Request, f url.Values, app *bridge.App) (*tokenResponse, *tokenError) {
	rt := f.Get("refresh_token")
	if rt == "" {
		return nil, badRequest("invalid_request", "refresh_token is missing")
	}
	if scope, ok := f["scope"]; ok && scope[0] != "app" {
		// The only scope there is; a refresh cannot widen it (§6).
		return nil, badRequest("invalid_scope", "scope must be app, or left out")
	}
	if len(rt) > maxParamLen {
		return nil, badRequest("invalid_grant", "the refresh token is unknown, expired or revoked")
	}
	t, spent, err := s.Issuer.Refresh(r.Context(), app, rt)
	var refused *grantRefused
	switch {
	case errors.Is(err, bridge.ErrRefreshInvalid):
		return nil, badRequest("invalid_grant", "the refresh token is unknown, expired or revoked")
	case errors.Is(err, bridge.ErrRefreshReused):
		s.logger.Warn("spent refresh token presented again; the installation's tokens are revoked", "client_id", app.ClientID)
		return nil, &tokenError{status: http.StatusBadRequest, code: "invalid_grant", reason: "refresh_reused",
			desc: "the refresh token was used already; every token of its grant is revoked"}
	case errors.As(err, &refused):
		return nil, badRequest("invalid_grant", refused.Error())
	case err != nil:
		return nil, s.serverError("refreshing a token", err)
	}
	s.logger.Info("token refreshed", "client_id", app.ClientID, "installation", spent.InstallationID)
	return newTokenResponse(t), nil
}

// handleRevoke is token revocation (RFC 7009): a client takes back one of
// its tokens. The answer is 200 whether or not the token was found, and
// the same for another client's token, which is left alone (§2.2).
func (s *Server) handleRevoke(w http.ResponseWriter, r *http.Request) {
	f, app, terr := s.clientRequest(w, r, "revocation")
	if terr != nil {
		s.failed(w, terr)
		return
	}
	tok := f.Get("token")
	if tok == "" {
		s.failed(w, badRequest("invalid_request", "token is missing"))
		return
	}
	// token_type_hint is not needed: both kinds are looked up by hash, and
	// RFC 7009 §2.1 has the server search every kind anyway.
	if len(tok) <= maxParamLen {
		what, err := s.Issuer.Revoke(r.Context(), app, tok)
		if err != nil {
			s.failed(w, s.serverError("revoking a token", err))
			return
		}
		switch what {
		case bridge.RevokedAccessToken:
			s.logger.Info("access token revoked", "client_id", app.ClientID)
		case bridge.RevokedGrant:
			s.logger.Info("refresh token revoked with every token of its grant", "client_id", app.ClientID)
		}
	}
	w.WriteHeader(http.StatusOK)
}

// authenticateClient checks the client's credentials: HTTP Basic (with the
// id and secret form-urlencoded first, RFC 6749 §2.3.1) or client_id and
// client_secret in the form. Clients written for the original platform
// send both; that is accepted when both name the same client and secret,
// and refused as invalid_request when they differ.
func (s *Server) authenticateClient(r *http.Request, f url.Values) (*bridge.App, *tokenError) {
	var id, secret string
	basic := false
	if ah := r.Header.Get("Authorization"); ah != "" {
		user, pass, ok := r.BasicAuth()
		if !ok {
			return nil, &tokenError{status: http.StatusUnauthorized, code: "invalid_client", desc: "the Authorization header is not valid HTTP Basic", basic: true, reason: "malformed_basic"}
		}
		var err1, err2 error
		id, err1 = url.QueryUnescape(user)
		secret, err2 = url.QueryUnescape(pass)
		if err1 != nil || err2 != nil {
			return nil, &tokenError{status: http.StatusUnauthorized, code: "invalid_client", desc: "the Basic credentials are not form-urlencoded", basic: true, reason: "malformed_basic"}
		}
		if fid, ok := f["client_id"]; ok && fid[0] != id {
			return nil, badRequest("invalid_request", "client_id differs from the client of the Authorization header")
		}
		if fs, ok := f["client_secret"]; ok && subtle.ConstantTimeCompare([]byte(fs[0]), []byte(secret)) != 1 {
			return nil, badRequest("invalid_request", "client_secret differs from the secret of the Authorization header: use one client authentication method")
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
	app, err := s.apps.App(r.Context(), id)
	if err != nil && bridge.ErrorCode(err) != bridge.ENOTFOUND {
		// Not a wrong client: the registry could not be read.
		return nil, s.serverError("reading the client's app", err)
	}
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
	if e.cause != nil {
		wire.SetRetryAfter(w.Header(), e.cause)
	}
	w.Header().Set("Content-Type", "application/json;charset=UTF-8")
	w.WriteHeader(e.status)
	json.NewEncoder(w).Encode(map[string]string{"error": e.code, "error_description": e.desc})
}
