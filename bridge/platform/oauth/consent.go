package oauth

// Consent: the page that lists the user's locations and switches, and
// the POST that installs the app and sends a code back to the client.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/switchbridge/switchbridge/bridge"
)

// locationView is one location on the consent page.
type locationView struct {
	ID       int64
	Name     string
	Switches []switchView
	// Hub names the hub that holds a location of another hub; Offline
	// says that hub has not called lately.
	Hub     string
	Offline bool
}

// switchView is one switch on the consent page. Limits says what it cannot
// do, so the user knows before a command answers 501.
type switchView struct {
	ID, Name, Limits string
	// Checked ticks the switch: the app has it already. SeeOnly ticks
	// its see-only box: the app may see it but not switch it.
	Checked, SeeOnly bool
}

// granted is what an installation holds in a location, for ticking the
// consent page's boxes.
type granted struct{ switches, seeOnly []string }

func grantedOf(in *bridge.Installation) granted { return granted{in.SwitchIDs, in.SeeOnly} }

func (g granted) view(id, name, limits string) switchView {
	return switchView{ID: id, Name: name, Limits: limits, Checked: slices.Contains(g.switches, id), SeeOnly: bridge.IsSeeOnly(g.seeOnly, id)}
}

// seeOnlyPicked is the switches the form ticks see-only among those it
// ticks at all: a see-only box beside a switch left out grants nothing.
func seeOnlyPicked(f url.Values) []string {
	var out []string
	for _, id := range f["see_only"] {
		if slices.Contains(f["switch"], id) {
			out = append(out, id)
		}
	}
	return out
}

func limits(sw *bridge.Switch) string {
	return limitsOf(func(c bridge.Command) bool { return bridge.Supports(sw.Device, c) })
}

func limitsOf(supports func(bridge.Command) bool) string {
	var can []string
	for _, c := range bridge.Commands {
		if supports(c) {
			can = append(can, string(c))
		}
	}
	switch {
	case len(can) == len(bridge.Commands):
		return ""
	case len(can) == 0:
		return "read-only: reports its state, cannot be switched"
	default:
		return "can only be switched " + strings.Join(can, " and ")
	}
}

// userLocations lists the configured locations the user belongs to, with
// the switches an installation already has there (by location) ticked.
// consentLocations is what the consent page offers a user for an app: the
// user's locations on this hub and on the platform's other hubs, the
// switches the app already has in each ticked.
func (s *Server) consentLocations(ctx context.Context, u *bridge.User, clientID string) []locationView {
	checked := s.connectedSwitches(ctx, u.ID, clientID)
	return append(s.userLocations(u, checked), s.hubLocations(ctx, u, checked)...)
}

func (s *Server) userLocations(u *bridge.User, checked map[int64]granted) []locationView {
	var out []locationView
	for _, l := range s.hub.Locations() {
		if !u.MemberOf(l.ID) {
			continue
		}
		out = append(out, s.locationView(l, checked[l.ID]))
	}
	return out
}

// locationView is a location with its switches, those in checked ticked.
func (s *Server) locationView(l *bridge.Location, checked granted) locationView {
	v := locationView{ID: l.ID, Name: l.Name}
	for _, id := range l.Switches {
		if sw, ok := s.hub.Switch(id); ok {
			v.Switches = append(v.Switches, checked.view(sw.ID, sw.Name, limits(sw)))
		}
	}
	return v
}

// handleConsent takes the user's decision: deny, or install the app into one
// of their locations with the switches they ticked.
func (s *Server) handleConsent(w http.ResponseWriter, r *http.Request) {
	p, ok := s.readPostedForm(w, r, false)
	if !ok {
		return
	}
	f, req, sess := p.f, p.req, p.sess
	back := "/oauth/authorize?" + req.Query()
	if f.Get("action") == "deny" {
		s.observe("authorization_denied", "user_denied")
		s.redirectError(w, r, &authError{Redirect: true, Code: "access_denied", Description: "the user denied the request", req: req})
		return
	}
	if f.Get("action") != "approve" {
		s.errorPage(w, http.StatusBadRequest, "The form must say approve or deny.")
		return
	}
	ctx := r.Context()
	user, err := s.sessionUser(ctx, sess)
	if bridge.ErrorCode(err) == bridge.ENOTFOUND {
		// The owner deleted the user while they were logged in.
		s.sessions.end(ctx, p.sessionID)
		s.errorPage(w, http.StatusForbidden, "Your login has ended (the user was removed, or its password changed). Log in again.")
		return
	}
	if err != nil {
		s.internal(w, r, err)
		return
	}
	app, err := s.apps.App(ctx, req.ClientID)
	if err != nil {
		s.internal(w, r, err)
		return
	}
	locID := idOrZero(f.Get("location"))
	in, err := s.Issuer.Install(ctx, InstallRequest{App: app, User: user, LocationID: locID, SwitchIDs: f["switch"], SeeOnly: seeOnlyPicked(f)})
	if errors.Is(err, ErrNotInstallable) {
		s.observe("authorization_denied", "unpublished_app")
		s.redirectError(w, r, &authError{Redirect: true, Code: "access_denied",
			Description: "this app is not published; only its developer can install it", req: req})
		return
	}
	if msg := s.refusal(err, locID); msg != "" {
		s.sessions.setFlash(r.Context(), w, msg, s.secure())
		http.Redirect(w, r, back, http.StatusSeeOther)
		return
	}
	if err != nil {
		s.internal(w, r, err)
		return
	}
	code, err := s.Issuer.IssueCode(ctx, in, req.RedirectURI, req.CodeChallenge)
	if err != nil {
		s.internal(w, r, err)
		return
	}
	s.observe("authorization_granted", "")
	s.logger.Info("app installed", "client_id", app.ClientID, "installation", in.ID, "user", user.Name, "location", locID, "switches", len(in.SwitchIDs), "see_only", len(in.SeeOnly))
	params := url.Values{"code": {code}}
	if req.HasState {
		params.Set("state", req.State)
	}
	s.redirectToClient(w, r, req.RedirectURI, params)
}

// refusal is what the consent page tells the user when the install rules
// refuse their selection, so they choose again; "" when err is not such a
// refusal.
func (s *Server) refusal(err error, locID int64) string {
	switch {
	case errors.Is(err, ErrUnknownLocation), errors.Is(err, ErrNotMember):
		return "Choose one of your locations."
	case errors.Is(err, ErrNoSwitch):
		return "Select at least one switch the app may control."
	case errors.Is(err, ErrSwitchElsewhere):
		if loc, ok := s.hub.Location(locID); ok {
			return fmt.Sprintf("Some selected switches are not in %s.", loc.Name)
		}
		return "Choose one of your locations."
	}
	return ""
}

// idOrZero reads an id from a form field: a positive decimal number of at
// most 18 digits (so it fits an int64), or 0, which no location has, for
// anything else. It never fails: a bad id is refused where 0 is.
func idOrZero(s string) int64 {
	var n int64
	if len(s) == 0 || len(s) > 18 {
		return 0
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0
		}
		n = n*10 + int64(c-'0')
	}
	return n
}
