package oauth

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/platform/accounts"
	"github.com/switchbridge/switchbridge/bridge/store"
	"github.com/switchbridge/switchbridge/bridge/store/pgtest"
)

// TestMain stops the PostgreSQL the tests started (pgtest).
func TestMain(m *testing.M) { pgtest.Main(m) }

// forEachDialect runs f once per storage engine. open opens another
// connection to the one database of the run, as another platform process
// would: the SQLite file of a temporary directory, or a PostgreSQL
// database of pgtest's.
func forEachDialect(t *testing.T, f func(t *testing.T, open func() *accounts.Store)) {
	for _, dialect := range []store.Dialect{store.SQLite, store.Postgres} {
		t.Run(string(dialect), func(t *testing.T) {
			ctx := context.Background()
			var connect func() (*accounts.Store, error)
			if dialect == store.SQLite {
				dir := t.TempDir()
				connect = func() (*accounts.Store, error) { return records(store.Open(ctx, dir)) }
			} else {
				dsn := pgtest.DSN(t)
				connect = func() (*accounts.Store, error) { return records(store.OpenPostgres(ctx, dsn)) }
			}
			f(t, func() *accounts.Store {
				t.Helper()
				db, err := connect()
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { db.DB().Close() })
				return db
			})
		})
	}
}

// seedPlatform adds alice (password alice-pw, location 1) and her
// published app app1 to a platform's database.
func seedPlatform(t *testing.T, db *accounts.Store) *bridge.User {
	t.Helper()
	ctx := context.Background()
	hash, _ := bcrypt.GenerateFromPassword([]byte("alice-pw"), bcrypt.MinCost)
	u, err := db.CreateUser(ctx, "alice", hash, []int64{1})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.CreateApp(ctx, &bridge.App{ClientID: "app1", Name: "App", SecretHash: Hash("s"),
		RedirectURIs: []string{"https://client.example/cb"}, OwnerID: u.ID, Published: true}); err != nil {
		t.Fatal(err)
	}
	return u
}

// authQuery is an authorization request of app1.
var authQuery = url.Values{"response_type": {"code"}, "client_id": {"app1"}, "scope": {"app"}, "redirect_uri": {"https://client.example/cb"}}.Encode()

// platformProcess is a Server over st with the routes of the platform
// role, as one platform process serves them.
func platformProcess(t *testing.T, st Store) (*Server, *http.ServeMux) {
	t.Helper()
	hub, err := bridge.NewSwitchboard([]bridge.Location{{ID: 1, Name: "Home", Switches: []string{"lamp"}}}, nil, bridge.SwitchboardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := New(st, hub, nil, Options{PublicURL: "http://hub.test"})
	mux := http.NewServeMux()
	s.Register(mux)
	return s, mux
}

// browser keeps cookies across requests to any platform process, as a
// browser behind a load balancer does.
type browser struct {
	t       *testing.T
	addr    string
	cookies map[string]*http.Cookie
}

func newBrowser(t *testing.T, addr string) *browser {
	return &browser{t: t, addr: addr, cookies: map[string]*http.Cookie{}}
}

// do sends a request to one process: a GET without form, a POST with.
func (b *browser) do(to http.Handler, path string, form url.Values) *httptest.ResponseRecorder {
	b.t.Helper()
	var r *http.Request
	if form == nil {
		r = httptest.NewRequest(http.MethodGet, path, nil)
	} else {
		r = httptest.NewRequest(http.MethodPost, path, strings.NewReader(form.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	r.RemoteAddr = b.addr + ":1234"
	for _, c := range b.cookies {
		r.AddCookie(c)
	}
	w := httptest.NewRecorder()
	to.ServeHTTP(w, r)
	for _, c := range w.Result().Cookies() {
		if c.MaxAge < 0 {
			delete(b.cookies, c.Name)
		} else {
			b.cookies[c.Name] = c
		}
	}
	return w
}

// page GETs path from a process and returns its body, following one
// redirect to the same process.
func (b *browser) page(to http.Handler, path string) string {
	b.t.Helper()
	w := b.do(to, path, nil)
	if w.Code == http.StatusSeeOther {
		w = b.do(to, w.Header().Get("Location"), nil)
	}
	if w.Code != http.StatusOK {
		b.t.Fatalf("GET %s = %d: %s", path, w.Code, w.Body)
	}
	return w.Body.String()
}

// csrf is the CSRF token of a page's form.
func (b *browser) csrf(body string) string {
	b.t.Helper()
	m := csrfField.FindStringSubmatch(body)
	if m == nil {
		b.t.Fatalf("no CSRF token on the page:\n%.400s", body)
	}
	return m[1]
}

// login posts the login form of the page it GETs from one process to
// another, and returns the page the redirect leads to there.
func (b *browser) login(from, to http.Handler, name, password string) string {
	b.t.Helper()
	form, _ := url.ParseQuery(authQuery)
	form.Set("csrf", b.csrf(b.page(from, "/oauth/authorize?"+authQuery)))
	form.Set("username", name)
	form.Set("password", password)
	w := b.do(to, "/oauth/login", form)
	if w.Code != http.StatusSeeOther {
		b.t.Fatalf("login = %d: %s", w.Code, w.Body)
	}
	return b.page(to, w.Header().Get("Location"))
}

// TestOnePlatformOfTwoProcesses: two platform processes on one database
// behind a load balancer without sticky sessions are one platform. A login
// form rendered by one is accepted by the other, the message after a wrong
// password signed by one is shown by the other, a session started through
// one is live at the other (its consent is accepted there), a logout
// through one ends it at both, and a password change, through either
// process's database connection, ends it too.
func TestOnePlatformOfTwoProcesses(t *testing.T) {
	forEachDialect(t, func(t *testing.T, open func() *accounts.Store) {
		ctx := context.Background()
		dbA, dbB := open(), open()
		seedPlatform(t, dbA)
		_, a := platformProcess(t, dbA)
		_, b := platformProcess(t, dbB)

		br := newBrowser(t, "198.51.100.1")
		if body := br.login(a, b, "alice", "wrong"); !strings.Contains(body, "Unknown user or wrong password.") {
			t.Errorf("the message signed by one process is not shown by the other:\n%.400s", body)
		}
		consent := br.login(b, a, "alice", "alice-pw")
		if !strings.Contains(consent, "Allow App") {
			t.Fatalf("logged in through a form of the other process, the consent page is not shown:\n%.400s", consent)
		}
		if body := br.page(b, "/oauth/authorize?"+authQuery); !strings.Contains(body, "Allow App") {
			t.Fatalf("the session started through one process is not live at the other:\n%.400s", body)
		}
		form, _ := url.ParseQuery(authQuery)
		form.Set("csrf", br.csrf(consent))
		form.Set("action", "approve")
		form.Set("location", "1")
		form.Set("switch", "lamp")
		w := br.do(b, "/oauth/authorize", form)
		if loc := w.Header().Get("Location"); w.Code != http.StatusSeeOther || !strings.HasPrefix(loc, "https://client.example/cb?code=") {
			t.Fatalf("consent through the other process = %d, Location %q: %s", w.Code, loc, w.Body)
		}

		// A logout through one process ends the session at both.
		logout, _ := url.ParseQuery(authQuery)
		logout.Set("csrf", br.csrf(consent))
		session := br.cookies[sessionCookie]
		if w := br.do(a, "/oauth/logout", logout); w.Code != http.StatusSeeOther {
			t.Fatalf("logout = %d: %s", w.Code, w.Body)
		}
		br.cookies[sessionCookie] = session // a copy of the cookie, kept
		for name, p := range map[string]http.Handler{"the process logged out through": a, "the other process": b} {
			if body := br.page(p, "/oauth/authorize?"+authQuery); strings.Contains(body, "Allow App") {
				t.Errorf("after the logout, %s still serves the session", name)
			}
		}

		// A password change ends every session of the user at every
		// process, whichever connection writes it.
		br = newBrowser(t, "198.51.100.2")
		br.login(a, b, "alice", "alice-pw")
		hash, _ := bcrypt.GenerateFromPassword([]byte("new-pw"), bcrypt.MinCost)
		if err := dbB.SetPassword(ctx, "alice", hash); err != nil {
			t.Fatal(err)
		}
		for name, p := range map[string]http.Handler{"a": a, "b": b} {
			if body := br.page(p, "/oauth/apps"); !strings.Contains(body, "Please log in again.") && !strings.Contains(body, `name="return" value="apps"`) {
				t.Errorf("process %s serves a session that outlived its password:\n%.400s", name, body)
			}
		}
		if body := br.login(b, a, "alice", "new-pw"); !strings.Contains(body, "Allow App") {
			t.Errorf("the new password does not log in:\n%.400s", body)
		}
	})
}

// TestFailedLoginsCountAcrossProcesses: wrong passwords spread over two
// processes count together, so a guesser behind a round-robin balancer
// gets one allowance, not one per process; and the right password, once
// the allowance is spent, waits at either process.
func TestFailedLoginsCountAcrossProcesses(t *testing.T) {
	forEachDialect(t, func(t *testing.T, open func() *accounts.Store) {
		dbA, dbB := open(), open()
		seedPlatform(t, dbA)
		_, a := platformProcess(t, dbA)
		_, b := platformProcess(t, dbB)
		guesser := newBrowser(t, "203.0.113.9")
		for i := range pairFree {
			from, to := a, b
			if i%2 == 1 {
				from, to = b, a
			}
			if body := guesser.login(from, to, "alice", "guess"); !strings.Contains(body, "Unknown user or wrong password.") {
				t.Fatalf("guess %d: %.300s", i+1, body)
			}
		}
		for name, p := range map[string]http.Handler{"a": a, "b": b} {
			if body := guesser.login(p, p, "alice", "alice-pw"); !strings.Contains(body, "Too many failed logins") {
				t.Errorf("after %d failures spread over both processes, process %s checks a password:\n%.300s", pairFree, name, body)
			}
		}
		// Another address is not slowed.
		if body := newBrowser(t, "203.0.113.10").login(a, b, "alice", "alice-pw"); !strings.Contains(body, "Allow App") {
			t.Errorf("alice from another address is kept out:\n%.300s", body)
		}
	})
}

// TestLoginBudgetsHoldUnderConcurrency: 30 wrong passwords posted at once,
// to one platform process or spread over two on one database, get at most
// a budget's worth of password checks (counted where bcrypt runs, not from
// the answers): the user name's budget when they come from 30 addresses,
// the address's when one address tries 30 names. Once a budget is spent
// the right password waits too, and is not checked.
func TestLoginBudgetsHoldUnderConcurrency(t *testing.T) {
	for _, processes := range []int{1, 2} {
		t.Run(fmt.Sprintf("%d processes", processes), func(t *testing.T) {
			forEachDialect(t, func(t *testing.T, open func() *accounts.Store) {
				ctx := context.Background()
				seedPlatform(t, open())
				hash, _ := bcrypt.GenerateFromPassword([]byte("user-pw"), bcrypt.MinCost)
				for i := range 30 {
					if _, err := open().CreateUser(ctx, fmt.Sprint("user", i), hash, []int64{1}); err != nil {
						t.Fatal(err)
					}
				}
				var checks atomic.Int64
				now := time.Now() // every process's clock stands still: no delay ends during the test
				var procs []http.Handler
				for range processes {
					s, mux := platformProcess(t, open())
					s.now = func() time.Time { return now }
					s.compareHash = func(hash, password []byte) error {
						checks.Add(1)
						return bcrypt.CompareHashAndPassword(hash, password)
					}
					procs = append(procs, mux)
				}

				// One user name from 30 addresses.
				wrong := burst(t, procs, 30, func(i int) (string, string, string) {
					return fmt.Sprintf("198.51.100.%d", i+1), "alice", "guess"
				})
				if n := checks.Load(); n != userFree || wrong != userFree {
					t.Errorf("30 parallel guesses at one name: %d password checks, %d answered as wrong; want %d (the name's budget)", n, wrong, userFree)
				}
				spent := checks.Load()
				if body := newBrowser(t, "198.51.100.200").login(procs[0], procs[len(procs)-1], "alice", "alice-pw"); !strings.Contains(body, "Too many failed logins") {
					t.Errorf("the right password, once the name's budget is spent, is let in:\n%.300s", body)
				}
				if n := checks.Load() - spent; n != 0 {
					t.Errorf("the right password was checked (%d) once the name's budget was spent", n)
				}

				// One address trying 30 names.
				checks.Store(0)
				wrong = burst(t, procs, 30, func(i int) (string, string, string) {
					return "203.0.113.7", fmt.Sprint("user", i), "guess"
				})
				if n := checks.Load(); n != addrFree || wrong != addrFree {
					t.Errorf("30 parallel guesses from one address: %d password checks, %d answered as wrong; want %d (the address's budget)", n, wrong, addrFree)
				}
				spent = checks.Load()
				if body := newBrowser(t, "203.0.113.7").login(procs[0], procs[len(procs)-1], "user29", "user-pw"); !strings.Contains(body, "Too many failed logins") {
					t.Errorf("the right password, once the address's budget is spent, is let in:\n%.300s", body)
				}
				if n := checks.Load() - spent; n != 0 {
					t.Errorf("the right password was checked (%d) once the address's budget was spent", n)
				}
				// The same user from elsewhere is let in.
				if body := newBrowser(t, "203.0.113.8").login(procs[0], procs[len(procs)-1], "user29", "user-pw"); !strings.Contains(body, "Allow App") {
					t.Errorf("a user whose name was tried from a throttled address is kept out elsewhere:\n%.300s", body)
				}
			})
		})
	}
}

// burst posts n login forms at once, the i-th from the address, as the
// user, with the password that who(i) returns, spread round robin over
// the processes; it returns how many were answered "wrong password".
func burst(t *testing.T, procs []http.Handler, n int, who func(i int) (addr, name, password string)) (wrong int) {
	t.Helper()
	browsers := make([]*browser, n)
	forms := make([]url.Values, n)
	for i := range n {
		addr, name, password := who(i)
		browsers[i] = newBrowser(t, addr)
		forms[i], _ = url.ParseQuery(authQuery)
		forms[i].Set("csrf", browsers[i].csrf(browsers[i].page(procs[i%len(procs)], "/oauth/authorize?"+authQuery)))
		forms[i].Set("username", name)
		forms[i].Set("password", password)
	}
	answers := make([]*httptest.ResponseRecorder, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			answers[i] = browsers[i].do(procs[(i+1)%len(procs)], "/oauth/login", forms[i])
		}()
	}
	close(start)
	wg.Wait()
	for i, w := range answers {
		if w.Code != http.StatusSeeOther {
			t.Fatalf("login %d = %d: %s", i, w.Code, w.Body)
		}
		body := browsers[i].page(procs[i%len(procs)], w.Header().Get("Location"))
		switch {
		case strings.Contains(body, "Unknown user or wrong password."):
			wrong++
		case !strings.Contains(body, "Too many failed logins"):
			t.Errorf("login %d: neither refused nor throttled:\n%.300s", i, body)
		}
	}
	return wrong
}
