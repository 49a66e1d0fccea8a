package console

import (
	"context"
	"net/http"

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

// Records are the hub's records the console reads and changes.
type Records interface {
	Audit(ctx context.Context, f bridge.AuditFilter) ([]bridge.AuditRecord, error)
}

// Devices are the devices a hub discovered and their adoption.
type Devices interface {
	DiscoveredDevices(ctx context.Context) ([]bridge.DiscoveredDevice, error)
}

// registerHub adds the hub's pages.
func (c *Console) registerHub(mux *http.ServeMux) {}
