// Package daemon reads a config once, builds the roles it asks for and
// runs them: the hub (bridge/hub) always; with it the platform
// (bridge/platform) on a single box or a platform, or the link to its
// platform (bridge/hub/replica) on a hub whose config has a platform:
// section. It owns what the roles share: the store, the metrics, the
// HTTP listeners and servers, the demo client. Open builds everything
// short of serving, in the order that lets every start-up problem surface
// before the daemon says it is ready; Serve serves; Close releases.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/bridge/console"
	"github.com/switchbridge/switchbridge/bridge/hub"
	"github.com/switchbridge/switchbridge/bridge/hub/api"
	"github.com/switchbridge/switchbridge/bridge/hub/hubstore"
	"github.com/switchbridge/switchbridge/bridge/hub/replica"
	"github.com/switchbridge/switchbridge/bridge/hub/webhook"
	"github.com/switchbridge/switchbridge/bridge/infra/certs"
	"github.com/switchbridge/switchbridge/bridge/infra/recentlog"
	"github.com/switchbridge/switchbridge/bridge/metrics"
	"github.com/switchbridge/switchbridge/bridge/platform"
	"github.com/switchbridge/switchbridge/bridge/platform/accounts"
	"github.com/switchbridge/switchbridge/bridge/platform/oauth"
	"github.com/switchbridge/switchbridge/bridge/store"
	"github.com/switchbridge/switchbridge/drivers"
)

// Daemon is one running switchbridge.
type Daemon struct {
	Config *config.Config
	// Store is the database both roles keep their records in; Accounts
	// the platform's records in it, HubStore the hub's.
	Store    *store.DB
	Accounts *accounts.Store
	HubStore *hubstore.Store
	Metrics  *metrics.Metrics
	// Hub is the hub role; Platform the platform role, nil on a hub of a
	// platform; Link that hub's link to its platform, nil elsewhere.
	Hub      *hub.Hub
	Platform *platform.Platform
	Link     *replica.Link

	// The roles' parts most used by tests and tools.
	Switchboard *bridge.Switchboard
	Feed        *bridge.Feed
	Webhooks    *webhook.Service
	API         *api.Handler
	// OAuth is the platform's authorization server; nil on a hub of a
	// platform.
	OAuth *oauth.Server
	// DemoURL is the demo client's public URL, "" when the config has no demo.
	DemoURL string

	logger    *slog.Logger
	reg       drivers.Registry
	recent    *recentlog.Ring // the log's last warnings and errors
	started   time.Time
	ln        *limitListener
	server    *http.Server
	handler   http.Handler
	publicURL string
	certs     *certs.Loader // nil without server.tls
	// console is the owner's console, on a hub of a platform too.
	console *console.Console
	// reloadMu makes reloads one at a time: SIGHUP's and the console's.
	reloadMu sync.Mutex

	metricsLn     net.Listener
	metricsServer *http.Server
	// self is the daemon's own listening addresses (setSelf), for isSelf.
	self atomic.Pointer[[]netip.AddrPort]

	bg     sync.WaitGroup
	stopBg context.CancelFunc
}

// Open starts everything short of serving: it opens the store (failing when
// the data dir is not writable), prepares the hub (the journal, the
// drivers' config), binds the listeners (failing when a port is taken),
// then opens the drivers and builds the platform or the link. On error,
// whatever was opened is closed again.
func Open(ctx context.Context, cfg *config.Config, reg drivers.Registry, logger *slog.Logger) (_ *Daemon, err error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	// The last warnings stay in memory for the console's overview.
	recent := recentlog.NewRing(slog.LevelWarn)
	logger = slog.New(recent.Wrap(logger.Handler()))
	d := &Daemon{Config: cfg, logger: logger, reg: reg, recent: recent, started: time.Now()}
	defer func() {
		if err != nil {
			d.Close()
			// Whatever step met a full disk (the store, its migrations, the
			// journal, the demo's user), the operator reads it plainly.
			err = store.ExplainDiskFull(err, cfg.DataDir)
		}
	}()
	if cfg.Server.TLS.Enabled() {
		if d.certs, err = certs.New(cfg.Server.TLS.CertFile, cfg.Server.TLS.KeyFile, logger.With("component", "tls")); err != nil {
			return nil, fmt.Errorf("server.tls: %w", err)
		}
	}
	if d.Store, err = OpenStore(ctx, cfg); err != nil {
		return nil, err
	}
	d.Accounts, d.HubStore = accounts.New(d.Store), hubstore.New(d.Store)
	d.Metrics = metrics.New(metrics.Options{Installations: d.Accounts.CountInstallations, Logger: logger.With("component", "metrics")})
	// The webhooks deliver for the installations this process serves: the
	// platform's own records, or the replica of a hub's platform.
	var installations webhook.Installations = d.Accounts
	if cfg.Platform != nil {
		installations = d.HubStore.Replica()
	}
	d.Hub, err = hub.New(ctx, hub.Options{Config: cfg, Store: d.HubStore, Registry: reg, Metrics: d.Metrics,
		Logger: logger, Installations: installations, IsSelf: d.isSelf})
	if err != nil {
		return nil, err
	}
	if err := d.listen(); err != nil {
		return nil, err
	}
	if err := d.Hub.Open(ctx); err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	if err := d.openRole(mux); err != nil {
		return nil, err
	}
	d.Switchboard, d.Feed, d.Webhooks, d.API = d.Hub.Switchboard, d.Hub.Feed, d.Hub.Webhooks, d.Hub.API
	if cfg.Demo != nil {
		if err := d.setUpDemo(ctx, mux); err != nil {
			return nil, fmt.Errorf("demo: %w", err)
		}
	}
	mux.HandleFunc("GET /{$}", d.handleRoot)
	d.buildServers(mux)
	d.runInBackground()
	return d, nil
}

// listen binds the API listener and the metrics listener, and notes the
// addresses no webhook may reach.
func (d *Daemon) listen() error {
	cfg := d.Config
	ln, err := net.Listen("tcp", cfg.Server.Listen)
	if err != nil {
		return fmt.Errorf("server.listen %s: %w", cfg.Server.Listen, err)
	}
	d.ln = newLimitListener(ln, cfg.Server.MaxConnections, d.logger)
	d.ln.trusted = cfg.Server.TrustedProxies.List()
	d.ln.onOpen, d.ln.onClose, d.ln.onReject = d.Metrics.ConnOpened, d.Metrics.ConnClosed, d.Metrics.ConnRejected
	if d.certs != nil {
		d.ln.tls = d.certs.TLSConfig()
	}
	if cfg.Server.MetricsListen != "off" {
		if d.metricsLn, err = net.Listen("tcp", cfg.Server.MetricsListen); err != nil {
			return fmt.Errorf("server.metrics_listen %s: %w", cfg.Server.MetricsListen, err)
		}
	}
	d.publicURL = cfg.AdvertisedURL(d.ln.Addr().String())
	for _, p := range cfg.NetworkWarnings() {
		d.logger.Warn(p.Msg, "config", cfg.File, "line", p.Line)
	}
	d.setSelf()
	return nil
}

// buildServers makes the HTTP servers of the API listener, over mux, and
// of the metrics listener.
func (d *Daemon) buildServers(mux *http.ServeMux) {
	cfg := d.Config
	// Instrument wraps the mux itself: it reads the matched route pattern
	// from the request the mux was given.
	d.handler = refuseTransferEncoding(d.Metrics.Instrument(mux))
	if d.certs != nil && cfg.Server.TLS.HSTS() > 0 {
		d.handler = strictTransportSecurity(d.handler, cfg.Server.TLS.HSTS())
	}
	d.server = &http.Server{
		Handler: d.handler,
		// Slow or idle clients must not hold connections on a small hub.
		ReadHeaderTimeout: 10 * time.Second,
		// Requests are small forms or no body at all.
		ReadTimeout: 30 * time.Second,
		// A command waits for its slowest switch; leave room beyond that.
		WriteTimeout: cfg.Server.CommandTimeout.Std() + 30*time.Second,
		// Keep-alive connections are cheap but not free on a Pi.
		IdleTimeout: 2 * time.Minute,
		// Headers hold a bearer token and a few cookies at most.
		MaxHeaderBytes: 16 << 10,
		ErrorLog:       newServerLog(d.logger),
	}
	// Shutdown waits for requests to end; event streams do not by
	// themselves.
	d.server.RegisterOnShutdown(d.API.CloseStreams)
	if d.console != nil {
		d.server.RegisterOnShutdown(d.console.CloseStreams)
	}
	if d.certs != nil {
		d.server.TLSConfig = d.certs.TLSConfig()
	}
	if d.metricsLn != nil {
		d.metricsServer = &http.Server{
			Handler: d.Metrics.Handler(),
			// A scraper sends one small GET; anything slower is not one.
			ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout:       10 * time.Second,
			// A scrape is bounded by the metrics package's own timeout.
			WriteTimeout:   30 * time.Second,
			IdleTimeout:    2 * time.Minute,
			MaxHeaderBytes: 8 << 10,
			ErrorLog:       newServerLog(d.logger),
		}
	}
}

// runInBackground starts the roles' own work (webhooks, the link, the
// platform's pruning) until Close.
func (d *Daemon) runInBackground() {
	ctx, cancel := context.WithCancel(context.Background())
	d.stopBg = cancel
	d.bg.Go(func() { d.Hub.Run(ctx) })
	if d.Platform != nil {
		d.bg.Go(func() { d.Platform.Run(ctx) })
	}
	if d.Link != nil {
		d.bg.Go(func() { d.Link.Run(ctx) })
	}
}

// PublicURL is the address the hub advertises: auth_url and base_url.
func (d *Daemon) PublicURL() string { return d.publicURL }

// Addr is the address the API listener is bound to.
func (d *Daemon) Addr() net.Addr { return d.ln.Addr() }

// MetricsAddr is the address the metrics listener is bound to, nil when
// metrics are off.
func (d *Daemon) MetricsAddr() net.Addr {
	if d.metricsLn == nil {
		return nil
	}
	return d.metricsLn.Addr()
}

// Healthy reports whether the daemon can do its work: the store answers.
// The watchdog pings systemd only while it does.
func (d *Daemon) Healthy(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return d.Store.Ping(ctx)
}

// Close releases everything: the roles' background work, the listeners,
// the drivers and the values pending, the usage writers, the store.
func (d *Daemon) Close() error {
	var errs []error
	if d.stopBg != nil {
		d.stopBg()
		d.bg.Wait()
	}
	// Serve's shutdown closes the listeners; after an Open without Serve
	// they are still bound. Closing one twice only returns an error.
	if d.ln != nil {
		d.ln.Close()
	}
	if d.metricsLn != nil {
		d.metricsLn.Close()
	}
	if d.Hub != nil {
		errs = append(errs, d.Hub.Close())
	}
	if d.Link != nil {
		errs = append(errs, d.Link.Close())
	}
	if d.Platform != nil {
		errs = append(errs, d.Platform.Close())
	}
	if d.Store != nil {
		errs = append(errs, d.Store.Close())
	}
	return errors.Join(errs...)
}

// setSelf records the addresses the hub listens on (API, metrics, the
// drivers' own listeners such as the embedded broker), which no webhook
// may reach. A driver's listener is taken as its config gives it: a host
// name there counts as every address of this machine.
func (d *Daemon) setSelf() {
	var own []netip.AddrPort
	for _, ln := range []net.Listener{d.ln, d.metricsLn} {
		if ln == nil || ln == (*limitListener)(nil) {
			continue
		}
		if ap, err := netip.ParseAddrPort(ln.Addr().String()); err == nil {
			own = append(own, ap)
		}
	}
	if d.Hub != nil {
		for _, l := range d.Hub.Listens() {
			host, port, err := net.SplitHostPort(l.Addr)
			n, perr := strconv.ParseUint(port, 10, 16)
			if err != nil || perr != nil {
				continue
			}
			ip, err := netip.ParseAddr(host)
			if err != nil {
				ip = netip.IPv6Unspecified() // "" or a name: every address
			}
			own = append(own, netip.AddrPortFrom(ip, uint16(n)))
		}
	}
	d.self.Store(&own)
}

// isSelf reports whether an address is one of the hub's own listeners,
// which a webhook must not reach whatever webhooks.allow says: the hub
// would post its events to itself, or an app would reach the metrics or
// the broker by a way around their own checks. Any address of this
// machine (loopback, unspecified, an interface's) at a port the hub
// listens on counts, whichever address the listener is bound to: a
// connection to 0.0.0.0 or [::] reaches a loopback listener too.
func (d *Daemon) isSelf(ap netip.AddrPort) bool {
	own := d.self.Load()
	if own == nil {
		return false
	}
	ip := ap.Addr().Unmap().WithZone("")
	for _, l := range *own {
		if l.Port() != ap.Port() {
			continue
		}
		if l.Addr().Unmap() == ip || thisMachine(ip) {
			return true
		}
	}
	return false
}

// thisMachine reports whether a connection to ip stays on this machine:
// loopback, unspecified, or an address of one of its interfaces.
func thisMachine(ip netip.Addr) bool {
	if ip.IsLoopback() || ip.IsUnspecified() {
		return true
	}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if own, ok := netip.AddrFromSlice(n.IP); ok && own.Unmap() == ip {
				return true
			}
		}
	}
	return false
}
