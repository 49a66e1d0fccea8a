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
	// DiscoveredDevices lists the devices, each with the configured
	// switch that uses it (UsedBy).
	DiscoveredDevices(ctx context.Context) ([]bridge.DiscoveredDevice, error)
	// Adopt adds a discovered device's switch to the config file, as
	// switchbridge devices adopt does, and has the hub serve it.
	Adopt(ctx context.Context, r AdoptRequest) (*Adopted, error)
}

// AdoptRequest is an adoption the owner asks for: a discovered device,
// the location its switch goes into, and the switch's id and name (""
// for the ones the device's entry proposes).
type AdoptRequest struct {
	Device   string
	Location int64
	ID, Name string
}

// Adopted is what an adoption did.
type Adopted struct {
	SwitchID string
	// File is the config file the switch was added to; Backup the
	// previous file.
	File, Backup string
	// Login is the embedded broker's login the device logs in with, ""
	// for none (another broker's); Password is set when the adoption
	// made that login: a secret, shown once.
	Login, Password string
	// ClientID is the client id the device announced itself with, now
	// Login's; Unbound, when set, says why it could not be bound.
	ClientID string
	Unbound  error
	// NotServed, when set, says why the hub does not serve the new
	// switch yet: its reload failed.
	NotServed error
}

// ConsoleInstallation is the installation the audit log and the feed name
// for a command an owner sent at the console (bridge.Sender): no app's
// installation has that id.
const ConsoleInstallation = "console"

// registerHub adds the hub's pages: its switches, live and switched from
// the page, the devices it discovered, adopted from the page, its
// webhooks and its audit log.
func (c *Console) registerHub(mux *http.ServeMux) {
	c.AddMenu("switches", "Switches")
	c.AddMenu("devices", "Devices")
	c.Handle(mux, "GET "+Path+"switches", c.switches)
	c.Handle(mux, "POST "+Path+"switches/{id}/{command}", c.command)
	c.Handle(mux, "GET "+Path+"events", c.events)
	c.Handle(mux, "GET "+Path+"devices", c.devices)
	c.Handle(mux, "POST "+Path+"devices/adopt", c.adopt)
	c.registerWebhooks(mux)
	c.registerAudit(mux)
}
