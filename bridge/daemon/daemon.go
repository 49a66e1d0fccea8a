// Package daemon assembles a running hub from a config: the store, the
// drivers, the Hub, the platform role (oauth), the hub role (api), the demo
// client, and the HTTP servers, in the order that lets every start-up
// problem surface before the hub says it is ready.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/bridge/hub/api"
	"github.com/switchbridge/switchbridge/bridge/hub/replica"
	"github.com/switchbridge/switchbridge/bridge/hub/webhook"
	"github.com/switchbridge/switchbridge/bridge/infra/certs"
	"github.com/switchbridge/switchbridge/bridge/metrics"
	"github.com/switchbridge/switchbridge/bridge/platform/linkserver"
	"github.com/switchbridge/switchbridge/bridge/platform/oauth"
	"github.com/switchbridge/switchbridge/bridge/store"
	"github.com/switchbridge/switchbridge/drivers"
)

// Daemon is one running hub.
type Daemon struct {
	Config      *config.Config
	Store       *store.DB
	Switchboard *bridge.Switchboard
	// Feed is the switches' changes, for event streams and webhooks.
	Feed     *bridge.Feed
	Webhooks *webhook.Service
	OAuth    *oauth.Server
	API      *api.Handler
	Metrics  *metrics.Metrics
	// DemoURL is the demo client's public URL, "" when the config has no demo.
	DemoURL string
	// Link is the hub's link to its platform, nil unless the config has
	// platform:; Platform serves the hubs' links, nil on a hub.
	Link     *replica.Follower
	Platform *linkserver.Platform

	logger    *slog.Logger
	reg       drivers.Registry
	env       drivers.Env
	drivers   *drivers.Set
	states    *store.ValueWriter
	usage     *store.UsageWriter
	ln        net.Listener
	server    *http.Server
	handler   http.Handler
	publicURL string
	certs     *certs.Loader // nil without server.tls

	metricsLn     net.Listener
	metricsServer *http.Server
	// self is the hub's own listening addresses (setSelf), for isSelf.
	self atomic.Pointer[[]netip.AddrPort]

	bg     sync.WaitGroup
	stopBg context.CancelFunc
}

// warnExposedSecrets logs each secret file other users can read. Such a
// file is used anyway, as Mosquitto does (config.ExposedSecrets says why
// not a refusal).
func (d *Daemon) warnExposedSecrets(cfg *config.Config, set *drivers.Set) {
	for _, p := range config.ExposedSecrets(append(cfg.SecretFiles(), set.SecretFiles()...)) {
		d.logger.Warn(p.Msg, "config", cfg.File, "line", p.Line)
	}
}

// Open starts everything short of serving: it opens the store (failing when
// the data dir is not writable), checks the drivers' config, binds the
// listener (failing when the port is taken), then opens the drivers. On
// error, whatever was opened is closed again.
func Open(ctx context.Context, cfg *config.Config, reg drivers.Registry, logger *slog.Logger) (_ *Daemon, err error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	d := &Daemon{Config: cfg, logger: logger, reg: reg}
	defer func() {
		if err != nil {
			d.Close()
			// Whatever step met a full disk (the store, its migrations, the
			// journal, the demo's user), the operator reads it plainly.
			err = store.ExplainDiskFull(err, cfg.DataDir)
		}
	}()
	if cfg.Server.TLS.Enabled() {
		d.certs, err = certs.New(cfg.Server.TLS.CertFile, cfg.Server.TLS.KeyFile, logger.With("component", "tls"))
		if err != nil {
			return nil, fmt.Errorf("server.tls: %w", err)
		}
	}
	d.Store, err = OpenStore(ctx, cfg)
	if err != nil {
		return nil, err
	}
	// The value journal makes a command's new value durable before its
	// 204. A platform on PostgreSQL has no switches of its own (config),
	// so nothing to journal, and no data_dir its processes share.
	var journal *store.Journal
	if d.Store.Dialect() == store.SQLite {
		journal, err = store.OpenJournal(cfg.DataDir)
		if err != nil {
			return nil, err
		}
		// Values a killed daemon journaled but had not yet written to the
		// database come first.
		rep, err := journal.Replay(d.Store)
		if err != nil {
			journal.Close()
			return nil, fmt.Errorf("replaying the value journal: %w", err)
		}
		logReplay(logger, filepath.Join(cfg.DataDir, store.JournalName), rep)
	}
	last, err := d.Store.SwitchValues(ctx)
	if err != nil {
		if journal != nil {
			journal.Close()
		}
		return nil, fmt.Errorf("reading stored switch values: %w", err)
	}
	// The audit log rides the value journal: a command's records go in
	// the write of its values, and reach the database with them.
	d.states = store.NewValueWriter(d.Store, journal, store.AuditBounds{MaxAge: cfg.Audit.MaxAge.Std(), MaxRows: cfg.Audit.MaxRows}, logger)
	// The change feed starts from the stored values, so a device that
	// reports what it had before the restart is no change; one set
	// otherwise while the drivers open is the start-up's.
	d.Feed = bridge.NewFeed(bridge.FeedOptions{ReadingEvery: cfg.Server.PowerEventsEvery.Std()})
	for id, v := range last {
		d.Feed.Seed(id, v)
	}
	// Webhooks subscribe before the drivers open, so that a start-up
	// policy's changes reach them too.
	allow, err := webhook.ParseAllow(cfg.Webhooks.Allow)
	if err != nil {
		return nil, err
	}
	var installations webhook.Installations = d.Store
	if cfg.Platform != nil {
		installations = d.Store.Replica()
	}
	d.Webhooks = webhook.New(d.Store, installations, d.Feed, nil, webhook.NewClient(allow, d.isSelf, cfg.Server.PublicURL), logger.With("component", "webhooks"))
	d.Metrics = metrics.New(metrics.Options{Installations: d.Store.CountInstallations, Logger: logger.With("component", "metrics")})
	env := drivers.Env{
		Metrics: d.Metrics.Registry(),
		Logger:  logger,
		// The records a driver keeps across restarts: the embedded
		// broker's client ids and their logins.
		Store: d.Store,
		LastValue: func(id string) (bridge.Value, bool) {
			if v, ok := d.states.Value(id); ok {
				return v, true // reported since start-up
			}
			v, ok := last[id]
			return v, ok
		},
		Notify: func(id string, st bridge.State) {
			d.states.Notify(id, st)
			d.Feed.Notify(id, st)
		},
	}
	d.env = env
	d.drivers, err = drivers.Build(cfg, reg, env)
	if err != nil {
		return nil, err
	}
	d.warnExposedSecrets(cfg, d.drivers)
	// A driver's own listener (the embedded broker) is checked against
	// this machine as server.listen is, before anything binds.
	if err := d.drivers.CheckListens(cfg.File); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Server.Listen)
	if err != nil {
		return nil, fmt.Errorf("server.listen %s: %w", cfg.Server.Listen, err)
	}
	limited := newLimitListener(ln, cfg.Server.MaxConnections, logger)
	limited.trusted = cfg.Server.TrustedProxies.List()
	d.ln = limited
	if cfg.Server.MetricsListen != "off" {
		d.metricsLn, err = net.Listen("tcp", cfg.Server.MetricsListen)
		if err != nil {
			return nil, fmt.Errorf("server.metrics_listen %s: %w", cfg.Server.MetricsListen, err)
		}
	}
	d.publicURL = cfg.AdvertisedURL(d.ln.Addr().String())
	for _, p := range cfg.NetworkWarnings() {
		logger.Warn(p.Msg, "config", cfg.File, "line", p.Line)
	}
	d.setSelf()
	switches, err := d.drivers.Open(ctx)
	if err != nil {
		return nil, err
	}
	d.Switchboard, err = bridge.NewSwitchboard(cfg.BridgeLocations(), switches, bridge.SwitchboardOptions{
		Timeout: cfg.Server.CommandTimeout.Std(), Persist: d.states.Persist, Observe: d.Metrics.ObserveCommand, Feed: d.Feed,
	})
	if err != nil {
		return nil, err
	}
	d.Feed.Started()
	d.Webhooks.SetSwitchboard(d.Switchboard)
	d.Webhooks.Observe = d.Metrics.WebhookDelivery
	d.Metrics.WatchWebhookOutbox(d.Store.WebhookOutbox)
	d.Metrics.WatchSwitches(d.Switchboard)
	limited.onOpen, limited.onClose, limited.onReject = d.Metrics.ConnOpened, d.Metrics.ConnClosed, d.Metrics.ConnRejected

	d.OAuth = oauth.New(d.Store, d.Switchboard, logger.With("component", "oauth"))
	d.OAuth.PublicURL = d.publicURL
	d.OAuth.TrustedProxies = cfg.Server.TrustedProxies.List()
	d.OAuth.Issuer.TokenLifetime = cfg.OAuth.TokenLifetime.Std()
	d.OAuth.Issuer.CodeLifetime = cfg.OAuth.CodeLifetime.Std()
	d.OAuth.Observe = d.Metrics.ObserveOAuth
	// When each installation was last used, for the connected apps page,
	// written behind the requests.
	d.usage = store.NewUsageWriter(d.Store, logger.With("component", "usage"))
	d.OAuth.Used = d.usage.Touch
	d.API = api.New(d.Switchboard, d.OAuth, logger.With("component", "api"))
	mux := http.NewServeMux()
	if cfg.Platform != nil {
		if err := d.setUpHub(mux); err != nil {
			return nil, err
		}
	} else {
		d.OAuth.Register(mux)
		d.setUpPlatform(mux)
	}
	d.API.TokenFailed = d.Metrics.APITokenFailed
	d.API.Feed = d.Feed
	d.API.Webhooks = d.Webhooks
	d.API.StreamsChanged, d.API.EventSent = d.Metrics.StreamsChanged, d.Metrics.EventSent
	if cfg.Platform != nil {
		d.API.AccessGeneration = d.Store.Replica().AccessGeneration
	} else {
		d.API.AccessGeneration = d.Store.AccessGeneration
	}
	switch rl := cfg.Server.RateLimit; {
	case rl.Off:
		d.API.RateLimit = api.RateLimit{}
	case rl.Requests > 0:
		d.API.RateLimit = api.RateLimit{Requests: rl.Requests, Per: rl.Per.Std()}
	}

	d.API.Register(mux)
	if cfg.Demo != nil {
		if err := d.setUpDemo(ctx, mux); err != nil {
			return nil, fmt.Errorf("demo: %w", err)
		}
	}
	mux.HandleFunc("GET /{$}", d.handleRoot)
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
		ErrorLog:       newServerLog(logger),
	}
	// Shutdown waits for requests to end; event streams do not by
	// themselves.
	d.server.RegisterOnShutdown(d.API.CloseStreams)
	if d.certs != nil {
		d.server.TLSConfig = d.certs.TLSConfig()
		limited.tls = d.certs.TLSConfig()
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
			ErrorLog:       newServerLog(logger),
		}
	}

	bgCtx, cancel := context.WithCancel(context.Background())
	d.stopBg = cancel
	d.bg.Add(1)
	go func() {
		defer d.bg.Done()
		d.prune(bgCtx)
	}()
	d.bg.Go(func() { d.runLink(bgCtx) })
	d.bg.Go(func() { d.Webhooks.Run(bgCtx) })
	return d, nil
}

// logReplay says what the journal replay did, so that no value the
// journal held is lost without a line in the log.
func logReplay(logger *slog.Logger, path string, rep *store.JournalReport) {
	if rep.Replayed > 0 {
		logger.Info("recovered switch values from the journal", "values", rep.Replayed)
	}
	if rep.AuditReplayed > 0 {
		logger.Info("recovered audit records from the journal", "records", rep.AuditReplayed)
	}
	if rep.Folded > 0 {
		logger.Info("value journal: values already stored (stopped between storing and emptying the journal); not replayed", "values", rep.Folded)
	}
	if rep.Unreadable > 0 {
		offs := make([]string, len(rep.UnreadableAt))
		for i, o := range rep.UnreadableAt {
			offs[i] = strconv.FormatInt(o, 10)
		}
		logger.Warn("value journal: unreadable lines skipped; the switches they were for come back with their value from before them",
			"file", path, "lines", rep.Unreadable, "offsets", strings.Join(offs, ","))
	}
	if rep.TornBytes > 0 {
		logger.Warn("value journal: cut a torn last line (a write cut short: its command was never acknowledged)",
			"file", path, "offset", rep.TornAt, "bytes", rep.TornBytes)
	}
	for _, o := range rep.Overridden {
		logger.Warn("value journal: a journaled value replaces a stored value with a later time stamp; the journal's order wins (the clock stepped back)",
			"switch", o.SwitchID, "value", string(o.Journaled), "at", o.JournaledAt.UTC().Format(time.RFC3339Nano),
			"stored_value", string(o.Stored), "stored_at", o.StoredAt.UTC().Format(time.RFC3339Nano))
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

// Close releases everything: drivers, pending state writes, the store.
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
	if d.drivers != nil {
		errs = append(errs, d.drivers.Close())
	}
	if d.states != nil {
		errs = append(errs, d.states.Close())
	}
	if d.usage != nil {
		errs = append(errs, d.usage.Close())
	}
	if d.Store != nil {
		errs = append(errs, d.Store.Close())
	}
	return errors.Join(errs...)
}

func (d *Daemon) prune(ctx context.Context) {
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		if err := d.Store.Prune(ctx, time.Now()); err != nil && ctx.Err() == nil {
			d.logger.Warn("pruning expired codes and tokens", "err", err)
		}
		d.pruneLinks(ctx, time.Now())
		// Each batch of commands prunes the audit log; this is for
		// records that age while none comes.
		d.states.PruneAudit()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// setSelf records the addresses the hub listens on (API, metrics, the
// drivers' own listeners such as the embedded broker), which no webhook
// may reach. A driver's listener is taken as its config gives it: a host
// name there counts as every address of this machine.
func (d *Daemon) setSelf() {
	var own []netip.AddrPort
	for _, ln := range []net.Listener{d.ln, d.metricsLn} {
		if ln == nil {
			continue
		}
		if ap, err := netip.ParseAddrPort(ln.Addr().String()); err == nil {
			own = append(own, ap)
		}
	}
	if d.drivers != nil {
		for _, l := range d.drivers.Listens() {
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
