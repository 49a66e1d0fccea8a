package daemon

// The two roles with several hubs: a daemon with a platform: section is a
// hub of that platform; any other daemon is a platform, which hubs may
// join (switchbridge hub add).

import (
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/bridge/hub/replica"
	"github.com/switchbridge/switchbridge/bridge/platform"
	"github.com/switchbridge/switchbridge/bridge/wire"
)

// openRole builds the role beside the hub and registers both on mux: the
// link to the platform on a hub whose config has a platform: section
// (the installation API answers from the replica, and /oauth/ and
// discovery point at the platform), else the platform itself.
func (d *Daemon) openRole(mux *http.ServeMux) error {
	p := d.Config.Platform
	if p == nil {
		d.Platform = platform.New(platform.Options{Config: d.Config, Store: d.Accounts, Own: d.Hub.Switchboard,
			PublicURL: d.publicURL, Metrics: d.Metrics, Logger: d.logger, HubRecords: d.HubStore})
		d.Platform.Register(mux)
		d.OAuth = d.Platform.OAuth
		d.Hub.Register(mux, d.OAuth, d.Accounts.AccessGeneration)
		d.openConsole(mux)
		return nil
	}
	secret, err := readSecret(p.SecretFile)
	if err != nil {
		return fmt.Errorf("platform.secret_file: %w", err)
	}
	sw := d.Hub.Switchboard
	d.Link, err = replica.Open(replica.Options{PlatformURL: p.URL, HubID: p.HubID, Secret: secret,
		Store: d.HubStore, Source: d.HubStore.Replica(), PruneReplica: d.HubStore.PruneReplica,
		Inventory: func() []bridge.RemoteLocation { return replica.InventoryOf(sw) },
		Metrics:   d.Metrics.Registry(), Logger: d.logger.With("component", "link")})
	if err != nil {
		return err
	}
	d.Hub.Register(mux, d.Link.Authorizer, d.HubStore.Replica().AccessGeneration)
	pointer := func(w http.ResponseWriter, r *http.Request) {
		wire.WriteError(w, http.StatusNotFound, "this is a hub of the platform at "+p.URL+
			": sign in, authorize apps and discover installations there", nil)
	}
	for _, pat := range []string{"/oauth/", "/api/apps/endpoints", "/api/smartapps/endpoints"} {
		mux.HandleFunc(pat, pointer)
	}
	d.openHubConsole(mux, p.URL, p.HubID)
	return nil
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
