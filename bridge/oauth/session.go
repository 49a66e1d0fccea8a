package oauth

import (
	"crypto/subtle"
	"net/http"
	"sync"
	"time"
)

// Login sessions live in memory: losing them on restart only means logging in
// again, and nothing a user created depends on them.
const (
	sessionCookie   = "switchbridge_session"
	sessionLifetime = 30 * time.Minute
	maxSessions     = 10000 // bounds memory against a flood of anonymous visits
)

type session struct {
	userID  int64 // 0 while not logged in
	csrf    string
	flash   string // one message for the next page, after a 303
	expires time.Time
}

type sessions struct {
	mu  sync.Mutex
	m   map[string]*session // by hex of Hash(cookie value)
	now func() time.Time
}

func newSessions() *sessions {
	return &sessions{m: map[string]*session{}, now: time.Now}
}

func key(id string) string { return string(Hash(id)) }

// get returns the session of the request's cookie, if it is live.
func (s *sessions) get(r *http.Request) (string, *session) {
	c, err := r.Cookie(sessionCookie)
	if err != nil || c.Value == "" {
		return "", nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.m[key(c.Value)]
	if !ok || !s.now().Before(sess.expires) {
		return "", nil
	}
	return c.Value, sess
}

// start makes a new session (replacing old, when given: a login rotates the
// id so a planted cookie cannot ride it) and returns its id.
func (s *sessions) start(old string, userID int64) (string, *session) {
	id := NewSecret()
	sess := &session{userID: userID, csrf: NewSecret(), expires: s.now().Add(sessionLifetime)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old != "" {
		delete(s.m, key(old))
	}
	if len(s.m) >= maxSessions {
		s.evictLocked()
	}
	s.m[key(id)] = sess
	return id, sess
}

func (s *sessions) evictLocked() {
	now := s.now()
	for k, v := range s.m {
		if !now.Before(v.expires) {
			delete(s.m, k)
		}
	}
	// Still full: drop anonymous sessions first, then anything.
	for k, v := range s.m {
		if len(s.m) < maxSessions {
			return
		}
		if v.userID == 0 {
			delete(s.m, k)
		}
	}
	for k := range s.m {
		if len(s.m) < maxSessions {
			return
		}
		delete(s.m, k)
	}
}

func (s *sessions) end(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, key(id))
}

// takeFlash returns and clears the session's message.
func (s *sessions) takeFlash(sess *session) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := sess.flash
	sess.flash = ""
	return f
}

func (s *sessions) setFlash(sess *session, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess.flash = msg
}

func csrfOK(sess *session, presented string) bool {
	return sess != nil && presented != "" && subtle.ConstantTimeCompare([]byte(sess.csrf), []byte(presented)) == 1
}

func setSessionCookie(w http.ResponseWriter, id string, secure bool) {
	http.SetCookie(w, &http.Cookie{
		Name:     sessionCookie,
		Value:    id,
		Path:     "/oauth/",
		MaxAge:   int(sessionLifetime / time.Second),
		HttpOnly: true,
		Secure:   secure,
		SameSite: http.SameSiteLaxMode,
	})
}
