package main

// install, for an app's developer, and the installation commands: list
// and delete. Deleting an installation moves the store's access generation
// in the same transaction, so a running hub stops honouring its tokens at
// its next request.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/link"
	"github.com/switchbridge/switchbridge/bridge/oauth"
	"github.com/switchbridge/switchbridge/bridge/store"
	"github.com/switchbridge/switchbridge/bridge/wire"
)

func (c *cli) install(ctx context.Context, args []string) error {
	f := newFlags("install")
	clientID := f.String("client-id", "", "the app's client id")
	userName := f.String("user", "", "the developer's user name (the app's owner)")
	loc := f.Int64("location", 0, "location id")
	asJSON := f.Bool("json", false, "print JSON")
	var switches stringList
	f.Var(&switches, "switch", "a switch id (repeatable)")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) > 0:
		return usageErr("install takes no arguments")
	case *clientID == "" || *userName == "" || *loc <= 0:
		return usageErr("install needs --client-id, --user and --location")
	case len(switches) == 0:
		return usageErr("install needs at least one --switch")
	}
	cfg, err := loadConfig(*f.config)
	if err != nil {
		return err
	}
	// The configured locations, for the install rules; no driver is opened.
	locations, err := bridge.NewHub(cfg.BridgeLocations(), nil)
	if err != nil {
		return err
	}
	db, err := store.Open(ctx, cfg.DataDir)
	if err != nil {
		return err
	}
	defer db.Close()
	app, err := db.App(ctx, *clientID)
	if err != nil {
		return errors.New(bridge.ErrorMessage(err))
	}
	user, err := db.UserByName(ctx, *userName)
	if err != nil {
		return errors.New(bridge.ErrorMessage(err))
	}
	// The hubs' locations too, with the config's first.
	issuer := oauth.NewIssuer(db, link.NewDirectory(db, locations))
	issuer.TokenLifetime = cfg.OAuth.TokenLifetime.Std()
	in, tok, err := issuer.InstallForDeveloper(ctx, oauth.InstallRequest{App: app, User: user, LocationID: *loc, SwitchIDs: switches})
	if errors.Is(err, oauth.ErrUnknownLocation) {
		return fmt.Errorf("location %d is not in %s", *loc, cfg.File)
	}
	if err != nil {
		return err
	}
	base := cfg.AdvertisedURL("")
	if _, own := locations.Location(in.LocationID); !own {
		if l, err := db.HubLocation(ctx, in.LocationID); err == nil {
			if h, err := db.Hub(ctx, l.HubID); err == nil {
				base = h.BaseURL
			}
		}
	}
	endpoint := base + wire.InstallationPath(in.ID)
	if *asJSON {
		return json.NewEncoder(c.stdout).Encode(map[string]string{"token": tok.Token, "endpoint": endpoint, "expires_at": tok.ExpiresAt.UTC().Format(time.RFC3339)})
	}
	fmt.Fprintf(c.stdout, "API token:    %s\nAPI endpoint: %s\n(expires %s)\n", tok.Token, endpoint, tok.ExpiresAt.Format("2006-01-02 15:04 MST"))
	return nil
}

func (c *cli) installationList(ctx context.Context, args []string) error {
	f := newFlags("installation list")
	userName := f.String("user", "", "only this user's installations")
	clientID := f.String("app", "", "only installations of this app (client id)")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErr("installation list takes no arguments; filter with --user NAME or --app CLIENT_ID")
	}
	cfg, db, err := openConfigStore(ctx, *f.config)
	if err != nil {
		return err
	}
	defer db.Close()
	dir, err := locationsOf(cfg, db)
	if err != nil {
		return err
	}
	filter := store.InstallationFilter{ClientID: *clientID}
	if *userName != "" {
		u, err := db.UserByName(ctx, *userName)
		if err != nil {
			return errors.New(bridge.ErrorMessage(err))
		}
		filter.UserID = u.ID
	}
	if *clientID != "" {
		if _, err := db.App(ctx, *clientID); err != nil {
			return errors.New(bridge.ErrorMessage(err))
		}
	}
	ins, err := db.FindInstallations(ctx, filter)
	if err != nil {
		return err
	}
	users, apps := map[int64]string{}, map[string]string{}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tAPP\tCLIENT_ID\tUSER\tLOCATION\tSWITCHES\tGRANTED\tLAST_USED")
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", in.ID, apps[in.ClientID], in.ClientID, users[in.UserID],
			locationLabel(dir, in.LocationID), strings.Join(in.SwitchIDs, ","), in.CreatedAt.Format(listTime), lastUsed(in.LastUsedAt))
	}
	return tw.Flush()
}

// listTime is how the lists show times, in the local time zone.
const listTime = "2006-01-02 15:04"

func lastUsed(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.Format(listTime)
}

func (c *cli) installationDelete(ctx context.Context, args []string) error {
	f := newFlags("installation delete")
	arg, err := f.parseOne(args, "one installation ID (see installation list)")
	if err != nil {
		return err
	}
	db, err := openStore(ctx, *f.config)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := db.Uninstall(ctx, arg); err != nil {
		return errors.New(bridge.ErrorMessage(err))
	}
	fmt.Fprintf(c.stdout, "installation %s deleted; its tokens no longer work\n", arg)
	return nil
}
