package console

import (
	"context"
	"net/http"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
)

// Hub is what the console shows and does of this process's own hub: its
// switches, their changes, its webhooks and audit log, the devices it
// discovered.
type Hub struct {
	Switchboard *bridge.Switchboard
	Feed        *bridge.Feed
	// Limit counts one console command of key (one per owner) against
	// the installation API's rate limit (api.Handler.Limit): an owner at
	// the console switches no faster than an app may.
	Limit func(key string) error
	// Records are the hub's webhooks and audit log.
	Records Records
	// Devices are the devices the hub discovered, and their adoption;
	// nil when no driver discovers any.
	Devices Devices
}

// Records are the hub's records the console reads and changes (its
// webhooks and audit log), and what names the installations, apps and
// users in them: on a single box the hub's records beside the
// platform's.
type Records interface {
	Audit(ctx context.Context, f bridge.AuditFilter) ([]bridge.AuditRecord, error)
	// Webhooks are an installation's webhooks; every installation's when
	// installationID is "".
	Webhooks(ctx context.Context, installationID string) ([]*bridge.Webhook, error)
	// DisableWebhook stops deliveries to a webhook and empties its
	// outbox, as the webhook service does to a receiver that is gone.
	DisableWebhook(ctx context.Context, id, reason string) error
	// EnableWebhook delivers to a disabled webhook again; ENOTFOUND for
	// none, ECONFLICT for one not disabled.
	EnableWebhook(ctx context.Context, id string) error
	// Installation is ENOTFOUND for one that is gone.
	Installation(ctx context.Context, id string) (*bridge.Installation, error)
	// GrantLive reports whether anyone holds a live token of an
	// installation's grant: its webhooks are suspended otherwise.
	GrantLive(ctx context.Context, installationID string, now time.Time) (bool, error)
	App(ctx context.Context, clientID string) (*bridge.App, error)
	UserByID(ctx context.Context, id int64) (*bridge.User, error)
}

// Devices are the devices a hub discovered and their adoption.
type Devices interface {
	DiscoveredDevices(ctx context.Context) ([]bridge.DiscoveredDevice, error)
}

// registerHub adds the hub's pages.
func (c *Console) registerHub(mux *http.ServeMux) {
	c.registerWebhooks(mux)
	c.registerAudit(mux)
}
