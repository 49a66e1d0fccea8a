package main

// audit: the records the hub keeps of the commands apps sent to its
// switches (bridge/platform/admin's Audit over the daemon's own store). Each hub
// keeps its own log; on a platform the command says where to look.

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
)

// defaultAuditLimit is how many records audit prints unless told: the
// screenful an owner looks at; --limit 0 prints them all.
const defaultAuditLimit = 100

func auditList(fs *flag.FlagSet) func(*invocation) error {
	installation := fs.String("installation", "", "only this installation's commands, by `ID`")
	switchID := fs.String("switch", "", "only the commands to this switch, by `ID`")
	app := fs.String("app", "", "only the commands of this app's installations, by its client `ID`")
	var since sinceFlag
	fs.Var(&since, "since", "only the commands of the last `DURATION` (such as 30m, 24h, 168h)")
	limit := fs.Int("limit", defaultAuditLimit, "print at most the `N` newest records; 0 prints all")
	asJSON := fs.Bool("json", false, "print JSON")
	return func(c *invocation) error {
		f := bridge.AuditFilter{InstallationID: *installation, ClientID: *app, SwitchID: *switchID, Limit: *limit}
		if since > 0 {
			f.Since = time.Now().Add(-time.Duration(since))
		}
		if *limit < 0 {
			return usageErr("--limit must be 0 (all) or more, not %d", *limit)
		}
		return c.audit(f, *asJSON)
	}
}

// sinceFlag is --since: a positive duration.
type sinceFlag time.Duration

func (s *sinceFlag) String() string { return time.Duration(*s).String() }
func (s *sinceFlag) Set(v string) error {
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return fmt.Errorf("%q is not a duration of the past (examples: 30m, 24h, 168h)", v)
	}
	*s = sinceFlag(d)
	return nil
}

// auditJSON is one record in audit --json.
type auditJSON struct {
	At             string `json:"at"`
	InstallationID string `json:"installation"`
	ClientID       string `json:"client_id"`
	App            string `json:"app,omitempty"`
	UserID         int64  `json:"user_id"`
	User           string `json:"user,omitempty"`
	SwitchID       string `json:"switch"`
	Command        string `json:"command"`
	Outcome        string `json:"outcome"`
	LatencyMS      int64  `json:"latency_ms"`
	RequestID      string `json:"request_id"`
}

func (c *invocation) audit(f bridge.AuditFilter, asJSON bool) error {
	// A platform without switches of its own runs no command itself:
	// its hubs keep the log.
	if c.cfg.PlatformWithoutSwitches() {
		hubs, err := c.store.Hubs(c.ctx)
		if err != nil {
			return err
		}
		return errors.New("this platform has no switches of its own: each hub keeps the audit log of the commands its installations sent; run switchbridge audit on the hub" +
			hubsToAsk(hubs))
	}
	rep, err := c.admin.Audit(c.ctx, f)
	if err != nil {
		return err
	}
	if len(rep.Elsewhere) > 0 {
		fmt.Fprintln(c.stderr, "switchbridge: this log holds the commands to this platform's own switches; each hub keeps the log of the installations in its locations: run switchbridge audit on the hub"+
			hubsToAsk(rep.Elsewhere))
	}
	names := c.auditNames()
	if asJSON {
		out := make([]auditJSON, len(rep.Records))
		for i, r := range rep.Records {
			out[i] = auditJSON{At: r.At.UTC().Format(time.RFC3339Nano), InstallationID: r.InstallationID, ClientID: r.ClientID, App: names.app(r.ClientID),
				UserID: r.UserID, User: names.user(r.UserID), SwitchID: r.SwitchID, Command: string(r.Command), Outcome: r.Outcome,
				LatencyMS: r.Latency.Milliseconds(), RequestID: r.RequestID}
		}
		return json.NewEncoder(c.stdout).Encode(out)
	}
	if len(rep.Records) == 0 {
		_, err := fmt.Fprintln(c.stdout, "no commands recorded"+auditScope(f))
		return err
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tINSTALLATION\tAPP\tUSER\tSWITCH\tCOMMAND\tOUTCOME\tLATENCY\tREQUEST_ID")
	for _, r := range rep.Records {
		app := names.app(r.ClientID)
		if app == "" {
			app = r.ClientID
		}
		user := names.user(r.UserID)
		if user == "" {
			user = strconv.FormatInt(r.UserID, 10)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.At.Local().Format(auditTime), r.InstallationID, app, user,
			r.SwitchID, r.Command, r.Outcome, latencyLabel(r), r.RequestID)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if f.Limit > 0 && len(rep.Records) == f.Limit {
		fmt.Fprintf(c.stderr, "switchbridge: the %d newest records; --limit N shows more, --limit 0 all\n", f.Limit)
	}
	return nil
}

// auditTime is how audit shows a record's time: to the second, in the
// machine's time zone.
const auditTime = "2006-01-02 15:04:05"

// latencyLabel is how long the record's switch took: "-" for one that
// was not sent the command, "<1ms" for one quicker than the log's
// resolution.
func latencyLabel(r bridge.AuditRecord) string {
	switch {
	case r.Outcome == bridge.OutcomeNotSent || r.Outcome == bridge.FailSeeOnly || r.Outcome == bridge.FailUnsupported || r.Outcome == bridge.FailRateLimited:
		return "-"
	case r.Latency < time.Millisecond:
		return "<1ms"
	}
	return r.Latency.Round(time.Millisecond).String()
}

// auditScope says what an empty answer was filtered to.
func auditScope(f bridge.AuditFilter) string {
	var parts []string
	if f.InstallationID != "" {
		parts = append(parts, "installation "+f.InstallationID)
	}
	if f.ClientID != "" {
		parts = append(parts, "app "+f.ClientID)
	}
	if f.SwitchID != "" {
		parts = append(parts, "switch "+f.SwitchID)
	}
	if !f.Since.IsZero() {
		parts = append(parts, "since "+f.Since.Local().Format(auditTime))
	}
	if len(parts) == 0 {
		return ""
	}
	return " for " + strings.Join(parts, ", ")
}

// hubsToAsk names the hubs for a message: ": NAME (URL), …", or that none
// is registered.
func hubsToAsk(hubs []*bridge.RegisteredHub) string {
	if len(hubs) == 0 {
		return " (no hub is registered yet: switchbridge hub add)"
	}
	parts := make([]string, len(hubs))
	for i, h := range hubs {
		parts[i] = h.Name + " (" + h.BaseURL + ")"
	}
	return ": " + strings.Join(parts, ", ")
}

// auditNamer names apps and users for the records, from the platform's
// records where this store has them (a hub's store does not: "" then).
type auditNamer struct {
	c     *invocation
	apps  map[string]string
	users map[int64]string
}

func (c *invocation) auditNames() *auditNamer {
	return &auditNamer{c: c, apps: map[string]string{}, users: map[int64]string{}}
}

func (n *auditNamer) app(clientID string) string {
	name, ok := n.apps[clientID]
	if !ok {
		if a, err := n.c.store.App(n.c.ctx, clientID); err == nil {
			name = a.Name
		}
		n.apps[clientID] = name
	}
	return name
}

func (n *auditNamer) user(id int64) string {
	name, ok := n.users[id]
	if !ok {
		if u, err := n.c.store.UserByID(n.c.ctx, id); err == nil {
			name = u.Name
		}
		n.users[id] = name
	}
	return name
}
