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
		inQuery           bool
		status            int    // of the Problem when token is ""
		code              string // of the Problem
		problem           string // part of its description
	}{
		{"header", "/x", "Bearer abc", "abc", false, 0, "", ""},
		{"scheme in any case", "/x", "bearer abc", "abc", false, 0, "", ""},
		{"surrounding space", "/x", "Bearer   abc  ", "abc", false, 0, "", ""},
		{"base64 padding", "/x", "Bearer ab+/c==", "ab+/c==", false, 0, "", ""},
		{"query", "/x?access_token=abc", "", "abc", true, 0, "", ""},
		// RFC 6750 §3.1: no credentials at all, or only another scheme's,
		// is 401 without an error code.
		{"nothing", "/x", "", "", false, 401, "", "an access token is required"},
		{"basic", "/x", "Basic dXNlcjpwYXNz", "", false, 401, "", "must be Bearer"},
		// A malformed request is 400 invalid_request.
		{"empty bearer", "/x", "Bearer ", "", false, 400, "invalid_request", "must be Bearer"},
		{"bearer without a space", "/x", "Bearer", "", false, 400, "invalid_request", "must be Bearer"},
		{"two tokens", "/x", "Bearer abc def", "", false, 400, "invalid_request", "must be Bearer"},
		{"padding inside", "/x", "Bearer a=b", "", false, 400, "invalid_request", "must be Bearer"},
		{"query beside a header", "/x?access_token=abc", "Bearer abc", "", false, 400, "invalid_request", "not both"},
		{"query twice", "/x?access_token=abc&access_token=abc", "", "", false, 400, "invalid_request", "more than once"},
		{"empty query token", "/x?access_token=", "", "", false, 400, "invalid_request", "empty or malformed"},
	}
	for _, c := range cases {
		r := httptest.NewRequest(http.MethodGet, c.url, nil)
		if c.header != "" {
			r.Header.Set("Authorization", c.header)
		}
		tok, inQuery, p := Token(r)
		if tok != c.token || inQuery != c.inQuery {
			t.Errorf("%s: Token = %q, %v, %+v; want %q, %v", c.name, tok, inQuery, p, c.token, c.inQuery)
			continue
		}
		switch {
		case c.token != "" && p != nil:
			t.Errorf("%s: a token and a problem %+v", c.name, p)
		case c.token == "" && p == nil:
			t.Errorf("%s: no token and no problem", c.name)
		case c.token == "" && (p.Status != c.status || p.Code != c.code || !strings.Contains(p.Description, c.problem)):
			t.Errorf("%s: problem = %+v, want %d %q %q", c.name, p, c.status, c.code, c.problem)
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
	w = httptest.NewRecorder()
	QueryRefused.Write(w)
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Header().Get("WWW-Authenticate"), `error="invalid_request"`) {
		t.Errorf("QueryRefused = %d %q", w.Code, w.Header().Get("WWW-Authenticate"))
	}
}
