package adminpages

// A hub of this platform keeps no users: its console sends an owner's
// browser here to sign in (bridge/hub/hubconsole). Once an owner is
// logged in at the platform (and, when the hub asks, has typed their
// password within console.ReauthAfter), the browser goes back to the
// hub's registered base URL, never to one the request names, with a code
// the hub redeems over its link.

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/console"
)

// SignInCallback is the path of a hub's console that takes the code.
const SignInCallback = console.Path + "signin/callback"

func (p *Pages) registerSignIn(mux *http.ServeMux) {
	p.c.Handle(mux, "GET "+console.Path+"signin", p.signIn)
}

func (p *Pages) signIn(q *console.Request) {
	if p.opts.SignIn == nil {
		p.c.ErrorPage(q.W, q.R, q.V, http.StatusNotFound, "This platform signs no one in to a hub's console.")
		return
	}
	in := q.R.URL.Query()
	state, next := in.Get("state"), in.Get("next")
	if state == "" || len(state) > 128 || len(next) > 512 {
		p.c.ErrorPage(q.W, q.R, q.V, http.StatusBadRequest, "This sign-in link is not one a hub's console made.")
		return
	}
	h, err := p.opts.Admin.Store.Hub(q.Ctx(), in.Get("hub"))
	if bridge.ErrorCode(err) == bridge.ENOTFOUND {
		p.c.ErrorPage(q.W, q.R, q.V, http.StatusNotFound, "No hub of this platform has that id.")
		return
	}
	if err != nil {
		p.c.Failed(q.W, q.R, err)
		return
	}
	if in.Get("reauth") == "1" && !p.c.Reauthenticated(q, q.R.URL.RequestURI()) {
		return
	}
	code, err := p.opts.SignIn(q.Ctx(), h.ID, q.V)
	if err != nil {
		p.c.Failed(q.W, q.R, err)
		return
	}
	p.c.Log(q, "hub_console_signin", h.Name, nil)
	back := url.Values{"code": {code}, "state": {state}, "next": {next}}
	http.Redirect(q.W, q.R, strings.TrimRight(h.BaseURL, "/")+SignInCallback+"?"+back.Encode(), http.StatusSeeOther)
}
