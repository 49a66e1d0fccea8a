package adminpages

// The hubs page: the platform's hubs with their link state, as
// switchbridge hub list shows them; add one or rotate its secret (each
// secret shown once, after the password typed within
// console.ReauthAfter), remove one with what was installed in its
// locations.

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/console"
	"github.com/switchbridge/switchbridge/bridge/platform/admin"
)

func (p *Pages) registerHubs(mux *http.ServeMux) {
	p.c.AddMenu("hubs", "Hubs")
	p.c.Handle(mux, "GET "+console.Path+"hubs", p.hubs)
	p.c.Handle(mux, "POST "+console.Path+"hubs/add", p.addHub)
	p.c.Handle(mux, "POST "+console.Path+"hubs/rotate", p.rotateHubSecret)
	p.c.Handle(mux, "POST "+console.Path+"hubs/remove", p.removeHub)
}

const hubsPath = console.Path + "hubs"

// hubSecretHint is what the owner does with a hub's new secret, as
// hub add says it.
const hubSecretHint = "On the hub, write it to platform.secret_file and reload it: systemctl reload switchbridge."

type hubRow struct {
	admin.HubState
	Locations string
	// Installations is how many installations its locations hold, as
	// text: what removing it ends.
	Installations string
}

type hubsView struct {
	Hubs []hubRow
}

func (p *Pages) hubs(q *console.Request) { p.renderHubs(q, "", nil) }

// renderHubs answers with the hubs page, with a notice and the secret of
// the action that just made it, shown this once.
func (p *Pages) renderHubs(q *console.Request, notice string, secrets []console.Secret) {
	ctx := q.Ctx()
	states, err := p.opts.Admin.HubStates(ctx, time.Now())
	if err != nil {
		p.c.Failed(q.W, q.R, err)
		return
	}
	ins, err := p.opts.Admin.Store.FindInstallations(ctx, bridge.InstallationFilter{})
	if err != nil {
		p.c.Failed(q.W, q.R, err)
		return
	}
	perLocation := map[int64]int{}
	for _, in := range ins {
		perLocation[in.LocationID]++
	}
	var v hubsView
	for _, st := range states {
		var locs []string
		n := 0
		for _, l := range st.RegisteredHub.Locations {
			locs = append(locs, l.Name+" ("+strconv.FormatInt(l.ID, 10)+")")
			n += perLocation[l.ID]
		}
		v.Hubs = append(v.Hubs, hubRow{HubState: st, Locations: strings.Join(locs, ", "), Installations: plural(n, "installation")})
	}
	view := p.c.View(q, "Hubs", "hubs", v)
	if notice != "" {
		view.Notice, view.Error = notice, ""
	}
	view.Secrets = secrets
	p.c.Render(q, http.StatusOK, templates()["hubs"], view)
}

func (p *Pages) addHub(q *console.Request) {
	if !p.c.Reauthenticated(q, hubsPath) {
		return
	}
	name := strings.TrimSpace(q.Form.Get("name"))
	h, secret, err := p.opts.Admin.AddHub(q.Ctx(), name, strings.TrimSpace(q.Form.Get("base_url")))
	if err != nil {
		p.c.Done(q, hubsPath, "hub_add", name, err, "")
		return
	}
	p.c.Log(q, "hub_add", name+" ("+h.ID+")", nil)
	p.renderHubs(q, "Added hub "+h.Name+" as "+h.ID+". Its secret is shown only now; it is stored hashed. "+hubSecretHint,
		[]console.Secret{{Name: "Secret of hub " + h.Name + " (" + h.ID + ")", Value: secret}})
}

func (p *Pages) rotateHubSecret(q *console.Request) {
	if !p.c.Reauthenticated(q, hubsPath) {
		return
	}
	id := q.Form.Get("id")
	h, err := p.opts.Admin.Store.Hub(q.Ctx(), id)
	var secret string
	if err == nil {
		secret, err = p.opts.Admin.RotateHubSecret(q.Ctx(), id)
	}
	if err != nil {
		p.c.Done(q, hubsPath, "hub_rotate_secret", id, err, "")
		return
	}
	p.c.Log(q, "hub_rotate_secret", id, nil)
	p.renderHubs(q, "The old secret of hub "+h.Name+" no longer works; the new one is shown only now. "+hubSecretHint,
		[]console.Secret{{Name: "New secret of hub " + h.Name + " (" + id + ")", Value: secret}})
}

func (p *Pages) removeHub(q *console.Request) {
	id := q.Form.Get("id")
	h, err := p.opts.Admin.Store.Hub(q.Ctx(), id)
	var n int
	if err == nil {
		n, err = p.opts.Admin.Store.RemoveHub(q.Ctx(), id)
	}
	msg := ""
	if h != nil {
		msg = "Removed hub " + h.Name + " (" + id + "); " + plural(n, "installation") + " in its locations uninstalled."
	}
	p.c.Done(q, hubsPath, "hub_remove", id, err, msg)
}
