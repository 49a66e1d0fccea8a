package oauth

import (
	"net/url"
	"strings"

	"github.com/switchbridge/switchbridge/bridge"
)

// authRequest is a validated authorization request.
type authRequest struct {
	ClientID    string
	RedirectURI string
	State       string
	HasState    bool
	// CodeChallenge is the client's PKCE challenge (RFC 7636, S256 only),
	// "" when it sent none.
	CodeChallenge string
}

// Query is the request as the query string it arrived as, rebuilt in a fixed
// order, for links and hidden form fields.
func (r *authRequest) Query() string {
	q := url.Values{}
	q.Set("response_type", "code")
	q.Set("client_id", r.ClientID)
	q.Set("scope", "app")
	q.Set("redirect_uri", r.RedirectURI)
	if r.HasState {
		q.Set("state", r.State)
	}
	if r.CodeChallenge != "" {
		q.Set("code_challenge", r.CodeChallenge)
		q.Set("code_challenge_method", "S256")
	}
	return q.Encode()
}

// authError is a failed authorization request. When Redirect is false the
// client or its redirect URI could not be trusted, and the user sees an error
// page; otherwise the error goes back to the client's redirect URI as RFC
// 6749 §4.1.2.1 says.
type authError struct {
	Redirect    bool
	Code        string // RFC 6749 error code
	Description string
	req         *authRequest // set when Redirect is true
	// cause is the store's error when the app registry could not be read:
	// the request is then answered as that error (503 while the database
	// is away), not as one naming an unknown client.
	cause error
}

func (e *authError) Error() string { return e.Code + ": " + e.Description }

// maxParamLen bounds every parameter; a longer one is invalid_request.
const maxParamLen = 2048

// parseAuthorizeRequest checks an authorization request's parameters.
// lookup returns a client (its registered redirect URIs, whether it must use
// PKCE), or ENOTFOUND when there is none. The checks run in the order RFC 6749 §4.1.2.1 needs: until the
// client and redirect URI are known good, nothing may redirect.
func parseAuthorizeRequest(q url.Values, lookup func(clientID string) (*bridge.App, error)) (*authRequest, *authError) {
	page := func(format string) *authError {
		return &authError{Code: "invalid_request", Description: format}
	}
	single := func(k string) (string, bool, bool) { // value, present, duplicated
		vs, ok := q[k]
		if !ok {
			return "", false, false
		}
		return vs[0], true, len(vs) > 1
	}

	clientID, ok, dup := single("client_id")
	switch {
	case dup:
		return nil, page("client_id is given more than once")
	case !ok || clientID == "":
		return nil, page("client_id is missing")
	case len(clientID) > maxParamLen:
		return nil, page("client_id is too long")
	}
	app, err := lookup(clientID)
	switch {
	case bridge.ErrorCode(err) == bridge.ENOTFOUND:
		return nil, page("client_id is not a registered app")
	case err != nil:
		return nil, &authError{Code: "server_error", Description: "the app registry cannot be read", cause: err}
	}
	redirectURI, ok, dup := single("redirect_uri")
	switch {
	case dup:
		return nil, page("redirect_uri is given more than once")
	case !ok || redirectURI == "":
		return nil, page("redirect_uri is missing")
	}
	registered := false
	for _, u := range app.RedirectURIs {
		if u == redirectURI { // exact string comparison, RFC 6749 §3.1.2.3 / RFC 9700 §4.1.3
			registered = true
			break
		}
	}
	if !registered {
		return nil, page("redirect_uri does not match a redirect URI registered for this app")
	}

	req := &authRequest{ClientID: clientID, RedirectURI: redirectURI}
	fail := func(code, desc string) *authError {
		return &authError{Redirect: true, Code: code, Description: desc, req: req}
	}
	// From here on the redirect URI is trusted; state goes back with any error
	// as long as it is itself well formed.
	if state, ok, dup := single("state"); ok {
		if dup {
			return nil, fail("invalid_request", "state is given more than once")
		}
		if len(state) > maxParamLen {
			return nil, fail("invalid_request", "state is too long")
		}
		req.State, req.HasState = state, true
	}
	for k, vs := range q {
		if len(vs) > 1 {
			return nil, fail("invalid_request", k+" is given more than once")
		}
	}
	rt, ok, _ := single("response_type")
	switch {
	case !ok || rt == "":
		return nil, fail("invalid_request", "response_type is missing")
	case rt != "code":
		return nil, fail("unsupported_response_type", "response_type must be code")
	}
	scope, ok, _ := single("scope")
	switch {
	case !ok || scope == "":
		return nil, fail("invalid_request", "scope is missing")
	case strings.TrimSpace(scope) != "app" || scope != "app":
		return nil, fail("invalid_scope", "scope must be app")
	}
	challenge, hasChallenge, _ := single("code_challenge")
	method, hasMethod, _ := single("code_challenge_method")
	switch {
	case !hasChallenge && hasMethod:
		return nil, fail("invalid_request", "code_challenge_method without code_challenge")
	case !hasChallenge:
	case method != "S256":
		// plain gives no protection against a stolen code (RFC 9700 §2.1.1).
		return nil, fail("invalid_request", "code_challenge_method must be S256")
	case len(challenge) != 43 || !validChallenge(challenge):
		// An S256 challenge is a SHA-256 in base64url without padding.
		return nil, fail("invalid_request", "code_challenge must be a SHA-256 in base64url: 43 characters of A-Z, a-z, 0-9, '-', '_'")
	default:
		req.CodeChallenge = challenge
	}
	if app.RequirePKCE && req.CodeChallenge == "" {
		// Registered as PKCE-only: a stolen code must be useless without
		// the verifier (RFC 9700 §2.1.1).
		return nil, fail("invalid_request", "this app must use PKCE: send code_challenge with code_challenge_method S256")
	}
	return req, nil
}

// validChallenge checks the form of a PKCE challenge or verifier (RFC 7636
// §4.1): 43 to 128 unreserved characters.
func validChallenge(s string) bool {
	if len(s) < 43 || len(s) > 128 {
		return false
	}
	for _, c := range s {
		switch {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '.', c == '_', c == '~':
		default:
			return false
		}
	}
	return true
}

// redirectWith builds the client redirect for a trusted redirect URI. The
// registered URI is kept byte for byte and the parameters are appended to
// its query, so whatever query it was registered with reaches the client
// unchanged (re-encoding it could change what the client reads).
func redirectWith(redirectURI string, params url.Values) string {
	sep := "?"
	if strings.Contains(redirectURI, "?") {
		sep = "&"
		if strings.HasSuffix(redirectURI, "?") || strings.HasSuffix(redirectURI, "&") {
			sep = ""
		}
	}
	return redirectURI + sep + params.Encode()
}

// reservedParams are added by the server to a redirect; a registered URI
// that already carries one would hand the client two values.
var reservedParams = []string{"code", "state", "error", "error_description", "iss"}

// ValidRedirectURI checks a redirect URI offered at app registration: an
// absolute URI without a fragment (RFC 6749 §3.1.2) whose scheme is http,
// https, or a private-use scheme in reverse domain notation for native apps
// (RFC 8252 §7.1, e.g. com.example.app:/cb). Plain http is allowed, since
// hub clients often live on the home network. Schemes that run code or
// carry data in a browser (javascript:, data:, …) are refused, and so are
// user information (https://user@host/ is a classic way to make a URI look
// like another host's) and a query that already holds a parameter the
// server adds.
func ValidRedirectURI(s string) error {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return err
	case len(s) > maxParamLen:
		return errString("redirect URI is too long")
	case u.Scheme == "" || !u.IsAbs():
		return errString("redirect URI " + s + " is not absolute")
	case u.Fragment != "" || strings.Contains(s, "#"):
		return errString("redirect URI " + s + " has a fragment")
	case u.User != nil:
		return errString("redirect URI " + s + " has user information (user@ or user:password@ before the host)")
	case u.Scheme == "http" || u.Scheme == "https":
		if u.Host == "" {
			return errString("redirect URI " + s + " has no host")
		}
	case !strings.Contains(u.Scheme, "."):
		return errString("redirect URI " + s + ": the scheme must be http, https or a reverse-domain private-use scheme such as com.example.app")
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return errString("redirect URI " + s + " has a malformed query")
	}
	for _, k := range reservedParams {
		if q.Has(k) {
			return errString("redirect URI " + s + " must not carry " + k + " in its query: the hub adds it")
		}
	}
	return nil
}

type errString string

func (e errString) Error() string { return string(e) }
