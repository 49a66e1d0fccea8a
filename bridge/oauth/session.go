package oauth

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
)

// Sessions exist only for users who logged in: a visitor who has not
// cannot make the hub keep anything, so a flood of visits cannot push out
// anyone's login in progress. The login form is protected against CSRF by
// a double-submit token instead: the visitor's cookie holds a random value
// the hub does not store, and the form carries an HMAC of it under a key
// only this process knows. The messages shown after a redirect (a wrong
// password, a form to fix) travel the same way, signed, in a short-lived
// cookie.
//
// Logged-in sessions live in memory: losing them on restart only means
// logging in again (and the key is new, so login forms open at the time
// must be sent again), and nothing a user created depends on them.
const (
	sessionCookie   = "switchbridge_session"
	flashCookie     = "switchbridge_flash"
	sessionLifetime = 30 * time.Minute
	flashLifetime   = time.Minute
	maxSessions     = 10000 // bounds memory against a user logging in forever
	maxUserSessions = 20    // one user's logins cannot push out another's
)

type session struct {
	userID int64
	// password is a digest of the user's password hash at login: a
	// password changed since ends the session (sessionUser).
	password []byte
	csrf     string
	expires  time.Time
}

type sessions struct {
	mu  sync.Mutex
	m   map[string]*session // by Hash(cookie value)
	now func() time.Time
	key []byte // signs login-form CSRF tokens and flash messages
}

func newSessions() *sessions {
	return &sessions{m: map[string]*session{}, now: time.Now, key: []byte(NewSecret())}
}

func key(id string) string { return string(Hash(id)) }

// cookieName is a cookie's name: with https the __Host- prefix, which a
// browser accepts only with Secure, Path=/ and no Domain, so no other host
// (a sibling subdomain) and no plain-http page can set or shadow it.
func cookieName(name string, secure bool) string {
	if secure {
		return "__Host-" + name
	}
	return name
}

// cookiePath is where the hub's cookies apply: the whole host with https
// (the __Host- prefix requires it), the OAuth pages otherwise.
func cookiePath(secure bool) string {
	if secure {
		return "/"
	}
	return "/oauth/"
}

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

// get returns the logged-in session of the request's cookie, if it is live.
func (s *sessions) get(r *http.Request, secure bool) (string, *session) {
	id := cookie(r, sessionCookie, secure)
	if id == "" {
		return "", nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.m[key(id)]
	if !ok || !s.now().Before(sess.expires) {
		return "", nil
	}
	return id, sess
}

// loginCSRF returns the CSRF token of the login form for this visitor,
// giving the visitor a fresh random cookie value when it has none.
func (s *sessions) loginCSRF(w http.ResponseWriter, r *http.Request, secure bool) string {
	v := cookie(r, sessionCookie, secure)
	if !wellFormedSecret(v) {
		v = NewSecret()
		setCookie(w, sessionCookie, v, sessionLifetime, secure)
	}
	return s.mac("login-csrf", v)
}

// loginCSRFOK checks a login form's CSRF token against the request's cookie.
func (s *sessions) loginCSRFOK(r *http.Request, presented string, secure bool) bool {
	v := cookie(r, sessionCookie, secure)
	return wellFormedSecret(v) && presented != "" && hmac.Equal([]byte(s.mac("login-csrf", v)), []byte(presented))
}

func (s *sessions) mac(purpose, v string) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(purpose))
	m.Write([]byte{0})
	m.Write([]byte(v))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// wellFormedSecret reports whether v looks like a NewSecret: a cookie of
// any other shape was not made by the hub and is replaced.
func wellFormedSecret(v string) bool {
	if len(v) != 43 {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(v)
	return err == nil
}

// start makes a logged-in session (replacing old, when given: a login
// rotates the id so a planted cookie cannot ride it) and returns its id.
func (s *sessions) start(old string, user *bridge.User) (string, *session) {
	id := NewSecret()
	now := s.now()
	userID := user.ID
	sess := &session{userID: userID, password: passwordDigest(user.PasswordHash), csrf: NewSecret(), expires: now.Add(sessionLifetime)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old != "" {
		delete(s.m, key(old))
	}
	s.evictLocked(now, userID)
	s.m[key(id)] = sess
	return id, sess
}

// evictLocked drops expired sessions when the table is full, keeps a
// user below maxUserSessions by dropping that user's oldest, and, should
// the table still be full, drops the oldest of all.
func (s *sessions) evictLocked(now time.Time, userID int64) {
	if len(s.m) >= maxSessions {
		for k, v := range s.m {
			if !now.Before(v.expires) {
				delete(s.m, k)
			}
		}
	}
	for _, uid := range []int64{userID, 0} { // 0: any user
		n := 0
		oldest, oldestKey := time.Time{}, ""
		for k, v := range s.m {
			if uid != 0 && v.userID != uid {
				continue
			}
			n++
			if oldestKey == "" || v.expires.Before(oldest) {
				oldest, oldestKey = v.expires, k
			}
		}
		if (uid != 0 && n >= maxUserSessions) || (uid == 0 && n >= maxSessions) {
			delete(s.m, oldestKey)
		}
	}
}

func (s *sessions) end(id string) {
	if id == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, key(id))
}

// setFlash leaves a message for the next page, signed so that nobody but
// the hub can make its pages say something.
func (s *sessions) setFlash(w http.ResponseWriter, msg string, secure bool) {
	v := base64.RawURLEncoding.EncodeToString([]byte(msg))
	setCookie(w, flashCookie, v+"."+s.mac("flash", v), flashLifetime, secure)
}

// noticeMark starts a flash message that reports something done (the
// connected apps page's "removed"), not a problem to fix.
const noticeMark = "\x00notice\x00"

// setNotice leaves a message saying that something was done.
func (s *sessions) setNotice(w http.ResponseWriter, msg string, secure bool) {
	s.setFlash(w, noticeMark+msg, secure)
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
	if !ok || !hmac.Equal([]byte(s.mac("flash", v)), []byte(sig)) {
		return "", false
	}
	b, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		return "", false
	}
	msg, notice = strings.CutPrefix(string(b), noticeMark)
	return msg, notice
}

func csrfOK(sess *session, presented string) bool {
	return sess != nil && presented != "" && subtle.ConstantTimeCompare([]byte(sess.csrf), []byte(presented)) == 1
}

// passwordDigest stands for a password hash in a session.
func passwordDigest(hash []byte) []byte {
	d := sha256.Sum256(hash)
	return d[:16]
}

// sessionUser returns the user of a logged-in session: ENOTFOUND when the
// user was deleted, or changed their password since this login (user
// passwd ends every session of the user, in any process).
func (s *Server) sessionUser(ctx context.Context, sess *session) (*bridge.User, error) {
	u, err := s.users.UserByID(ctx, sess.userID)
	if err != nil {
		return nil, err
	}
	if subtle.ConstantTimeCompare(passwordDigest(u.PasswordHash), sess.password) != 1 {
		return nil, bridge.Errorf(bridge.ENOTFOUND, "the user's password changed since this login")
	}
	return u, nil
}
