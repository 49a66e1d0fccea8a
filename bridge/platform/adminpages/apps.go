package adminpages

// The apps page: the registered apps (never their secrets); create one,
// its client secret shown once; publish or unpublish, legacy on or off,
// rotate the secret (shown once), delete. The same rules and words as
// switchbridge app …, through admin.Service. Creating an app or rotating
// its secret shows a secret, so it needs the password typed within
// console.ReauthAfter.

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/console"
	"github.com/switchbridge/switchbridge/bridge/platform/admin"
)

func (p *Pages) registerApps(mux *http.ServeMux) {
	p.c.AddMenu("apps", "Apps")
	p.c.Handle(mux, "GET "+console.Path+"apps", p.apps)
	p.c.Handle(mux, "POST "+console.Path+"apps/create", p.createApp)
	p.c.Handle(mux, "POST "+console.Path+"apps/publish", p.publishApp)
	p.c.Handle(mux, "POST "+console.Path+"apps/legacy", p.appLegacy)
	p.c.Handle(mux, "POST "+console.Path+"apps/rotate", p.rotateAppSecret)
	p.c.Handle(mux, "POST "+console.Path+"apps/delete", p.deleteApp)
}

const appsPath = console.Path + "apps"

// legacyWarning is said whenever an app's legacy mode is turned on, as
// the command line says it.
const legacyWarning = "Legacy: this app's access tokens are accepted in the query string, where proxies, browsers and logs keep them; use it only for clients that cannot send Authorization: Bearer."

type appRow struct {
	*bridge.App
	Owner string
	// Lifetime is its access tokens' lifetime, "default" for the
	// platform's oauth.token_lifetime.
	Lifetime string
	// Installations is how many installations of it there are, as
	// text: what deleting it ends.
	Installations string
}

type appsView struct {
	Apps  []appRow
	Users []*bridge.User
	// Me is the owner using the console, the new app's owner unless
	// another is chosen.
	Me string
}

func (p *Pages) apps(q *console.Request) { p.renderApps(q, "", nil) }

// renderApps answers with the apps page, with a notice and the secrets
// of the action that just made them, shown this once.
func (p *Pages) renderApps(q *console.Request, notice string, secrets []console.Secret) {
	ctx := q.Ctx()
	st := p.opts.Admin.Store
	apps, err := st.Apps(ctx)
	if err != nil {
		p.c.Failed(q.W, q.R, err)
		return
	}
	users, err := st.Users(ctx)
	if err != nil {
		p.c.Failed(q.W, q.R, err)
		return
	}
	ins, err := st.FindInstallations(ctx, bridge.InstallationFilter{})
	if err != nil {
		p.c.Failed(q.W, q.R, err)
		return
	}
	count := map[string]int{}
	for _, in := range ins {
		count[in.ClientID]++
	}
	names := map[int64]string{}
	for _, u := range users {
		names[u.ID] = u.Name
	}
	v := appsView{Users: users, Me: q.V.User.Name}
	for _, a := range apps {
		r := appRow{App: a, Owner: names[a.OwnerID], Lifetime: "default", Installations: plural(count[a.ClientID], "installation")}
		if r.Owner == "" {
			r.Owner = "user " + strconv.FormatInt(a.OwnerID, 10)
		}
		if a.AccessTokenLifetime > 0 {
			r.Lifetime = a.AccessTokenLifetime.String()
		}
		v.Apps = append(v.Apps, r)
	}
	view := p.c.View(q, "Apps", "apps", v)
	if notice != "" {
		view.Notice, view.Error = notice, ""
	}
	view.Secrets = secrets
	p.c.Render(q, http.StatusOK, templates()["apps"], view)
}

// redirectURIList reads the redirect URIs a form gives one per line.
func redirectURIList(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

func (p *Pages) createApp(q *console.Request) {
	if !p.c.Reauthenticated(q, appsPath) {
		return
	}
	name := strings.TrimSpace(q.Form.Get("name"))
	lifetime, err := admin.ParseLifetime(q.Form.Get("lifetime"))
	var app *bridge.App
	var secret string
	if err == nil {
		app, secret, err = p.opts.Admin.CreateApp(q.Ctx(), admin.AppSpec{
			Name: name, RedirectURIs: redirectURIList(q.Form.Get("redirect_uris")), Owner: q.Form.Get("owner"),
			Published: q.Form.Get("published") == "on", RequirePKCE: q.Form.Get("require_pkce") == "on",
			Legacy: q.Form.Get("legacy") == "on", AccessTokenLifetime: lifetime,
		})
	}
	if err != nil {
		p.c.Done(q, appsPath, "app_create", name, err, "")
		return
	}
	p.c.Log(q, "app_create", name+" ("+app.ClientID+")", nil)
	msg := "Created " + app.Name + ": its client id is " + app.ClientID + ". The secret is shown only now; it is stored hashed."
	if app.Legacy {
		msg += " " + legacyWarning
	}
	p.renderApps(q, msg, []console.Secret{{Name: "Client secret of " + app.Name + " (" + app.ClientID + ")", Value: secret}})
}

// appNamed returns the app a form names by its client id, for the
// message of an action on it.
func (p *Pages) appNamed(q *console.Request) (*bridge.App, error) {
	return p.opts.Admin.Store.App(q.Ctx(), q.Form.Get("client_id"))
}

func (p *Pages) publishApp(q *console.Request) {
	id, on := q.Form.Get("client_id"), q.Form.Get("published") == "on"
	app, err := p.appNamed(q)
	if err == nil {
		err = p.opts.Admin.Store.SetAppPublished(q.Ctx(), id, on)
	}
	msg := ""
	if app != nil {
		msg = app.Name + " is published: every user may install it."
		if !on {
			msg = app.Name + " is unpublished: only its owner may install it; earlier installations keep working."
		}
	}
	p.c.Done(q, appsPath, "app_publish", id, err, msg)
}

func (p *Pages) appLegacy(q *console.Request) {
	id, on := q.Form.Get("client_id"), q.Form.Get("legacy") == "on"
	app, err := p.appNamed(q)
	if err == nil {
		// The running hub reads the flag at each request.
		err = p.opts.Admin.Store.SetAppLegacy(q.Ctx(), id, on)
	}
	msg := ""
	if app != nil {
		msg = app.Name + ": legacy off."
		if on {
			msg = app.Name + ": legacy on. " + legacyWarning
		}
	}
	p.c.Done(q, appsPath, "app_legacy", id, err, msg)
}

func (p *Pages) rotateAppSecret(q *console.Request) {
	if !p.c.Reauthenticated(q, appsPath) {
		return
	}
	id := q.Form.Get("client_id")
	app, err := p.appNamed(q)
	var secret string
	if err == nil {
		secret, err = p.opts.Admin.RotateAppSecret(q.Ctx(), id)
	}
	if err != nil {
		p.c.Done(q, appsPath, "app_rotate_secret", id, err, "")
		return
	}
	p.c.Log(q, "app_rotate_secret", id, nil)
	p.renderApps(q, "The old secret of "+app.Name+" no longer works; the new one is shown only now.",
		[]console.Secret{{Name: "New client secret of " + app.Name + " (" + id + ")", Value: secret}})
}

func (p *Pages) deleteApp(q *console.Request) {
	id := q.Form.Get("client_id")
	app, err := p.appNamed(q)
	var n int
	if err == nil {
		n, err = p.opts.Admin.DeleteApp(q.Ctx(), id)
	}
	msg := ""
	if app != nil {
		msg = "Deleted " + app.Name + " (" + id + "); " + plural(n, "installation") + " uninstalled, their tokens no longer work."
	}
	p.c.Done(q, appsPath, "app_delete", id, err, msg)
}

// plural is "1 installation", "2 installations".
func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}
