package oauth

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
)

// loginRequest is a request carrying the cookies w set.
func loginRequest(w *httptest.ResponseRecorder) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/oauth/login", nil)
	for _, c := range w.Result().Cookies() {
		r.AddCookie(c)
	}
	return r
}

// TestDeviceCookie: the cookie a login leaves stands for that user only,
// until it expires or the user's password changes, and cannot be forged.
func TestDeviceCookie(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	s := &Server{opts: Options{PublicURL: "https://hub.example"}, now: func() time.Time { return now }}
	alice := &bridge.User{ID: 1, Name: "alice", PasswordHash: []byte("alice-hash")}
	bob := &bridge.User{ID: 2, Name: "bob", PasswordHash: []byte("bob-hash")}

	w := httptest.NewRecorder()
	s.rememberDevice(w, httptest.NewRequest(http.MethodPost, "/oauth/login", nil), alice)
	r := loginRequest(w)
	id := s.device(r, alice)
	if id == "" {
		t.Fatal("the browser alice logged in from is not known")
	}
	if got := s.device(r, bob); got != "" {
		t.Error("alice's cookie stands for bob")
	}
	if got := s.device(r, &bridge.User{ID: 1, Name: "alice", PasswordHash: []byte("new-hash")}); got != "" {
		t.Error("the cookie outlives a password change")
	}

	// bob logs in in the same browser: both are known, each with his own id.
	w2 := httptest.NewRecorder()
	s.rememberDevice(w2, r, bob)
	r2 := loginRequest(w2)
	if s.device(r2, alice) != id || s.device(r2, bob) == "" {
		t.Error("a second user's login lost the first user's entry")
	}

	// Forgeries: another user id under alice's signature, a changed expiry.
	v := r.Header.Get("Cookie")
	v = v[strings.Index(v, "=")+1:]
	for name, forged := range map[string]string{
		"user id": "2" + v[1:],
		"expiry":  strings.Replace(v, ".", ".9", 1),
		"garbage": "x.y.z.w",
		"quotes":  `1.99999999999.a"b.c\\d`,
		"huge":    strings.Repeat(v+"~", 20),
	} {
		fr := httptest.NewRequest(http.MethodPost, "/oauth/login", nil)
		fr.AddCookie(&http.Cookie{Name: "__Host-" + deviceCookie, Value: forged})
		if s.device(fr, alice) != "" || s.device(fr, bob) != "" {
			t.Errorf("a forged cookie (%s) is trusted", name)
		}
	}

	if e := parseDeviceCookie(`1.99999999999.a"b.c\\d~1.99999999999.ok.ok`); len(e) != 1 {
		t.Errorf("an entry with bytes the hub never writes is kept, to be echoed back: %v", e)
	}

	// Bounded: the users a browser remembers, and the cookie's life.
	rq := r
	for i := range maxDeviceUsers + 2 {
		w := httptest.NewRecorder()
		s.rememberDevice(w, rq, &bridge.User{ID: int64(10 + i), PasswordHash: []byte("h")})
		rq = loginRequest(w)
	}
	if n := len(parseDeviceCookie(rq.Cookies()[0].Value)); n != maxDeviceUsers {
		t.Errorf("the browser remembers %d users, bound %d", n, maxDeviceUsers)
	}
	if s.device(rq, alice) != "" {
		t.Error("the oldest user was not dropped")
	}
	now = now.Add(deviceLifetime + time.Second)
	if s.device(r, alice) != "" {
		t.Error("an expired device cookie is trusted")
	}
}
