package oauth

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/platform/accounts"
	"github.com/switchbridge/switchbridge/bridge/store"
)

// recordingStore is a real store that counts the sessions started in it.
type recordingStore struct {
	*accounts.Store
	started atomic.Int64
}

func (r *recordingStore) StartLoginSession(ctx context.Context, hash []byte, s bridge.LoginSession, replaced []byte, perUser, total int) error {
	r.started.Add(1)
	return r.Store.StartLoginSession(ctx, hash, s, replaced, perUser, total)
}

// newTestServer is a Server over a real store in a temporary directory,
// with one user (alice, in location 1) and one app.
func newTestServer(t *testing.T) (*Server, *http.ServeMux, string) {
	s, mux, _ := newRecordingServer(t)
	return s, mux, authQuery
}

func newRecordingServer(t *testing.T) (*Server, *http.ServeMux, *recordingStore) {
	t.Helper()
	db, err := records(store.Open(context.Background(), t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.DB().Close() })
	seedPlatform(t, db)
	st := &recordingStore{Store: db}
	s, mux := platformProcess(t, st)
	return s, mux, st
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// TestVisitorsKeepNoSessions: showing the login form to a visitor who is
// not logged in stores nothing on the hub, so no number of visits can push
// out another visitor's login in progress.
func TestVisitorsKeepNoSessions(t *testing.T) {
	_, mux, st := newRecordingServer(t)
	query := authQuery
	get := func(cookies ...*http.Cookie) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, "/oauth/authorize?"+query, nil)
		r.RemoteAddr = "192.0.2.1:1234"
		for _, c := range cookies {
			r.AddCookie(c)
		}
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			t.Fatalf("authorize = %d: %s", w.Code, w.Body)
		}
		return w
	}
	// A login in progress elsewhere.
	first := get()
	cookies := first.Result().Cookies()
	csrf := csrfField.FindStringSubmatch(first.Body.String())
	if len(cookies) != 1 || csrf == nil {
		t.Fatalf("login page: cookies %v, csrf %v", cookies, csrf)
	}
	for range 300 {
		get()
	}
	if n := st.started.Load(); n != 0 {
		t.Fatalf("%d sessions stored for visitors who did not log in", n)
	}

	form := url.Values{"username": {"alice"}, "password": {"alice-pw"}, "csrf": {csrf[1]}}
	q, _ := url.ParseQuery(query)
	for k, v := range q {
		form[k] = v
	}
	post := func(form url.Values, cookies []*http.Cookie) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/oauth/login", strings.NewReader(form.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.RemoteAddr = "198.51.100.1:1234"
		for _, c := range cookies {
			r.AddCookie(c)
		}
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		return w
	}
	// The token is bound to its cookie: without it, or with another
	// visitor's cookie, it is refused.
	if w := post(form, nil); w.Code != http.StatusForbidden {
		t.Errorf("login without the cookie = %d, want 403", w.Code)
	}
	if w := post(form, get().Result().Cookies()); w.Code != http.StatusForbidden {
		t.Errorf("login with another visitor's cookie = %d, want 403", w.Code)
	}
	w := post(form, cookies)
	if w.Code != http.StatusSeeOther {
		t.Fatalf("login after the flood = %d: %s", w.Code, w.Body)
	}
	var session *http.Cookie
	for _, c := range w.Result().Cookies() {
		if c.Name == sessionCookie {
			session = c
		}
	}
	if session == nil || session.Value == cookies[0].Value {
		t.Fatalf("login did not start a new session: %v", w.Result().Cookies())
	}
	if body := get(session).Body.String(); !strings.Contains(body, "Allow App") {
		t.Errorf("not logged in after the login:\n%.300s", body)
	}
}

// TestFlashIsSigned: the message shown after a redirect comes from the
// hub only; a forged one is dropped.
func TestFlashIsSigned(t *testing.T) {
	s, mux, query := newTestServer(t)
	show := func(c *http.Cookie) string {
		r := httptest.NewRequest(http.MethodGet, "/oauth/authorize?"+query, nil)
		r.AddCookie(c)
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		return w.Body.String()
	}
	w := httptest.NewRecorder()
	s.sessions.setFlash(context.Background(), w, "Unknown user or wrong password.", false)
	signed := w.Result().Cookies()[0]
	if body := show(signed); !strings.Contains(body, "Unknown user or wrong password.") {
		t.Errorf("a signed message is not shown")
	}
	v, _, _ := strings.Cut(signed.Value, ".")
	forged := &http.Cookie{Name: flashCookie, Value: strings.Replace(v, "V", "W", 1) + "." + strings.Repeat("A", 43)}
	if body := show(forged); strings.Contains(body, `class="error"`) {
		t.Errorf("a forged message is shown:\n%.300s", body)
	}
}

// TestSecureFromTheParsedScheme: cookies are Secure and __Host- for an
// https public URL in any case, and not for http.
func TestSecureFromTheParsedScheme(t *testing.T) {
	for u, want := range map[string]bool{
		"https://hub.example":  true,
		"HTTPS://hub.example":  true,
		"Https://hub.example":  true,
		"http://hub.example":   false,
		"http://https.example": false,
	} {
		s := &Server{opts: Options{PublicURL: u}}
		if s.secure() != want {
			t.Errorf("%s: secure %v, want %v", u, s.secure(), want)
		}
	}
}

// TestUserSessionsAreCapped: one user logging in again and again keeps
// at most maxUserSessions, the oldest going first, and leaves another
// user's session alone.
func TestUserSessionsAreCapped(t *testing.T) {
	s, _, st := newRecordingServer(t)
	ctx := context.Background()
	ss := s.sessions
	clock := time.Unix(1_000_000, 0)
	ss.now = func() time.Time { clock = clock.Add(time.Second); return clock }
	alice, err := st.UserByName(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	bob, err := st.CreateUser(ctx, "bob", []byte("hash"), nil)
	if err != nil {
		t.Fatal(err)
	}
	live := func(id string) bool {
		t.Helper()
		_, err := st.LoginSession(ctx, Hash(id))
		if err != nil && bridge.ErrorCode(err) != bridge.ENOTFOUND {
			t.Fatal(err)
		}
		return err == nil
	}
	start := func(u *bridge.User) string {
		t.Helper()
		id, _, err := ss.start(ctx, "", u)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	bobs := start(bob)
	var ids []string
	for range maxUserSessions + 5 {
		ids = append(ids, start(alice))
	}
	kept := 0
	for _, id := range ids {
		if live(id) {
			kept++
		}
	}
	if kept != maxUserSessions {
		t.Errorf("alice has %d sessions, want %d", kept, maxUserSessions)
	}
	if !live(bobs) {
		t.Error("another user's session was pushed out")
	}
	if !live(ids[len(ids)-1]) {
		t.Error("the newest session was pushed out")
	}
	if live(ids[0]) {
		t.Error("the oldest session was kept")
	}
	// A session past its lifetime is not served, though still stored.
	r := httptest.NewRequest(http.MethodGet, "/oauth/apps", nil)
	r.AddCookie(&http.Cookie{Name: sessionCookie, Value: ids[len(ids)-1]})
	if _, sess, err := ss.get(r, false); err != nil || sess == nil {
		t.Fatalf("the newest session is not served: %v", err)
	}
	clock = clock.Add(sessionLifetime)
	if _, sess, err := ss.get(r, false); err != nil || sess != nil {
		t.Errorf("a session past its lifetime is served: %+v %v", sess, err)
	}
}
