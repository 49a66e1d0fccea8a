package main

// install, for an app's developer, and the installation commands: list
// and delete. Deleting an installation moves the store's access generation
// in the same transaction, so a running hub stops honouring its tokens at
// its next request.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/platform/oauth"
	"github.com/switchbridge/switchbridge/bridge/wire"
)

func install(fs *flag.FlagSet) func(*invocation) error {
	clientID := fs.String("client-id", "", "the app's client `ID`")
	userName := fs.String("user", "", "the developer's user `NAME` (the app's owner)")
	var loc locationID
	fs.Var(&loc, "location", "the location `ID`")
	asJSON := fs.Bool("json", false, "print JSON")
	var switches, seeOnly stringList
	fs.Var(&switches, "switch", "a switch `ID` (repeatable)")
	fs.Var(&seeOnly, "see-only", "one of the switches, by `ID`, that the app may see but not switch (repeatable)")
	return func(c *invocation) error {
		return c.install(*clientID, *userName, int64(loc), switches, seeOnly, *asJSON)
	}
}

func (c *invocation) install(clientID, userName string, loc int64, switches, seeOnly []string, asJSON bool) error {
	ctx, cfg, db := c.ctx, c.cfg, c.store
	app, err := db.App(ctx, clientID)
	if err != nil {
		return err
	}
	user, err := db.UserByName(ctx, userName)
	if err != nil {
		return err
	}
	// The config's locations and the hubs', as the consent page offers them.
	issuer := oauth.NewIssuer(db, c.locations)
	issuer.TokenLifetime = cfg.OAuth.TokenLifetime.Std()
	in, tok, err := issuer.InstallForDeveloper(ctx, oauth.InstallRequest{App: app, User: user, LocationID: loc, SwitchIDs: switches, SeeOnly: seeOnly})
	if errors.Is(err, oauth.ErrUnknownLocation) {
		return fmt.Errorf("location %d is not in %s, nor held by a hub of this platform", loc, cfg.File)
	}
	if err != nil {
		return err
	}
	base := cfg.AdvertisedURL("")
	if !hasLocation(cfg, in.LocationID) {
		if l, err := db.HubLocation(ctx, in.LocationID); err == nil {
			if h, err := db.Hub(ctx, l.HubID); err == nil {
				base = h.BaseURL
			}
		}
	}
	endpoint := base + wire.InstallationPath(in.ID)
	if asJSON {
		return json.NewEncoder(c.stdout).Encode(map[string]string{"token": tok.Token, "endpoint": endpoint, "expires_at": tok.ExpiresAt.UTC().Format(time.RFC3339)})
	}
	fmt.Fprintf(c.stdout, "API token:    %s\nAPI endpoint: %s\n(expires %s)\n", tok.Token, endpoint, tok.ExpiresAt.Format("2006-01-02 15:04 MST"))
	return nil
}

func installationList(fs *flag.FlagSet) func(*invocation) error {
	userName := fs.String("user", "", "only this user's installations, by user `NAME`")
	clientID := fs.String("app", "", "only installations of this app, by `CLIENT_ID`")
	return func(c *invocation) error { return c.installationList(*userName, *clientID) }
}

func (c *invocation) installationList(userName, clientID string) error {
	ctx, db := c.ctx, c.store
	dir := c.locations
	filter := bridge.InstallationFilter{ClientID: clientID}
	if userName != "" {
		u, err := db.UserByName(ctx, userName)
		if err != nil {
			return err
		}
		filter.UserID = u.ID
	}
	if clientID != "" {
		if _, err := db.App(ctx, clientID); err != nil {
			return err
		}
	}
	ins, err := db.FindInstallations(ctx, filter)
	if err != nil {
		return err
	}
	users, apps := map[int64]string{}, map[string]string{}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tAPP\tCLIENT_ID\tUSER\tLOCATION\tSWITCHES\tGRANTED\tLAST_USED\tWEBHOOKS")
	for _, in := range ins {
		if _, ok := users[in.UserID]; !ok {
			users[in.UserID] = fmt.Sprint(in.UserID)
			if u, err := db.UserByID(ctx, in.UserID); err == nil {
				users[in.UserID] = u.Name
			}
		}
		if _, ok := apps[in.ClientID]; !ok {
			apps[in.ClientID] = "?"
			if a, err := db.App(ctx, in.ClientID); err == nil {
				apps[in.ClientID] = a.Name
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", in.ID, apps[in.ClientID], in.ClientID, users[in.UserID],
			locationLabel(dir, in.LocationID), switchesLabel(in), in.CreatedAt.Format(listTime), lastUsed(in.LastUsedAt),
			webhooksOf(ctx, db, in.ID))
	}
	return tw.Flush()
}

// webhooksOf sums up an installation's webhooks for the list: how many
// deliver, how many are suspended (no one holds a live token of the
// grant), and why each disabled one stopped. Webhooks live in the store of
// the hub that serves the installation.
func webhooksOf(ctx context.Context, db any, id string) string {
	src, ok := db.(interface {
		Webhooks(ctx context.Context, installationID string) ([]*bridge.Webhook, error)
		GrantLive(ctx context.Context, installationID string, now time.Time) (bool, error)
	})
	if !ok {
		return "-"
	}
	ws, err := src.Webhooks(ctx, id)
	if err != nil || len(ws) == 0 {
		return "none"
	}
	live, err := src.GrantLive(ctx, id, time.Now())
	if err != nil {
		return "?"
	}
	active, failing, suspended := 0, 0, 0
	var disabled []string
	for _, w := range ws {
		switch {
		case w.Disabled:
			disabled = append(disabled, "disabled: "+w.DisabledReason)
		case !live:
			suspended++
		case !w.FailingSince.IsZero():
			failing++
		default:
			active++
		}
	}
	out := fmt.Sprintf("%d active", active)
	if suspended > 0 {
		out = fmt.Sprintf("%d suspended (no live token: the app must be authorized again)", suspended)
		if active > 0 {
			out = fmt.Sprintf("%d active, ", active) + out
		}
	}
	if failing > 0 {
		out += fmt.Sprintf(", %d failing", failing)
	}
	for _, d := range disabled {
		out += "; " + d
	}
	return out
}

// listTime is how the lists show times, in the local time zone.
const listTime = "2006-01-02 15:04"

func lastUsed(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.Format(listTime)
}

// switchesLabel lists an installation's switches, a see-only one marked
// "(see-only)".
func switchesLabel(in *bridge.Installation) string {
	out := make([]string, len(in.SwitchIDs))
	for i, id := range in.SwitchIDs {
		out[i] = id
		if bridge.IsSeeOnly(in.SeeOnly, id) {
			out[i] += "(see-only)"
		}
	}
	return strings.Join(out, ",")
}

func installationSeeOnly(fs *flag.FlagSet) func(*invocation) error {
	sw := fs.String("switch", "", "the switch `ID`, one of the installation's")
	return func(c *invocation) error {
		id, mode := c.args[0], c.args[1]
		if mode != "on" && mode != "off" {
			return usageErr("installation see-only takes on or off, not %q", mode)
		}
		if err := c.store.SetSeeOnly(c.ctx, id, *sw, mode == "on"); err != nil {
			return err
		}
		// The access generation moved with the write: a running hub, and
		// a hub of this platform through its replica, apply it at once.
		if mode == "on" {
			fmt.Fprintf(c.stdout, "installation %s: switch %s is see-only; commands to it are refused\n", id, *sw)
		} else {
			fmt.Fprintf(c.stdout, "installation %s: switch %s can be seen and switched\n", id, *sw)
		}
		return nil
	}
}

func installationSwitches(fs *flag.FlagSet) func(*invocation) error {
	var switches, seeOnly stringList
	fs.Var(&switches, "switch", "a switch `ID` the installation grants (repeatable): all of them, not only those added")
	fs.Var(&seeOnly, "see-only", "one of the switches, by `ID`, that the app may see but not switch (repeatable)")
	return func(c *invocation) error {
		in, err := c.admin.ChangeSwitches(c.ctx, c.args[0], switches, seeOnly)
		if err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "installation %s grants %s", in.ID, strings.Join(in.SwitchIDs, ", "))
		if len(in.SeeOnly) > 0 {
			fmt.Fprintf(c.stdout, " (see-only: %s)", strings.Join(in.SeeOnly, ", "))
		}
		fmt.Fprintln(c.stdout)
		return nil
	}
}

func installationDelete(c *invocation) error {
	if err := c.store.Uninstall(c.ctx, c.args[0]); err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "installation %s deleted; its tokens no longer work\n", c.args[0])
	return nil
}
