package daemon

// The owner's console on a platform (a single box's shows its own hub
// too): built once both roles are, since it shows both.

import (
	"context"
	"net/http"

	"github.com/switchbridge/switchbridge/bridge/console"
	"github.com/switchbridge/switchbridge/bridge/hub/hubconsole"
	"github.com/switchbridge/switchbridge/bridge/platform/adminpages"
)

// openConsole builds the console over the platform's login and admin
// service and, when this process drives switches of its own, its hub.
func (d *Daemon) openConsole(mux *http.ServeMux) {
	o := d.consoleOptions(d.OAuth.ConsoleGate())
	if len(d.Hub.Switchboard.Locations()) == 0 {
		o.Hub = nil // a platform that drives no switches
	}
	c := console.New(o)
	c.Register(mux)
	adminpages.New(c, adminpages.Options{Admin: d.Platform.Admin, Own: d.Hub.Switchboard, Hubs: d.Platform.Directory,
		SignIn: d.OAuth.ConsoleSignInCode}).Register(mux)
}

// openHubConsole builds the console of a hub of a platform: the hub's
// pages, its owners signed in through the platform.
func (d *Daemon) openHubConsole(mux *http.ServeMux, platformURL, hubID string) {
	gate := hubconsole.New(hubconsole.Options{PlatformURL: platformURL, HubID: hubID, PublicURL: d.publicURL,
		Redeem: d.Link.RedeemConsoleSignIn, Logger: d.logger.With("component", "console")})
	gate.Register(mux)
	console.New(d.consoleOptions(gate)).Register(mux)
}

// consoleOptions are the console's options over gate, with this
// process's hub.
func (d *Daemon) consoleOptions(gate console.Gate) console.Options {
	return console.Options{
		Gate: gate, PublicURL: d.publicURL,
		Health: d.health, Logger: d.logger.With("component", "console"), Observe: d.Metrics.ObserveConsole,
		Hub: &console.Hub{
			Switchboard: d.Hub.Switchboard, Feed: d.Hub.Feed, Limit: d.Hub.API.Limit,
			Records: d.HubStore, Devices: d.HubStore,
		},
	}
}

// health is the console's overview of this process.
func (d *Daemon) health(ctx context.Context) []console.HealthItem {
	return healthItems(ctx, d)
}
