package oauth

// What the owner's console (bridge/console) takes from the login pages:
// who is logged in, the login form that returns to the console, the
// confirmation of the password before a secret is shown, and the
// messages a page leaves for the next. One login, one set of sessions,
// device cookies and login throttling for the OAuth pages and the
// console.

import (
	"net/http"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/console"
)

// ConsoleGate is the console's Gate over this server's login.
func (s *Server) ConsoleGate() console.Gate { return consoleGate{s} }

type consoleGate struct{ s *Server }

// Visitor returns the request's logged-in user, nil when there is none:
// no session, an expired one, or one whose user was deleted or changed
// their password since (then the session ends). PasswordAt is when the
// session started: at login, and at each confirmation of the password,
// which starts a new session.
func (g consoleGate) Visitor(r *http.Request) (*console.Visitor, error) {
	s := g.s
	id, sess, err := s.sessions.get(r, s.secure())
	if err != nil || sess == nil {
		return nil, err
	}
	u, err := s.sessionUser(r.Context(), sess)
	if bridge.ErrorCode(err) == bridge.ENOTFOUND {
		s.sessions.end(r.Context(), id)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &console.Visitor{User: u, CSRF: sess.CSRF, PasswordAt: sess.Created}, nil
}

// Login answers with the login form, which posts to /oauth/login and
// comes back to next (ConsoleNext). With v set it asks v's user for their
// password again, their name filled in: a login, so it starts a new
// session whose PasswordAt is now.
func (g consoleGate) Login(w http.ResponseWriter, r *http.Request, next string, v *console.Visitor, msg string) {
	s := g.s
	pageHeaders(w)
	flash, notice := s.sessions.takeFlash(w, r, s.secure())
	if msg == "" && !notice {
		msg = flash // a wrong password, a throttled login
	}
	d := pageData{Next: ConsoleNext(next), Error: msg}
	if v != nil {
		d.Reauth, d.Username = true, v.User.Name
	}
	s.renderLogin(w, r, d)
}

// SetNotice leaves a message for the next page, signed so that only the
// platform can make a page say something.
func (g consoleGate) SetNotice(w http.ResponseWriter, r *http.Request, msg string, notice bool) {
	if notice {
		g.s.sessions.setNotice(r.Context(), w, msg, g.s.secure())
		return
	}
	g.s.sessions.setFlash(r.Context(), w, msg, g.s.secure())
}

// TakeNotice returns the message the previous page left, if any.
func (g consoleGate) TakeNotice(w http.ResponseWriter, r *http.Request) (string, bool) {
	return g.s.sessions.takeFlash(w, r, g.s.secure())
}

// Logout ends the session at every process of the platform, as the OAuth
// pages' logout does.
func (g consoleGate) Logout(w http.ResponseWriter, r *http.Request, _ *console.Visitor) error {
	s := g.s
	id, _, err := s.sessions.get(r, s.secure())
	if err != nil {
		return err
	}
	if err := s.sessions.end(r.Context(), id); err != nil {
		return err
	}
	setCookie(w, sessionCookie, "", 0, s.secure())
	return nil
}
