package main

// The platform's hub commands: hub add, list, rotate-secret and remove.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/link"
	"github.com/switchbridge/switchbridge/bridge/oauth"
	"github.com/switchbridge/switchbridge/bridge/store"
)

const hubUsage = `  hub add NAME --base-url URL [--json]
                              register a hub with this platform; prints its hub_id and secret (shown only now)
  hub list [--json]           list hubs: link state, last seen, version, locations, replica lag,
                              and a second process with a hub's credentials that was refused
  hub rotate-secret ID [--json]
                              give a hub a new secret; the old one stops working at once
  hub remove ID               unregister a hub and uninstall every installation in its locations
`

// openPlatformStore opens the store of a daemon that is a platform: the
// hub commands make no sense on a hub.
func openPlatformStore(ctx context.Context, path string) (*store.DB, error) {
	cfg, err := loadConfig(path)
	if err != nil {
		return nil, err
	}
	if cfg.Platform != nil {
		return nil, fmt.Errorf("%s is the config of a hub of %s: run hub commands on the platform", cfg.File, cfg.Platform.URL)
	}
	return store.Open(ctx, cfg.DataDir)
}

func (c *cli) hubAdd(ctx context.Context, args []string) error {
	f := newFlags("hub add")
	baseURL := f.String("base-url", "", "the hub's public URL (its server.public_url): clients call it")
	asJSON := f.Bool("json", false, "print JSON")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || strings.TrimSpace(pos[0]) == "" || len(pos[0]) > 64 {
		return usageErr("hub add takes one NAME (1-64 characters)")
	}
	u, err := url.Parse(strings.TrimRight(*baseURL, "/"))
	if *baseURL == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.User != nil {
		return usageErr("hub add needs --base-url, the hub's public URL: absolute http(s) without path, user or query")
	}
	db, err := openPlatformStore(ctx, *f.config)
	if err != nil {
		return err
	}
	defer db.Close()
	secret := oauth.NewSecret()
	h := &bridge.RemoteHub{ID: newHubID(), Name: pos[0], BaseURL: u.String(), SecretHash: oauth.Hash(secret)}
	if err := db.CreateHub(ctx, h); err != nil {
		return errors.New(bridge.ErrorMessage(err))
	}
	return c.printHubSecret(h.ID, secret, *asJSON)
}

func (c *cli) printHubSecret(id, secret string, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(c.stdout).Encode(map[string]string{"hub_id": id, "secret": secret})
	}
	fmt.Fprintf(c.stdout, "hub_id: %s\nsecret: %s\n(the secret is shown only now; it is stored hashed. On the hub, write it to platform.secret_file and reload it: systemctl reload switchbridge.)\n", id, secret)
	return nil
}

func newHubID() string {
	var b [8]byte
	rand.Read(b[:])
	return "hub-" + hex.EncodeToString(b[:])
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
	// this hub's credentials, within conflictShown, and when.
	Conflict   string `json:"conflict,omitempty"`
	ConflictAt string `json:"conflict_at,omitempty"`
}

// conflictShown is how long hub list shows a refused second process.
const conflictShown = 24 * time.Hour

func (c *cli) hubList(ctx context.Context, args []string) error {
	f := newFlags("hub list")
	asJSON := f.Bool("json", false, "print JSON")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErr("hub list takes no arguments")
	}
	db, err := openPlatformStore(ctx, *f.config)
	if err != nil {
		return err
	}
	defer db.Close()
	hubs, err := db.Hubs(ctx)
	if err != nil {
		return err
	}
	seq, err := db.ChangeSeq(ctx)
	if err != nil {
		return err
	}
	now := time.Now()
	out := make([]hubListEntry, 0, len(hubs))
	for _, h := range hubs {
		e := hubListEntry{ID: h.ID, Name: h.Name, BaseURL: h.BaseURL, Link: "never", Version: h.Version, Locations: []int64{}, Lag: max(seq-h.Cursor, 0)}
		if !h.LastSeen.IsZero() {
			e.Link = "down"
			if now.Sub(h.LastSeen) < link.OnlineWithin {
				e.Link = "up"
			}
			e.LastSeen = h.LastSeen.UTC().Format(time.RFC3339)
		}
		for _, l := range h.Locations {
			e.Locations = append(e.Locations, l.ID)
		}
		if h.Conflict != "" && now.Sub(h.ConflictAt) < conflictShown {
			e.Conflict, e.ConflictAt = h.Conflict, h.ConflictAt.UTC().Format(time.RFC3339)
		}
		out = append(out, e)
	}
	if *asJSON {
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

func (c *cli) hubRotateSecret(ctx context.Context, args []string) error {
	f := newFlags("hub rotate-secret")
	asJSON := f.Bool("json", false, "print JSON")
	arg, err := f.parseOne(args, "one hub ID")
	if err != nil {
		return err
	}
	db, err := openPlatformStore(ctx, *f.config)
	if err != nil {
		return err
	}
	defer db.Close()
	secret := oauth.NewSecret()
	if err := db.SetHubSecret(ctx, arg, oauth.Hash(secret)); err != nil {
		return errors.New(bridge.ErrorMessage(err))
	}
	return c.printHubSecret(arg, secret, *asJSON)
}

func (c *cli) hubRemove(ctx context.Context, args []string) error {
	f := newFlags("hub remove")
	arg, err := f.parseOne(args, "one hub ID")
	if err != nil {
		return err
	}
	db, err := openPlatformStore(ctx, *f.config)
	if err != nil {
		return err
	}
	defer db.Close()
	n, err := db.RemoveHub(ctx, arg)
	if err != nil {
		return errors.New(bridge.ErrorMessage(err))
	}
	fmt.Fprintf(c.stdout, "hub %s removed; %s in its locations uninstalled\n", arg, plural(n, "installation"))
	return nil
}
