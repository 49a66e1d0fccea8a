package main

// The app commands: create, publish, legacy, access-token-lifetime, list,
// rotate-secret and delete. Rotating a secret or deleting an app moves
// the store's access generation in the same transaction, so a running hub
// stops honouring the old secret or the app's tokens at its next request.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/oauth"
	"github.com/switchbridge/switchbridge/bridge/store"
)

func (c *cli) appCreate(ctx context.Context, args []string) error {
	f := newFlags("app create")
	name := f.String("name", "", "the app's display name")
	owner := f.String("owner", "", "the developer's user name")
	publish := f.Bool("publish", false, "let any user install it")
	requirePKCE := f.Bool("require-pkce", false, "refuse its authorization requests without a PKCE code_challenge")
	legacy := f.Bool("legacy", false, "accept its access tokens in the query string, as the original platform did")
	var lifetime lifetimeFlag
	f.Var(&lifetime, "access-token-lifetime", "lifetime of its access tokens (default: oauth.token_lifetime)")
	asJSON := f.Bool("json", false, "print JSON")
	var uris stringList
	f.Var(&uris, "redirect-uri", "a redirect URI (repeatable)")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) > 0:
		return usageErr("app create takes no arguments")
	case strings.TrimSpace(*name) == "":
		return usageErr("app create needs --name")
	case len(uris) == 0:
		return usageErr("app create needs at least one --redirect-uri")
	case *owner == "":
		return usageErr("app create needs --owner USER")
	}
	for _, u := range uris {
		if err := oauth.ValidRedirectURI(u); err != nil {
			return usageErr("%v", err)
		}
	}
	db, err := openStore(ctx, *f.config)
	if err != nil {
		return err
	}
	defer db.Close()
	u, err := db.UserByName(ctx, *owner)
	if err != nil {
		return fmt.Errorf("owner: %s", bridge.ErrorMessage(err))
	}
	id, secret := oauth.NewClientID(), oauth.NewSecret()
	app := &bridge.App{ClientID: id, Name: *name, SecretHash: oauth.Hash(secret), RedirectURIs: uris, OwnerID: u.ID, Published: *publish, RequirePKCE: *requirePKCE,
		Legacy: *legacy, AccessTokenLifetime: time.Duration(lifetime)}
	if err := db.CreateApp(ctx, app); err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(c.stdout).Encode(map[string]string{"client_id": id, "client_secret": secret})
	}
	fmt.Fprintf(c.stdout, "client_id:     %s\nclient_secret: %s\n(the secret is shown only now; it is stored hashed)\n", id, secret)
	if *legacy {
		fmt.Fprintln(c.stdout, legacyWarning)
	}
	return nil
}

const legacyWarning = "legacy: this app's access tokens are accepted in the query string, where proxies, browsers and logs keep them; use it only for clients that cannot send Authorization: Bearer"

// lifetimeFlag is an access-token lifetime: a Go duration of at least a
// second (expires_in counts seconds).
type lifetimeFlag time.Duration

func (l *lifetimeFlag) String() string { return time.Duration(*l).String() }
func (l *lifetimeFlag) Set(v string) error {
	d, err := parseLifetime(v)
	if err != nil {
		return err
	}
	*l = lifetimeFlag(d)
	return nil
}

func parseLifetime(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil || d < time.Second || d%time.Second != 0 {
		return 0, fmt.Errorf("%q is not a lifetime: a whole number of seconds, at least 1s (examples: 90s, 1h, 2160h)", v)
	}
	return d, nil
}

func (c *cli) appPublish(ctx context.Context, args []string) error {
	f := newFlags("app publish")
	arg, err := f.parseOne(args, "one CLIENT_ID")
	if err != nil {
		return err
	}
	db, err := openStore(ctx, *f.config)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := db.PublishApp(ctx, arg); err != nil {
		return errors.New(bridge.ErrorMessage(err))
	}
	fmt.Fprintf(c.stdout, "app %s published\n", arg)
	return nil
}

func (c *cli) appLegacy(ctx context.Context, args []string) error {
	f := newFlags("app legacy")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 2 || (pos[1] != "on" && pos[1] != "off") {
		return usageErr("app legacy takes a CLIENT_ID and on or off")
	}
	db, err := openStore(ctx, *f.config)
	if err != nil {
		return err
	}
	defer db.Close()
	on := pos[1] == "on"
	if err := db.SetAppLegacy(ctx, pos[0], on); err != nil {
		return errors.New(bridge.ErrorMessage(err))
	}
	// The running hub reads the flag at each request.
	fmt.Fprintf(c.stdout, "app %s: legacy %s\n", pos[0], pos[1])
	if on {
		fmt.Fprintln(c.stdout, legacyWarning)
	}
	return nil
}

func (c *cli) appAccessTokenLifetime(ctx context.Context, args []string) error {
	f := newFlags("app access-token-lifetime")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usageErr("app access-token-lifetime takes a CLIENT_ID and a DURATION (or default)")
	}
	var d time.Duration
	if pos[1] != "default" {
		if d, err = parseLifetime(pos[1]); err != nil {
			return usageErr("%v", err)
		}
	}
	db, err := openStore(ctx, *f.config)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := db.SetAppAccessTokenLifetime(ctx, pos[0], d); err != nil {
		return errors.New(bridge.ErrorMessage(err))
	}
	if d == 0 {
		fmt.Fprintf(c.stdout, "app %s: access tokens issued from now on live oauth.token_lifetime\n", pos[0])
	} else {
		fmt.Fprintf(c.stdout, "app %s: access tokens issued from now on live %s\n", pos[0], d)
	}
	return nil
}

func (c *cli) appList(ctx context.Context, args []string) error {
	f := newFlags("app list")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErr("app list takes no arguments")
	}
	db, err := openStore(ctx, *f.config)
	if err != nil {
		return err
	}
	defer db.Close()
	apps, err := db.Apps(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CLIENT_ID\tNAME\tOWNER\tPUBLISHED\tPKCE\tLEGACY\tTOKEN_LIFETIME\tREDIRECT_URIS")
	for _, a := range apps {
		owner := strconv.FormatInt(a.OwnerID, 10)
		if u, err := db.UserByID(ctx, a.OwnerID); err == nil {
			owner = u.Name
		}
		pkce := "optional"
		if a.RequirePKCE {
			pkce = "required"
		}
		lifetime := "default"
		if a.AccessTokenLifetime > 0 {
			lifetime = a.AccessTokenLifetime.String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%s\t%v\t%s\t%s\n", a.ClientID, a.Name, owner, a.Published, pkce, a.Legacy, lifetime, strings.Join(a.RedirectURIs, " "))
	}
	return tw.Flush()
}

func (c *cli) appRotateSecret(ctx context.Context, args []string) error {
	f := newFlags("app rotate-secret")
	asJSON := f.Bool("json", false, "print JSON")
	arg, err := f.parseOne(args, "one CLIENT_ID")
	if err != nil {
		return err
	}
	db, err := openStore(ctx, *f.config)
	if err != nil {
		return err
	}
	defer db.Close()
	secret := oauth.NewSecret()
	if err := db.SetAppSecret(ctx, arg, oauth.Hash(secret)); err != nil {
		return errors.New(bridge.ErrorMessage(err))
	}
	if *asJSON {
		return json.NewEncoder(c.stdout).Encode(map[string]string{"client_id": arg, "client_secret": secret})
	}
	fmt.Fprintf(c.stdout, "client_id:     %s\nclient_secret: %s\n(the old secret no longer works; the new one is shown only now)\n", arg, secret)
	return nil
}

func (c *cli) appDelete(ctx context.Context, args []string) error {
	f := newFlags("app delete")
	arg, err := f.parseOne(args, "one CLIENT_ID")
	if err != nil {
		return err
	}
	db, err := openStore(ctx, *f.config)
	if err != nil {
		return err
	}
	defer db.Close()
	ins, err := db.FindInstallations(ctx, store.InstallationFilter{ClientID: arg})
	if err != nil {
		return err
	}
	if err := db.DeleteApp(ctx, arg); err != nil {
		return errors.New(bridge.ErrorMessage(err))
	}
	fmt.Fprintf(c.stdout, "app %s deleted; %s uninstalled, their tokens no longer work\n", arg, plural(len(ins), "installation"))
	return nil
}
