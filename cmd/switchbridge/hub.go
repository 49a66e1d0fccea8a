package main

// The platform's hub commands: hub add, list, rotate-secret and remove.

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/switchbridge/switchbridge/bridge/platform/admin"
)

func hubAdd(fs *flag.FlagSet) func(*invocation) error {
	var base baseURL
	fs.Var(&base, "base-url", "the hub's public `URL` (its server.public_url): clients call it")
	asJSON := fs.Bool("json", false, "print JSON")
	return func(c *invocation) error {
		h, secret, err := c.admin.AddHub(c.ctx, c.args[0], string(base))
		if err != nil {
			return err
		}
		return c.printHubSecret(h.ID, secret, *asJSON)
	}
}

// baseURL is --base-url: an absolute http(s) URL without path, user or
// query, as a hub's server.public_url is.
type baseURL string

func (b *baseURL) String() string { return string(*b) }
func (b *baseURL) Set(v string) error {
	u, err := admin.CheckHubURL(v)
	if err != nil {
		return errors.New(errorText(err))
	}
	*b = baseURL(u)
	return nil
}

func (c *invocation) printHubSecret(id, secret string, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(c.stdout).Encode(map[string]string{"hub_id": id, "secret": secret})
	}
	fmt.Fprintf(c.stdout, "hub_id: %s\nsecret: %s\n(the secret is shown only now; it is stored hashed. On the hub, write it to platform.secret_file and reload it: systemctl reload switchbridge.)\n", id, secret)
	return nil
}

// hubListEntry is one hub as hub list --json prints it.
type hubListEntry struct {
	ID        string  `json:"id"`
	Name      string  `json:"name"`
	BaseURL   string  `json:"base_url"`
	Link      string  `json:"link"` // up, down or never
	LastSeen  string  `json:"last_seen,omitempty"`
	Version   string  `json:"version"`
	Locations []int64 `json:"locations"`
	// Lag is the platform's newest change sequence less the hub's
	// acknowledged cursor.
	Lag int64 `json:"replica_lag"`
	// Conflict is why the platform last refused a second process with
	// this hub's credentials, within admin.ConflictShown, and when.
	Conflict   string `json:"conflict,omitempty"`
	ConflictAt string `json:"conflict_at,omitempty"`
}

func hubList(fs *flag.FlagSet) func(*invocation) error {
	asJSON := fs.Bool("json", false, "print JSON")
	return func(c *invocation) error { return c.hubList(*asJSON) }
}

// hubList lists the hubs as the admin service sees them (the console's
// hubs page shows the same).
func (c *invocation) hubList(asJSON bool) error {
	states, err := c.admin.HubStates(c.ctx, time.Now())
	if err != nil {
		return err
	}
	out := make([]hubListEntry, 0, len(states))
	for _, h := range states {
		e := hubListEntry{ID: h.ID, Name: h.Name, BaseURL: h.BaseURL, Link: h.Link, Version: h.Version, Locations: []int64{}, Lag: h.Lag}
		if !h.LastSeen.IsZero() {
			e.LastSeen = h.LastSeen.UTC().Format(time.RFC3339)
		}
		for _, l := range h.Locations {
			e.Locations = append(e.Locations, l.ID)
		}
		if h.ConflictRecent {
			e.Conflict, e.ConflictAt = h.Conflict, h.ConflictAt.UTC().Format(time.RFC3339)
		}
		out = append(out, e)
	}
	if asJSON {
		return json.NewEncoder(c.stdout).Encode(out)
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tBASE_URL\tLINK\tLAST_SEEN\tVERSION\tLOCATIONS\tREPLICA_LAG\tSECOND_PROCESS_REFUSED")
	for _, e := range out {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", e.ID, e.Name, e.BaseURL, e.Link, orDash(e.LastSeen), orDash(e.Version), orDash(joinIDs(e.Locations)), e.Lag, orDash(e.ConflictAt))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, e := range out {
		if e.Conflict != "" {
			fmt.Fprintf(c.stdout, "hub %s (%s), %s: %s\n", e.Name, e.ID, e.ConflictAt, e.Conflict)
		}
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func hubRotateSecret(fs *flag.FlagSet) func(*invocation) error {
	asJSON := fs.Bool("json", false, "print JSON")
	return func(c *invocation) error {
		secret, err := c.admin.RotateHubSecret(c.ctx, c.args[0])
		if err != nil {
			return err
		}
		return c.printHubSecret(c.args[0], secret, *asJSON)
	}
}

func hubRemove(c *invocation) error {
	n, err := c.store.RemoveHub(c.ctx, c.args[0])
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "hub %s removed; %s in its locations uninstalled\n", c.args[0], plural(n, "installation"))
	return nil
}
