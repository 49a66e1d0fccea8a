package bearer

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestToken(t *testing.T) {
	cases := []struct {
		name, url, header string
		token             string
		problem           string // part of the message when token is ""
		code              string
	}{
		{"header", "/x", "Bearer abc", "abc", "", ""},
		{"scheme in any case", "/x", "bearer abc", "abc", "", ""},
		{"surrounding space", "/x", "Bearer   abc  ", "abc", "", ""},
		{"nothing", "/x", "", "", "an access token is required", ""},
		{"basic", "/x", "Basic dXNlcjpwYXNz", "", "must be Bearer", "invalid_request"},
		{"empty bearer", "/x", "Bearer ", "", "must be Bearer", "invalid_request"},
		{"query only", "/x?access_token=abc", "", "", "not accepted in the query string", "invalid_request"},
		{"query beside a header", "/x?access_token=abc", "Bearer abc", "", "not accepted in the query string", "invalid_request"},
	}
	for _, c := range cases {
		r := httptest.NewRequest(http.MethodGet, c.url, nil)
		if c.header != "" {
			r.Header.Set("Authorization", c.header)
		}
		tok, problem := Token(r)
		if tok != c.token || (c.token == "" && !strings.Contains(problem, c.problem)) {
			t.Errorf("%s: Token = %q, %q", c.name, tok, problem)
		}
		if c.token == "" && MissingCode(r) != c.code {
			t.Errorf("%s: MissingCode = %q, want %q", c.name, MissingCode(r), c.code)
		}
	}
}

func TestWriteError(t *testing.T) {
	w := httptest.NewRecorder()
	WriteError(w, http.StatusUnauthorized, "invalid_token", `the "token" expired`)
	ch := w.Header().Get("WWW-Authenticate")
	if ch != `Bearer realm="switchbridge", error="invalid_token", error_description="the 'token' expired"` {
		t.Errorf("challenge = %s", ch)
	}
	var body map[string]string
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || body["error"] != "invalid_token" || w.Code != 401 {
		t.Errorf("body = %s (%d)", w.Body, w.Code)
	}
	w = httptest.NewRecorder()
	WriteError(w, http.StatusUnauthorized, "", "no token")
	if ch := w.Header().Get("WWW-Authenticate"); ch != `Bearer realm="switchbridge"` {
		t.Errorf("challenge without credentials = %s (RFC 6750 §3.1: no error code)", ch)
	}
}
