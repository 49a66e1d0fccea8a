package adminpages

// The installations page: which app holds which switches of whose
// location, with which rights, and when it last reached the hub, filtered
// by app and user as switchbridge installation list --app --user; revoke
// one, or make a switch of one see-only or switchable again
// (installation see-only). Each write moves the store's access generation
// in its transaction, so the installation's tokens change at their next
// request, at this process and at every hub of the platform.

import (
	"net/http"
	"net/url"
	"slices"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/console"
)

func (p *Pages) registerInstallations(mux *http.ServeMux) {
	p.c.AddMenu("installations", "Installations")
	p.c.Handle(mux, "GET "+console.Path+"installations", p.installations)
	p.c.Handle(mux, "POST "+console.Path+"installations/revoke", p.revokeInstallation)
	p.c.Handle(mux, "POST "+console.Path+"installations/see-only", p.setSeeOnly)
	p.c.Handle(mux, "POST "+console.Path+"installations/switches", p.changeSwitches)
}

// grantedSwitch is one switch of an installation.
type grantedSwitch struct {
	ID      string
	SeeOnly bool
}

type installationRow struct {
	*bridge.Installation
	App, User, Location string
	Switches            []grantedSwitch
	// Choices are the switches of the installation's location, for the
	// form that changes which it grants.
	Choices []switchChoice
}

// switchChoice is a switch the change form offers.
type switchChoice struct {
	ID, Name         string
	Granted, SeeOnly bool
}

type installationsView struct {
	Installations []installationRow
	Apps          []*bridge.App
	Users         []*bridge.User
	// App and User are the filter: a client id and a user name, "" for
	// all.
	App, User string
}

// installationsBack is the installations page with the filter a form
// carries, where an action on it returns.
func installationsBack(f url.Values) string {
	q := url.Values{}
	for _, k := range []string{"app", "user"} {
		if v := f.Get(k); v != "" {
			q.Set(k, v)
		}
	}
	if len(q) == 0 {
		return console.Path + "installations"
	}
	return console.Path + "installations?" + q.Encode()
}

func (p *Pages) installations(q *console.Request) {
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
	locs, err := p.locations(ctx)
	if err != nil {
		p.c.Failed(q.W, q.R, err)
		return
	}
	v := installationsView{Apps: apps, Users: users, App: q.R.URL.Query().Get("app"), User: q.R.URL.Query().Get("user")}
	// The filter's rules are installation list's: a user or app that is
	// not there is said so, not shown as none installed.
	filter := bridge.InstallationFilter{ClientID: v.App}
	var problem error
	if v.User != "" {
		u, err := st.UserByName(ctx, v.User)
		if err != nil {
			problem = err
		} else {
			filter.UserID = u.ID
		}
	}
	if v.App != "" && problem == nil {
		if _, err := st.App(ctx, v.App); err != nil {
			problem = err
		}
	}
	var ins []*bridge.Installation
	if problem == nil {
		if ins, err = st.FindInstallations(ctx, filter); err != nil {
			p.c.Failed(q.W, q.R, err)
			return
		}
	}
	appNames, userNames := map[string]string{}, map[int64]string{}
	for _, a := range apps {
		appNames[a.ClientID] = a.Name
	}
	for _, u := range users {
		userNames[u.ID] = u.Name
	}
	for _, in := range ins {
		r := installationRow{Installation: in, App: appNames[in.ClientID], User: userNames[in.UserID],
			Location: locationNames([]int64{in.LocationID}, locs)}
		for _, id := range in.SwitchIDs {
			r.Switches = append(r.Switches, grantedSwitch{ID: id, SeeOnly: bridge.IsSeeOnly(in.SeeOnly, id)})
		}
		r.Choices = p.switchChoices(in)
		v.Installations = append(v.Installations, r)
	}
	view := p.c.View(q, "Installations", "installations", v)
	status := http.StatusOK
	if problem != nil {
		view.Error = console.Message(problem)
		if bridge.ErrorCode(problem) == bridge.ENOTFOUND {
			status = http.StatusNotFound
		}
	}
	p.c.Render(q, status, templates()["installations"], view)
}

func (p *Pages) revokeInstallation(q *console.Request) {
	id := q.Form.Get("id")
	err := p.opts.Admin.Store.Uninstall(q.Ctx(), id)
	p.c.Done(q, installationsBack(q.Form), "installation_delete", id, err, "Installation "+id+" deleted; its tokens no longer work.")
}

func (p *Pages) setSeeOnly(q *console.Request) {
	id, sw, mode := q.Form.Get("id"), q.Form.Get("switch"), q.Form.Get("see_only")
	var err error
	if mode != "on" && mode != "off" {
		err = bridge.Errorf(bridge.EINVALID, "see-only takes on or off, not %q", mode)
	} else {
		// The access generation moves with the write: this process, and a
		// hub of the platform through its replica, apply it at once.
		err = p.opts.Admin.Store.SetSeeOnly(q.Ctx(), id, sw, mode == "on")
	}
	msg := "Installation " + id + ": switch " + sw + " can be seen and switched."
	if mode == "on" {
		msg = "Installation " + id + ": switch " + sw + " is see-only; commands to it are refused."
	}
	p.c.Done(q, installationsBack(q.Form), "installation_see_only", id+" "+sw, err, msg)
}

// switchChoices are the switches of in's location, those it grants
// checked; none when the location is gone.
func (p *Pages) switchChoices(in *bridge.Installation) []switchChoice {
	loc, ok := p.opts.Admin.Locations.Location(in.LocationID)
	if !ok {
		return nil
	}
	var out []switchChoice
	for _, id := range loc.Switches {
		name := id
		if p.opts.Own != nil {
			if sw, ok := p.opts.Own.Switch(id); ok && sw.LocationID == in.LocationID {
				name = sw.Name
			}
		}
		out = append(out, switchChoice{ID: id, Name: name, Granted: slices.Contains(in.SwitchIDs, id), SeeOnly: bridge.IsSeeOnly(in.SeeOnly, id)})
	}
	return out
}

// changeSwitches changes which switches an installation grants, as its
// user could on the connected apps page (admin.Service.ChangeSwitches).
func (p *Pages) changeSwitches(q *console.Request) {
	id := q.Form.Get("id")
	_, err := p.opts.Admin.ChangeSwitches(q.Ctx(), id, q.Form["switch"], q.Form["see_only"])
	p.c.Done(q, installationsBack(q.Form), "installation_switches", id, err, "Changed the switches installation "+id+" grants.")
}
