// Package platform is the platform role: users, apps, OAuth and consent
// (bridge/platform/oauth), installations and their tokens, discovery, the
// hubs that join it (switchbridge hub add) and the link's server side
// they call (bridge/platform/linkserver). A single box is a platform and
// a hub (bridge/hub) in one process: its own switchboard's locations are
// offered beside the hubs'.
package platform

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/bridge/metrics"
	"github.com/switchbridge/switchbridge/bridge/platform/accounts"
	"github.com/switchbridge/switchbridge/bridge/platform/admin"
	"github.com/switchbridge/switchbridge/bridge/platform/linkserver"
	"github.com/switchbridge/switchbridge/bridge/platform/oauth"
	"github.com/switchbridge/switchbridge/bridge/store"
)

// Compaction of the change log the hubs follow: a hub away for longer
// than changeLogAge (or behind by more than changeLogKeep changes) fetches
// a snapshot when it is back.
const (
	changeLogAge  = 7 * 24 * time.Hour
	changeLogKeep = 100_000
)

// Platform is the platform role of a running daemon.
type Platform struct {
	// OAuth is the authorization server and the token check of the
	// platform's own installation API.
	OAuth *oauth.Server
	// Links serves the hubs' links.
	Links *linkserver.Platform
	// Admin applies the owner's commands, for the command line's and
	// the console's one code path.
	Admin *admin.Service
	// Directory is where the platform's own locations and its hubs' are.
	Directory *linkserver.Directory

	store  *accounts.Store
	usage  *store.UsageWriter
	logger *slog.Logger
}

// Options is what a Platform is built with.
type Options struct {
	Config *config.Config
	Store  *accounts.Store
	// Own is the switchboard of this process's own locations.
	Own *bridge.Switchboard
	// PublicURL is the address clients are told: auth_url and base_url.
	PublicURL string
	Metrics   *metrics.Metrics
	Logger    *slog.Logger
	// HubRecords are the webhooks and the audit log of this process's own
	// hub, for the connected apps page (a single box's daemon passes its
	// hub's records).
	HubRecords oauth.HubRecords
}

// New builds the platform.
func New(o Options) *Platform {
	p := &Platform{store: o.Store, logger: o.Logger}
	// When each installation was last used, for the connected apps page,
	// written behind the requests.
	p.usage = store.NewUsageWriter(o.Store, o.Logger.With("component", "usage"))
	// Consent, discovery and the install rules see the locations the hubs
	// hold beside this process's own.
	dir := linkserver.NewDirectory(o.Store, o.Own)
	p.Directory = dir
	p.OAuth = oauth.New(o.Store, o.Own, o.Logger.With("component", "oauth"), oauth.Options{
		PublicURL: o.PublicURL, TrustedProxies: o.Config.Server.TrustedProxies.List(),
		Observe: o.Metrics.ObserveOAuth, Used: p.usage.Touch, Hubs: dir, Locations: dir,
		TokenLifetime: o.Config.OAuth.TokenLifetime.Std(), CodeLifetime: o.Config.OAuth.CodeLifetime.Std(),
		HubRecords: o.HubRecords,
	})
	p.Admin = &admin.Service{Store: o.Store, Locations: dir, AuditLog: o.HubRecords, Installer: p.OAuth.Issuer}
	p.Links = linkserver.NewPlatform(o.Store, o.Logger.With("component", "link"), linkserver.Options{
		TrustedProxies: o.Config.Server.TrustedProxies.List(),
		Own:            func(id int64) bool { _, ok := o.Own.Location(id); return ok },
		SignIns:        p.OAuth,
	})
	p.warnHubConnections(o.Config.Server.MaxConnections)
	return p
}

// Register adds the platform's routes to mux: the OAuth endpoints and
// pages, discovery, and the hubs' link.
func (p *Platform) Register(mux *http.ServeMux) {
	p.OAuth.Register(mux)
	p.Links.Register(mux)
}

// Run keeps the platform's records bounded until ctx ends: expired codes
// and tokens, and the change log the hubs follow.
func (p *Platform) Run(ctx context.Context) {
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		now := time.Now()
		if err := p.store.Prune(ctx, now); err != nil && ctx.Err() == nil {
			p.logger.Warn("pruning expired codes and tokens", "err", err)
		}
		if _, err := p.store.CompactChanges(ctx, now.Add(-changeLogAge), changeLogKeep); err != nil && ctx.Err() == nil {
			p.logger.Warn("compacting the hubs' change log", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Shutdown ends the hubs' long polls, which would outlast a graceful
// shutdown's timeout, with an answer that has the hubs call again soon.
func (p *Platform) Shutdown() { p.Links.Shutdown() }

// Close writes the uses not written yet.
func (p *Platform) Close() error { return p.usage.Close() }

// warnHubConnections warns when the registered hubs approach half of
// server.max_connections: each hub holds one long poll open, and what the
// hubs hold is not left for users and apps.
func (p *Platform) warnHubConnections(limit int) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hubs, err := p.store.Hubs(ctx)
	if err != nil {
		return
	}
	if len(hubs) >= limit/2 {
		p.logger.Warn("registered hubs approach server.max_connections: each hub holds a long poll open, leaving fewer connections for users and apps; raise server.max_connections",
			"hubs", len(hubs), "max_connections", limit)
	}
}
