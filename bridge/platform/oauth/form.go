package oauth

// What every login and consent POST is checked for: a bounded form, the
// authorization request it carries, and the CSRF token of its page.

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/console"
)

// maxFormBytes bounds login, consent and token request bodies: they hold a
// few short fields, so anything larger is not a real client.
const maxFormBytes = 64 << 10

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
// and the CSRF token of its page.
type postedForm struct {
	f         url.Values
	req       *authRequest // nil for the connected apps page's login
	sessionID string
	sess      *bridge.LoginSession // nil for a login
	// back is the page the POST returns to: the authorization request's,
	// or the connected apps page.
	back string
}

// clientID is the client of the form's authorization request, "" for none.
func (p postedForm) clientID() string {
	if p.req == nil {
		return ""
	}
	return p.req.ClientID
}

// appsPage is the connected apps page; its login and logout forms say
// return=apps and carry no authorization request.
const appsPage = "/oauth/apps"

func returnsToApps(f url.Values) bool {
	_, hasClient := f["client_id"]
	return (f.Get("return") == "apps" || f.Get("return") == "console") && !hasClient
}

// ConsolePath is where the owner's console is served; its login and
// logout forms say return=console and next=<a page of the console>.
const ConsolePath = console.Path

// returnPage is the page a login or logout form without an authorization
// request goes back to: the connected apps page, or the console page its
// next field names. next must be a path of the console: anything else (a
// URL of another host, "//host", a backslash a browser reads as a slash)
// goes to the console's first page, so the form cannot send anyone
// elsewhere.
func returnPage(f url.Values) string {
	if f.Get("return") != "console" {
		return appsPage
	}
	return ConsoleNext(f.Get("next"))
}

// ConsoleNext is next when it is a path of the console, the console's
// first page otherwise (console.SafeNext).
func ConsoleNext(next string) string { return console.SafeNext(next) }

// readPostedForm runs those checks and answers the request itself when one
// fails (ok false). A login form's token is checked against the visitor's
// cookie; any other form needs a logged-in session and its token. The
// connected apps page's login form carries no authorization request.
func (s *Server) readPostedForm(w http.ResponseWriter, r *http.Request, login bool) (p postedForm, ok bool) {
	pageHeaders(w)
	f, err := readForm(w, r)
	if err != nil {
		s.errorPage(w, http.StatusBadRequest, "The form could not be read: "+err.Error())
		return p, false
	}
	var req *authRequest
	back := returnPage(f)
	if !login || !returnsToApps(f) {
		var aerr *authError
		req, aerr = parseAuthorizeRequest(authParams(f), s.lookupClient(r.Context()))
		if aerr != nil {
			s.authFailed(w, r, aerr)
			return p, false
		}
		back = "/oauth/authorize?" + req.Query()
	}
	secure := s.secure()
	id, sess, err := s.sessions.get(r, secure)
	if err != nil {
		s.internal(w, r, err)
		return p, false
	}
	csrf := csrfOK(sess, f.Get("csrf"))
	if login {
		if csrf, err = s.sessions.loginCSRFOK(r, f.Get("csrf"), secure); err != nil {
			s.internal(w, r, err)
			return p, false
		}
	}
	if !csrf {
		s.errorPage(w, http.StatusForbidden, "This form has expired or was not sent by this page. Go back and start again from the app.")
		return p, false
	}
	if login {
		sess = nil
	}
	return postedForm{f: f, req: req, sessionID: id, sess: sess, back: back}, true
}
