package replica

// The Follower, its session with the platform (report the inventory, then
// follow the changes), the back-off after a break, and what it shows of
// the link (up, refused, replica age, metrics). Its requests are in
// client.go, its replica in replica.go, its token check in authorizer.go.

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchbridge/switchbridge/bridge"
)

// inventoryRetry is how often a hub reports an inventory the platform
// refused again, the operator having perhaps fixed the other side.
const inventoryRetry = time.Minute

// Back-off between attempts to reach the platform. It starts from
// minBackoff again after any session in which a poll was answered.
const (
	minBackoff = time.Second
	maxBackoff = 30 * time.Second
)

// A platform that said it is shutting down (503 with Retry-After) is
// called again every restartRetry (with jitter) for up to restartWindow,
// rather than after a growing back-off: it is most likely restarting, and
// the hub should be back within a second of it.
const (
	restartRetry  = 400 * time.Millisecond
	restartWindow = time.Minute
)

// Follower is the hub's side of the link: it reports the inventory, follows the
// platform's changes into the replica and keeps at it.
type Follower struct {
	opts FollowerOptions

	platform *url.URL
	hubID    string
	instance string // drawn at start: this process (link.InstanceHeader)
	store    Store
	logger   *slog.Logger
	client   *http.Client

	reported chan struct{} // an inventory change waits to be reported
	kick     chan struct{} // a new secret: try again now
	// heartbeats: the platform said (at the last inventory) that it sends
	// 102 Processing on long polls.
	heartbeats atomic.Bool
	// beatAtOnce: the platform said it sends the first 102 as soon as it
	// accepts a poll, so that one measures a round trip.
	beatAtOnce atomic.Bool
	// beatsHeard: a heartbeat reached this hub, and none was missed since.
	beatsHeard atomic.Bool
	// pollHeard: the platform was heard on the current poll (a heartbeat
	// or the answer).
	pollHeard atomic.Bool
	// rtt is the link's round-trip estimate (rtt.go).
	rtt rttEstimate
	// polled: a poll was answered since the session started.
	polled atomic.Bool
	// accepted is the platform's last link.LocationsHeader the replica follows.
	accepted  atomic.Pointer[string]
	usage     usageReports  // uses not yet reported (usage.go)
	usageKick chan struct{} // uses to report, or the link came up
	up        atomic.Bool
	syncedAt  atomic.Int64 // unix ms of the platform's last answer
	// refused is the platform's last refusal of the inventory or the
	// credentials, "" while the link is fine.
	mu      sync.Mutex
	refused string
	secret  string
	// removed: the platform said this hub was removed, or that it must be
	// given new credentials (a platform restored from an older backup);
	// the replica is emptied until the platform accepts the hub again.
	removed atomic.Bool

	// applyMu orders the batches of the long poll and of SyncNow: a batch
	// older than the replica's cursor is not applied over a newer one.
	applyMu sync.Mutex

	syncMu    sync.Mutex
	syncing   chan struct{} // closed when the sync in flight ends; nil when none
	syncStart time.Time     // when the last sync started
	syncOK    bool          // whether the last sync applied
	// syncWaiters counts the callers of SyncNow waiting on a sync.
	syncWaiters atomic.Int32
	// syncs counts the syncs on a miss by outcome (metrics).
	syncs *prometheus.CounterVec
}

// FollowerOptions is what a Follower needs besides its credentials.
type FollowerOptions struct {
	// Inventory returns the hub's locations and switches as they are now.
	Inventory func() []bridge.RemoteLocation
	// Applied, when set, is called after every batch that changed the
	// replica (the token check's cache must forget what it knew).
	Applied func()
}

// NewFollower returns the hub's side of the link to the platform at platformURL,
// as hub hubID with secret.
func NewFollower(platformURL, hubID, secret string, st Store, logger *slog.Logger, opts FollowerOptions) (*Follower, error) {
	u, err := url.Parse(strings.TrimRight(platformURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("platform url %q must be an absolute http(s) URL", platformURL)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	var inst [8]byte
	crand.Read(inst[:])
	h := &Follower{opts: opts, platform: u, hubID: hubID, secret: secret, instance: hex.EncodeToString(inst[:]), store: st, logger: logger,
		reported: make(chan struct{}, 1), kick: make(chan struct{}, 1), usageKick: make(chan struct{}, 1), client: newClient()}
	h.syncs = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchbridge_platform_link_syncs_total",
		Help: "Syncs of the replica on a miss (a token or installation it does not hold), by outcome: applied, failed (the platform slower than the deadline, or unreachable), link_down (none tried)."},
		[]string{"outcome"})
	for _, o := range []string{"applied", "failed", "link_down"} {
		h.syncs.WithLabelValues(o)
	}
	if s, err := st.ReplicaState(context.Background()); err == nil && s.Synced {
		h.syncedAt.Store(s.SyncedAt.UnixMilli())
	}
	return h, nil
}

// InventoryChanged asks for the inventory to be reported again (after a
// reload); a long poll in flight is cut short for it.
func (h *Follower) InventoryChanged() {
	select {
	case h.reported <- struct{}{}:
	default:
	}
}

// SetSecret replaces the hub's secret (platform.secret_file read again on
// reload) and, when it changed, connects again with it at once. It
// reports whether it changed.
func (h *Follower) SetSecret(secret string) bool {
	h.mu.Lock()
	changed := secret != h.secret
	h.secret = secret
	h.mu.Unlock()
	if changed {
		select {
		case h.kick <- struct{}{}:
		default:
		}
		h.InventoryChanged()
	}
	return changed
}

func (h *Follower) credentials() (string, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.hubID, h.secret
}

// Settled reports whether what the replica lacks is known not to exist
// for this hub: the platform removed it, or told it to get new
// credentials, and the replica was emptied. Otherwise, while the link is
// down, an unknown token cannot be confirmed either way.
func (h *Follower) Settled() bool { return h.removed.Load() }

// Up reports whether the link is up.
func (h *Follower) Up() bool { return h.up.Load() }

// Refused returns the platform's last refusal, "" when none.
func (h *Follower) Refused() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.refused
}

// ReplicaAge is how long ago the platform last answered; -1 when never.
func (h *Follower) ReplicaAge() time.Duration {
	ms := h.syncedAt.Load()
	if ms == 0 {
		return -1
	}
	return time.Since(time.UnixMilli(ms))
}

// Register adds the link's metrics to reg.
func (h *Follower) Register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "switchbridge_platform_link_up",
			Help: "1 while the hub's link to its platform is up, else 0 (the hub then serves from its replica)."},
			func() float64 {
				if h.Up() {
					return 1
				}
				return 0
			}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "switchbridge_platform_replica_age_seconds",
			Help: "Seconds since the platform last answered the hub (its replica is at least that current); -1 before the first answer."},
			func() float64 {
				if a := h.ReplicaAge(); a >= 0 {
					return a.Seconds()
				}
				return -1
			}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "switchbridge_platform_link_refused",
			Help: "1 while the platform refuses this hub (a wrong or rotated secret, a conflicting inventory, another process with its credentials; the hub serves its replica), 2 once it said the hub was removed or must be given new credentials (the replica is emptied), else 0."},
			func() float64 {
				switch {
				case h.removed.Load():
					return 2
				case h.Refused() != "":
					return 1
				}
				return 0
			}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "switchbridge_platform_link_rtt_seconds",
			Help: "The hub's smoothed round-trip estimate of its link to the platform (RFC 6298 SRTT), from which its deadlines follow; -1 before the first sample."},
			func() float64 {
				if srtt, _, ok := h.rtt.smoothed(); ok {
					return srtt.Seconds()
				}
				return -1
			}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "switchbridge_platform_replica_tombstones",
			Help: "Tombstones the hub keeps of installations and tokens the platform deleted, refused 401 without asking it; -1 when they cannot be read."},
			h.tombstones),
		h.syncs,
	} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// Run keeps the link until ctx ends: report the inventory, then follow the
// changes; after any break, back off and start again from the stored
// cursor.
func (h *Follower) Run(ctx context.Context) {
	reporting := make(chan struct{})
	defer func() { <-reporting }()
	go func() { defer close(reporting); h.reportUsageWhileRunning(ctx) }()
	backoff := minBackoff
	var restarting time.Time // until when the platform is called again quickly
	for ctx.Err() == nil {
		h.polled.Store(false)
		select {
		case <-h.kick: // this session uses the new secret already
		default:
		}
		err := h.session(ctx)
		wasUp := h.up.Swap(false)
		// The pool may hold connections that died with this one (a
		// network event kills them all): the next session dials anew.
		h.client.CloseIdleConnections()
		if ctx.Err() != nil {
			return
		}
		if h.polled.Load() {
			backoff, restarting = minBackoff, time.Time{}
		}
		var se *statusError
		if errors.As(err, &se) {
			h.follow(ctx, se.Header)
		}
		switch {
		case errors.As(err, &se) && se.Removed:
			h.removedByPlatform(ctx, se.Message, false)
		case errors.As(err, &se) && se.Rekey:
			h.removedByPlatform(ctx, se.Message, true)
		case errors.As(err, &se) && (se.Status == http.StatusConflict || se.Status == http.StatusUnauthorized || se.Status == http.StatusBadRequest):
			h.setRefused(se.Message)
			h.logger.Error("the platform refused this hub: "+bridge.Untrusted(se.Message).String()+"; serving the installations and tokens the replica holds",
				"platform", h.platform.String(), "status", se.Status)
		case errors.As(err, &se) && se.Status == http.StatusServiceUnavailable && se.RetryAfter > 0 && se.RetryAfter <= 2*time.Second:
			if restarting.IsZero() || time.Now().After(restarting) {
				restarting = time.Now().Add(restartWindow)
			}
			// A platform restarting, or one whose database is away for a
			// moment, says so this way; its message tells which.
			h.logger.Warn("the platform is briefly unavailable: calling it again in a moment; serving the installations and tokens the replica holds meanwhile",
				"platform", h.platform.String(), "reason", bridge.Untrusted(se.Message))
		case wasUp:
			h.logger.Warn("platform link lost: serving the installations and tokens the replica holds until it is back",
				"platform", h.platform.String(), "err", err, "replica_age_seconds", int64(h.ReplicaAge().Seconds()))
		case time.Now().Before(restarting):
			// Called every few hundred milliseconds while it restarts: once
			// said is enough.
			h.logger.Debug("platform unreachable while it restarts", "platform", h.platform.String(), "err", err)
		default:
			h.logger.Warn("platform unreachable: serving the installations and tokens the replica holds",
				"platform", h.platform.String(), "err", err, "retry_in_seconds", backoff.Seconds())
		}
		// Full jitter on the upper half: many hubs that lost one platform
		// do not all call it again at once.
		d := backoff/2 + rand.N(backoff/2+1)
		fast := time.Now().Before(restarting)
		if fast {
			d = restartRetry/2 + rand.N(restartRetry/2+1)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		case <-h.kick:
			backoff = minBackoff
			continue
		}
		if !fast {
			backoff = min(backoff*2, maxBackoff)
		}
	}
}

// session reports the inventory and follows the changes until an error.
//
// An inventory the platform refuses (409: a location another hub holds;
// 400: past the limits) does not end the session: the platform keeps the
// locations it last accepted from this hub, and the hub goes on following
// their changes (a revocation must still reach it), trying the inventory
// again every inventoryRetry and after every reload.
func (h *Follower) session(ctx context.Context) error {
	var retryAt time.Time // when to report a refused inventory again; zero when accepted
	retried := false      // the last poll failed and was tried again
	report := func() error {
		err := h.putInventory(ctx)
		var se *statusError
		switch {
		case err == nil:
			h.setRefused("")
			h.removed.Store(false)
			retryAt = time.Time{}
			return nil
		case errors.As(err, &se) && !se.Removed && (se.Status == http.StatusConflict || se.Status == http.StatusBadRequest):
			h.logger.Error("the platform refused this hub: "+bridge.Untrusted(se.Message).String()+"; following the changes of the locations it last accepted from this hub, and trying again every minute",
				"platform", h.platform.String(), "status", se.Status)
			retryAt = time.Now().Add(inventoryRetry)
			return nil
		}
		return err
	}
	if err := report(); err != nil {
		return err
	}
	h.up.Store(true)
	h.logger.Info("platform link up", "platform", h.platform.String(), "hub", h.hubID)
	h.kickUsage() // what was used while the link was down
	for ctx.Err() == nil {
		select {
		case <-h.reported:
			if err := report(); err != nil {
				return err
			}
		default:
			if !retryAt.IsZero() && time.Now().After(retryAt) {
				if err := report(); err != nil {
					return err
				}
			}
		}
		st, err := h.store.ReplicaState(ctx)
		if err != nil {
			return fmt.Errorf("reading the replica's cursor: %w", err)
		}
		if !st.Synced {
			if err := h.snapshot(ctx, st); err != nil {
				return err
			}
			continue
		}
		err = h.poll(ctx, st)
		var silence *silenceError
		if errors.As(err, &silence) && silence.heard {
			retried = false // the platform was heard since the last retry
		}
		var se *statusError
		if err != nil && ctx.Err() == nil && !errors.As(err, &se) {
			// A late heartbeat, a connection cut: one more poll on a
			// fresh connection before the link counts as down. A slow
			// or lossy link costs a poll, not a flap.
			if !retried {
				retried = true
				h.client.CloseIdleConnections()
				h.logger.Info("a long poll failed: polling again on a fresh connection", "err", err)
				continue
			}
			if silence != nil {
				// Heard again before the watchdog is armed on the next
				// session's first poll.
				h.beatsHeard.Store(false)
			}
			return err
		}
		if err == nil {
			retried = false
		}
		if errors.As(err, &se) && se.Status == http.StatusGone && !se.Removed {
			h.logger.Info("the platform no longer has the changes after the replica's cursor: fetching a snapshot", "cursor", st.Cursor)
			if err := h.snapshot(ctx, st); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
	}
	return ctx.Err()
}

func (h *Follower) setRefused(s string) {
	h.mu.Lock()
	h.refused = s
	h.mu.Unlock()
}

// tombstoneCounter is a replica store that counts its tombstones.
type tombstoneCounter interface {
	Tombstones(ctx context.Context) (int, error)
}

// tombstones reads how many tombstones the replica keeps, for a scrape.
func (h *Follower) tombstones() float64 {
	tc, ok := h.store.(tombstoneCounter)
	if !ok {
		return -1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	n, err := tc.Tombstones(ctx)
	if err != nil {
		return -1
	}
	return float64(n)
}
