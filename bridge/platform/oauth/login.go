package oauth

// Login and logout, with the throttling of failed logins.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/switchbridge/switchbridge/bridge"
)

// throttled answers a login that must wait: back to the login page, which
// says for how long.
func (s *Server) throttled(w http.ResponseWriter, r *http.Request, back string, wait time.Duration) {
	s.observe("authorization_denied", "login_throttled")
	s.sessions.setFlash(r.Context(), w, fmt.Sprintf("Too many failed logins. Try again in %d seconds.", int(wait.Seconds()+1)), s.secure())
	http.Redirect(w, r, back, http.StatusSeeOther)
}

func (s *Server) handleLogin(w http.ResponseWriter, r *http.Request) {
	p, ok := s.readPostedForm(w, r, true)
	if !ok {
		return
	}
	f, id, back, clientID := p.f, p.sessionID, p.back, p.clientID()
	name := f.Get("username")
	// A login to the owner's console is logged and counted as such.
	console := p.req == nil && f.Get("return") == "console"
	keys := newLoginKeys(name, s.clientKey(r))
	if cookie(r, deviceCookie, s.secure()) != "" {
		// A browser the user logged in from before: only its own
		// allowance counts (device.go).
		if u, err := s.users.UserByName(r.Context(), name); err == nil {
			keys = keys.fromDevice(s.device(r, u))
		}
	}
	ctx := r.Context()
	wait, err := s.throttle.wait(ctx, s.now(), keys)
	if err != nil {
		s.internal(w, r, err)
		return
	}
	if wait > 0 {
		s.logger.Warn("login refused: too many failed logins", "client_id", bridge.Untrusted(clientID), "retry_after_seconds", int(wait.Seconds()+1))
		s.throttled(w, r, back, wait)
		return
	}
	var user *bridge.User
	var c *charge
	var bad bool
	var serr error // the store's
	switch s.throttle.check(ctx, func() {
		// Charged now, in one step with the check of the budgets, before
		// the password is checked: parallel logins must not all pass on
		// one count. Charged even when the client has gone, so going away
		// saves no guess.
		if c, wait, serr = s.throttle.charge(context.WithoutCancel(ctx), s.now(), keys); serr != nil || wait > 0 {
			return
		}
		var err error
		if user, err = s.checkPassword(ctx, name, f.Get("password")); err != nil {
			bad = true
		}
	}) {
	case gaveUp:
		return // the client went away while waiting for a turn
	case queueFull:
		s.logger.Warn("login refused: too many logins waiting for a password check", "client_id", bridge.Untrusted(clientID))
		s.throttled(w, r, back, busyRetry)
		return
	}
	if serr != nil {
		s.internal(w, r, serr)
		return
	}
	if wait > 0 {
		s.throttled(w, r, back, wait)
		return
	}
	if bad {
		if c.nameSpent() {
			s.logger.Warn("many failed logins for one user name: someone may be guessing its password; "+
				"logins as that user now wait, except from browsers the user logged in from before", "failures", userFree)
		}
		s.observe("authorization_denied", "bad_login")
		if console {
			s.observe("console_login", "refused")
		}
		// The typed name is logged only when it is a user: a password typed
		// into the name field must not end up in the log.
		if _, uerr := s.users.UserByName(ctx, f.Get("username")); uerr == nil {
			s.logger.Info("login failed", "user", bridge.Untrusted(f.Get("username")), "client_id", bridge.Untrusted(clientID))
		} else {
			s.logger.Info("login failed for an unknown user name", "client_id", bridge.Untrusted(clientID))
		}
		s.sessions.setFlash(r.Context(), w, "Unknown user or wrong password.", s.secure())
		http.Redirect(w, r, back, http.StatusSeeOther)
		return
	}
	if err := s.throttle.succeed(context.WithoutCancel(ctx), c); err != nil {
		// The counts stay until they are forgotten; the login goes on.
		s.logger.Warn("clearing the failed logins of a correct login", "err", err)
	}
	nid, _, err := s.sessions.start(ctx, id, user)
	if err != nil {
		s.internal(w, r, err)
		return
	}
	s.rememberDevice(w, r, user)
	setCookie(w, sessionCookie, nid, sessionLifetime, s.secure())
	if console {
		s.observe("console_login", "ok")
		s.logger.Info("console login", "user", user.Name, "owner", user.Owner)
	}
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
		s.compare(dummyHash(), password)
		return nil, errors.New("bad credentials")
	}
	u, err := s.users.UserByName(ctx, name)
	if err != nil {
		s.compare(dummyHash(), password)
		return nil, errors.New("bad credentials")
	}
	if s.compare(u.PasswordHash, password) != nil {
		return nil, errors.New("bad credentials")
	}
	return u, nil
}

// compare is the password check: bcrypt's, or the tests' that count the
// checks a burst of logins gets.
func (s *Server) compare(hash []byte, password string) error {
	if s.compareHash != nil {
		return s.compareHash(hash, []byte(password))
	}
	return bcrypt.CompareHashAndPassword(hash, []byte(password))
}

func (s *Server) handleLogout(w http.ResponseWriter, r *http.Request) {
	pageHeaders(w)
	f, err := readForm(w, r)
	if err != nil {
		s.errorPage(w, http.StatusBadRequest, err.Error())
		return
	}
	id, sess, err := s.sessions.get(r, s.secure())
	if err != nil {
		s.internal(w, r, err)
		return
	}
	if !csrfOK(sess, f.Get("csrf")) {
		s.errorPage(w, http.StatusForbidden, "This form has expired or was not sent by this page.")
		return
	}
	if err := s.sessions.end(r.Context(), id); err != nil {
		// Not logged out at the other processes: say so, not that it
		// worked.
		s.internal(w, r, err)
		return
	}
	setCookie(w, sessionCookie, "", 0, s.secure())
	if returnsToApps(f) {
		http.Redirect(w, r, returnPage(f), http.StatusSeeOther) // its login form
		return
	}
	req, aerr := parseAuthorizeRequest(authParams(f), s.lookupClient(r.Context()))
	if aerr != nil {
		s.errorPage(w, http.StatusOK, "You are logged out.")
		return
	}
	http.Redirect(w, r, "/oauth/authorize?"+req.Query(), http.StatusSeeOther)
}
