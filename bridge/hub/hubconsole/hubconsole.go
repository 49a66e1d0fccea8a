// Package hubconsole lets owners into the console (bridge/console) of a
// hub of a platform. Such a hub keeps no users: its console sends an
// owner's browser to the platform's /console/signin, which sends it back
// to this hub's registered base URL with a code once an owner is logged
// in there; the hub redeems the code over its link, authenticated as
// itself, and keeps a console session of its own. The platform's
// login, throttling and owner role decide who gets in; the hub only
// remembers, for SessionLifetime, that the platform said so.
//
// Sessions live in this process's memory: a restart of the hub signs its
// owners in again (one more redirect through the platform). A sign-in
// needs the state cookie of the browser that started it, and each code
// is taken once.
package hubconsole

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/console"
	"github.com/switchbridge/switchbridge/bridge/infra/clientaddr"
	"github.com/switchbridge/switchbridge/bridge/link"
)

// Bounds of the hub's console logins.
const (
	SessionLifetime = 30 * time.Minute
	// maxSessions bounds the sessions kept: the oldest goes first.
	maxSessions = 64
	// stateLifetime is how long a sign-in may take at the platform
	// (typing a password included).
	stateLifetime = 10 * time.Minute
	// CallbackPath takes the platform's code.
	CallbackPath = console.Path + "signin/callback"
)

const (
	sessionCookie = "switchbridge_hub_console"
	stateCookie   = "switchbridge_hub_console_state"
	flashCookie   = "switchbridge_hub_console_flash"
)

// Options is what a Gate is built with.
type Options struct {
	// PlatformURL is the platform's address, HubID this hub's id there.
	PlatformURL, HubID string
	// PublicURL is this hub's: with https its cookies are Secure and
	// __Host- prefixed.
	PublicURL string
	// Redeem asks the platform who a code signs in (replica.Link's
	// RedeemConsoleSignIn).
	Redeem func(ctx context.Context, code string) (link.ConsoleOwner, error)
	Logger *slog.Logger
	// TrustedProxies are the peers whose forwarding headers name the
	// client (server.trusted_proxies): sign-ins asked about at once are
	// bounded per client.
	TrustedProxies []netip.Prefix
	// Now is the sessions' clock; time.Now when nil.
	Now func() time.Time
}

// Gate is a console.Gate over sessions the platform signs in.
type Gate struct {
	opts   Options
	secure bool
	key    []byte // signs CSRF tokens, states and messages; new at each start

	mu       sync.Mutex
	sessions map[string]*session // by the hash of the cookie
	// taken are the codes the platform vouched for, until they expire;
	// pending those being asked about now, with the client that sent
	// each (clientaddr.Key), and pendingBy how many each client has: a
	// stranger's made-up codes take no memory past their question, and
	// hold up no one else's sign-in.
	taken     map[string]time.Time
	pending   map[string]string
	pendingBy map[string]int
}

type session struct {
	owner   link.ConsoleOwner
	created time.Time
	csrf    string
}

// New returns the hub's console gate.
func New(o Options) *Gate {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	u, err := url.Parse(o.PublicURL)
	g := &Gate{opts: o, secure: err == nil && u.Scheme == "https", key: make([]byte, 32),
		sessions: map[string]*session{}, taken: map[string]time.Time{}, pending: map[string]string{}, pendingBy: map[string]int{}}
	rand.Read(g.key)
	return g
}

// Register adds the sign-in's callback to mux.
func (g *Gate) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET "+CallbackPath, g.callback)
}

func (g *Gate) cookieName(name string) string {
	if g.secure {
		return "__Host-" + name
	}
	return name
}

func (g *Gate) setCookie(w http.ResponseWriter, name, value string, age time.Duration) {
	maxAge := int(age / time.Second)
	if age <= 0 {
		maxAge = -1
	}
	http.SetCookie(w, &http.Cookie{Name: g.cookieName(name), Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, Secure: g.secure, SameSite: http.SameSiteLaxMode})
}

func (g *Gate) cookie(r *http.Request, name string) string {
	c, err := r.Cookie(g.cookieName(name))
	if err != nil {
		return ""
	}
	return c.Value
}

func (g *Gate) mac(purpose, v string) string {
	m := hmac.New(sha256.New, g.key)
	m.Write([]byte(purpose))
	m.Write([]byte{0})
	m.Write([]byte(v))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func hashOf(v string) string {
	s := sha256.Sum256([]byte(v))
	return string(s[:])
}

func newSecret() string {
	var b [32]byte
	rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// Visitor returns the owner of the request's console session, nil when
// there is none or it has ended.
func (g *Gate) Visitor(r *http.Request) (*console.Visitor, error) {
	id := g.cookie(r, sessionCookie)
	if id == "" || len(id) > 64 {
		return nil, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	s, ok := g.sessions[hashOf(id)]
	if !ok {
		return nil, nil
	}
	if g.opts.Now().Sub(s.created) >= SessionLifetime {
		delete(g.sessions, hashOf(id))
		return nil, nil
	}
	return &console.Visitor{User: &bridge.User{ID: s.owner.ID, Name: s.owner.Name, Owner: true}, CSRF: s.csrf,
		PasswordAt: time.UnixMilli(s.owner.PasswordAt)}, nil
}

// Login sends the browser to the platform to sign in, and back to next;
// with v set the platform asks for the password again first. msg has
// nowhere to show on this hub: the platform's pages say what goes wrong
// there.
func (g *Gate) Login(w http.ResponseWriter, r *http.Request, next string, v *console.Visitor, _ string) {
	state := newSecret()
	g.setCookie(w, stateCookie, state, stateLifetime)
	q := url.Values{"hub": {g.opts.HubID}, "state": {g.mac("state", state)}, "next": {console.SafeNext(next)}}
	if v != nil {
		q.Set("reauth", "1")
	}
	http.Redirect(w, r, strings.TrimRight(g.opts.PlatformURL, "/")+console.Path+"signin?"+q.Encode(), http.StatusSeeOther)
}

// callback takes the platform's code: from the browser that started the
// sign-in (its state cookie), once.
func (g *Gate) callback(w http.ResponseWriter, r *http.Request) {
	console.Headers(w)
	q := r.URL.Query()
	code, state := q.Get("code"), g.cookie(r, stateCookie)
	g.setCookie(w, stateCookie, "", 0)
	if state == "" || len(code) > 1024 || subtle.ConstantTimeCompare([]byte(g.mac("state", state)), []byte(q.Get("state"))) != 1 {
		http.Error(w, "This sign-in was not started in this browser, or took too long. Open the console again.", http.StatusForbidden)
		return
	}
	if !strings.Contains(code, ".") {
		http.Error(w, "This sign-in link is not one the platform made. Open the console again.", http.StatusForbidden)
		return
	}
	switch g.reserve(code, clientaddr.Key(r, g.opts.TrustedProxies)) {
	case errTaken:
		http.Error(w, "This sign-in link was used already. Open the console again.", http.StatusForbidden)
		return
	case errBusy:
		w.Header().Set("Retry-After", "5")
		http.Error(w, "Too many sign-ins at once. Try again in a few seconds.", http.StatusServiceUnavailable)
		return
	}
	owner, err := g.opts.Redeem(r.Context(), code)
	g.settle(code, err == nil)
	if err != nil {
		g.opts.Logger.Warn("console sign-in: the platform did not vouch for the code", "err", err)
		http.Error(w, "The platform did not confirm this sign-in; open the console again. (The hub's log has the reason.)", http.StatusForbidden)
		return
	}
	id := newSecret()
	g.mu.Lock()
	now := g.opts.Now()
	for len(g.sessions) >= maxSessions {
		oldest := ""
		for k, s := range g.sessions {
			if oldest == "" || s.created.Before(g.sessions[oldest].created) {
				oldest = k
			}
		}
		delete(g.sessions, oldest)
	}
	g.sessions[hashOf(id)] = &session{owner: owner, created: now, csrf: g.mac("csrf", id)}
	g.mu.Unlock()
	g.setCookie(w, sessionCookie, id, SessionLifetime)
	g.opts.Logger.Info("console login", "user", owner.Name, "via", "platform")
	http.Redirect(w, r, console.SafeNext(q.Get("next")), http.StatusSeeOther)
}

// Bounds of the sign-ins asked about at once: each is a call to the
// platform. An owner signs in once; a client with more at once is making
// codes up, and waits without holding anyone else up, unless it comes
// from more addresses (IPv6: /64s) than a neighbour has.
const (
	maxPending          = 32
	maxPendingPerClient = 2
)

var (
	errTaken = errors.New("taken")
	errBusy  = errors.New("busy")
)

// reserve marks code as being asked about for client: errTaken when it
// was used or is being asked about already, errBusy past the bounds.
func (g *Gate) reserve(code, client string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.opts.Now()
	for c, until := range g.taken {
		if now.After(until) {
			delete(g.taken, c)
		}
	}
	h := hashOf(code)
	if _, ok := g.taken[h]; ok {
		return errTaken
	}
	if _, ok := g.pending[h]; ok {
		return errTaken
	}
	if len(g.pending) >= maxPending || g.pendingBy[client] >= maxPendingPerClient {
		return errBusy
	}
	g.pending[h] = client
	g.pendingBy[client]++
	return nil
}

// settle ends code's question: a code the platform vouched for is kept
// as taken for as long as codes last (so it signs in once); a refused
// one is forgotten.
func (g *Gate) settle(code string, vouched bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	h := hashOf(code)
	client := g.pending[h]
	delete(g.pending, h)
	if g.pendingBy[client]--; g.pendingBy[client] <= 0 {
		delete(g.pendingBy, client)
	}
	if vouched {
		g.taken[h] = g.opts.Now().Add(2 * time.Minute)
	}
}

// Logout ends the session at this hub.
func (g *Gate) Logout(w http.ResponseWriter, r *http.Request, _ *console.Visitor) error {
	if id := g.cookie(r, sessionCookie); id != "" {
		g.mu.Lock()
		delete(g.sessions, hashOf(id))
		g.mu.Unlock()
	}
	g.setCookie(w, sessionCookie, "", 0)
	return nil
}

// SetNotice leaves a signed message for the next page.
func (g *Gate) SetNotice(w http.ResponseWriter, _ *http.Request, msg string, notice bool) {
	kind := "p"
	if notice {
		kind = "n"
	}
	v := kind + base64.RawURLEncoding.EncodeToString([]byte(msg))
	g.setCookie(w, flashCookie, v+"."+g.mac("flash", v), time.Minute)
}

// TakeNotice returns the message the previous page left, if any.
func (g *Gate) TakeNotice(w http.ResponseWriter, r *http.Request) (string, bool) {
	c := g.cookie(r, flashCookie)
	if c == "" {
		return "", false
	}
	g.setCookie(w, flashCookie, "", 0)
	v, sig, ok := strings.Cut(c, ".")
	if !ok || len(v) < 1 || !hmac.Equal([]byte(sig), []byte(g.mac("flash", v))) {
		return "", false
	}
	b, err := base64.RawURLEncoding.DecodeString(v[1:])
	if err != nil {
		return "", false
	}
	return string(b), v[0] == 'n'
}
