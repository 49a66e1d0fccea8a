// Package democlient is a small third-party app served by the demo hub at
// /demo/. It plays the external service exactly as a real one would, over
// HTTP to the hub's public URL: it starts the authorization, takes the code
// on its redirect URI, exchanges it at the token endpoint, calls discovery,
// lists and commands the switches it was granted, and follows their
// changes on the installation's event stream, which its page shows live.
package democlient

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"

	"github.com/switchbridge/switchbridge/bridge/wire"
)

// CallbackPath is the demo client's redirect URI path.
const CallbackPath = "/demo/callback"

// Options configure the demo client.
type Options struct {
	ClientID     string
	ClientSecret string
	AuthURL      string // the hub's public URL ({auth_url})
	RedirectURL  string
	Logger       *slog.Logger
}

// Client is the demo app.
type Client struct {
	oauth  oauth2.Config
	auth   string
	http   *http.Client
	logger *slog.Logger

	mu       sync.Mutex
	sessions map[string]*grant // by cookie value
	notices  map[string]string // one-time messages for /demo/?notice=<id>
	pending  map[string]string // PKCE verifier by state, until the callback
}

// Both maps are bounded: the demo runs on a small hub for anyone who opens it.
const maxEntries = 1000

type grant struct {
	token    string
	uri      string
	location string
	csrf     string
	flash    string
}

// New returns the demo client.
func New(o Options) *Client {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Client{
		oauth: oauth2.Config{
			ClientID: o.ClientID, ClientSecret: o.ClientSecret, RedirectURL: o.RedirectURL, Scopes: []string{"app"},
			Endpoint: oauth2.Endpoint{AuthURL: o.AuthURL + "/oauth/authorize", TokenURL: o.AuthURL + "/oauth/token", AuthStyle: oauth2.AuthStyleInHeader},
		},
		auth:     o.AuthURL,
		http:     &http.Client{Timeout: 30 * time.Second},
		logger:   o.Logger,
		sessions: map[string]*grant{},
		notices:  map[string]string{},
		pending:  map[string]string{},
	}
}

// Register mounts the demo client's pages.
func (c *Client) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /demo/{$}", c.home)
	mux.HandleFunc("GET /demo/connect", c.connect)
	mux.HandleFunc("GET "+CallbackPath, c.callback)
	mux.HandleFunc("POST /demo/command", c.command)
	mux.HandleFunc("POST /demo/disconnect", c.disconnect)
	mux.HandleFunc("GET /demo/events", c.events)
	mux.HandleFunc("GET /demo/live.js", live)
}

const (
	stateCookie   = "demo_state"
	sessionCookie = "demo_session"
)

func (c *Client) session(r *http.Request) *grant {
	ck, err := r.Cookie(sessionCookie)
	if err != nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessions[ck.Value]
}

type switchView struct {
	ID    string
	Name  string
	Value *string
}

type homeData struct {
	Connected bool
	Location  string
	URI       string
	Switches  []switchView
	CSRF      string
	Flash     string
	Error     string
}

// headers sets the page's type and the security headers the hub's own
// pages carry (wire.PageHeaders).
func headers(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	wire.PageHeaders(w)
	// One script, from this client (live.js), which may only open the
	// client's own event stream.
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; script-src 'self'; connect-src 'self'; base-uri 'none'; frame-ancestors 'none'")
}

func (c *Client) home(w http.ResponseWriter, r *http.Request) {
	headers(w)
	g := c.session(r)
	d := homeData{}
	if g != nil {
		c.mu.Lock()
		d.Flash, g.flash = g.flash, ""
		c.mu.Unlock()
		d.Connected, d.Location, d.URI, d.CSRF = true, g.location, g.uri, g.csrf
		list, err := c.list(r.Context(), g)
		if err != nil {
			d.Error = err.Error()
		}
		d.Switches = list
	}
	// Only messages this client made itself are shown: the id is random
	// and used once, so a link cannot put words on the hub's page.
	if id := r.URL.Query().Get("notice"); id != "" {
		c.mu.Lock()
		d.Error = c.notices[id]
		delete(c.notices, id)
		c.mu.Unlock()
	}
	homePage.Execute(w, d)
}

// connect starts the authorization with a fresh state, kept in a cookie so
// the callback can check that the code answers a request this browser made.
func (c *Client) connect(w http.ResponseWriter, r *http.Request) {
	state := randomString()
	verifier := oauth2.GenerateVerifier() // PKCE, as every client should (RFC 9700 §2.1.1)
	c.mu.Lock()
	if len(c.pending) >= maxEntries {
		clear(c.pending)
	}
	c.pending[state] = verifier
	c.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: stateCookie, Value: state, Path: "/demo/", MaxAge: 600, HttpOnly: true, SameSite: http.SameSiteLaxMode})
	http.Redirect(w, r, c.oauth.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier)), http.StatusFound)
}

func (c *Client) callback(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	ck, err := r.Cookie(stateCookie)
	if err != nil || subtle.ConstantTimeCompare([]byte(ck.Value), []byte(q.Get("state"))) != 1 {
		c.fail(w, r, "the authorization answer did not match a request from this browser; connect again")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: stateCookie, Path: "/demo/", MaxAge: -1})
	c.mu.Lock()
	verifier := c.pending[ck.Value]
	delete(c.pending, ck.Value)
	c.mu.Unlock()
	if e := q.Get("error"); e != "" {
		c.fail(w, r, "the hub answered "+e+": "+q.Get("error_description"))
		return
	}
	ctx := context.WithValue(r.Context(), oauth2.HTTPClient, c.http)
	tok, err := c.oauth.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		c.logger.Warn("demo client: token exchange failed", "err", err)
		c.fail(w, r, "token exchange failed: "+err.Error())
		return
	}
	ep, err := c.discover(r.Context(), tok.AccessToken)
	if err != nil {
		c.fail(w, r, err.Error())
		return
	}
	id := randomString()
	c.mu.Lock()
	if len(c.sessions) >= maxEntries {
		clear(c.sessions) // everyone connects again; nothing is lost on the hub
	}
	c.sessions[id] = &grant{token: tok.AccessToken, uri: ep.URI, location: ep.Location.Name, csrf: randomString()}
	c.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: id, Path: "/demo/", HttpOnly: true, SameSite: http.SameSiteLaxMode})
	http.Redirect(w, r, "/demo/", http.StatusSeeOther)
}

type endpoint struct {
	URI      string `json:"uri"`
	BaseURL  string `json:"base_url"`
	Location struct {
		Name string `json:"name"`
	} `json:"location"`
}

func (c *Client) discover(ctx context.Context, token string) (*endpoint, error) {
	var eps []endpoint
	if err := c.call(ctx, http.MethodGet, c.auth+"/api/apps/endpoints", token, &eps); err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	if len(eps) == 0 {
		return nil, fmt.Errorf("discovery returned no installation")
	}
	return &eps[0], nil
}

func (c *Client) list(ctx context.Context, g *grant) ([]switchView, error) {
	var raw []struct {
		ID    string  `json:"id"`
		Name  string  `json:"name"`
		Value *string `json:"value"`
	}
	if err := c.call(ctx, http.MethodGet, g.uri+"/switches", g.token, &raw); err != nil {
		return nil, err
	}
	out := make([]switchView, len(raw))
	for i, s := range raw {
		out[i] = switchView{ID: s.ID, Name: s.Name, Value: s.Value}
	}
	return out, nil
}

func (c *Client) command(w http.ResponseWriter, r *http.Request) {
	g := c.session(r)
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	if g == nil || r.ParseForm() != nil || subtle.ConstantTimeCompare([]byte(r.PostForm.Get("csrf")), []byte(g.csrf)) != 1 {
		http.Redirect(w, r, "/demo/", http.StatusSeeOther)
		return
	}
	cmd := r.PostForm.Get("command")
	msg := "All switches are " + cmd + "."
	if err := c.call(r.Context(), http.MethodPut, g.uri+"/switches/"+cmd, g.token, nil); err != nil {
		msg = "The hub refused: " + err.Error()
	}
	c.mu.Lock()
	g.flash = msg
	c.mu.Unlock()
	http.Redirect(w, r, "/demo/", http.StatusSeeOther)
}

// fail sends the browser back to the home page with a message.
func (c *Client) fail(w http.ResponseWriter, r *http.Request, msg string) {
	id := randomString()
	c.mu.Lock()
	if len(c.notices) >= maxEntries {
		clear(c.notices)
	}
	c.notices[id] = msg
	c.mu.Unlock()
	http.Redirect(w, r, "/demo/?notice="+id, http.StatusSeeOther)
}

func (c *Client) disconnect(w http.ResponseWriter, r *http.Request) {
	g := c.session(r)
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	if g == nil || r.ParseForm() != nil || subtle.ConstantTimeCompare([]byte(r.PostForm.Get("csrf")), []byte(g.csrf)) != 1 {
		http.Redirect(w, r, "/demo/", http.StatusSeeOther)
		return
	}
	if ck, err := r.Cookie(sessionCookie); err == nil {
		c.mu.Lock()
		delete(c.sessions, ck.Value)
		c.mu.Unlock()
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Path: "/demo/", MaxAge: -1})
	http.Redirect(w, r, "/demo/", http.StatusSeeOther)
}

// call makes one API request with the bearer token and decodes a JSON
// answer into out (when not nil). An error status becomes an error carrying
// the status and the hub's message.
func (c *Client) call(ctx context.Context, method, url, token string, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode >= 300 {
		var e struct {
			Message string `json:"message"`
			Desc    string `json:"error_description"`
		}
		json.Unmarshal(body, &e)
		m := e.Message + e.Desc
		if m == "" {
			m = strings.TrimSpace(string(body))
		}
		return fmt.Errorf("%s (HTTP %d)", m, resp.StatusCode)
	}
	if out != nil {
		return json.Unmarshal(body, out)
	}
	return nil
}

var homePage = template.Must(template.New("home").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Demo client · switchbridge</title>
<style>
body { font: 16px/1.45 system-ui, sans-serif; background: #eef3ee; color: #1d2330; margin: 0; }
main { max-width: 32rem; margin: 3rem auto; background: #fff; border-radius: 10px; padding: 1.5rem 2rem; box-shadow: 0 1px 4px rgba(0,0,0,.12); }
h1 { font-size: 1.3rem; margin-top: 0; }
table { border-collapse: collapse; width: 100%; margin: 1rem 0; }
td { padding: .4rem .2rem; border-bottom: 1px solid #e3e6ea; }
.on { color: #18794e; font-weight: 600; } .off { color: #6b7280; }
button, a.button { font-size: 1rem; padding: .5rem 1.1rem; border-radius: 6px; border: 1px solid #1f7a4d; background: #26945d; color: #fff; cursor: pointer; text-decoration: none; display: inline-block; margin: 0 .4rem .4rem 0; }
code { overflow-wrap: anywhere; }
button.secondary { background: #fff; color: #1f7a4d; }
.error { background: #fdecec; color: #8a1c1c; border-radius: 6px; padding: .5rem .8rem; }
.flash { background: #e8f5ee; border-radius: 6px; padding: .5rem .8rem; }
.note { color: #5b6475; font-size: .9rem; }
form { display: inline; }
</style></head><body><main>
<h1>Demo client</h1>
<p class="note">This page plays a third-party service that controls switches on your hub through the installed-app API.</p>
{{if .Error}}<p class="error" role="alert" id="error">{{.Error}}</p>{{end}}
{{if .Connected}}
{{if .Flash}}<p class="flash" id="flash">{{.Flash}}</p>{{end}}
<p>Installed into <strong>{{.Location}}</strong>. Installation URI: <code>{{.URI}}</code></p>
<table id="switches">{{range .Switches}}
<tr><td>{{.Name}}</td><td class="{{if .Value}}{{.Value}}{{end}}" data-switch="{{.Name}}" data-id="{{.ID}}">{{if .Value}}{{.Value}}{{else}}unknown{{end}}</td></tr>{{end}}
</table>
<p class="note" id="live">Changes made elsewhere show here as they happen.</p>
<script src="/demo/live.js"></script>
<form method="post" action="/demo/command"><input type="hidden" name="csrf" value="{{.CSRF}}"><input type="hidden" name="command" value="on"><button id="all-on">Turn all on</button></form>
<form method="post" action="/demo/command"><input type="hidden" name="csrf" value="{{.CSRF}}"><input type="hidden" name="command" value="off"><button id="all-off">Turn all off</button></form>
<form method="post" action="/demo/disconnect"><input type="hidden" name="csrf" value="{{.CSRF}}"><button class="secondary">Disconnect</button></form>
{{else}}
<p>Not connected. Connecting sends you to the hub, where you log in, choose a location and tick the switches this service may control.</p>
<p><a class="button" id="connect" href="/demo/connect">Connect to my hub</a></p>
{{end}}
</main></body></html>`))

// events relays the installation's event stream to the page: the browser
// cannot send the bearer token, which stays with this client, as a real
// service would keep it on its server.
func (c *Client) events(w http.ResponseWriter, r *http.Request) {
	g := c.session(r)
	if g == nil {
		http.Error(w, "not connected", http.StatusUnauthorized)
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, g.uri+"/events", nil)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	req.Header.Set("Authorization", "Bearer "+g.token)
	if id := r.Header.Get("Last-Event-ID"); id != "" && len(id) < 100 {
		req.Header.Set("Last-Event-ID", id)
	}
	// Not c.http: its timeout would cut the stream.
	resp, err := streamClient.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		http.Error(w, "the hub answered "+resp.Status, http.StatusBadGateway)
		return
	}
	rc := http.NewResponseController(w)
	// A stream outlives the server's timeouts, which are for answers.
	rc.SetReadDeadline(time.Time{})
	rc.SetWriteDeadline(time.Time{})
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			rc.SetWriteDeadline(time.Now().Add(10 * time.Second))
			if _, werr := w.Write(buf[:n]); werr != nil || rc.Flush() != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

var streamClient = &http.Client{Transport: &http.Transport{ResponseHeaderTimeout: 30 * time.Second}}

// live serves the page's script: it follows /demo/events and updates the
// table.
func live(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	io.WriteString(w, liveJS)
}

const liveJS = `'use strict';
(function () {
  const es = new EventSource('/demo/events');
  function show(id, value) {
    const td = document.querySelector('td[data-id="' + CSS.escape(id) + '"]');
    if (!td) return;
    td.textContent = value || 'unknown';
    td.className = value || '';
  }
  es.addEventListener('snapshot', (e) => {
    for (const s of JSON.parse(e.data)) show(s.id, s.value);
  });
  es.addEventListener('switch', (e) => {
    const s = JSON.parse(e.data);
    show(s.id, s.value);
  });
})();
`

func randomString() string {
	// The hub's secret generator is the right one; a demo client has its
	// own copy of the idea so it depends on nothing of the hub's.
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return fmt.Sprintf("%x", b[:])
}
