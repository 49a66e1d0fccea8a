package console

// The switches page: every switch of the hub by location, with its value,
// availability, last sign of life and power, kept live by the hub's own
// feed (events.go), and switched on or off from the page through the
// switchboard, under the installation API's rate limit and the switch's
// max_changes, recorded in the audit log as the console's.

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
)

type switchesView struct {
	Locations []locationView
	// Live is whether the page's values follow the hub's feed.
	Live bool
}

type locationView struct {
	ID       int64
	Name     string
	Switches []switchRow
}

// switchRow is one switch as the page shows it.
type switchRow struct {
	liveSwitch
	Name     string
	Commands []commandButton
}

// commandButton is one command a switch's device takes, a form of its
// own. Confirm, when set, is what the page asks before sending it.
type commandButton struct {
	Command bridge.Command
	Label   string
	Confirm string
}

// liveSwitch is what the page shows of a switch that changes: a row's
// cells, and the JSON of an event named "switch" on /console/events,
// which static/console.js writes into them. Every field is text as the
// page shows it.
type liveSwitch struct {
	ID        string `json:"id"`
	Value     string `json:"value"` // "on", "off", "" when not known
	Available bool   `json:"available"`
	LastSeen  string `json:"last_seen"`
	Power     string `json:"power"`
}

// liveOf is how the page shows a switch's value, availability, last sign
// and reading.
func liveOf(id string, v bridge.Value, available bool, lastSeen time.Time, r *bridge.Reading, stale bool) liveSwitch {
	s := liveSwitch{ID: id, Value: string(v), Available: available, LastSeen: When(lastSeen), Power: "not known"}
	if r != nil && r.Has&bridge.HasPower != 0 && !stale {
		s.Power = strconv.FormatFloat(r.Power, 'f', 1, 64) + " W"
	}
	return s
}

// ValueClass is the class of a value's cell, as console.js sets it.
func (s liveSwitch) ValueClass() string {
	if s.Value == "" {
		return ""
	}
	return "value-" + s.Value
}

func (c *Console) switches(q *Request) {
	h := c.opts.Hub
	v := switchesView{Live: h.Feed != nil}
	now := time.Now()
	for _, l := range h.Switchboard.Locations() {
		lv := locationView{ID: l.ID, Name: l.Name}
		for _, id := range l.Switches {
			sw, ok := h.Switchboard.Switch(id)
			if !ok || sw.LocationID != l.ID {
				continue // a reload between the two reads: the next view has it
			}
			st := sw.Device.State()
			row := switchRow{liveSwitch: liveOf(sw.ID, st.Value, st.Available, st.LastSeen, st.Reading, st.Stale(now)), Name: sw.Name}
			for _, cmd := range bridge.Commands {
				if !bridge.Supports(sw.Device, cmd) {
					continue
				}
				b := commandButton{Command: cmd, Label: map[bridge.Command]string{bridge.CommandOn: "On", bridge.CommandOff: "Off"}[cmd]}
				if sw.Confirm {
					b.Confirm = fmt.Sprintf("Switch %s %s?", sw.Name, cmd)
				}
				row.Commands = append(row.Commands, b)
			}
			lv.Switches = append(lv.Switches, row)
		}
		v.Locations = append(v.Locations, lv)
	}
	c.Render(q, http.StatusOK, templates()["switches"], c.View(q, "Switches", "switches", v))
}

// command switches one switch on or off, as an app's command through the
// installation API would: counted against the API's rate limit under the
// owner's own key, then through the switchboard (the switch's
// max_changes, the audit log, the feed), with the console as its sender.
func (c *Console) command(q *Request) {
	h := c.opts.Hub
	id := q.R.PathValue("id")
	back := Path + "switches"
	cmd, err := bridge.ParseCommand(q.R.PathValue("command"))
	if err != nil {
		c.Done(q, back, "switch_command", id, err, "")
		return
	}
	action := "switch_" + string(cmd)
	sw, ok := h.Switchboard.Switch(id)
	if !ok {
		c.Done(q, back, action, id, bridge.Errorf(bridge.ENOTFOUND, "there is no switch %q (any more): the page shows the switches there are now", id), "")
		return
	}
	if sw.Confirm && q.Form.Get("confirmed") != "yes" {
		// Asked by the page's script; with scripts off, on a page here.
		c.Render(q, http.StatusOK, templates()["confirm"], c.View(q, "Switch "+sw.Name+" "+string(cmd)+"?", "switches",
			confirmView{Action: Path + "switches/" + id + "/" + string(cmd), Question: fmt.Sprintf("Switch %s %s?", sw.Name, cmd), Yes: fmt.Sprintf("Yes, switch %s %s", sw.Name, cmd), Back: back}))
		return
	}
	if h.Limit != nil {
		if err := h.Limit("console:" + strconv.FormatInt(q.V.User.ID, 10)); err != nil {
			c.Done(q, back, action, id, err, "")
			return
		}
	}
	ctx := bridge.WithSender(q.Ctx(), bridge.Sender{Installation: ConsoleInstallation, App: ConsoleInstallation,
		UserID: q.V.User.ID, RequestID: newRequestID()})
	err = h.Switchboard.Command(ctx, []string{id}, cmd)
	c.Done(q, back, action, id, err, fmt.Sprintf("%s is %s.", sw.Name, cmd.Value()))
}

// newRequestID names a console command in the audit log, as an API
// request's X-Request-Id names an app's: 16 random bytes in hex.
func newRequestID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// confirmView is the page that asks before a switch marked confirm: true
// is switched, when the page's script did not ask.
type confirmView struct {
	Action, Question, Yes, Back string
}
