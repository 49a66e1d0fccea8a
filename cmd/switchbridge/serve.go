package main

// serve runs the hub: the memory limit, the log, systemd's readiness and
// watchdog, and the signals (SIGTERM and SIGINT stop, SIGHUP reloads).

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	sdnotify "github.com/coreos/go-systemd/v22/daemon"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/bridge/daemon"
	"github.com/switchbridge/switchbridge/bridge/infra/asynclog"
	"github.com/switchbridge/switchbridge/bridge/infra/version"
	"github.com/switchbridge/switchbridge/drivers/builtin"
)

func serve(c *invocation) error {
	ctx := c.ctx
	cfg, err := config.Load(c.configPath, config.ForServe())
	if err != nil {
		return err
	}
	// No request waits for its log lines: they go through a buffer that
	// one goroutine writes out within asynclog.FlushEvery, and all of
	// them before serve returns.
	logOut := asynclog.New(c.stderr, 0)
	defer logOut.Close()
	logger := newLogger(cfg, logOut)
	limit, from := applyMemoryLimit(cfg)
	v := version.Get()
	logger.Info("switchbridge starting", "version", v.Version, "commit", v.Commit, "go", v.Go,
		"config", cfg.File, "pid", os.Getpid(),
		"memory_limit", limit.String(), "memory_limit_from", from)
	// The lines that mark the daemon's life go out at once: an operator
	// (or systemd's journal) watching a start sees it as it happens.
	logOut.Flush()
	d, err := daemon.Open(ctx, cfg, builtin.Registry(), logger)
	if err != nil {
		return err
	}
	defer d.Close()
	d.Metrics.Registry().MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "switchbridge_log_lines_dropped_total",
		Help: "Log lines dropped because the log buffer was full (the journal or terminal did not keep up).",
	}, func() float64 { return float64(logOut.Dropped()) }))
	metricsAddr := "off"
	if a := d.MetricsAddr(); a != nil {
		metricsAddr = a.String()
	}
	logger.Info("switchbridge ready", "listen", d.Addr().String(), "public_url", d.PublicURL(),
		"metrics_listen", metricsAddr, "switches", len(d.Switchboard.Switches()))
	logOut.Flush()
	if d.DemoURL != "" {
		fmt.Fprintf(c.stdout, "\nswitchbridge demo hub is running. Open %s and log in as %s / %s.\nThe owner's console is at %s/console/ (same login).\n\n",
			d.DemoURL, cfg.Demo.User, cfg.Demo.Password, strings.TrimRight(d.PublicURL(), "/"))
	}
	// Listeners are bound and drivers open: tell systemd (a no-op outside it).
	if _, err := sdnotify.SdNotify(false, sdnotify.SdNotifyReady); err != nil {
		logger.Warn("telling systemd we are ready", "err", err)
	}
	bg, stopBg := context.WithCancel(ctx)
	var helpers sync.WaitGroup
	helpers.Go(func() { watchdog(bg, d, logger) })
	helpers.Go(func() { reloadOnHangup(bg, d, c.configPath, c.hangup, logger) })
	// Before the deferred Close: a reload in progress must end before the
	// drivers it is opening are closed.
	defer helpers.Wait()
	defer stopBg()

	err = d.Serve(ctx)
	sdnotify.SdNotify(false, sdnotify.SdNotifyStopping)
	if err != nil {
		return err
	}
	logger.Info("switchbridge stopped")
	return nil
}

// applyMemoryLimit sets the Go runtime's soft memory limit to
// server.memory_limit, unless GOMEMLIMIT is set in the environment: the
// runtime has applied that one already, and an operator who sets it
// (say, in a systemd drop-in) means it. It returns the limit in force and
// where it came from. Near the limit the garbage collector works harder
// and hands freed memory back to the system sooner, so a burst of traffic
// does not leave the hub holding it.
func applyMemoryLimit(cfg *config.Config) (config.ByteSize, string) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return config.ByteSize(debug.SetMemoryLimit(-1)), "GOMEMLIMIT"
	}
	debug.SetMemoryLimit(int64(cfg.Server.MemoryLimit))
	return cfg.Server.MemoryLimit, "server.memory_limit"
}

func newLogger(cfg *config.Config, w io.Writer) *slog.Logger {
	var level slog.Level
	level.UnmarshalText([]byte(cfg.Log.Level)) // checked by config
	opts := &slog.HandlerOptions{Level: level}
	if cfg.Log.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// watchdog pings systemd's watchdog at half its interval, but only while
// the daemon is healthy: a hub whose store no longer answers stops pinging
// and systemd restarts it.
func watchdog(ctx context.Context, d *daemon.Daemon, logger *slog.Logger) {
	interval, err := sdnotify.SdWatchdogEnabled(false)
	if err != nil || interval <= 0 {
		return
	}
	t := time.NewTicker(interval / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := d.Healthy(ctx); err != nil {
			logger.Error("unhealthy: not pinging the watchdog", "err", err)
			continue
		}
		sdnotify.SdNotify(false, sdnotify.SdNotifyWatchdog)
	}
}

// reloadOnHangup re-reads the TLS certificate and the config on each
// request from hangup (SIGHUP) and applies the config's switches and
// locations. A config with problems is
// reported and changes nothing. Requests made while the daemon was still
// starting waited in hangup (coalesced into one) and are applied first.
func reloadOnHangup(ctx context.Context, d *daemon.Daemon, path string, hangup *reloadRequests, logger *slog.Logger) {
	select {
	case <-hangup.pending():
		asked, early := hangup.taken()
		logger.Info("reload asked for during start-up: reloading now", "requests", asked, "before_main", early)
		reload(ctx, d, path, logger)
	default:
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-hangup.pending():
			hangup.taken()
		}
		reload(ctx, d, path, logger)
	}
}

// reload re-reads the TLS certificate and the config, and applies the
// config's switches and locations.
func reload(ctx context.Context, d *daemon.Daemon, path string, logger *slog.Logger) {
	sdnotify.SdNotify(false, sdnotify.SdNotifyReloading)
	// The certificate first, and whatever the config says: a renewal hook
	// sends SIGHUP without touching the config.
	if err := d.ReloadCertificates(); err != nil {
		logger.Error("TLS certificate reload failed; still serving the previous certificate", "err", err)
	}
	cfg, err := config.Load(path)
	if err == nil {
		err = d.Reload(ctx, cfg)
	}
	if err != nil {
		logger.Error("reload refused; still running the previous config", "err", err)
	}
	sdnotify.SdNotify(false, sdnotify.SdNotifyReady)
}

// relaySignals turns signals into what the program does with them. SIGTERM
// and SIGINT cancel ctx: serve shuts down gracefully, other commands stop.
// SIGHUP asks serve to reload; the request waits in hangup until serve is
// ready to apply it. For the other commands SIGHUP is a terminal hanging up
// and stops them like SIGTERM. early is how many SIGHUPs came before main
// (package earlysig caught them): they count as if they came now.
func relaySignals(sigs <-chan os.Signal, early int, serving bool, cancel context.CancelFunc, hangup *reloadRequests) {
	switch {
	case early > 0 && serving:
		hangup.askEarly(early)
	case early > 0:
		cancel()
	}
	for sig := range sigs {
		if sig != syscall.SIGHUP || !serving {
			cancel()
			continue
		}
		hangup.ask()
	}
}

// reloadRequests holds reloads asked for and not yet applied. Any number
// of them coalesce into one: a reload reads the config as it is then.
type reloadRequests struct {
	c     chan struct{} // one slot: a reload is pending
	asked atomic.Int64  // requests since the last take, for the log
	early atomic.Int64  // of those, the ones that came before main ran
}

func newReloadRequests() *reloadRequests {
	return &reloadRequests{c: make(chan struct{}, 1)}
}

func (r *reloadRequests) ask() {
	r.asked.Add(1)
	select {
	case r.c <- struct{}{}:
	default: // a reload is already pending
	}
}

// askEarly records n requests that came before main ran.
func (r *reloadRequests) askEarly(n int) {
	r.early.Add(int64(n))
	for range n {
		r.ask()
	}
}

// pending yields, in a select, when a reload is pending. A
// nil *reloadRequests (in-process runs) never yields.
func (r *reloadRequests) pending() <-chan struct{} {
	if r == nil {
		return nil
	}
	return r.c
}

// taken is called after receiving from pending; it returns how many
// requests that reload answers, and how many of them came before main.
func (r *reloadRequests) taken() (asked, early int64) {
	return r.asked.Swap(0), r.early.Swap(0)
}
