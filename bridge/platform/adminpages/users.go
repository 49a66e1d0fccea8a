package adminpages

// The users page: who may log in and install apps, in which locations,
// and who is an owner; add, set a password, make or unmake an owner,
// delete. The same rules as switchbridge user …, through admin.Service.

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/console"
	"github.com/switchbridge/switchbridge/bridge/platform/admin"
)

func (p *Pages) registerUsers(mux *http.ServeMux) {
	p.c.AddMenu("users", "Users")
	p.c.Handle(mux, "GET "+console.Path+"users", p.users)
	p.c.Handle(mux, "POST "+console.Path+"users/add", p.addUser)
	p.c.Handle(mux, "POST "+console.Path+"users/password", p.setPassword)
	p.c.Handle(mux, "POST "+console.Path+"users/owner", p.setOwner)
	p.c.Handle(mux, "POST "+console.Path+"users/delete", p.deleteUser)
}

type userRow struct {
	*bridge.User
	Locations string
}

type usersView struct {
	Users                    []userRow
	Locations                []locationChoice
	MinPassword, MaxPassword int
}

// locationChoice is a location a form offers.
type locationChoice struct {
	ID   int64
	Name string
	// Hub names the hub of the platform that holds it; "" for this
	// process's own.
	Hub string
}

// locations are the locations users may belong to: this process's own,
// then its hubs'.
func (p *Pages) locations(ctx context.Context) ([]locationChoice, error) {
	var out []locationChoice
	if p.opts.Own != nil {
		for _, l := range p.opts.Own.Locations() {
			out = append(out, locationChoice{ID: l.ID, Name: l.Name})
		}
	}
	if p.opts.Hubs != nil {
		hl, err := p.opts.Hubs.HubLocations(ctx)
		if err != nil {
			return nil, err
		}
		for _, l := range hl {
			out = append(out, locationChoice{ID: l.ID, Name: l.Name, Hub: l.HubName})
		}
	}
	return out, nil
}

// locationNames is a user's locations as the page shows them.
func locationNames(ids []int64, all []locationChoice) string {
	var names []string
	for _, id := range ids {
		name := "location " + strconv.FormatInt(id, 10)
		if i := slices.IndexFunc(all, func(l locationChoice) bool { return l.ID == id }); i >= 0 {
			name = all[i].Name + " (" + strconv.FormatInt(id, 10) + ")"
		}
		names = append(names, name)
	}
	return strings.Join(names, ", ")
}

func (p *Pages) users(q *console.Request) {
	ctx := q.Ctx()
	us, err := p.opts.Admin.Store.Users(ctx)
	if err != nil {
		p.c.Failed(q.W, q.R, err)
		return
	}
	locs, err := p.locations(ctx)
	if err != nil {
		p.c.Failed(q.W, q.R, err)
		return
	}
	v := usersView{Locations: locs, MinPassword: admin.MinPassword, MaxPassword: admin.MaxPassword}
	for _, u := range us {
		v.Users = append(v.Users, userRow{User: u, Locations: locationNames(u.Locations, locs)})
	}
	p.c.Render(q, http.StatusOK, templates()["users"], p.c.View(q, "Users", "users", v))
}

// formLocations reads the location ids a form checked.
func formLocations(vals []string) ([]int64, error) {
	var out []int64
	for _, v := range vals {
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, bridge.Errorf(bridge.EINVALID, "%q is not a location id", v)
		}
		out = append(out, id)
	}
	return out, nil
}

func (p *Pages) addUser(q *console.Request) {
	name := strings.TrimSpace(q.Form.Get("name"))
	locs, err := formLocations(q.Form["location"])
	if err == nil {
		_, err = p.opts.Admin.AddUser(q.Ctx(), name, q.Form.Get("password"), locs, q.Form.Get("owner") == "on")
	}
	p.c.Done(q, console.Path+"users", "user_add", name, err, "Added "+name+".")
}

func (p *Pages) setPassword(q *console.Request) {
	name := q.Form.Get("name")
	err := p.opts.Admin.SetPassword(q.Ctx(), name, q.Form.Get("password"))
	p.c.Done(q, console.Path+"users", "user_passwd", name, err, "Set a new password for "+name+"; their logins ended.")
}

func (p *Pages) setOwner(q *console.Request) {
	name, on := q.Form.Get("name"), q.Form.Get("owner") == "on"
	var err error
	if !on && name == q.V.User.Name {
		// The console would lock out the one using it; the command line
		// can still do it.
		err = bridge.Errorf(bridge.EINVALID, "you cannot remove your own owner role here: another owner can, or switchbridge user owner %s off", name)
	} else {
		err = p.opts.Admin.SetOwner(q.Ctx(), name, on)
	}
	msg := name + " is an owner now."
	if !on {
		msg = name + " is no longer an owner."
	}
	p.c.Done(q, console.Path+"users", "user_owner", name, err, msg)
}

func (p *Pages) deleteUser(q *console.Request) {
	name := q.Form.Get("name")
	var n int
	var err error
	if name == q.V.User.Name {
		err = bridge.Errorf(bridge.EINVALID, "you cannot delete yourself here: another owner can, or switchbridge user delete %s", name)
	} else {
		n, err = p.opts.Admin.DeleteUser(q.Ctx(), name)
	}
	p.c.Done(q, console.Path+"users", "user_delete", name, err, "Deleted "+name+" and "+strconv.Itoa(n)+" installation(s) of theirs.")
}
