// Package bearer reads RFC 6750 bearer tokens from requests and writes the
// errors that refuse them, so discovery and the installation API apply the
// same rules: the token travels in the Authorization header and nowhere else.
package bearer

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// Token returns the request's bearer token from the Authorization header,
// the only place it is accepted. When there is none it returns "" and a
// message that says why: a token in the query string is refused (RFC 6750
// §2.3, RFC 9700 §4.3.2).
func Token(r *http.Request) (token, problem string) {
	if r.URL.Query().Has("access_token") {
		// Refused even beside a header: RFC 6750 §2 allows one method per
		// request, and a token in a URL ends up in logs.
		return "", "access tokens are not accepted in the query string; send Authorization: Bearer <token>"
	}
	ah := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(ah, " ")
	if ah != "" && ok && strings.EqualFold(scheme, "Bearer") && strings.TrimSpace(tok) != "" {
		return strings.TrimSpace(tok), ""
	}
	if ah != "" {
		return "", "the Authorization header must be Bearer <token>"
	}
	return "", "an access token is required: send Authorization: Bearer <token>"
}

// MissingCode is the RFC 6750 error code for a request without a usable
// token: none when it sent no credentials at all (§3.1), invalid_request when
// it sent them the wrong way (in the query string, or another scheme).
func MissingCode(r *http.Request) string {
	if r.Header.Get("Authorization") == "" && !r.URL.Query().Has("access_token") {
		return ""
	}
	return "invalid_request"
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
	w.WriteHeader(status)
	body := map[string]string{"error": code, "error_description": desc}
	if code == "" {
		body["error"] = "unauthorized"
	}
	json.NewEncoder(w).Encode(body)
}
