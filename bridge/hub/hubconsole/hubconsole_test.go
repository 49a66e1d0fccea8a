package hubconsole_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge/hub/hubconsole"
	"github.com/switchbridge/switchbridge/bridge/link"
)

// gateRig is a hub's console gate whose platform vouches for the codes
// in good, each once, as the platform's redemption would.
type gateRig struct {
	g    *hubconsole.Gate
	mux  *http.ServeMux
	now  time.Time
	good map[string]link.ConsoleOwner
	asks int
}

func newGateRig(t *testing.T) *gateRig {
	r := &gateRig{now: time.Unix(1_800_000_000, 0), good: map[string]link.ConsoleOwner{}}
	r.g = hubconsole.New(hubconsole.Options{PlatformURL: "http://platform.test", HubID: "hub-1", PublicURL: "http://hub.test",
		Redeem: func(_ context.Context, code string) (link.ConsoleOwner, error) {
			r.asks++
			o, ok := r.good[code]
			if !ok {
				return o, errors.New("refused")
			}
			return o, nil
		},
		Now: func() time.Time { return r.now }})
	r.mux = http.NewServeMux()
	r.g.Register(r.mux)
	return r
}

// startSignIn has the gate send a browser to the platform, and returns
// the browser's state cookie and the state the platform is to send back.
func (r *gateRig) startSignIn(t *testing.T, next string) (*http.Cookie, string) {
	t.Helper()
	w := httptest.NewRecorder()
	r.g.Login(w, httptest.NewRequest("GET", "http://hub.test"+next, nil), next, nil, "")
	loc, err := url.Parse(w.Header().Get("Location"))
	if err != nil || w.Code != http.StatusSeeOther || loc.Host != "platform.test" || loc.Path != "/console/signin" {
		t.Fatalf("Login answered %d to %q, want 303 to the platform's /console/signin", w.Code, w.Header().Get("Location"))
	}
	if q := loc.Query(); q.Get("hub") != "hub-1" || q.Get("reauth") != "" {
		t.Fatalf("the sign-in asks %v", q)
	}
	cs := w.Result().Cookies()
	if len(cs) != 1 || !cs[0].HttpOnly || cs[0].SameSite != http.SameSiteLaxMode {
		t.Fatalf("state cookie %+v", cs)
	}
	return cs[0], loc.Query().Get("state")
}

func (r *gateRig) callback(state string, code, next string, cookies ...*http.Cookie) *httptest.ResponseRecorder {
	return r.callbackFrom("", state, code, next, cookies...)
}

// callbackFrom is callback from the address from (host:port), or from
// httptest's when "".
func (r *gateRig) callbackFrom(from, state string, code, next string, cookies ...*http.Cookie) *httptest.ResponseRecorder {
	q := url.Values{"code": {code}, "state": {state}, "next": {next}}
	req := httptest.NewRequest("GET", "http://hub.test"+hubconsole.CallbackPath+"?"+q.Encode(), nil)
	if from != "" {
		req.RemoteAddr = from
	}
	for _, c := range cookies {
		req.AddCookie(c)
	}
	w := httptest.NewRecorder()
	r.mux.ServeHTTP(w, req)
	return w
}

func sessionCookie(t *testing.T, w *httptest.ResponseRecorder) *http.Cookie {
	t.Helper()
	for _, c := range w.Result().Cookies() {
		if c.Name == "switchbridge_hub_console" && c.MaxAge > 0 {
			return c
		}
	}
	t.Fatalf("no session cookie in %v", w.Header()["Set-Cookie"])
	return nil
}

func TestSignIn(t *testing.T) {
	r := newGateRig(t)
	r.good["code.1"] = link.ConsoleOwner{ID: 7, Name: "olga", PasswordAt: r.now.Add(-time.Minute).UnixMilli()}
	state, sent := r.startSignIn(t, "/console/switches")

	// Without the browser's state cookie, or with another state: refused,
	// and the platform is not even asked.
	if w := r.callback(sent, "code.1", "/console/"); w.Code != http.StatusForbidden {
		t.Errorf("no state cookie: %d, want 403", w.Code)
	}
	if w := r.callback("forged", "code.1", "/console/", state); w.Code != http.StatusForbidden {
		t.Errorf("another state: %d, want 403", w.Code)
	}
	if r.asks != 0 {
		t.Errorf("the platform was asked %d times for sign-ins refused at the hub", r.asks)
	}

	w := r.callback(sent, "code.1", "//evil.test/console/", state)
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/console/" {
		t.Fatalf("sign-in answered %d to %q, want 303 to /console/ (next was another host)", w.Code, w.Header().Get("Location"))
	}
	sess := sessionCookie(t, w)
	req := httptest.NewRequest("GET", "http://hub.test/console/", nil)
	req.AddCookie(sess)
	v, err := r.g.Visitor(req)
	if err != nil || v == nil || v.User.Name != "olga" || !v.User.Owner || v.CSRF == "" || !v.PasswordAt.Equal(r.now.Add(-time.Minute)) {
		t.Fatalf("visitor %+v, %v; want olga, an owner, with a CSRF token and when she typed her password", v, err)
	}

	// The same code again, even with a fresh state: taken.
	state2, sent2 := r.startSignIn(t, "/console/")
	if w := r.callback(sent2, "code.1", "/console/", state2); w.Code != http.StatusForbidden {
		t.Errorf("a code used twice: %d, want 403", w.Code)
	}
	// A code the platform does not vouch for.
	state3, sent3 := r.startSignIn(t, "/console/")
	if w := r.callback(sent3, "unknown.code", "/console/", state3); w.Code != http.StatusForbidden {
		t.Errorf("a code the platform refused: %d, want 403", w.Code)
	}

	// The session ends after its lifetime.
	r.now = r.now.Add(hubconsole.SessionLifetime)
	if v, _ := r.g.Visitor(req); v != nil {
		t.Errorf("a session older than %s still lets %s in", hubconsole.SessionLifetime, v.User.Name)
	}
}

func TestReauthAsksThePlatform(t *testing.T) {
	r := newGateRig(t)
	r.good["c.1"] = link.ConsoleOwner{ID: 7, Name: "olga", PasswordAt: r.now.UnixMilli()}
	state, sent := r.startSignIn(t, "/console/")
	req := httptest.NewRequest("GET", "http://hub.test/console/", nil)
	req.AddCookie(sessionCookie(t, r.callback(sent, "c.1", "/console/", state)))
	v, _ := r.g.Visitor(req)
	w := httptest.NewRecorder()
	r.g.Login(w, req, "/console/devices", v, "")
	loc, _ := url.Parse(w.Header().Get("Location"))
	if loc == nil || loc.Query().Get("reauth") != "1" || loc.Query().Get("next") != "/console/devices" {
		t.Errorf("asking for the password again sends the browser to %q, want the platform with reauth=1 and next", w.Header().Get("Location"))
	}
}

func TestLogoutAndNotices(t *testing.T) {
	r := newGateRig(t)
	r.good["c.1"] = link.ConsoleOwner{ID: 7, Name: "olga"}
	state, sent := r.startSignIn(t, "/console/")
	sess := sessionCookie(t, r.callback(sent, "c.1", "/console/", state))
	req := httptest.NewRequest("POST", "http://hub.test/console/logout", nil)
	req.AddCookie(sess)
	if err := r.g.Logout(httptest.NewRecorder(), req, nil); err != nil {
		t.Fatal(err)
	}
	if v, _ := r.g.Visitor(req); v != nil {
		t.Error("the session outlived its logout")
	}

	w := httptest.NewRecorder()
	r.g.SetNotice(w, req, "Switched on the lamp.", true)
	flash := w.Result().Cookies()[0]
	read := httptest.NewRequest("GET", "http://hub.test/console/", nil)
	read.AddCookie(flash)
	if msg, notice := r.g.TakeNotice(httptest.NewRecorder(), read); msg != "Switched on the lamp." || !notice {
		t.Errorf("notice read back as %q, %v", msg, notice)
	}
	forged := *flash
	forged.Value = "nU2lnbiBoZXJl." + strings.Repeat("A", 43)
	read = httptest.NewRequest("GET", "http://hub.test/console/", nil)
	read.AddCookie(&forged)
	if msg, _ := r.g.TakeNotice(httptest.NewRecorder(), read); msg != "" {
		t.Errorf("a message the hub did not sign is shown: %q", msg)
	}
}

// TestMadeUpCodesAreBounded: a stranger with a state of their own sends
// made-up codes: each client (an address, an IPv6 /64) has at most two
// asked about at once and the hub at most 32 (the rest get 503 at once,
// with no call to the platform), so a neighbour's codes hold up no
// owner's sign-in from elsewhere; a refused code is forgotten, so no
// number of them fills the hub's memory; one without a code's shape is
// refused before any question.
func TestMadeUpCodesAreBounded(t *testing.T) {
	r := newGateRig(t)
	release := make(chan struct{})
	asked := make(chan string, 100)
	r.g = hubconsole.New(hubconsole.Options{PlatformURL: "http://platform.test", HubID: "hub-1", PublicURL: "http://hub.test",
		Redeem: func(_ context.Context, code string) (link.ConsoleOwner, error) {
			asked <- code
			<-release
			return link.ConsoleOwner{}, errors.New("refused")
		}})
	r.mux = http.NewServeMux()
	r.g.Register(r.mux)
	state, sent := r.startSignIn(t, "/console/")
	if w := r.callback(sent, "no-shape", "/console/", state); w.Code != http.StatusForbidden || len(asked) != 0 {
		t.Fatalf("a code without a code's shape: %d, %d questions", w.Code, len(asked))
	}
	done := make(chan int, 64)
	pending := 0
	ask := func(from, code string) {
		t.Helper()
		go func() { done <- r.callbackFrom(from, sent, code, "/console/", state).Code }()
		if got := <-asked; got != code {
			t.Fatalf("the platform was asked about %q, want %q", got, code)
		}
		pending++
	}
	busy := func(from, code string) {
		t.Helper()
		answer := make(chan *httptest.ResponseRecorder, 1)
		go func() { answer <- r.callbackFrom(from, sent, code, "/console/", state) }()
		select {
		case w := <-answer:
			if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
				t.Errorf("%s from %s: %d, want 503 with Retry-After", code, from, w.Code)
			}
		case <-asked:
			close(release) // let the questions end, so that the test does too
			t.Fatalf("%s from %s was asked about, want 503 at once", code, from)
		}
	}
	// A neighbour: two at once, then refused at once.
	ask("192.0.2.7:4000", "made.up0")
	ask("192.0.2.7:4001", "made.up1")
	busy("192.0.2.7:4002", "made.up2")
	// One IPv6 /64 is one client, whichever address in it.
	ask("[2001:db8:1:2::a]:4000", "made.up3")
	ask("[2001:db8:1:2::b]:4000", "made.up4")
	busy("[2001:db8:1:2::c]:4000", "made.up5")
	// An owner elsewhere is asked about all the same.
	ask("192.0.2.8:5000", "owner.code")
	// Across many clients, at most 32 at once.
	for i := 0; pending < 32; i++ {
		ask(fmt.Sprintf("198.51.100.%d:4000", i+1), fmt.Sprintf("many.client%d", i))
	}
	busy("203.0.113.1:4000", "one.more")
	close(release)
	for range pending {
		if c := <-done; c != http.StatusForbidden {
			t.Errorf("a made-up code: %d, want 403", c)
		}
	}
	// Forgotten: the same made-up code is asked about again, not
	// remembered as taken, and its client may ask again.
	go func() { <-asked }()
	if w := r.callbackFrom("192.0.2.7:4000", sent, "made.up0", "/console/", state); w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "did not confirm") {
		t.Errorf("a refused code sent again: %d %q, want the platform asked again", w.Code, w.Body.String())
	}
}

// TestSignInsCountedBehindAProxy: behind a reverse proxy in
// TrustedProxies the client its header names is counted, not the proxy;
// the header of a peer that is not one is ignored.
func TestSignInsCountedBehindAProxy(t *testing.T) {
	r := newGateRig(t)
	release := make(chan struct{})
	asked := make(chan struct{}, 10)
	r.g = hubconsole.New(hubconsole.Options{PlatformURL: "http://platform.test", HubID: "hub-1", PublicURL: "http://hub.test",
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.1/32")},
		Redeem: func(context.Context, string) (link.ConsoleOwner, error) {
			asked <- struct{}{}
			<-release
			return link.ConsoleOwner{}, errors.New("refused")
		}})
	r.mux = http.NewServeMux()
	r.g.Register(r.mux)
	defer close(release)
	state, sent := r.startSignIn(t, "/console/")
	call := func(peer, forwarded, code string) <-chan int {
		q := url.Values{"code": {code}, "state": {sent}, "next": {"/console/"}}
		req := httptest.NewRequest("GET", "http://hub.test"+hubconsole.CallbackPath+"?"+q.Encode(), nil)
		req.RemoteAddr = peer
		req.Header.Set("X-Forwarded-For", forwarded)
		req.AddCookie(state)
		c := make(chan int, 1)
		go func() {
			w := httptest.NewRecorder()
			r.mux.ServeHTTP(w, req)
			c <- w.Code
		}()
		return c
	}
	askedAbout := func(answer <-chan int, what string) {
		t.Helper()
		select {
		case <-asked:
		case code := <-answer:
			t.Fatalf("%s: %d, want it asked about", what, code)
		}
	}
	// Three clients through the proxy: each is asked about.
	for i := range 3 {
		askedAbout(call("10.0.0.1:3000", fmt.Sprintf("192.0.2.%d", i+1), fmt.Sprintf("via.proxy%d", i)), fmt.Sprint("client ", i+1, " through the proxy"))
	}
	// A stranger naming a client in its own header is counted as itself.
	askedAbout(call("192.0.2.50:3000", "192.0.2.60", "own.a"), "a stranger's first")
	askedAbout(call("192.0.2.50:3001", "192.0.2.61", "own.b"), "a stranger's second")
	select {
	case code := <-call("192.0.2.50:3002", "192.0.2.62", "own.c"):
		if code != http.StatusServiceUnavailable {
			t.Errorf("a third at once from one peer naming other clients: %d, want 503", code)
		}
	case <-asked:
		t.Error("a third at once from one peer naming other clients was asked about, want 503 at once")
	}
}
