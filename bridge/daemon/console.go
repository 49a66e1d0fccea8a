package daemon

// The owner's console on a platform (a single box's shows its own hub
// too): built once both roles are, since it shows both.

import (
	"context"
	"errors"
	"io/fs"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/bridge/console"
	"github.com/switchbridge/switchbridge/bridge/hub/adopt"
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
	d.console = console.New(o)
	d.console.Register(mux)
	adminpages.New(d.console, adminpages.Options{Admin: d.Platform.Admin, Own: d.Hub.Switchboard, Hubs: d.Platform.Directory,
		SignIn: d.OAuth.ConsoleSignInCode}).Register(mux)
}

// openHubConsole builds the console of a hub of a platform: the hub's
// pages, its owners signed in through the platform.
func (d *Daemon) openHubConsole(mux *http.ServeMux, platformURL, hubID string) {
	gate := hubconsole.New(hubconsole.Options{PlatformURL: platformURL, HubID: hubID, PublicURL: d.publicURL,
		Redeem: d.Link.RedeemConsoleSignIn, Logger: d.logger.With("component", "console"), TrustedProxies: d.Config.Server.TrustedProxies.List()})
	gate.Register(mux)
	d.console = console.New(d.consoleOptions(gate, linkedRecords{d.HubStore, d.HubStore.Replica()}))
	d.console.Register(mux)
}

// consoleOptions are the console's options over gate, with this
// process's hub.
func (d *Daemon) consoleOptions(gate console.Gate, records console.Records) console.Options {
	return console.Options{
		Gate: gate, PublicURL: d.publicURL,
		Health: d.health, Logger: d.logger.With("component", "console"), Observe: d.Metrics.ObserveConsole,
		Hub: &console.Hub{
			Switchboard: d.Hub.Switchboard, Feed: d.Hub.Feed, Limit: d.Hub.API.Limit,
			Records: records, Devices: &consoleDevices{d: d},
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

// consoleDevices are the hub's discovered devices as the console lists
// and adopts them: as switchbridge devices and devices adopt do
// (bridge/hub/adopt), over the config file the daemon was started with,
// after which the daemon reloads it as SIGHUP would.
type consoleDevices struct {
	d *Daemon
	// mu makes adoptions one at a time: each reads the file the last
	// one wrote.
	mu sync.Mutex
}

// DiscoveredDevices lists them with the switch of the config file that
// uses each; when the file cannot be read (a config given as text), with
// the running hub's.
func (c *consoleDevices) DiscoveredDevices(ctx context.Context) ([]bridge.DiscoveredDevice, error) {
	cfg, err := config.Load(c.d.Config.File)
	if err != nil {
		return c.d.HubStore.DiscoveredDevices(ctx)
	}
	return adopt.Devices(ctx, c.d.HubStore, cfg)
}

// Adopt adopts the device into the config file, then reloads it.
func (c *consoleDevices) Adopt(ctx context.Context, r console.AdoptRequest) (*console.Adopted, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cfg, err := config.Load(c.d.Config.File)
	if err != nil {
		return nil, bridge.Errorf(bridge.EUNAVAILABLE, "the hub cannot read its config file: %v", oneLine(err))
	}
	a, err := adopt.Adopt(ctx, cfg, adopt.Request{Device: r.Device, Location: r.Location, ID: r.ID, Name: r.Name},
		adopt.Options{Store: c.d.HubStore, Registry: c.d.reg})
	switch {
	case config.IsProblems(err):
		return nil, bridge.Errorf(bridge.EINVALID, "the config would not pass check-config with the device adopted, so it was left as it was: %s", oneLine(err))
	case errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS):
		return nil, bridge.Errorf(bridge.EUNAVAILABLE, "the hub may not write its config file %s (%v): adopt the device on the hub with switchbridge devices adopt %s --location %d",
			cfg.File, oneLine(err), r.Device, r.Location)
	case err != nil:
		return nil, err
	}
	out := &console.Adopted{SwitchID: a.SwitchID, File: cfg.File, Backup: a.Backup, Login: a.Login, Password: a.Password,
		ClientID: a.ClientID, Unbound: a.Unbound}
	// Not the request's context: a page closed meanwhile must not stop
	// the drivers halfway through opening.
	out.NotServed = c.d.reloadConfigFile(context.WithoutCancel(ctx), "adopted device "+r.Device)
	return out, nil
}

// oneLine is err's text on one line: a page shows it, a log line carries it.
func oneLine(err error) string { return strings.Join(strings.Fields(err.Error()), " ") }

// reloadConfigFile reloads the config file as SIGHUP does (serve's
// reload: the file read again, then Reload), for why.
func (d *Daemon) reloadConfigFile(ctx context.Context, why string) error {
	cfg, err := config.Load(d.Config.File)
	if err == nil {
		err = d.Reload(ctx, cfg)
	}
	if err != nil {
		d.logger.Error("reload refused; still running the previous config", "reason", bridge.Untrusted(why), "err", err)
		return err
	}
	d.logger.Info("reloaded the config file", "reason", bridge.Untrusted(why))
	return nil
}
