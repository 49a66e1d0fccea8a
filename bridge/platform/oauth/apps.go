package oauth

// The connected apps page: a logged-in user sees each installation they
// made (app, location, switches, when granted, when last used, its last
// actions from the audit log), removes one
// (its tokens stop working at once, discovery no longer lists it) or
// changes its switches.
//
// Changing switches goes through the hub's own consent page for that app
// and location, with the current switches ticked, and updates the same
// installation: same id, so the client's installation URI and its tokens
// keep working, now for the new selection. No authorization request is
// made and no code is sent: the hub cannot start an authorization on the
// client's behalf (it knows neither the client's state nor whether it
// waits for a code), and the client needs none, as its tokens follow the
// installation.
//
// The pages have the consent page's protections: a logged-in session,
// the session's CSRF token on every POST, no framing, no caching, and a
// 303 after every POST.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
)

// connectedView is one installation on the connected apps page.
type connectedView struct {
	ID       string
	AppName  string
	Location string
	Switches string // names, comma-separated
	SeeOnly  string // those of Switches the app may see but not switch
	Granted  string
	Changed  string // "" when the switches were never changed
	LastUsed string
	Webhooks []webhookView
	// Actions are the installation's last commands, newest first, one per
	// switch; ActionsElsewhere, when set, says where they are kept instead
	// (the hub that ran them), and Actions is then empty.
	Actions          []actionView
	ActionsElsewhere string
}

// actionView is one switch of one of an installation's commands, as the
// audit log recorded it.
type actionView struct {
	At, Switch, Command, Outcome string
	OK                           bool
}

// lastActions is how many of an installation's last actions the page
// shows: enough to see what an app did lately, not a log.
const lastActions = 5

// HubRecords is what this process, as the hub of its own locations, keeps
// of the installations it serves (Options.HubRecords): their webhooks and
// the commands they sent (the audit log, bridge.AuditRecord). The
// installations in a hub's location have theirs on that hub, not here.
type HubRecords interface {
	Webhooks(ctx context.Context, installationID string) ([]*bridge.Webhook, error)
	Audit(ctx context.Context, f bridge.AuditFilter) ([]bridge.AuditRecord, error)
}

// webhookView is one of an installation's webhooks as the page shows it.
type webhookView struct {
	URL, Status string
	Pending     int // deliveries waiting in the outbox
}

// grantLiver is a store that tells whether anyone holds a live token of
// an installation's grant: its webhooks are suspended otherwise.
type grantLiver interface {
	GrantLive(ctx context.Context, installationID string, now time.Time) (bool, error)
}

// registerApps adds the connected apps page's routes.
func (s *Server) registerApps(mux *http.ServeMux) {
	mux.HandleFunc("GET "+appsPage, s.handleApps)
	mux.HandleFunc("POST "+appsPage+"/remove", s.handleRemove)
	mux.HandleFunc("GET "+appsPage+"/switches", s.handleChangeForm)
	mux.HandleFunc("POST "+appsPage+"/switches", s.handleChangeSwitches)
}

// timeFormat is how the page shows times, in the hub's time zone.
const timeFormat = "2 Jan 2006 15:04"

// handleApps shows the user's installations, or the login form when no one
// is logged in.
func (s *Server) handleApps(w http.ResponseWriter, r *http.Request) {
	pageHeaders(w)
	secure := s.secure()
	id, sess, err := s.sessions.get(r, secure)
	if err != nil {
		s.internal(w, r, err)
		return
	}
	flash, notice := s.sessions.takeFlash(w, r, secure)
	if sess == nil {
		if notice {
			flash = ""
		}
		s.renderLogin(w, r, pageData{Error: flash})
		return
	}
	ctx := r.Context()
	user, err := s.sessionUser(ctx, sess)
	if bridge.ErrorCode(err) == bridge.ENOTFOUND {
		// The user was deleted, or changed their password, since.
		s.sessions.end(ctx, id)
		s.renderLogin(w, r, pageData{Error: "Please log in again."})
		return
	}
	if err != nil {
		s.internal(w, r, err)
		return
	}
	ins, err := s.connected.InstallationsOf(ctx, user.ID)
	if err != nil {
		s.internal(w, r, err)
		return
	}
	d := pageData{CSRF: sess.CSRF, User: user}
	if notice {
		d.Notice = flash
	} else {
		d.Error = flash
	}
	for _, in := range ins {
		v := connectedView{
			ID: in.ID, AppName: in.ClientID, Location: s.locationName(ctx, in.LocationID),
			Switches: s.switchNames(ctx, in.LocationID, in.SwitchIDs), SeeOnly: s.switchNames(ctx, in.LocationID, in.SeeOnly), Granted: in.CreatedAt.Local().Format(timeFormat), LastUsed: "never",
		}
		if a, err := s.apps.App(ctx, in.ClientID); err == nil {
			v.AppName = a.Name
		}
		if in.UpdatedAt.Sub(in.CreatedAt) >= time.Second {
			v.Changed = in.UpdatedAt.Local().Format(timeFormat)
		}
		if !in.LastUsedAt.IsZero() {
			v.LastUsed = in.LastUsedAt.Local().Format(timeFormat)
		}
		if err := s.addActions(ctx, &v, in); err != nil {
			s.internal(w, r, err)
			return
		}
		if hr := s.opts.HubRecords; hr != nil {
			ws, err := hr.Webhooks(ctx, in.ID)
			live := true
			if gl, ok := s.connected.(grantLiver); ok && err == nil && len(ws) > 0 {
				live, err = gl.GrantLive(ctx, in.ID, s.now())
			}
			if err != nil {
				s.internal(w, r, err)
				return
			}
			for _, hook := range ws {
				hook.Suspended = !live
				v.Webhooks = append(v.Webhooks, webhookView{URL: hook.URL, Status: hook.Status(), Pending: hook.Pending})
			}
		}
		d.Connected = append(d.Connected, v)
	}
	s.render(w, http.StatusOK, "apps", d)
}

// addActions adds an installation's last actions to its view: from this
// daemon's audit log, unless a hub of the platform holds the
// installation's location: that hub ran its commands and keeps their
// records, and the view says so rather than show none.
func (s *Server) addActions(ctx context.Context, v *connectedView, in *bridge.Installation) error {
	if _, own := s.hub.Location(in.LocationID); !own && s.opts.Hubs != nil {
		hl, ok, err := s.opts.Hubs.HubLocation(ctx, in.LocationID)
		if err != nil {
			s.logger.Warn("looking up a hub's location", "location", in.LocationID, "err", err)
		}
		if ok {
			v.ActionsElsewhere = hl.HubName
			return nil
		}
	}
	// Its own location, or one gone: what this daemon ran is here.
	if s.opts.HubRecords == nil {
		return nil
	}
	recs, err := s.opts.HubRecords.Audit(ctx, bridge.AuditFilter{InstallationID: in.ID, Limit: lastActions})
	if err != nil {
		return err
	}
	for _, r := range recs {
		v.Actions = append(v.Actions, actionView{At: r.At.Local().Format(actionTime), Switch: s.switchNames(ctx, in.LocationID, []string{r.SwitchID}),
			Command: string(r.Command), Outcome: bridge.OutcomeText(r.Outcome), OK: r.Outcome == bridge.OutcomeOK})
	}
	return nil
}

// actionTime is how the page shows an action's time: to the second, as
// commands come close together.
const actionTime = "2 Jan 2006 15:04:05"

// locationOf is a location as the consent page shows it, with the switches
// in checked ticked: one of this hub's or, on a platform, of its hubs'.
func (s *Server) locationOf(ctx context.Context, id int64, checked granted) (locationView, bool) {
	if l, ok := s.hub.Location(id); ok {
		return s.locationView(l, checked), true
	}
	if s.opts.Hubs != nil {
		hl, ok, err := s.opts.Hubs.HubLocation(ctx, id)
		if err != nil {
			s.logger.Warn("looking up a hub's location", "location", id, "err", err)
		}
		if ok {
			return remoteLocationView(hl, checked), true
		}
	}
	return locationView{}, false
}

func (s *Server) locationName(ctx context.Context, id int64) string {
	if l, ok := s.locationOf(ctx, id, granted{}); ok {
		return l.Name
	}
	return fmt.Sprintf("location %d (no longer on this hub)", id)
}

// switchNames names an installation's switches, by id where the location
// no longer has one.
func (s *Server) switchNames(ctx context.Context, locationID int64, ids []string) string {
	l, _ := s.locationOf(ctx, locationID, granted{})
	names := make([]string, len(ids))
	for i, id := range ids {
		names[i] = id
		for _, sw := range l.Switches {
			if sw.ID == id {
				names[i] = sw.Name
			}
		}
	}
	return strings.Join(names, ", ")
}

// appsForm is a POST of the connected apps page that passed the checks:
// a bounded form, a logged-in session and its CSRF token, and an
// installation of that session's user.
type appsForm struct {
	f    map[string][]string
	user *bridge.User
	in   *bridge.Installation
	app  *bridge.App
}

// readAppsForm runs those checks and answers the request itself when one
// fails (ok false).
func (s *Server) readAppsForm(w http.ResponseWriter, r *http.Request) (p appsForm, ok bool) {
	pageHeaders(w)
	f, err := readForm(w, r)
	if err != nil {
		s.errorPage(w, http.StatusBadRequest, "The form could not be read: "+err.Error())
		return p, false
	}
	_, sess, err := s.sessions.get(r, s.secure())
	if err != nil {
		s.internal(w, r, err)
		return p, false
	}
	if !csrfOK(sess, f.Get("csrf")) {
		s.errorPage(w, http.StatusForbidden, "This form has expired or was not sent by this page. Open your connected apps again.")
		return p, false
	}
	user, in, app, ok := s.ownInstallation(w, r, sess, f.Get("installation"))
	if !ok {
		return p, false
	}
	return appsForm{f: f, user: user, in: in, app: app}, true
}

// ownInstallation looks up an installation of the session's user; anything
// else (another user's, a removed one, garbage) is "not connected", so the
// page tells no one whose installations exist.
func (s *Server) ownInstallation(w http.ResponseWriter, r *http.Request, sess *bridge.LoginSession, id string) (*bridge.User, *bridge.Installation, *bridge.App, bool) {
	ctx := r.Context()
	user, err := s.sessionUser(ctx, sess)
	if err != nil {
		s.sessions.setFlash(r.Context(), w, "Please log in again.", s.secure())
		http.Redirect(w, r, appsPage, http.StatusSeeOther)
		return nil, nil, nil, false
	}
	var in *bridge.Installation
	if len(id) <= maxParamLen {
		in, err = s.connected.Installation(ctx, id)
	}
	if in == nil || in.UserID != user.ID {
		if err != nil && bridge.ErrorCode(err) != bridge.ENOTFOUND {
			s.internal(w, r, err)
			return nil, nil, nil, false
		}
		s.sessions.setFlash(r.Context(), w, "That app is not connected (any more).", s.secure())
		http.Redirect(w, r, appsPage, http.StatusSeeOther)
		return nil, nil, nil, false
	}
	app, err := s.apps.App(ctx, in.ClientID)
	if err != nil {
		s.internal(w, r, err)
		return nil, nil, nil, false
	}
	return user, in, app, true
}

// handleRemove uninstalls one of the user's installations.
func (s *Server) handleRemove(w http.ResponseWriter, r *http.Request) {
	p, ok := s.readAppsForm(w, r)
	if !ok {
		return
	}
	err := s.connected.Uninstall(r.Context(), p.in.ID)
	if err != nil && bridge.ErrorCode(err) != bridge.ENOTFOUND { // removed meanwhile: as asked
		s.internal(w, r, err)
		return
	}
	// The store moved the access generation; clearing here as well spares
	// this process's next requests the look at it.
	s.check.Forget()
	s.logger.Info("app removed by its user", "client_id", p.in.ClientID, "installation", p.in.ID, "user", p.user.Name, "location", p.in.LocationID)
	s.sessions.setNotice(r.Context(), w, fmt.Sprintf("%s is removed from %s: its access ended.", p.app.Name, s.locationName(r.Context(), p.in.LocationID)), s.secure())
	http.Redirect(w, r, appsPage, http.StatusSeeOther)
}

// handleChangeForm shows the consent page for an installation's app and
// location with its current switches ticked.
func (s *Server) handleChangeForm(w http.ResponseWriter, r *http.Request) {
	pageHeaders(w)
	secure := s.secure()
	_, sess, err := s.sessions.get(r, secure)
	if err != nil {
		s.internal(w, r, err)
		return
	}
	if sess == nil {
		http.Redirect(w, r, appsPage, http.StatusSeeOther) // its login form
		return
	}
	user, in, app, ok := s.ownInstallation(w, r, sess, r.URL.Query().Get("installation"))
	if !ok {
		return
	}
	flash, notice := s.sessions.takeFlash(w, r, secure)
	if notice {
		flash = ""
	}
	v, ok := s.locationOf(r.Context(), in.LocationID, grantedOf(in))
	if !ok || !user.MemberOf(in.LocationID) {
		s.sessions.setFlash(r.Context(), w, fmt.Sprintf("The switches of %s cannot be changed: you no longer have %s. Remove it instead.", app.Name, s.locationName(r.Context(), in.LocationID)), secure)
		http.Redirect(w, r, appsPage, http.StatusSeeOther)
		return
	}
	s.render(w, http.StatusOK, "change", pageData{App: app, CSRF: sess.CSRF, Error: flash, User: user,
		Locations: []locationView{v}, Installation: in.ID})
}

// handleChangeSwitches updates an installation with the switches ticked,
// under the install rules, keeping its id.
func (s *Server) handleChangeSwitches(w http.ResponseWriter, r *http.Request) {
	p, ok := s.readAppsForm(w, r)
	if !ok {
		return
	}
	in, err := s.Issuer.Install(r.Context(), InstallRequest{App: p.app, User: p.user, LocationID: p.in.LocationID, SwitchIDs: p.f["switch"], SeeOnly: seeOnlyPicked(p.f)})
	if errors.Is(err, ErrNotInstallable) {
		s.sessions.setFlash(r.Context(), w, fmt.Sprintf("%s is no longer published, so its switches cannot be changed. Remove it, or keep it as it is.", p.app.Name), s.secure())
		http.Redirect(w, r, appsPage, http.StatusSeeOther)
		return
	}
	if msg := s.refusal(err, p.in.LocationID); msg != "" {
		s.sessions.setFlash(r.Context(), w, msg, s.secure())
		http.Redirect(w, r, appsPage+"/switches?installation="+p.in.ID, http.StatusSeeOther)
		return
	}
	if err != nil {
		s.internal(w, r, err)
		return
	}
	if in.ID != p.in.ID {
		// Install updates the installation of this app, user and
		// location; another id would mean the rows changed under us.
		s.internal(w, r, fmt.Errorf("changing the switches of installation %s made installation %s", p.in.ID, in.ID))
		return
	}
	s.check.Forget()
	s.logger.Info("switches of an app changed by its user", "client_id", in.ClientID, "installation", in.ID, "user", p.user.Name,
		"location", in.LocationID, "switches", len(in.SwitchIDs))
	notice := fmt.Sprintf("%s now controls %s in %s.", p.app.Name, s.switchNames(r.Context(), in.LocationID, in.SwitchIDs), s.locationName(r.Context(), in.LocationID))
	if len(in.SeeOnly) > 0 {
		notice += fmt.Sprintf(" It may see but not switch %s.", s.switchNames(r.Context(), in.LocationID, in.SeeOnly))
	}
	s.sessions.setNotice(r.Context(), w, notice, s.secure())
	http.Redirect(w, r, appsPage, http.StatusSeeOther)
}

// connectedSwitches is the switches the user's current installation of
// app has in each location, for ticking them on the consent page.
func (s *Server) connectedSwitches(ctx context.Context, userID int64, clientID string) map[int64]granted {
	ins, err := s.connected.InstallationsOf(ctx, userID)
	if err != nil {
		s.logger.Warn("reading the user's installations for the consent page", "err", err)
		return nil
	}
	out := map[int64]granted{}
	for _, in := range ins {
		if in.ClientID == clientID {
			out[in.LocationID] = grantedOf(in)
		}
	}
	return out
}
