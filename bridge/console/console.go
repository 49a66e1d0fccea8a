// Package console is the owner's console: web pages at /console/ where an
// owner of the hub sees its switches, adopts its plugs, and manages its
// users, apps, installations, hubs and webhooks from a browser (a phone on
// the home Wi-Fi) instead of a shell. This package is the console itself
// and the pages of a hub (switches, devices, webhooks, audit log, health);
// a platform adds the pages of its records (bridge/platform/adminpages).
// Each action is the command line's: it goes through the same admin
// service or the same switchboard, with the same rules and limits; the
// console adds only pages and forms.
//
// Who may use it, a Gate says: on a platform (a single box too) the OAuth
// pages' login (sessions, device cookies, login throttling), and only
// owners (a user with the owner role: switchbridge user owner NAME on);
// everyone else gets 403. A page that shows a secret asks for the
// password again when it was last typed more than ReauthAfter ago. Pages
// are server-rendered html/template, embedded, and work with scripts
// off; one small script of its own (static/console.js) adds live values
// and confirmations. Every answer carries a Content-Security-Policy
// without inline script or style, and every POST needs the session's
// CSRF token and this origin.
package console

import (
	"bytes"
	"context"
	"crypto/subtle"
	"embed"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
)

// Path is where the console is served.
const Path = "/console/"

// SafeNext is next when it is a path of the console, the console's first
// page otherwise: a login or sign-in that comes back to next cannot send
// anyone elsewhere (a URL of another host, "//host", a backslash a
// browser reads as a slash).
func SafeNext(next string) string {
	if !strings.HasPrefix(next, Path) || strings.ContainsAny(next, "\\\r\n\t") || strings.Contains(next, "//") || len(next) > 512 {
		return Path
	}
	return next
}

// ReauthAfter is how long after the owner last typed their password a
// page may show a secret (an app's or a hub's, a plug login's password)
// without asking for it again.
const ReauthAfter = 5 * time.Minute

// Visitor is the logged-in user of a console request.
type Visitor struct {
	User *bridge.User
	// CSRF is the token the session's forms carry.
	CSRF string
	// PasswordAt is when the user last typed their password into this
	// session.
	PasswordAt time.Time
}

// Gate is who may use the console: a platform's *oauth.Server.
type Gate interface {
	// Visitor is the request's logged-in user, nil when none.
	Visitor(r *http.Request) (*Visitor, error)
	// Login answers with the login form, which comes back to next (a
	// console path); with v set, it asks v's user for their password
	// again, after which v's PasswordAt is now. msg, when set, says what
	// went wrong.
	Login(w http.ResponseWriter, r *http.Request, next string, v *Visitor, msg string)
	// SetNotice leaves a message for the next page (notice: something
	// done; else something that went wrong); TakeNotice reads and clears
	// it.
	SetNotice(w http.ResponseWriter, r *http.Request, msg string, notice bool)
	TakeNotice(w http.ResponseWriter, r *http.Request) (msg string, notice bool)
	// Logout ends v's login (the console's form has been checked).
	Logout(w http.ResponseWriter, r *http.Request, v *Visitor) error
}

// Options is what a Console is built with. Gate and PublicURL are
// required.
type Options struct {
	Gate Gate
	// PublicURL is the address browsers reach this process at: a POST
	// from any other origin is refused.
	PublicURL string
	// Hub is this process's own hub: its switches and their changes,
	// webhooks, audit log and discovered devices. Nil on a platform that
	// drives no switches.
	Hub *Hub
	// Health says how this process is; nil shows only the version.
	Health func(ctx context.Context) []HealthItem
	Logger *slog.Logger
	// Observe, when set, counts each action: what (such as "user_add",
	// "switch_on") and its result ("ok", "refused", "failed", "asked").
	Observe func(action, result string)
	// Now is the clock of the re-authentication rule; time.Now when nil.
	Now func() time.Time
}

// HealthItem is one line of the overview: a name, what it says, and
// whether it needs the owner's attention.
type HealthItem struct {
	Name, Value string
	Problem     bool
}

// Console serves the owner's pages.
type Console struct {
	opts   Options
	logger *slog.Logger
	origin string // scheme://host[:port] of PublicURL
	menu   []MenuItem
	live   liveStreams // the switches page's event streams
}

// MenuItem is an entry of the console's menu.
type MenuItem struct {
	Key, Label string
}

// New builds the console with the hub's pages when o.Hub is set.
func New(o Options) *Console {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	c := &Console{opts: o, logger: o.Logger}
	if u, err := url.Parse(o.PublicURL); err == nil && u.Host != "" {
		c.origin = strings.ToLower(u.Scheme + "://" + u.Host)
	}
	c.menu = []MenuItem{{"", "Overview"}}
	return c
}

//go:embed pages/*.html
var pageFiles embed.FS

//go:embed static
var staticFiles embed.FS

// funcs are the helpers every page may use.
var funcs = template.FuncMap{"when": When}

// ParsePages parses each page of fsys matching glob with the console's
// layout, by its file name without .html. A page defines "content".
func ParsePages(fsys fs.FS, glob string) map[string]*template.Template {
	names, err := fs.Glob(fsys, glob)
	if err != nil {
		panic(err)
	}
	out := map[string]*template.Template{}
	for _, n := range names {
		name := strings.TrimSuffix(n[strings.LastIndex(n, "/")+1:], ".html")
		if name == "layout" {
			continue
		}
		t := template.Must(template.New(name).Funcs(funcs).ParseFS(pageFiles, "pages/layout.html"))
		out[name] = template.Must(t.ParseFS(fsys, n))
	}
	return out
}

// templates are this package's pages, parsed at the first page served: a
// hub whose owner never opens the console keeps none of them.
var templates = sync.OnceValue(func() map[string]*template.Template { return ParsePages(pageFiles, "pages/*.html") })

// When is how a page shows a time: in the hub's time zone, "never" for
// none.
func When(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.Local().Format("2 Jan 2006 15:04:05")
}

// Register adds the console's routes to mux: its overview, its static
// files, and the hub's pages when it has a hub. Others add theirs with
// Handle and AddMenu.
func (c *Console) Register(mux *http.ServeMux) {
	static, _ := fs.Sub(staticFiles, "static")
	files := http.StripPrefix(Path+"static/", http.FileServerFS(static))
	mux.Handle("GET "+Path+"static/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		Headers(w)
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	}))
	c.Handle(mux, Path, func(q *Request) {
		c.ErrorPage(q.W, q.R, q.V, http.StatusNotFound, "There is no such page in the console.")
	})
	c.Handle(mux, "GET "+Path+"{$}", c.overview)
	c.Handle(mux, "POST "+Path+"logout", c.logout)
	if c.opts.Hub != nil {
		c.registerHub(mux)
	}
}

// logout ends the owner's login and says so: a page, not the login form
// at once, since a hub's console would sign an owner still logged in at
// the platform straight back in.
func (c *Console) logout(q *Request) {
	if err := c.opts.Gate.Logout(q.W, q.R, q.V); err != nil {
		c.Failed(q.W, q.R, err)
		return
	}
	c.Log(q, "logout", q.V.User.Name, nil)
	var buf bytes.Buffer
	if err := templates()["loggedout"].ExecuteTemplate(&buf, "layout", View{Title: "Logged out"}); err != nil {
		c.Failed(q.W, q.R, err)
		return
	}
	q.W.Header().Set("Content-Type", "text/html; charset=utf-8")
	q.W.Write(buf.Bytes())
}

// AddMenu adds an entry to the menu, for the page at Path+key.
func (c *Console) AddMenu(key, label string) { c.menu = append(c.menu, MenuItem{key, label}) }

// Headers are every console answer's: a page may load its own script and
// stylesheet and talk to its own origin, and nothing else; it is never
// framed, never cached, never sniffed, and tells no other site where its
// links came from (same-origin: a form sent to the console itself still
// carries its Origin, which no-referrer would make "null").
func Headers(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "+
		"form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
}

// Request is one console request of a logged-in owner.
type Request struct {
	W http.ResponseWriter
	R *http.Request
	V *Visitor
	// Form is a POST's body, read and checked (size, CSRF, origin).
	Form url.Values
}

// Ctx is the request's context.
func (q *Request) Ctx() context.Context { return q.R.Context() }

// Handle adds a console page to mux at pattern: h runs for a logged-in
// owner (anyone else gets the login form, or 403), with the security
// headers set, and for a POST only with a bounded form from this origin
// carrying the session's CSRF token.
func (c *Console) Handle(mux *http.ServeMux, pattern string, h func(q *Request)) {
	mux.Handle(pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		Headers(w)
		v, err := c.opts.Gate.Visitor(r)
		if err != nil {
			c.Failed(w, r, err)
			return
		}
		if v == nil {
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				c.observe("console", "refused")
				c.ErrorPage(w, r, nil, http.StatusForbidden, "Your login has ended. Log in again, then repeat what you did.")
				return
			}
			c.opts.Gate.Login(w, r, r.URL.RequestURI(), nil, "")
			return
		}
		if !v.User.Owner {
			c.observe("console", "refused")
			c.logger.Warn("console refused: not an owner", "user", v.User.Name, "path", bridge.Untrusted(r.URL.Path))
			c.ErrorPage(w, r, nil, http.StatusForbidden, "The console is for the hub's owners, and "+v.User.Name+
				" is not one. An owner can make you one (switchbridge user owner "+v.User.Name+" on).")
			return
		}
		q := &Request{W: w, R: r, V: v}
		if r.Method == http.MethodPost {
			if !c.sameOrigin(r) {
				c.observe("console", "refused")
				c.logger.Warn("console refused a form from another origin", "user", v.User.Name, "origin", bridge.Untrusted(r.Header.Get("Origin")))
				c.ErrorPage(w, r, v, http.StatusForbidden, "This form was not sent by a page of this hub.")
				return
			}
			f, err := readForm(w, r)
			if err != nil {
				c.ErrorPage(w, r, v, http.StatusBadRequest, "The form could not be read: "+bridge.ErrorMessage(err))
				return
			}
			if !csrfOK(v, f.Get("csrf")) {
				c.observe("console", "refused")
				c.ErrorPage(w, r, v, http.StatusForbidden, "This form has expired or was not sent by this page. Reload the page and try again.")
				return
			}
			q.Form = f
		}
		h(q)
	}))
}

// sameOrigin reports whether a POST comes from a page of this hub: its
// Origin (or, without one, its Referer) must be the public URL's origin or
// that of the host the request was sent to. A browser sends Origin with
// every cross-origin POST; a request with neither header is no browser's
// cross-site form, and still needs the session's cookie and CSRF token.
func (c *Console) sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		ref := r.Header.Get("Referer")
		if ref == "" {
			return true
		}
		u, err := url.Parse(ref)
		if err != nil {
			return false
		}
		o = u.Scheme + "://" + u.Host
	}
	o = strings.ToLower(o)
	if c.origin != "" && o == c.origin {
		return true
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return o == strings.ToLower(scheme+"://"+r.Host)
}

func csrfOK(v *Visitor, presented string) bool {
	return v.CSRF != "" && presented != "" && len(presented) == len(v.CSRF) && subtleEqual(v.CSRF, presented)
}

// maxForm bounds a console form: a few short fields, or a redirect URI
// list.
const maxForm = 64 << 10

func readForm(w http.ResponseWriter, r *http.Request) (url.Values, error) {
	ct, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";")
	if strings.TrimSpace(strings.ToLower(ct)) != "application/x-www-form-urlencoded" {
		return nil, bridge.Errorf(bridge.EINVALID, "the body must be application/x-www-form-urlencoded")
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		return nil, bridge.Errorf(bridge.EINVALID, "the body is not a valid form of at most %d bytes", maxForm)
	}
	return r.PostForm, nil
}

// Reauthenticated reports whether the owner typed their password within
// ReauthAfter; if not, it answers with the form that asks for it, which
// comes back to back (a GET page of the console) afterwards.
func (c *Console) Reauthenticated(q *Request, back string) bool {
	if c.opts.Now().Sub(q.V.PasswordAt) < ReauthAfter {
		return true
	}
	c.observe("reauth", "asked")
	c.opts.Gate.Login(q.W, q.R, back, q.V, "")
	return false
}

func (c *Console) observe(action, result string) {
	if c.opts.Observe != nil {
		c.opts.Observe(action, result)
	}
}

// Done logs and counts an owner's action, as the command line's are
// logged: who did what to which record, and how it ended; err nil is
// success. It leaves the message for the next page and sends the browser
// to back (POST, redirect, GET: a reload does not repeat it).
func (c *Console) Done(q *Request, back, action, target string, err error, ok string) {
	c.Log(q, action, target, err)
	if err != nil {
		c.opts.Gate.SetNotice(q.W, q.R, Message(err), false)
	} else {
		c.opts.Gate.SetNotice(q.W, q.R, ok, true)
	}
	http.Redirect(q.W, q.R, back, http.StatusSeeOther)
}

// Log logs and counts an action whose answer the caller writes itself
// (one that shows a secret once).
func (c *Console) Log(q *Request, action, target string, err error) {
	if err != nil {
		c.observe(action, Result(err))
		c.logger.Warn("console action failed", "user", q.V.User.Name, "action", action, "target", bridge.Untrusted(target), "err", err)
		return
	}
	c.observe(action, "ok")
	c.logger.Info("console action", "user", q.V.User.Name, "action", action, "target", bridge.Untrusted(target))
}

// Result is how an action that failed is counted: refused by a rule (the
// owner can fix the input), or failed (the hub could not).
func Result(err error) string {
	switch bridge.ErrorCode(err) {
	case bridge.EINVALID, bridge.ENOTFOUND, bridge.ECONFLICT, bridge.ETOOMANY, bridge.EFORBIDDEN, bridge.ENOTIMPLEMENTED:
		return "refused"
	}
	return "failed"
}

// Message is what a page says of a failed action: the rule's own words,
// or for anything else that the log has the reason.
func Message(err error) string {
	if Result(err) == "refused" {
		return bridge.ErrorMessage(err)
	}
	return "That did not work: " + bridge.ErrorMessage(err) + " (the hub's log has more)."
}

// View is what every page gets.
type View struct {
	Title  string
	Nav    string // the page's menu key
	Menu   []MenuItem
	User   *bridge.User
	CSRF   string
	Notice string
	Error  string
	Data   any
	// Secrets are shown once, on the answer of the action that made
	// them.
	Secrets []Secret
}

// Secret is a secret a page shows once.
type Secret struct {
	Name, Value string
}

// View is the View of a page of q: its title, menu key and data, and
// the message the previous page left.
func (c *Console) View(q *Request, title, nav string, data any) View {
	d := View{Title: title, Nav: nav, Menu: c.menu, User: q.V.User, CSRF: q.V.CSRF, Data: data}
	if msg, notice := c.opts.Gate.TakeNotice(q.W, q.R); notice {
		d.Notice = msg
	} else {
		d.Error = msg
	}
	return d
}

// Render answers with page t (one of ParsePages').
func (c *Console) Render(q *Request, status int, t *template.Template, d View) {
	var buf bytes.Buffer
	if t == nil {
		c.Failed(q.W, q.R, bridge.Errorf(bridge.EINTERNAL, "no such console page"))
		return
	}
	if err := t.ExecuteTemplate(&buf, "layout", d); err != nil {
		c.Failed(q.W, q.R, err)
		return
	}
	q.W.Header().Set("Content-Type", "text/html; charset=utf-8")
	q.W.WriteHeader(status)
	q.W.Write(buf.Bytes())
}

// ErrorPage answers with a page that says what went wrong; v may be nil
// (no menu then).
func (c *Console) ErrorPage(w http.ResponseWriter, r *http.Request, v *Visitor, status int, msg string) {
	d := View{Title: http.StatusText(status), Error: msg}
	if v != nil && v.User.Owner {
		d.User, d.CSRF, d.Menu = v.User, v.CSRF, c.menu
	}
	var buf bytes.Buffer
	if err := templates()["error"].ExecuteTemplate(&buf, "layout", d); err != nil {
		http.Error(w, msg, status)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// Failed answers a request the hub could not serve, the reason in the
// log.
func (c *Console) Failed(w http.ResponseWriter, r *http.Request, err error) {
	c.logger.Error("console request failed", "path", bridge.Untrusted(r.URL.Path), "err", err)
	status := http.StatusInternalServerError
	if bridge.ErrorCode(err) == bridge.EUNAVAILABLE {
		status = http.StatusServiceUnavailable
	}
	c.ErrorPage(w, r, nil, status, "Something went wrong on the hub. Try again; if it keeps failing, the hub's log says why.")
}

func subtleEqual(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }
