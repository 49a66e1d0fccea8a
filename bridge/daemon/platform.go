package daemon

// The two roles with several hubs: a daemon with a platform: section is a
// hub of that platform; any other daemon is a platform, which hubs may
// join (switchbridge hub add).

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/bridge/hub/api"
	"github.com/switchbridge/switchbridge/bridge/hub/replica"
	"github.com/switchbridge/switchbridge/bridge/platform/linkserver"
	"github.com/switchbridge/switchbridge/bridge/platform/oauth"
	"github.com/switchbridge/switchbridge/bridge/store"
	"github.com/switchbridge/switchbridge/bridge/wire"
)

// Compaction of the platform's change log: a hub away for longer than
// changeLogAge (or behind by more than changeLogKeep changes) fetches a
// snapshot when it is back.
const (
	changeLogAge  = 7 * 24 * time.Hour
	changeLogKeep = 100_000
)

// setUpHub makes the daemon a hub of its platform: the installation API
// answers from the replica, the link follows the platform, and /oauth/ and
// discovery point at the platform.
func (d *Daemon) setUpHub(mux *http.ServeMux) error {
	p := d.Config.Platform
	secret, err := readSecret(p.SecretFile)
	if err != nil {
		return fmt.Errorf("platform.secret_file: %w", err)
	}
	auth := replica.NewAuthorizer(d.Store.Replica())
	d.Link, err = replica.NewFollower(p.URL, p.HubID, secret, d.Store, d.logger.With("component", "link"))
	if err != nil {
		return err
	}
	d.Link.Inventory = func() []bridge.RemoteLocation { return replica.InventoryOf(d.Switchboard) }
	d.Link.Applied = auth.Forget
	auth.Sync = d.Link.SyncNow
	auth.Settled = d.Link.Settled
	// The platform keeps when each installation was last used, for its
	// connected apps page: a hub reports the uses of its tokens there.
	d.usage.Close()
	d.usage = store.NewUsageWriter(d.Link, d.logger.With("component", "usage"))
	d.OAuth.Used = d.usage.Touch
	auth.SetUsed(d.usage.Touch)
	if err := d.Link.Register(d.Metrics.Registry()); err != nil {
		return err
	}
	d.API = api.New(d.Switchboard, auth, d.logger.With("component", "api"))
	pointer := func(w http.ResponseWriter, r *http.Request) {
		wire.WriteError(w, http.StatusNotFound, "this is a hub of the platform at "+p.URL+
			": sign in, authorize apps and discover installations there", nil)
	}
	for _, pat := range []string{"/oauth/", "/api/apps/endpoints", "/api/smartapps/endpoints"} {
		mux.HandleFunc(pat, pointer)
	}
	return nil
}

// setUpPlatform serves the hubs' link and lets consent, discovery and the
// install rules see the locations the hubs hold.
func (d *Daemon) setUpPlatform(mux *http.ServeMux) {
	d.Platform = linkserver.NewPlatform(d.Store, d.logger.With("component", "link"))
	d.Platform.TrustedProxies = d.Config.Server.TrustedProxies.List()
	d.Platform.Own = func(id int64) bool { _, ok := d.Switchboard.Location(id); return ok }
	d.Platform.Register(mux)
	d.warnHubConnections()
	dir := linkserver.NewDirectory(d.Store, d.Switchboard)
	d.OAuth.Hubs = dir
	lifetime, code := d.OAuth.Issuer.TokenLifetime, d.OAuth.Issuer.CodeLifetime
	d.OAuth.Issuer = oauth.NewIssuer(d.Store, dir)
	d.OAuth.Issuer.TokenLifetime, d.OAuth.Issuer.CodeLifetime = lifetime, code
}

// warnHubConnections warns when the registered hubs approach half of
// server.max_connections: each hub holds one long poll open, and what the
// hubs hold is not left for users and apps.
func (d *Daemon) warnHubConnections() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hubs, err := d.Store.Hubs(ctx)
	if err != nil {
		return
	}
	if limit := d.Config.Server.MaxConnections; len(hubs) >= limit/2 {
		d.logger.Warn("registered hubs approach server.max_connections: each hub holds a long poll open, leaving fewer connections for users and apps; raise server.max_connections",
			"hubs", len(hubs), "max_connections", limit)
	}
}

// runLink keeps the hub's link until ctx ends.
func (d *Daemon) runLink(ctx context.Context) {
	if d.Link != nil {
		d.Link.Run(ctx)
	}
}

// pruneLinks keeps the platform's change log and the hub's replica bounded.
func (d *Daemon) pruneLinks(ctx context.Context, now time.Time) {
	if d.Link != nil {
		if err := d.Store.PruneReplica(ctx, now); err != nil && ctx.Err() == nil {
			d.logger.Warn("pruning expired tokens from the replica", "err", err)
		}
		return
	}
	if _, err := d.Store.CompactChanges(ctx, now.Add(-changeLogAge), changeLogKeep); err != nil && ctx.Err() == nil {
		d.logger.Warn("compacting the hubs' change log", "err", err)
	}
}

// reloadSecret reads platform.secret_file again (SIGHUP): after hub
// rotate-secret on the platform, the operator writes the new secret there
// and reloads, and the hub links with it at once. The file's path may
// change too; the platform's url and the hub's id need a restart.
func (d *Daemon) reloadSecret(cfg *config.Config) error {
	if d.Link == nil || cfg.Platform == nil {
		return nil
	}
	secret, err := readSecret(cfg.Platform.SecretFile)
	if err != nil {
		return fmt.Errorf("platform.secret_file: %w (the hub keeps the secret it had)", err)
	}
	if d.Link.SetSecret(secret) {
		d.logger.Info("reload: platform.secret_file holds a new secret: linking with it")
	}
	d.Config.Platform.SecretFile = cfg.Platform.SecretFile
	return nil
}

// readSecret reads a secret file: its first line, which must not be empty.
func readSecret(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	s, _, _ := strings.Cut(string(b), "\n")
	s = strings.TrimSpace(s)
	if s == "" {
		return "", fmt.Errorf("%s is empty: write the secret `switchbridge hub add` printed into it", path)
	}
	return s, nil
}
