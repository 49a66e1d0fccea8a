// Package hub is the hub role: it opens the drivers, runs the
// switchboard, keeps the switches' values (the value journal) and the
// audit log of commands, serves the installation API, streams the
// switches' changes and sends webhooks. A single box is a hub and a
// platform (bridge/platform) in one process; a hub of a platform answers
// its tokens from its replica (bridge/hub/replica). Which one it is, the
// daemon decides: a Hub is handed the token check it serves with.
//
// A hub starts in two steps, New and Open, so that everything that can
// refuse a start (the journal, a driver's settings, a driver's listener)
// does before the daemon binds its own listeners, and no device is
// touched until those are bound.
package hub

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/bridge/hub/api"
	"github.com/switchbridge/switchbridge/bridge/hub/hubstore"
	"github.com/switchbridge/switchbridge/bridge/hub/webhook"
	"github.com/switchbridge/switchbridge/bridge/metrics"
	"github.com/switchbridge/switchbridge/bridge/store"
	"github.com/switchbridge/switchbridge/drivers"
)

// Hub is the hub role of a running daemon.
type Hub struct {
	// Switchboard runs the commands; nil until Open.
	Switchboard *bridge.Switchboard
	// Feed is the switches' changes, for event streams and webhooks.
	Feed     *bridge.Feed
	Webhooks *webhook.Service
	// API is the installation API; nil until Register.
	API *api.Handler

	cfg     *config.Config
	store   *hubstore.Store
	reg     drivers.Registry
	env     drivers.Env
	drivers *drivers.Set
	states  *hubstore.ValueWriter
	metrics *metrics.Metrics
	logger  *slog.Logger
}

// Options is what a Hub is built with.
type Options struct {
	Config *config.Config
	// Store is the hub's records.
	Store    *hubstore.Store
	Registry drivers.Registry
	Metrics  *metrics.Metrics
	Logger   *slog.Logger
	// Installations are what the webhooks deliver for: the platform's
	// records on a single box, the replica's on a hub of a platform.
	Installations webhook.Installations
	// IsSelf reports whether an address is one of this process's own
	// listeners, which no webhook may reach.
	IsSelf func(netip.AddrPort) bool
}

// New prepares the hub: it replays the value journal, starts the feed from
// the stored values, subscribes the webhooks to the feed (so a start-up
// policy's changes reach them), and builds and checks the drivers, their
// own listeners checked against this machine, without touching a device.
func New(ctx context.Context, o Options) (_ *Hub, err error) {
	h := &Hub{cfg: o.Config, store: o.Store, reg: o.Registry, metrics: o.Metrics, logger: o.Logger}
	last, err := h.openValues(ctx)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			h.Close()
		}
	}()
	// The change feed starts from the stored values, so a device that
	// reports what it had before the restart is no change; one set
	// otherwise while the drivers open is the start-up's.
	h.Feed = bridge.NewFeed(bridge.FeedOptions{ReadingEvery: o.Config.Server.PowerEventsEvery.Std()})
	for id, v := range last {
		h.Feed.Seed(id, v)
	}
	allow, err := webhook.ParseAllow(o.Config.Webhooks.Allow)
	if err != nil {
		return nil, err
	}
	h.Webhooks = webhook.New(o.Store, o.Installations, h.Feed, webhook.NewClient(allow, o.IsSelf, o.Config.Server.PublicURL),
		o.Logger.With("component", "webhooks"), o.Metrics.WebhookDelivery)
	h.env = drivers.Env{
		Metrics: o.Metrics.Registry(),
		Logger:  o.Logger,
		// The records a driver keeps across restarts: the embedded
		// broker's client ids and their logins, the energy totals.
		Store: o.Store,
		LastValue: func(id string) (bridge.Value, bool) {
			if v, ok := h.states.Value(id); ok {
				return v, true // reported since start-up
			}
			v, ok := last[id]
			return v, ok
		},
		Notify: func(id string, st bridge.State) {
			h.states.Notify(id, st)
			h.Feed.Notify(id, st)
		},
	}
	if h.drivers, err = drivers.Build(o.Config, o.Registry, h.env); err != nil {
		return nil, err
	}
	h.warnExposedSecrets(o.Config, h.drivers)
	// A driver's own listener (the embedded broker) is checked against
	// this machine as server.listen is, before anything binds.
	if err := h.drivers.CheckListens(o.Config.File); err != nil {
		return nil, err
	}
	return h, nil
}

// openValues replays the value journal into the store and opens the
// writer of values and audit records; it returns the stored values. A
// platform on PostgreSQL has no switches of its own (config), so nothing
// to journal, and no data_dir its processes share.
func (h *Hub) openValues(ctx context.Context) (map[string]bridge.Value, error) {
	var journal *store.Journal
	if h.store.DB().Dialect() == store.SQLite {
		var err error
		if journal, err = store.OpenJournal(h.cfg.DataDir); err != nil {
			return nil, err
		}
		// Values a killed daemon journaled but had not yet written to the
		// database come first.
		rep, err := journal.Replay(h.store.DB())
		if err != nil {
			journal.Close()
			return nil, fmt.Errorf("replaying the value journal: %w", err)
		}
		logReplay(h.logger, filepath.Join(h.cfg.DataDir, store.JournalName), rep)
	}
	last, err := h.store.DB().SwitchValues(ctx)
	if err != nil {
		if journal != nil {
			journal.Close()
		}
		return nil, fmt.Errorf("reading stored switch values: %w", err)
	}
	// The audit log rides the value journal: a command's records go in
	// the write of its values, and reach the database with them.
	h.states = hubstore.NewValueWriter(h.store, journal, hubstore.AuditBounds{MaxAge: h.cfg.Audit.MaxAge.Std(), MaxRows: h.cfg.Audit.MaxRows}, h.logger)
	return last, nil
}

// Listens are the drivers' own listeners (the embedded broker's).
func (h *Hub) Listens() []drivers.Listen { return h.drivers.Listens() }

// Open opens the drivers and builds the switchboard over them.
func (h *Hub) Open(ctx context.Context) error {
	switches, err := h.drivers.Open(ctx)
	if err != nil {
		return err
	}
	h.Switchboard, err = bridge.NewSwitchboard(h.cfg.BridgeLocations(), switches, bridge.SwitchboardOptions{
		Timeout: h.cfg.Server.CommandTimeout.Std(), Persist: h.states.Persist, Observe: h.metrics.ObserveCommand, Feed: h.Feed,
	})
	if err != nil {
		return err
	}
	h.Feed.Started()
	h.metrics.WatchWebhookOutbox(h.store.WebhookOutbox)
	h.metrics.WatchSwitches(h.Switchboard)
	return nil
}

// Register builds the installation API, its tokens checked by auth, and
// adds its routes to mux. accessGeneration is the counter that moves with
// every change taking access away (the platform's or the replica's), so
// that open streams check their tokens again only when it moved.
func (h *Hub) Register(mux *http.ServeMux, auth bridge.Authorizer, accessGeneration func(context.Context) (int64, error)) {
	o := api.Options{
		TokenFailed: h.metrics.APITokenFailed, Feed: h.Feed, Webhooks: h.Webhooks,
		StreamsChanged: h.metrics.StreamsChanged, EventSent: h.metrics.EventSent, AccessGeneration: accessGeneration,
	}
	switch rl := h.cfg.Server.RateLimit; {
	case rl.Off:
		o.RateLimit = &api.RateLimit{}
	case rl.Requests > 0:
		o.RateLimit = &api.RateLimit{Requests: rl.Requests, Per: rl.Per.Std()}
	}
	h.API = api.New(h.Switchboard, auth, h.logger.With("component", "api"), o)
	h.API.Register(mux)
}

// Run delivers webhooks and keeps the audit log bounded until ctx ends.
func (h *Hub) Run(ctx context.Context) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.Webhooks.Run(ctx, h.Switchboard)
	}()
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		// Each batch of commands prunes the audit log; this is for
		// records that age while none comes.
		h.states.PruneAudit()
		select {
		case <-ctx.Done():
			<-done
			return
		case <-t.C:
		}
	}
}

// Close closes the drivers and writes the values and records pending.
func (h *Hub) Close() error {
	var err error
	if h.drivers != nil {
		err = h.drivers.Close()
	}
	if h.states != nil {
		if cerr := h.states.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// warnExposedSecrets logs each secret file other users can read. Such a
// file is used anyway, as Mosquitto does (config.ExposedSecrets says why
// not a refusal).
func (h *Hub) warnExposedSecrets(cfg *config.Config, set *drivers.Set) {
	for _, p := range config.ExposedSecrets(append(cfg.SecretFiles(), set.SecretFiles()...)) {
		h.logger.Warn(p.Msg, "config", cfg.File, "line", p.Line)
	}
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
