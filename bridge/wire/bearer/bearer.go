// Package bearer reads RFC 6750 bearer tokens from requests and writes the
// errors that refuse them, so discovery and the installation API apply the
// same rules: the token travels in the Authorization header, or, for a
// legacy app only, in the query string.
package bearer

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// Problem is a request whose token could not be read, with the RFC 6750
// §3.1 answer: 400 invalid_request for a malformed request, 401 without an
// error code for one that carries no token at all (or only credentials of
// another scheme).
type Problem struct {
	Status      int
	Code        string
	Description string
}

func malformed(desc string) *Problem {
	return &Problem{Status: http.StatusBadRequest, Code: "invalid_request", Description: desc}
}

// Token returns the request's bearer token and whether it came in the
// query string (access_token, RFC 6750 §2.3), which the caller accepts only
// from a legacy app once it knows the token's app. A request that sends
// the token both ways, or twice, or malformed, is a *Problem.
func Token(r *http.Request) (token string, inQuery bool, p *Problem) {
	ah := r.Header.Get("Authorization")
	// Query parses the whole query string into a map: most requests have
	// none to parse.
	var qs []string
	queried := false
	if r.URL.RawQuery != "" {
		qs, queried = r.URL.Query()["access_token"]
	}
	if queried {
		switch {
		case ah != "":
			// RFC 6750 §2: one method per request.
			return "", false, malformed("send the access token once: in the Authorization header or the query string, not both")
		case len(qs) > 1:
			return "", false, malformed("access_token is given more than once")
		case !validToken(qs[0]):
			return "", false, malformed("access_token in the query string is empty or malformed")
		}
		return qs[0], true, nil
	}
	if ah == "" {
		return "", false, &Problem{Status: http.StatusUnauthorized, Description: "an access token is required: send Authorization: Bearer <token>"}
	}
	scheme, tok, _ := strings.Cut(ah, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		// Another scheme is no token at all (§3: no error code).
		return "", false, &Problem{Status: http.StatusUnauthorized, Description: "the Authorization header must be Bearer <token>"}
	}
	tok = strings.TrimSpace(tok)
	if !validToken(tok) {
		return "", false, malformed("the Authorization header must be Bearer <token>, the token in base64 or base64url characters")
	}
	return tok, false, nil
}

// validToken checks the form of a token (b64token, RFC 6750 §2.1): the
// characters of base64 and base64url, '=' only at the end.
func validToken(s string) bool {
	body := strings.TrimRight(s, "=")
	if body == "" {
		return false
	}
	for _, c := range body {
		switch {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '-', c == '.', c == '_', c == '~', c == '+', c == '/':
		default:
			return false
		}
	}
	return true
}

// QueryRefused is the Problem of a token in the query string of a request
// whose app is not legacy.
var QueryRefused = malformed("access tokens are not accepted in the query string; send Authorization: Bearer <token>")

// Write answers the request with the problem.
func (p *Problem) Write(w http.ResponseWriter) {
	WriteError(w, p.Status, p.Code, p.Description)
}

// WriteError answers a request whose token failed (RFC 6750 §3) with a
// WWW-Authenticate challenge and a JSON body. With an empty code the
// challenge names only the realm.
func WriteError(w http.ResponseWriter, status int, code, desc string) {
	challenge := `Bearer realm="switchbridge"`
	if code != "" {
		challenge += fmt.Sprintf(`, error=%q, error_description=%q`, code, strings.ReplaceAll(desc, `"`, "'"))
	}
	w.Header().Set("WWW-Authenticate", challenge)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	body := map[string]string{"error": code, "error_description": desc}
	if code == "" {
		body["error"] = "unauthorized"
	}
	json.NewEncoder(w).Encode(body)
}

type queryKey struct{}

// FromQuery marks ctx as carrying a request whose token came in the query
// string: the token check then counts a use only for a legacy app, the
// only kind whose request is answered (InQuery).
func FromQuery(ctx context.Context) context.Context {
	return context.WithValue(ctx, queryKey{}, true)
}

// InQuery reports whether FromQuery marked ctx.
func InQuery(ctx context.Context) bool {
	v, _ := ctx.Value(queryKey{}).(bool)
	return v
}
