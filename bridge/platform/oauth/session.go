package oauth

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
)

// Sessions exist only for users who logged in: a visitor who has not
// cannot make the platform keep anything, so a flood of visits cannot push
// out anyone's login in progress. The login form is protected against CSRF
// by a double-submit token instead: the visitor's cookie holds a random
// value the platform does not store, and the form carries an HMAC of it
// under the signing key. The messages shown after a redirect (a wrong
// password, a form to fix) travel the same way, signed, in a short-lived
// cookie.
//
// Logged-in sessions and the signing key are kept in the database
// (LoginSessions, SigningKeys), so that several platform processes behind
// one address are one platform: a login form rendered by one is accepted
// by another, a session started through one is live at all of them, and a
// logout through one ends it everywhere. A session is stored by the hash
// of its cookie, so reading the database gives no one a login; its forms'
// CSRF token is an HMAC of the cookie, stored nowhere. It also survives a
// restart.
const (
	sessionCookie   = "switchbridge_session"
	flashCookie     = "switchbridge_flash"
	sessionLifetime = 30 * time.Minute
	flashLifetime   = time.Minute
	maxSessions     = 10000 // bounds the table against a user logging in forever
	maxUserSessions = 20    // one user's logins cannot push out another's
)

// signingKeyName names the signing key in the database.
const signingKeyName = "login-pages"

// signingKey is the key that signs login forms' CSRF tokens and the
// flash messages, and keys the hashes of the throttle's keys. The first
// process that needs it makes it; every process reads it once and then
// holds it, since it never changes.
type signingKey struct {
	store SigningKeys
	mu    sync.Mutex // held while reading it from the database
	key   atomic.Pointer[[]byte]
}

func (k *signingKey) get(ctx context.Context) ([]byte, error) {
	if p := k.key.Load(); p != nil {
		return *p, nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if p := k.key.Load(); p != nil {
		return *p, nil
	}
	fresh := make([]byte, 32)
	rand.Read(fresh)
	key, err := k.store.SigningKey(ctx, signingKeyName, fresh)
	if err != nil {
		return nil, fmt.Errorf("reading the signing key of the login pages: %w", err)
	}
	if len(key) < 32 {
		return nil, fmt.Errorf("the signing key of the login pages is %d bytes; want at least 32", len(key))
	}
	k.key.Store(&key)
	return key, nil
}

// sum is the HMAC of v for a purpose, so that a value signed for one
// purpose (a flash message) passes for no other (a CSRF token).
func (k *signingKey) sum(ctx context.Context, purpose, v string) ([]byte, error) {
	key, err := k.get(ctx)
	if err != nil {
		return nil, err
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(purpose))
	m.Write([]byte{0})
	m.Write([]byte(v))
	return m.Sum(nil), nil
}

// mac is sum as text, for a form or a cookie.
func (k *signingKey) mac(ctx context.Context, purpose, v string) (string, error) {
	sum, err := k.sum(ctx, purpose, v)
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(sum), nil
}

type sessions struct {
	store  LoginSessions
	key    *signingKey
	now    func() time.Time
	logger *slog.Logger
}

func newSessions(st LoginSessions, key *signingKey, logger *slog.Logger) *sessions {
	return &sessions{store: st, key: key, now: time.Now, logger: logger}
}

// cookieName is a cookie's name: with https the __Host- prefix, which a
// browser accepts only with Secure, Path=/ and no Domain, so no other host
// (a sibling subdomain) and no plain-http page can set or shadow it.
func cookieName(name string, secure bool) string {
	if secure {
		return "__Host-" + name
	}
	return name
}

// cookiePath is where the hub's cookies apply: the whole host, which the
// __Host- prefix requires with https, and the OAuth pages and the console
// (ConsolePath) share the login over plain http too.
func cookiePath(bool) string { return "/" }

// cookie returns the value of the request's cookie name, "" when absent.
func cookie(r *http.Request, name string, secure bool) string {
	c, err := r.Cookie(cookieName(name, secure))
	if err != nil {
		return ""
	}
	return c.Value
}

func setCookie(w http.ResponseWriter, name, value string, maxAge time.Duration, secure bool) {
	age := int(maxAge / time.Second)
	if maxAge <= 0 {
		age = -1 // Max-Age=0: the browser deletes it now
	}
	http.SetCookie(w, &http.Cookie{
		Name:     cookieName(name, secure),
		Value:    value,
		Path:     cookiePath(secure),
		MaxAge:   age,
		HttpOnly: true,
		Secure:   secure,
		SameSite: http.SameSiteLaxMode,
	})
}

// get returns the logged-in session of the request's cookie, if it is
// live, and its id; an error only when the database could not say.
func (s *sessions) get(r *http.Request, secure bool) (string, *bridge.LoginSession, error) {
	id := cookie(r, sessionCookie, secure)
	if !wellFormedSecret(id) {
		return "", nil, nil // not made by the platform: no session to look up
	}
	sess, err := s.store.LoginSession(r.Context(), Hash(id))
	if bridge.ErrorCode(err) == bridge.ENOTFOUND {
		return "", nil, nil
	}
	if err != nil {
		return "", nil, err
	}
	if !s.now().Before(sess.Expires) {
		return "", nil, nil
	}
	if sess.CSRF, err = s.csrf(r.Context(), id); err != nil {
		return "", nil, err
	}
	return id, sess, nil
}

// csrf is the CSRF token of the forms of the session id: an HMAC of the
// session's cookie under the signing key, so that, like the cookie, it is
// never stored and reading the database gives no one a form that passes.
// It is a session's for its whole life, at every process. Sessions
// started before tokens were derived (migration 0017) stay logged in; a
// form they had open is refused once, as expired, and works reloaded.
func (s *sessions) csrf(ctx context.Context, id string) (string, error) {
	return s.key.mac(ctx, "session-csrf", id)
}

// loginCSRF returns the CSRF token of the login form for this visitor,
// giving the visitor a fresh random cookie value when it has none.
func (s *sessions) loginCSRF(w http.ResponseWriter, r *http.Request, secure bool) (string, error) {
	v := cookie(r, sessionCookie, secure)
	if !wellFormedSecret(v) {
		v = NewSecret()
		setCookie(w, sessionCookie, v, sessionLifetime, secure)
	}
	return s.key.mac(r.Context(), "login-csrf", v)
}

// loginCSRFOK checks a login form's CSRF token against the request's
// cookie.
func (s *sessions) loginCSRFOK(r *http.Request, presented string, secure bool) (bool, error) {
	v := cookie(r, sessionCookie, secure)
	if !wellFormedSecret(v) || presented == "" {
		return false, nil
	}
	want, err := s.key.mac(r.Context(), "login-csrf", v)
	if err != nil {
		return false, err
	}
	return hmac.Equal([]byte(want), []byte(presented)), nil
}

// wellFormedSecret reports whether v looks like a NewSecret: a cookie of
// any other shape was not made by the platform and is replaced.
func wellFormedSecret(v string) bool {
	if len(v) != 43 {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(v)
	return err == nil
}

// start makes a logged-in session (replacing old, when given: a login
// rotates the id so a planted cookie cannot ride it) and returns its id.
// The store keeps the bounds: at most maxUserSessions per user and
// maxSessions in all, the oldest going first.
func (s *sessions) start(ctx context.Context, old string, user *bridge.User) (string, *bridge.LoginSession, error) {
	id := NewSecret()
	now := s.now()
	csrf, err := s.csrf(ctx, id)
	if err != nil {
		return "", nil, err
	}
	sess := &bridge.LoginSession{UserID: user.ID, Password: passwordDigest(user.PasswordHash), CSRF: csrf,
		Created: now, Expires: now.Add(sessionLifetime)}
	var replaced []byte
	if old != "" {
		replaced = Hash(old)
	}
	if err := s.store.StartLoginSession(ctx, Hash(id), *sess, replaced, maxUserSessions, maxSessions); err != nil {
		return "", nil, err
	}
	return id, sess, nil
}

// end ends a session at every process. A failure is logged and returned;
// callers that end a session only because it is no longer valid (its user
// is gone) may ignore it, since such a session is refused anyway.
func (s *sessions) end(ctx context.Context, id string) error {
	if id == "" {
		return nil
	}
	err := s.store.EndLoginSession(ctx, Hash(id))
	if err != nil {
		s.logger.Error("ending a login session", "err", err)
	}
	return err
}

// setFlash leaves a message for the next page, signed so that nobody but
// the platform can make its pages say something. Without the signing key
// (the database is away) the message is logged and dropped: the page
// after the redirect shows none.
func (s *sessions) setFlash(ctx context.Context, w http.ResponseWriter, msg string, secure bool) {
	v := base64.RawURLEncoding.EncodeToString([]byte(msg))
	sig, err := s.key.mac(ctx, "flash", v)
	if err != nil {
		s.logger.Error("a message for the next page is dropped", "err", err)
		return
	}
	setCookie(w, flashCookie, v+"."+sig, flashLifetime, secure)
}

// noticeMark starts a flash message that reports something done (the
// connected apps page's "removed"), not a problem to fix.
const noticeMark = "\x00notice\x00"

// setNotice leaves a message saying that something was done.
func (s *sessions) setNotice(ctx context.Context, w http.ResponseWriter, msg string, secure bool) {
	s.setFlash(ctx, w, noticeMark+msg, secure)
}

// takeFlash returns the request's message, if it carries a valid one, and
// clears it; notice says whether setNotice left it.
func (s *sessions) takeFlash(w http.ResponseWriter, r *http.Request, secure bool) (msg string, notice bool) {
	c := cookie(r, flashCookie, secure)
	if c == "" {
		return "", false
	}
	setCookie(w, flashCookie, "", 0, secure)
	v, sig, ok := strings.Cut(c, ".")
	if !ok {
		return "", false
	}
	want, err := s.key.mac(r.Context(), "flash", v)
	if err != nil {
		s.logger.Error("a message for this page is dropped", "err", err)
		return "", false
	}
	if !hmac.Equal([]byte(want), []byte(sig)) {
		return "", false
	}
	b, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		return "", false
	}
	msg, notice = strings.CutPrefix(string(b), noticeMark)
	return msg, notice
}

// renderLogin shows the login form with its CSRF token.
func (s *Server) renderLogin(w http.ResponseWriter, r *http.Request, d pageData) {
	csrf, err := s.sessions.loginCSRF(w, r, s.secure())
	if err != nil {
		s.internal(w, r, err)
		return
	}
	d.CSRF = csrf
	s.render(w, http.StatusOK, "login", d)
}

func csrfOK(sess *bridge.LoginSession, presented string) bool {
	return sess != nil && presented != "" && subtle.ConstantTimeCompare([]byte(sess.CSRF), []byte(presented)) == 1
}

// passwordDigest stands for a password hash in a session.
func passwordDigest(hash []byte) []byte {
	d := sha256.Sum256(hash)
	return d[:16]
}

// sessionUser returns the user of a logged-in session: ENOTFOUND when the
// user was deleted, or changed their password since this login (user
// passwd ends every session of the user, in any process).
func (s *Server) sessionUser(ctx context.Context, sess *bridge.LoginSession) (*bridge.User, error) {
	u, err := s.users.UserByID(ctx, sess.UserID)
	if err != nil {
		return nil, err
	}
	if subtle.ConstantTimeCompare(passwordDigest(u.PasswordHash), sess.Password) != 1 {
		return nil, bridge.Errorf(bridge.ENOTFOUND, "the user's password changed since this login")
	}
	return u, nil
}
