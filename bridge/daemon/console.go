package daemon

// The owner's console on a platform (a single box's shows its own hub
// too): built once both roles are, since it shows both.

import (
	"context"
	"net/http"
	"time"

	"github.com/switchbridge/switchbridge/bridge"

	"github.com/switchbridge/switchbridge/bridge/console"
	"github.com/switchbridge/switchbridge/bridge/hub/hubconsole"
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
	o := d.consoleOptions(d.OAuth.ConsoleGate(), consoleRecords{d.HubStore, d.Accounts})
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
	console.New(d.consoleOptions(gate, linkedRecords{d.HubStore, d.HubStore.Replica()})).Register(mux)
}

// consoleOptions are the console's options over gate, with this
// process's hub.
func (d *Daemon) consoleOptions(gate console.Gate, records console.Records) console.Options {
	return console.Options{
		Gate: gate, PublicURL: d.publicURL,
		Health: d.health, Logger: d.logger.With("component", "console"), Observe: d.Metrics.ObserveConsole,
		Hub: &console.Hub{
			Switchboard: d.Hub.Switchboard, Feed: d.Hub.Feed, Limit: d.Hub.API.Limit,
			Records: records, Devices: d.HubStore,
		},
	}
}

// health is the console's overview of this process.
func (d *Daemon) health(ctx context.Context) []console.HealthItem {
	return healthItems(ctx, d)
}

// linkedRecords are the console's records on a hub of a platform: its own
// webhooks and audit log, and its replica of the platform's
// installations. The replica holds no app or user names: the pages show
// ids there.
type linkedRecords struct {
	*hubRecords
	replica *hubstore.Replica
}

func (r linkedRecords) Installation(ctx context.Context, id string) (*bridge.Installation, error) {
	return r.replica.Installation(ctx, id)
}

func (r linkedRecords) GrantLive(ctx context.Context, installationID string, now time.Time) (bool, error) {
	return r.replica.GrantLive(ctx, installationID, now)
}

func (linkedRecords) App(context.Context, string) (*bridge.App, error) {
	return nil, bridge.Errorf(bridge.ENOTFOUND, "a hub of a platform keeps no apps")
}

func (linkedRecords) UserByID(context.Context, int64) (*bridge.User, error) {
	return nil, bridge.Errorf(bridge.ENOTFOUND, "a hub of a platform keeps no users")
}
