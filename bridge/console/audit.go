package console

// The audit log page: the records of the commands sent to the hub's
// switches (bridge.AuditRecord), newest first, filtered by app, switch
// and time as switchbridge audit filters them (an exact client id, an
// exact switch id, a duration of the past), a screenful at a time. The
// filters are a GET form and links, so the page works without scripts
// and a filtered view can be bookmarked.

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
)

// Bounds of the audit page: it shows DefaultAuditLimit records unless
// asked for more, never more than MaxAuditLimit (switchbridge audit
// --limit 0 prints them all).
const (
	DefaultAuditLimit = 100
	MaxAuditLimit     = 1000
)

// auditByConsole is the installation the console's own commands are
// recorded with; their user is the owner who sent them.
const auditByConsole = "console"

func (c *Console) registerAudit(mux *http.ServeMux) {
	c.AddMenu("audit", "Audit log")
	c.Handle(mux, "GET "+Path+"audit", c.audit)
}

// sinceChoices are the form's choices of time; a link may ask for any
// other duration, as switchbridge audit --since does.
var sinceChoices = []struct{ Value, Label string }{
	{"", "any time"},
	{"1h", "the last hour"},
	{"24h", "the last 24 hours"},
	{"168h", "the last 7 days"},
	{"720h", "the last 30 days"},
}

type choice struct {
	Value, Label string
	Selected     bool
}

type auditView struct {
	// App, Switch and Since are the filters as asked for.
	App, Switch, Since string
	Switches           []choice
	SinceChoices       []choice
	Rows               []auditRow
	// Limit is how many records the page shows at most; More, when set,
	// the link that shows more.
	Limit int
	More  string
	// MoreCount is how many more records More shows at most.
	MoreCount int
	// AtMost is set when the page shows MaxAuditLimit and there are more.
	AtMost bool
	// Scope says what the records were filtered to.
	Scope string
	// Invalid is set when the filters could not be read: no records are
	// shown, only the form and what is wrong.
	Invalid bool
}

type auditRow struct {
	At, Installation, App, AppLink, User, Switch, SwitchLink string
	Command, Outcome, Latency, RequestID                     string
	OK                                                       bool
}

// auditQuery is the page's filter, read from its query.
type auditQuery struct {
	app, sw, since string
	limit          int
}

func readAuditQuery(v url.Values) (auditQuery, error) {
	q := auditQuery{app: strings.TrimSpace(v.Get("app")), sw: strings.TrimSpace(v.Get("switch")), since: strings.TrimSpace(v.Get("since")),
		limit: DefaultAuditLimit}
	if q.since != "" {
		d, err := time.ParseDuration(q.since)
		if err != nil || d <= 0 {
			return q, bridge.Errorf(bridge.EINVALID, "%q is not a duration of the past (examples: 30m, 24h, 168h)", q.since)
		}
	}
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 {
			return q, bridge.Errorf(bridge.EINVALID, "%q is not a number of records (1 or more)", l)
		}
		q.limit = min(n, MaxAuditLimit)
	}
	return q, nil
}

// values are the query's filters as a query string, with limit when it is
// not the default.
func (q auditQuery) values(limit int) url.Values {
	v := url.Values{}
	for k, x := range map[string]string{"app": q.app, "switch": q.sw, "since": q.since} {
		if x != "" {
			v.Set(k, x)
		}
	}
	if limit != DefaultAuditLimit {
		v.Set("limit", strconv.Itoa(limit))
	}
	return v
}

// link is the audit page with the query's filters and one changed.
func (q auditQuery) link(key, value string) string {
	v := q.values(DefaultAuditLimit)
	v.Set(key, value)
	return Path + "audit?" + v.Encode()
}

func (c *Console) audit(q *Request) {
	ctx := q.Ctx()
	aq, err := readAuditQuery(q.R.URL.Query())
	view := auditView{App: aq.app, Switch: aq.sw, Since: aq.since, Limit: aq.limit}
	view.Switches, view.SinceChoices = c.switchChoices(aq.sw), sinceOptions(aq.since)
	if err != nil {
		view.Invalid = true
		d := c.View(q, "Audit log", "audit", view)
		d.Error = Message(err)
		c.Render(q, http.StatusBadRequest, templates()["audit"], d)
		return
	}
	f := bridge.AuditFilter{ClientID: aq.app, SwitchID: aq.sw, Limit: aq.limit + 1}
	if aq.since != "" {
		d, _ := time.ParseDuration(aq.since)
		f.Since = c.opts.Now().Add(-d)
	}
	recs, err := c.opts.Hub.Records.Audit(ctx, f)
	if err != nil {
		c.Failed(q.W, q.R, err)
		return
	}
	if len(recs) > aq.limit {
		recs = recs[:aq.limit]
		if aq.limit < MaxAuditLimit {
			next := min(2*aq.limit, MaxAuditLimit)
			view.More, view.MoreCount = Path+"audit?"+aq.values(next).Encode(), next-aq.limit
		} else {
			view.AtMost = true
		}
	}
	names := newNamer(c.opts.Hub)
	for _, r := range recs {
		view.Rows = append(view.Rows, c.auditRow(ctx, names, aq, r))
	}
	view.Scope = auditScope(aq, f.Since)
	c.Render(q, http.StatusOK, templates()["audit"], c.View(q, "Audit log", "audit", view))
}

func (c *Console) auditRow(ctx context.Context, names *namer, aq auditQuery, r bridge.AuditRecord) auditRow {
	row := auditRow{At: When(r.At), Installation: r.InstallationID, Command: string(r.Command), Outcome: bridge.OutcomeText(r.Outcome),
		OK: r.Outcome == bridge.OutcomeOK, Latency: latencyText(r), RequestID: r.RequestID, Switch: r.SwitchID,
		SwitchLink: aq.link("switch", r.SwitchID)}
	row.User = names.user(ctx, r.UserID)
	if row.User == "" {
		row.User = "user " + strconv.FormatInt(r.UserID, 10)
	}
	if r.InstallationID == auditByConsole {
		row.Installation = "console (user " + row.User + ")"
	}
	if r.ClientID != "" {
		row.App, row.AppLink = r.ClientID, aq.link("app", r.ClientID)
		if name := names.app(ctx, r.ClientID); name != "" {
			row.App = name + " (" + r.ClientID + ")"
		}
	}
	if name := names.switchName(r.SwitchID); name != "" {
		row.Switch = name + " (" + r.SwitchID + ")"
	}
	return row
}

// latencyText is how long the record's switch took, as switchbridge
// audit says it: "-" for one that was not sent the command, "<1ms" for one
// quicker than the log's resolution.
func latencyText(r bridge.AuditRecord) string {
	switch {
	case r.Outcome == bridge.OutcomeNotSent || r.Outcome == bridge.FailSeeOnly || r.Outcome == bridge.FailUnsupported || r.Outcome == bridge.FailRateLimited:
		return "-"
	case r.Latency < time.Millisecond:
		return "<1ms"
	}
	return r.Latency.Round(time.Millisecond).String()
}

// auditScope says what the records were filtered to, "" for nothing.
func auditScope(q auditQuery, since time.Time) string {
	var parts []string
	if q.app != "" {
		parts = append(parts, "app "+q.app)
	}
	if q.sw != "" {
		parts = append(parts, "switch "+q.sw)
	}
	if !since.IsZero() {
		parts = append(parts, "since "+When(since))
	}
	return strings.Join(parts, ", ")
}

// switchChoices are the hub's switches by location, with the one asked
// for selected; one no longer configured is offered by its id.
func (c *Console) switchChoices(selected string) []choice {
	out := []choice{{Value: "", Label: "any switch", Selected: selected == ""}}
	found := selected == ""
	sb := c.opts.Hub.Switchboard
	if sb != nil {
		for _, l := range sb.Locations() {
			for _, id := range l.Switches {
				name := id
				if s, ok := sb.Switch(id); ok {
					name = s.Name
				}
				out = append(out, choice{Value: id, Label: l.Name + ": " + name, Selected: id == selected})
				found = found || id == selected
			}
		}
	}
	if !found {
		out = append(out, choice{Value: selected, Label: selected + " (not configured now)", Selected: true})
	}
	return out
}

func sinceOptions(selected string) []choice {
	var out []choice
	found := false
	for _, s := range sinceChoices {
		out = append(out, choice{Value: s.Value, Label: s.Label, Selected: s.Value == selected})
		found = found || s.Value == selected
	}
	if !found {
		out = append(out, choice{Value: selected, Label: "the last " + selected, Selected: true})
	}
	return out
}

// namer names the installations, apps, users and switches of a page's
// records, each looked up once.
type namer struct {
	hub   *Hub
	ins   map[string]*bridge.Installation
	apps  map[string]string
	users map[int64]string
}

func newNamer(h *Hub) *namer {
	return &namer{hub: h, ins: map[string]*bridge.Installation{}, apps: map[string]string{}, users: map[int64]string{}}
}

// installation is nil for one that is gone.
func (n *namer) installation(ctx context.Context, id string) (*bridge.Installation, error) {
	if in, ok := n.ins[id]; ok {
		return in, nil
	}
	in, err := n.hub.Records.Installation(ctx, id)
	if bridge.ErrorCode(err) == bridge.ENOTFOUND {
		in, err = nil, nil
	}
	if err != nil {
		return nil, err
	}
	n.ins[id] = in
	return in, nil
}

// app is an app's name, "" when unknown (an app deleted since).
func (n *namer) app(ctx context.Context, clientID string) string {
	name, ok := n.apps[clientID]
	if !ok {
		if a, err := n.hub.Records.App(ctx, clientID); err == nil {
			name = a.Name
		}
		n.apps[clientID] = name
	}
	return name
}

// user is a user's name, "" when unknown (a user deleted since).
func (n *namer) user(ctx context.Context, id int64) string {
	name, ok := n.users[id]
	if !ok {
		if u, err := n.hub.Records.UserByID(ctx, id); err == nil {
			name = u.Name
		}
		n.users[id] = name
	}
	return name
}

// switchName is a configured switch's name, "" for one no longer
// configured.
func (n *namer) switchName(id string) string {
	if n.hub.Switchboard == nil {
		return ""
	}
	if s, ok := n.hub.Switchboard.Switch(id); ok {
		return s.Name
	}
	return ""
}
