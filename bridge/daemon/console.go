package daemon

// The owner's console on a platform (a single box's shows its own hub
// too): built once both roles are, since it shows both.

import (
	"context"
	"net/http"

	"github.com/switchbridge/switchbridge/bridge/console"
	"github.com/switchbridge/switchbridge/bridge/hub/hubstore"
	"github.com/switchbridge/switchbridge/bridge/platform/accounts"
	"github.com/switchbridge/switchbridge/bridge/platform/adminpages"
)

// consoleRecords are what the console's hub pages read and change: the
// hub's records (webhooks, the audit log) and the platform's that name
// the installations, apps and users in them, which a single box keeps
// side by side.
type consoleRecords struct {
	*hubRecords
	*platformRecords
}

// hubRecords and platformRecords name the two for consoleRecords' fields.
type (
	hubRecords      = hubstore.Store
	platformRecords = accounts.Store
)

// openConsole builds the console over the platform's login and admin
// service and, when this process drives switches of its own, its hub.
func (d *Daemon) openConsole(mux *http.ServeMux) {
	o := console.Options{
		Gate: d.OAuth.ConsoleGate(), PublicURL: d.publicURL,
		Health: d.health, Logger: d.logger.With("component", "console"), Observe: d.Metrics.ObserveConsole,
	}
	if len(d.Hub.Switchboard.Locations()) > 0 {
		o.Hub = &console.Hub{
			Switchboard: d.Hub.Switchboard, Feed: d.Hub.Feed, Limit: d.Hub.API.Limit,
			Records: consoleRecords{d.HubStore, d.Accounts}, Devices: d.HubStore,
		}
	}
	c := console.New(o)
	c.Register(mux)
	adminpages.New(c, adminpages.Options{Admin: d.Platform.Admin, Own: d.Hub.Switchboard, Hubs: d.Platform.Directory}).Register(mux)
}

// health is the console's overview of this process.
func (d *Daemon) health(ctx context.Context) []console.HealthItem {
	return healthItems(ctx, d)
}
