package oauth

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/store"
)

// newTestServer is a Server over a real store in a temporary directory,
// with one user (alice, in location 1) and one app.
func newTestServer(t *testing.T) (*Server, *http.ServeMux, string) {
	t.Helper()
	db, err := store.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	hub, err := bridge.NewSwitchboard([]bridge.Location{{ID: 1, Name: "Home"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	hash, _ := bcrypt.GenerateFromPassword([]byte("alice-pw"), bcrypt.MinCost)
	u, err := db.CreateUser(context.Background(), "alice", hash, []int64{1})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.CreateApp(context.Background(), &bridge.App{ClientID: "app1", Name: "App", SecretHash: Hash("s"),
		RedirectURIs: []string{"https://client.example/cb"}, OwnerID: u.ID, Published: true}); err != nil {
		t.Fatal(err)
	}
	s := New(db, hub, nil)
	s.PublicURL = "http://hub.test"
	mux := http.NewServeMux()
	s.Register(mux)
	q := url.Values{"response_type": {"code"}, "client_id": {"app1"}, "scope": {"app"}, "redirect_uri": {"https://client.example/cb"}}
	return s, mux, q.Encode()
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// TestVisitorsKeepNoSessions: showing the login form to a visitor who is
// not logged in stores nothing on the hub, so no number of visits can push
// out another visitor's login in progress.
func TestVisitorsKeepNoSessions(t *testing.T) {
	s, mux, query := newTestServer(t)
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
	s.sessions.mu.Lock()
	n := len(s.sessions.m)
	s.sessions.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d sessions kept for visitors who did not log in", n)
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
	s.sessions.setFlash(w, "Unknown user or wrong password.", false)
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
		s := &Server{PublicURL: u}
		if s.secure() != want {
			t.Errorf("%s: secure %v, want %v", u, s.secure(), want)
		}
	}
}

// TestUserSessionsAreCapped: one user logging in again and again keeps at
// most maxUserSessions, the oldest going first, and leaves another user's
// session alone.
func TestUserSessionsAreCapped(t *testing.T) {
	ss := newSessions()
	clock := time.Unix(1_000_000, 0)
	ss.now = func() time.Time { clock = clock.Add(time.Second); return clock }
	bob, _ := ss.start("", &bridge.User{ID: 2})
	var ids []string
	for range maxUserSessions + 5 {
		id, _ := ss.start("", &bridge.User{ID: 1})
		ids = append(ids, id)
	}
	count := 0
	for _, v := range ss.m {
		if v.userID == 1 {
			count++
		}
	}
	if count != maxUserSessions {
		t.Errorf("user 1 has %d sessions, want %d", count, maxUserSessions)
	}
	if _, ok := ss.m[key(bob)]; !ok {
		t.Error("another user's session was pushed out")
	}
	if _, ok := ss.m[key(ids[len(ids)-1])]; !ok {
		t.Error("the newest session was pushed out")
	}
	if _, ok := ss.m[key(ids[0])]; ok {
		t.Error("the oldest session was kept")
	}
}
