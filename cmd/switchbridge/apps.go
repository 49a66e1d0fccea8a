package main

// The app commands: create, publish, legacy, access-token-lifetime, list,
// rotate-secret and delete. Rotating a secret or deleting an app moves
// the store's access generation in the same transaction, so a running hub
// stops honouring the old secret or the app's tokens at its next request.

import (
	"encoding/json"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/switchbridge/switchbridge/bridge/platform/admin"
	"github.com/switchbridge/switchbridge/bridge/platform/oauth"
)

func appCreate(fs *flag.FlagSet) func(*invocation) error {
	name := fs.String("name", "", "the app's display `NAME`")
	owner := fs.String("owner", "", "the developer's `USER` name")
	publish := fs.Bool("publish", false, "let any user install it")
	requirePKCE := fs.Bool("require-pkce", false, "refuse its authorization requests without a PKCE code_challenge")
	legacy := fs.Bool("legacy", false, "accept its access tokens in the query string, as the original platform did")
	var lifetime lifetimeFlag
	fs.Var(&lifetime, "access-token-lifetime", "the lifetime of its access tokens, a `DURATION` such as 1h (default: oauth.token_lifetime)")
	asJSON := fs.Bool("json", false, "print JSON")
	var uris redirectURIs
	fs.Var(&uris, "redirect-uri", "a redirect `URI` (repeatable)")
	return func(c *invocation) error {
		app, secret, err := c.admin.CreateApp(c.ctx, admin.AppSpec{Name: *name, RedirectURIs: uris, Owner: *owner, Published: *publish,
			RequirePKCE: *requirePKCE, Legacy: *legacy, AccessTokenLifetime: time.Duration(lifetime)})
		if err != nil {
			return err
		}
		if *asJSON {
			return json.NewEncoder(c.stdout).Encode(map[string]string{"client_id": app.ClientID, "client_secret": secret})
		}
		fmt.Fprintf(c.stdout, "client_id:     %s\nclient_secret: %s\n(the secret is shown only now; it is stored hashed)\n", app.ClientID, secret)
		if *legacy {
			fmt.Fprintln(c.stdout, legacyWarning)
		}
		return nil
	}
}

// redirectURIs is the repeatable --redirect-uri, each checked as it is
// given.
type redirectURIs []string

func (r *redirectURIs) String() string { return strings.Join(*r, " ") }
func (r *redirectURIs) Set(v string) error {
	if err := oauth.ValidRedirectURI(v); err != nil {
		return err
	}
	*r = append(*r, v)
	return nil
}
func (*redirectURIs) repeatable() {}

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
	d, err := admin.ParseLifetime(v)
	if err == nil && d == 0 { // "default" or blank: not a lifetime here
		err = fmt.Errorf("%q is not a lifetime: a whole number of seconds, at least 1s (examples: 90s, 1h, 2160h)", v)
	}
	return d, err
}

func appSetPublished(published bool) func(*invocation) error {
	return func(c *invocation) error {
		if err := c.store.SetAppPublished(c.ctx, c.args[0], published); err != nil {
			return err
		}
		if published {
			fmt.Fprintf(c.stdout, "app %s published: every user may install it\n", c.args[0])
		} else {
			fmt.Fprintf(c.stdout, "app %s unpublished: only its owner may install it; earlier installations keep working\n", c.args[0])
		}
		return nil
	}
}

func appLegacy(c *invocation) error {
	id, mode := c.args[0], c.args[1]
	if mode != "on" && mode != "off" {
		return usageErr("app legacy takes on or off, not %q", mode)
	}
	on := mode == "on"
	if err := c.store.SetAppLegacy(c.ctx, id, on); err != nil {
		return err
	}
	// The running hub reads the flag at each request.
	fmt.Fprintf(c.stdout, "app %s: legacy %s\n", id, mode)
	if on {
		fmt.Fprintln(c.stdout, legacyWarning)
	}
	return nil
}

func appAccessTokenLifetime(c *invocation) error {
	id := c.args[0]
	var d time.Duration
	if c.args[1] != "default" {
		var err error
		if d, err = parseLifetime(c.args[1]); err != nil {
			return usageErr("%v", err)
		}
	}
	if err := c.admin.SetAppAccessTokenLifetime(c.ctx, id, d); err != nil {
		return err
	}
	if d == 0 {
		fmt.Fprintf(c.stdout, "app %s: access tokens issued from now on live oauth.token_lifetime\n", id)
	} else {
		fmt.Fprintf(c.stdout, "app %s: access tokens issued from now on live %s\n", id, d)
	}
	return nil
}

func appList(c *invocation) error {
	ctx, db := c.ctx, c.store
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

func appRotateSecret(fs *flag.FlagSet) func(*invocation) error {
	asJSON := fs.Bool("json", false, "print JSON")
	return func(c *invocation) error {
		id := c.args[0]
		secret, err := c.admin.RotateAppSecret(c.ctx, id)
		if err != nil {
			return err
		}
		if *asJSON {
			return json.NewEncoder(c.stdout).Encode(map[string]string{"client_id": id, "client_secret": secret})
		}
		fmt.Fprintf(c.stdout, "client_id:     %s\nclient_secret: %s\n(the old secret no longer works; the new one is shown only now)\n", id, secret)
		return nil
	}
}

func appDelete(c *invocation) error {
	id := c.args[0]
	n, err := c.admin.DeleteApp(c.ctx, id)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "app %s deleted; %s uninstalled, their tokens no longer work\n", id, plural(n, "installation"))
	return nil
}
