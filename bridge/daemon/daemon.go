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
	"sync"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/api"
	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/bridge/democlient"
	"github.com/switchbridge/switchbridge/bridge/metrics"
	"github.com/switchbridge/switchbridge/bridge/oauth"
	"github.com/switchbridge/switchbridge/bridge/store"
	"github.com/switchbridge/switchbridge/drivers"
)

// Daemon is one running hub.
type Daemon struct {
	Config  *config.Config
	Store   *store.DB
	Hub     *bridge.Hub
	OAuth   *oauth.Server
	API     *api.Handler
	Metrics *metrics.Metrics
	// DemoURL is the demo client's public URL, "" when the config has no demo.
	DemoURL string

	logger    *slog.Logger
	reg       drivers.Registry
	env       drivers.Env
	drivers   *drivers.Set
	states    *stateWriter
	ln        net.Listener
	server    *http.Server
	handler   http.Handler
	publicURL string

	metricsLn     net.Listener
	metricsServer *http.Server

	bg     sync.WaitGroup
	stopBg context.CancelFunc
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
		}
	}()
	d.Store, err = store.Open(ctx, cfg.DataDir)
	if err != nil {
		return nil, err
	}
	journal, err := store.OpenJournal(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	// Values a killed daemon journaled but had not yet written to the
	// database come first.
	if n, err := journal.Replay(d.Store); err != nil {
		journal.Close()
		return nil, fmt.Errorf("replaying the value journal: %w", err)
	} else if n > 0 {
		logger.Info("recovered switch values from the journal", "values", n)
	}
	last, err := d.Store.SwitchValues(ctx)
	if err != nil {
		journal.Close()
		return nil, fmt.Errorf("reading stored switch values: %w", err)
	}
	d.states = newStateWriter(d.Store, journal, logger)
	d.Metrics = metrics.New(metrics.Options{Installations: d.Store.CountInstallations, Logger: logger.With("component", "metrics")})
	env := drivers.Env{
		MQTT:   d.Metrics,
		Logger: logger,
		LastValue: func(id string) (bridge.Value, bool) {
			if v, ok := d.states.value(id); ok {
				return v, true // reported since start-up
			}
			v, ok := last[id]
			return v, ok
		},
		Notify: d.states.notify,
	}
	d.env = env
	d.drivers, err = drivers.Build(cfg, reg, env)
	if err != nil {
		return nil, err
	}
	d.ln, err = net.Listen("tcp", cfg.Server.Listen)
	if err != nil {
		return nil, fmt.Errorf("server.listen %s: %w", cfg.Server.Listen, err)
	}
	if cfg.Server.MetricsListen != "off" {
		d.metricsLn, err = net.Listen("tcp", cfg.Server.MetricsListen)
		if err != nil {
			return nil, fmt.Errorf("server.metrics_listen %s: %w", cfg.Server.MetricsListen, err)
		}
	}
	d.publicURL = cfg.AdvertisedURL(d.ln.Addr().String())
	if cfg.Server.PublicURL == "" && !isLoopback(d.ln.Addr()) {
		logger.Warn("server.public_url is not set: clients are told to use " + d.publicURL + ", which reaches the hub only from this machine")
	}
	switches, err := d.drivers.Open(ctx)
	if err != nil {
		return nil, err
	}
	d.Hub, err = bridge.NewHub(locations(cfg), switches)
	if err != nil {
		return nil, err
	}
	d.Hub.Timeout = cfg.Server.CommandTimeout.Std()
	d.Hub.Sync = d.states.sync
	d.Hub.Observe = d.Metrics.ObserveCommand
	d.Metrics.WatchSwitches(d.Hub)

	d.OAuth = oauth.New(d.Store, d.Hub, logger.With("component", "oauth"))
	d.OAuth.PublicURL = d.publicURL
	d.OAuth.TokenLifetime = cfg.OAuth.TokenLifetime.Std()
	d.OAuth.CodeLifetime = cfg.OAuth.CodeLifetime.Std()
	d.OAuth.Observe = d.Metrics.ObserveOAuth
	d.API = api.New(d.Hub, d.OAuth, logger.With("component", "api"))
	d.API.TokenFailed = d.Metrics.APITokenFailed

	mux := http.NewServeMux()
	d.OAuth.Register(mux)
	d.API.Register(mux)
	if cfg.Demo != nil {
		if err := d.setUpDemo(ctx, mux); err != nil {
			return nil, fmt.Errorf("demo: %w", err)
		}
	}
	mux.HandleFunc("GET /{$}", d.handleRoot)
	// Instrument wraps the mux itself: it reads the matched route pattern
	// from the request the mux was given.
	d.handler = d.Metrics.Instrument(mux)

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
		ErrorLog:       slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
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
			ErrorLog:       slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		}
	}

	bgCtx, cancel := context.WithCancel(context.Background())
	d.stopBg = cancel
	d.bg.Add(1)
	go func() {
		defer d.bg.Done()
		d.prune(bgCtx)
	}()
	return d, nil
}

func locations(cfg *config.Config) []bridge.Location {
	var locs []bridge.Location
	for _, l := range cfg.Locations {
		bl := bridge.Location{ID: l.ID, Name: l.Name}
		for _, s := range l.Switches {
			bl.Switches = append(bl.Switches, s.ID)
		}
		locs = append(locs, bl)
	}
	return locs
}

// Reload applies the locations, switches and driver settings (mqtt) of a
// new config without stopping the HTTP servers: commands in flight finish;
// a driver whose settings and switches did not change keeps running as it
// is (its GPIO lines stay claimed, its broker connection up); the others
// are closed and opened anew; then the hub switches tables. If the
// new drivers fail to open, the old config's drivers are opened again and
// the error is returned. Sections that need a restart (server, data_dir,
// oauth, log, demo) are left as they were, with a warning when they changed.
func (d *Daemon) Reload(ctx context.Context, cfg *config.Config) error {
	for name, changed := range map[string]bool{
		"server":   cfg.Server != d.Config.Server,
		"data_dir": cfg.DataDir != d.Config.DataDir,
		"oauth":    cfg.OAuth != d.Config.OAuth,
		"log":      cfg.Log != d.Config.Log,
		"demo":     (cfg.Demo == nil) != (d.Config.Demo == nil) || (cfg.Demo != nil && *cfg.Demo != *d.Config.Demo),
	} {
		if changed {
			d.logger.Warn("reload: this section changed but takes effect only after a restart", "section", name)
		}
	}
	env := d.env
	env.Reload = true
	next, err := drivers.Build(cfg, d.reg, env)
	if err != nil {
		return err
	}
	return d.Hub.Exclusive(func() error {
		kept := next.KeepUnchanged(d.drivers)
		switches, err := next.OpenReplacing(ctx, d.drivers)
		if err == nil {
			err = d.Hub.Replace(locations(cfg), switches)
			if err != nil {
				next.Close()
			}
		}
		if err != nil {
			d.drivers.Close() // what OpenReplacing had not closed yet
			// Back to the config that worked, even if the reload was
			// interrupted (a SIGTERM cancels ctx): the hub must not be left
			// on closed devices.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			old, berr := drivers.Build(d.Config, d.reg, env)
			if berr == nil {
				sws, oerr := old.Open(rctx)
				if oerr == nil {
					rerr := d.Hub.Replace(locations(d.Config), sws)
					if rerr == nil {
						d.drivers = old
						return fmt.Errorf("reload failed, kept the previous switches: %w", err)
					}
					old.Close()
					oerr = rerr
				}
				berr = oerr
			}
			// Neither config opens: no switch is served (commands answer
			// 404 naming them) rather than commands reaching closed devices.
			d.Hub.Replace(locations(d.Config), nil)
			d.drivers = old
			if d.drivers == nil {
				d.drivers, _ = drivers.Build(&config.Config{File: d.Config.File}, d.reg, env)
			}
			return fmt.Errorf("reload failed and the previous switches could not be reopened (%v): %w", berr, err)
		}
		d.drivers = next
		d.Config.Locations = cfg.Locations
		d.Config.MQTT = cfg.MQTT
		d.logger.Info("reloaded switches and locations", "switches", len(switches), "locations", len(cfg.Locations), "drivers_kept", kept)
		return nil
	})
}

// isLoopback reports whether a listener is bound to loopback only.
func isLoopback(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
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

// Serve serves HTTP until ctx is done, then shuts down gracefully: it stops
// accepting, lets requests in flight finish within the config's shutdown
// timeout, and returns. It returns a non-nil error only when serving failed.
func (d *Daemon) Serve(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- d.server.Serve(d.ln) }()
	merrc := make(chan error, 1)
	if d.metricsServer != nil {
		go func() { merrc <- d.metricsServer.Serve(d.metricsLn) }()
	}
	select {
	case err := <-errc:
		if d.metricsServer != nil {
			d.metricsServer.Close()
		}
		return err
	case err := <-merrc:
		d.server.Close()
		return fmt.Errorf("metrics listener: %w", err)
	case <-ctx.Done():
	}
	d.logger.Info("shutting down: finishing requests in flight", "timeout_seconds", d.Config.Server.ShutdownTimeout.Std().Seconds())
	// A fresh timeout, not the cancelled ctx: requests in flight get their time.
	sctx, cancel := context.WithTimeout(context.Background(), d.Config.Server.ShutdownTimeout.Std())
	defer cancel()
	if d.metricsServer != nil {
		go d.metricsServer.Shutdown(sctx)
	}
	err := d.server.Shutdown(sctx)
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		return serr
	}
	if err != nil {
		d.server.Close()
		return fmt.Errorf("shutting down: requests still running after %s: %w", d.Config.Server.ShutdownTimeout.Std(), err)
	}
	return nil
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
		d.states.close()
		errs = append(errs, d.states.journal.Close())
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
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (d *Daemon) handleRoot(w http.ResponseWriter, r *http.Request) {
	if d.DemoURL != "" {
		http.Redirect(w, r, "/demo/", http.StatusFound)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintln(w, "switchbridge hub. Clients start at /oauth/authorize; see the README.")
}

// DemoClientID is the client id of the demo app.
const DemoClientID = "switchbridge-demo"

// setUpDemo makes sure the demo user (member of every location) and the
// published demo app exist, gives the app a fresh secret that only this
// process knows, and mounts the demo client.
func (d *Daemon) setUpDemo(ctx context.Context, mux *http.ServeMux) error {
	demo := d.Config.Demo
	hash, err := bcrypt.GenerateFromPassword([]byte(demo.Password), bcrypt.DefaultCost)
	if err != nil {
		return err
	}
	var all []int64
	for _, l := range d.Config.Locations {
		all = append(all, l.ID)
	}
	user, err := d.Store.UserByName(ctx, demo.User)
	switch bridge.ErrorCode(err) {
	case "":
		if err := d.Store.SetPassword(ctx, demo.User, hash); err != nil {
			return err
		}
	case bridge.ENOTFOUND:
		if user, err = d.Store.CreateUser(ctx, demo.User, hash, all); err != nil {
			return err
		}
	default:
		return err
	}
	redirect := d.publicURL + democlient.CallbackPath
	secret := oauth.NewSecret()
	_, err = d.Store.App(ctx, DemoClientID)
	switch bridge.ErrorCode(err) {
	case "":
		if err := d.Store.SetAppSecret(ctx, DemoClientID, oauth.Hash(secret)); err != nil {
			return err
		}
		if err := d.Store.SetAppRedirectURIs(ctx, DemoClientID, []string{redirect}); err != nil {
			return err
		}
	case bridge.ENOTFOUND:
		err = d.Store.CreateApp(ctx, &bridge.App{ClientID: DemoClientID, Name: "Demo client", SecretHash: oauth.Hash(secret),
			RedirectURIs: []string{redirect}, OwnerID: user.ID, Published: true})
		if err != nil {
			return err
		}
	default:
		return err
	}
	c := democlient.New(democlient.Options{
		ClientID: DemoClientID, ClientSecret: secret, AuthURL: d.publicURL, RedirectURL: redirect,
		Logger: d.logger.With("component", "demo"),
	})
	c.Register(mux)
	d.DemoURL = d.publicURL + "/demo/"
	return nil
}

// stateWriter stores the values drivers report without making them wait on
// the disk: the latest value per switch is queued and written to the
// database in batches by one goroutine. A command, which must not be
// answered before its values are durable, appends them to the value
// journal instead (one write); each batch written to the database empties
// the journal again.
type stateWriter struct {
	db      valueSaver
	journal *store.Journal
	logger  *slog.Logger

	// wmu serialises journal appends and database flushes, so a flush
	// knows everything journaled before it is in its batch.
	wmu       sync.Mutex
	journaled map[string]bridge.Value // queued values already in the journal; under wmu

	mu   sync.Mutex
	last map[string]bridge.Value
	// at is when each switch's last value was learnt, by this process's
	// clock (with its monotonic reading, so a wall-clock step cannot reorder
	// reports): a value learnt earlier, such as a command's confirmation
	// stored after the device already reported a newer change, is dropped.
	at     map[string]time.Time
	queue  map[string]bridge.State // reported, not yet in the database
	closed bool
	wake   chan struct{}
	stop   chan struct{} // closed by close: no more waiting to coalesce
	done   chan struct{}
}

// valueSaver is the part of the store the writer needs.
type valueSaver interface {
	SaveSwitchValues(ctx context.Context, vs []store.SwitchValue) error
}

func newStateWriter(db valueSaver, journal *store.Journal, logger *slog.Logger) *stateWriter {
	w := &stateWriter{db: db, journal: journal, logger: logger, journaled: map[string]bridge.Value{},
		last: map[string]bridge.Value{}, at: map[string]time.Time{}, queue: map[string]bridge.State{},
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	return w
}

// notify takes in a state a driver reports. Only a value the driver learnt,
// which comes with its time (drivers.Env.Notify), is stored: a state with a
// zero Updated only passes on availability, and its value is the one
// LastValue gave the driver, which must not overwrite anything newer.
func (w *stateWriter) notify(id string, st bridge.State) {
	if st.Value == "" || st.Updated.IsZero() {
		return
	}
	w.mu.Lock()
	if w.closed || st.Updated.Before(w.at[id]) {
		w.mu.Unlock()
		return
	}
	w.at[id] = st.Updated
	if w.last[id] == st.Value {
		w.mu.Unlock()
		return
	}
	w.last[id] = st.Value
	w.queue[id] = st
	// Under the lock, so close cannot shut the channel between check and send.
	select {
	case w.wake <- struct{}{}:
	default:
	}
	w.mu.Unlock()
}

// coalesce is how long reported values gather before the background
// writer stores them: plugs that report every few seconds cost one SD-card
// write per window, not one per message.
const coalesce = 500 * time.Millisecond

func (w *stateWriter) run() {
	defer close(w.done)
	for range w.wake {
		t := time.NewTimer(coalesce)
		select {
		case <-t.C:
		case <-w.stop:
			t.Stop()
		}
		w.flush()
	}
	w.flush()
}

// value is the last value reported for a switch since start-up.
func (w *stateWriter) value(id string) (bridge.Value, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	v, ok := w.last[id]
	return v, ok
}

func toValue(id string, st bridge.State) store.SwitchValue {
	at := st.Updated
	if at.IsZero() {
		at = time.Now()
	}
	return store.SwitchValue{SwitchID: id, Value: st.Value, At: at}
}

// sync records that a command left switches at v (each as of its
// confirmation) and makes every value reported so far durable before it
// returns: it appends those not yet journaled to the journal. Should the
// journal fail, it writes the database instead; only when both fail does
// it return an error, and the command is not answered as a success.
func (w *stateWriter) sync(v bridge.Value, confirmedAt map[string]time.Time) error {
	for id, at := range confirmedAt {
		w.notify(id, bridge.State{Value: v, Available: true, Updated: at})
	}
	w.wmu.Lock()
	defer w.wmu.Unlock()
	w.mu.Lock()
	var batch []store.SwitchValue
	for id, st := range w.queue {
		if w.journaled[id] != st.Value {
			batch = append(batch, toValue(id, st))
		}
	}
	w.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	if err := w.journal.Append(batch); err != nil {
		w.logger.Warn("value journal: writing the database instead", "err", err)
		if ferr := w.flushLocked(); ferr != nil {
			return errors.Join(err, ferr)
		}
		return nil
	}
	for _, v := range batch {
		w.journaled[v.SwitchID] = v.Value
	}
	return nil
}

func (w *stateWriter) flush() {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	w.flushLocked()
}

func (w *stateWriter) flushLocked() error {
	w.mu.Lock()
	q := w.queue
	w.queue = map[string]bridge.State{}
	w.mu.Unlock()
	if len(q) == 0 {
		return nil
	}
	batch := make([]store.SwitchValue, 0, len(q))
	for id, st := range q {
		batch = append(batch, toValue(id, st))
	}
	if err := w.db.SaveSwitchValues(context.Background(), batch); err != nil {
		w.logger.Warn("storing switch values; will retry", "switches", len(batch), "err", err)
		// Put back what no newer report replaced; the journal keeps what it has.
		w.mu.Lock()
		for id, st := range q {
			if _, newer := w.queue[id]; !newer {
				w.queue[id] = st
			}
		}
		if !w.closed {
			select { // try again after the next coalescing window
			case w.wake <- struct{}{}:
			default:
			}
		}
		w.mu.Unlock()
		return err
	}
	// Everything journaled so far was in the queue this batch took (or was
	// replaced by a newer value in it), so the journal is no longer needed.
	if err := w.journal.Compact(); err != nil {
		w.logger.Warn("value journal: compacting", "err", err)
	}
	clear(w.journaled)
	return nil
}

func (w *stateWriter) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	close(w.stop)
	close(w.wake)
	<-w.done
}
