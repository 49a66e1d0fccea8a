package oauth

// The authorization endpoint: GET /oauth/authorize shows the login page
// or, for a logged-in user, the consent page; errors go back to the client
// when its redirect URI can be trusted.

import (
	"net/http"
	"net/url"

	"github.com/switchbridge/switchbridge/bridge"
)

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
	secure := s.secure()
	id, sess, err := s.sessions.get(r, secure)
	if err != nil {
		s.internal(w, r, err)
		return
	}
	app, err := s.apps.App(r.Context(), req.ClientID)
	if err != nil {
		s.internal(w, r, err)
		return
	}
	flash, notice := s.sessions.takeFlash(w, r, secure)
	if notice {
		flash = "" // meant for the connected apps page
	}
	if sess == nil {
		s.renderLogin(w, r, pageData{App: app, Req: req, Error: flash})
		return
	}
	user, err := s.sessionUser(r.Context(), sess)
	if bridge.ErrorCode(err) == bridge.ENOTFOUND {
		// The user was deleted, or changed their password, since.
		s.sessions.end(r.Context(), id)
		s.renderLogin(w, r, pageData{App: app, Req: req, Error: "Please log in again."})
		return
	}
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
	s.render(w, http.StatusOK, "consent", pageData{App: app, Req: req, CSRF: sess.CSRF, Error: flash, User: user,
		Locations: s.consentLocations(r.Context(), user, app.ClientID), ReturnTo: returnHost(req.RedirectURI)})
}

// returnHost is what the consent page names as where the user is sent
// back to: the redirect URI's host, or for an app's private-use scheme
// (com.example.app:/cb) the scheme, which names the app.
func returnHost(redirectURI string) string {
	u, err := url.Parse(redirectURI)
	switch {
	case err != nil:
		return redirectURI
	case u.Host != "":
		return u.Host
	default:
		return u.Scheme + ":"
	}
}

func (s *Server) authFailed(w http.ResponseWriter, r *http.Request, e *authError) {
	if e.cause != nil {
		s.internal(w, r, e.cause)
		return
	}
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
	s.redirectToClient(w, r, e.req.RedirectURI, p)
}

// redirectToClient sends an authorization response (a code or an error) to
// the client. It names the hub as its issuer (RFC 9207), so a client that
// talks to several authorization servers can tell whose response this is
// (the mix-up attack).
func (s *Server) redirectToClient(w http.ResponseWriter, r *http.Request, redirectURI string, p url.Values) {
	p.Set("iss", s.opts.PublicURL)
	http.Redirect(w, r, redirectWith(redirectURI, p), http.StatusSeeOther)
}
