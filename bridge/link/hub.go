package link

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/oauth"
	"github.com/switchbridge/switchbridge/bridge/wire"
)

// ReplicaStore is the hub's store of its replica; bridge/store implements
// it.
type ReplicaStore interface {
	ReplicaState(ctx context.Context) (bridge.ReplicaState, error)
	// ApplyBatch applies a batch and stores its cursor in one transaction.
	ApplyBatch(ctx context.Context, b *bridge.ChangeBatch, at time.Time) error
	// RetainReplicaLocations drops the installations outside locs, with
	// their tokens, and says how many.
	RetainReplicaLocations(ctx context.Context, locs []int64) (int, error)
	// ClearReplica empties the replica and forgets its cursor.
	ClearReplica(ctx context.Context) error
}

// Limits on what a hub accepts from its platform: a snapshot of a large
// household's installations (a few hundred bytes each, with their tokens)
// is well under a megabyte; 16 MiB leaves room for tens of thousands.
const MaxBatchBytes = 16 << 20

// Syncs at once on a replica miss (SyncNow): at most one at a time and one
// per minSyncInterval, so bogus tokens cannot flood the platform, each
// bounded by syncTimeout.
const (
	minSyncInterval = 200 * time.Millisecond
	syncTimeout     = 2 * time.Second
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

// Dead connections. A long poll that heard no heartbeat (102 Processing,
// sent every HeartbeatInterval) for heartbeatSilence is on a dead
// connection: the hub drops it and connects again. A platform that sends
// no heartbeats (an older version) is given the poll time plus pollGrace.
// TCP keepalives find a dead idle connection in about keepAliveIdle +
// 3 × keepAliveInterval, for whatever the pool holds.
const (
	heartbeatSilence  = 3 * time.Second
	pollGrace         = 5 * time.Second
	requestTimeout    = 15 * time.Second
	keepAliveIdle     = 10 * time.Second
	keepAliveInterval = 5 * time.Second
)

// Hub is the hub's side of the link: it reports the inventory, follows the
// platform's changes into the replica and keeps at it.
type Hub struct {
	// Inventory returns the hub's locations and switches as they are now.
	Inventory func() []bridge.RemoteLocation
	// Applied is called after every batch that changed the replica (the
	// token check's cache must forget what it knew).
	Applied func()

	platform *url.URL
	hubID    string
	instance string // drawn at start: this process (InstanceHeader)
	store    ReplicaStore
	logger   *slog.Logger
	client   *http.Client

	reported chan struct{} // an inventory change waits to be reported
	kick     chan struct{} // a new secret: try again now
	// heartbeats: the platform said (at the last inventory) that it sends
	// 102 Processing on long polls.
	heartbeats atomic.Bool
	// beatsHeard: a heartbeat reached this hub, and none was missed since.
	beatsHeard atomic.Bool
	// polled: a poll was answered since the session started.
	polled atomic.Bool
	// accepted is the platform's last LocationsHeader the replica follows.
	accepted atomic.Pointer[string]
	usage    usageReports // uses not yet reported (usage.go)
	up       atomic.Bool
	syncedAt atomic.Int64 // unix ms of the platform's last answer
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
}

// NewHub returns the hub's side of the link to the platform at platformURL,
// as hub hubID with secret.
func NewHub(platformURL, hubID, secret string, st ReplicaStore, logger *slog.Logger) (*Hub, error) {
	u, err := url.Parse(strings.TrimRight(platformURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("platform url %q must be an absolute http(s) URL", platformURL)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	var inst [8]byte
	crand.Read(inst[:])
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAliveConfig: net.KeepAliveConfig{
		Enable: true, Idle: keepAliveIdle, Interval: keepAliveInterval, Count: 3}}
	// HTTP/1.1 (a DialContext of its own turns HTTP/2 off): each request
	// has a connection of its own, so a long poll that died takes no other
	// request with it, and the pool can be dropped as a whole.
	h := &Hub{platform: u, hubID: hubID, secret: secret, instance: hex.EncodeToString(inst[:]), store: st, logger: logger,
		reported: make(chan struct{}, 1), kick: make(chan struct{}, 1),
		client: &http.Client{Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           dialer.DialContext,
			MaxIdleConns:          2,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   10 * time.Second,
			ResponseHeaderTimeout: DefaultPollTimeout + pollGrace,
		}},
	}
	if s, err := st.ReplicaState(context.Background()); err == nil && s.Synced {
		h.syncedAt.Store(s.SyncedAt.UnixMilli())
	}
	return h, nil
}

// InventoryChanged asks for the inventory to be reported again (after a
// reload); a long poll in flight is cut short for it.
func (h *Hub) InventoryChanged() {
	select {
	case h.reported <- struct{}{}:
	default:
	}
}

// SetSecret replaces the hub's secret (platform.secret_file read again on
// reload) and, when it changed, connects again with it at once. It
// reports whether it changed.
func (h *Hub) SetSecret(secret string) bool {
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

func (h *Hub) credentials() (string, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.hubID, h.secret
}

// Settled reports whether what the replica lacks is known not to exist
// for this hub: the platform removed it, or told it to get new
// credentials, and the replica was emptied. Otherwise, while the link is
// down, an unknown token cannot be confirmed either way.
func (h *Hub) Settled() bool { return h.removed.Load() }

// Up reports whether the link is up.
func (h *Hub) Up() bool { return h.up.Load() }

// Refused returns the platform's last refusal, "" when none.
func (h *Hub) Refused() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.refused
}

// ReplicaAge is how long ago the platform last answered; -1 when never.
func (h *Hub) ReplicaAge() time.Duration {
	ms := h.syncedAt.Load()
	if ms == 0 {
		return -1
	}
	return time.Since(time.UnixMilli(ms))
}

// Register adds the link's metrics to reg.
func (h *Hub) Register(reg prometheus.Registerer) error {
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
func (h *Hub) Run(ctx context.Context) {
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
			h.logger.Warn("the platform is shutting down: calling it again in a moment; serving the installations and tokens the replica holds meanwhile",
				"platform", h.platform.String())
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
func (h *Hub) session(ctx context.Context) error {
	var retryAt time.Time // when to report a refused inventory again; zero when accepted
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
	h.reportUsage(ctx) // what was used while the link was down
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
			if err := h.snapshot(ctx); err != nil {
				return err
			}
			continue
		}
		// Uses a failed report kept go out between polls.
		h.reportUsage(ctx)
		err = h.poll(ctx, st)
		var se *statusError
		if errors.As(err, &se) && se.Status == http.StatusGone && !se.Removed {
			h.logger.Info("the platform no longer has the changes after the replica's cursor: fetching a snapshot", "cursor", st.Cursor)
			if err := h.snapshot(ctx); err != nil {
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

// removedByPlatform empties the replica of a hub the platform removed: its
// installations were uninstalled there, and unlike an outage nothing will
// bring their revocations.
func (h *Hub) removedByPlatform(ctx context.Context, msg string, rekey bool) {
	h.setRefused(msg)
	first := !h.removed.Swap(true)
	h.applyMu.Lock()
	err := h.store.ClearReplica(context.WithoutCancel(ctx))
	h.applyMu.Unlock()
	if err != nil {
		h.logger.Error("the platform removed this hub, but emptying the replica failed", "err", err)
		return
	}
	if h.Applied != nil {
		h.Applied()
	}
	switch {
	case first && rekey:
		h.logger.Error("this hub needs new credentials: the platform does not know its secret and never held its replica's cursor (restored from an older backup); "+
			"replica emptied, serving no installation; on the platform run hub rotate-secret (or hub add), write the secret into platform.secret_file and reload (SIGHUP)",
			"platform", h.platform.String(), "hub", h.hubID, "reason", msg)
	case first:
		h.logger.Error("the platform removed this hub (hub remove): replica emptied, serving no installation; "+
			"register it again with hub add and write the new id and secret into its config", "platform", h.platform.String(), "hub", h.hubID, "reason", msg)
	}
}

func (h *Hub) setRefused(s string) {
	h.mu.Lock()
	h.refused = s
	h.mu.Unlock()
}

func (h *Hub) putInventory(ctx context.Context) error {
	inv := Inventory{Version: Version(), Locations: h.Inventory()}
	if err := h.retain(ctx, inv.Locations); err != nil {
		return err
	}
	body, err := json.Marshal(inv)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	// The replica's cursor lets a platform restored from an older backup
	// tell this hub that it needs new credentials (RekeyHeader).
	var hdr http.Header
	if st, err := h.store.ReplicaState(ctx); err == nil && st.Synced {
		hdr = http.Header{CursorHeader: {strconv.FormatInt(st.Cursor, 10) + " " + st.CursorTag}}
	}
	got, err := h.do(ctx, http.MethodPut, InventoryPath, hdr, body, nil)
	var se *statusError
	if errors.As(err, &se) {
		h.setRefused(se.Message)
	}
	if err == nil {
		h.heartbeats.Store(got.Get(HeartbeatHeader) != "")
		h.follow(ctx, got)
	}
	return err
}

// follow drops from the replica the locations the platform no longer
// accepts from this hub (LocationsHeader): another process with this
// hub's credentials took them, or an inventory the platform refused left
// them elsewhere. Their changes no longer reach this hub, so what the
// replica holds of them is frozen: it serves none of it.
func (h *Hub) follow(ctx context.Context, hdr http.Header) {
	vals, ok := hdr[LocationsHeader]
	if !ok || len(vals) != 1 {
		return
	}
	if last := h.accepted.Load(); last != nil && *last == vals[0] {
		return
	}
	accepted := map[int64]bool{}
	for f := range strings.SplitSeq(vals[0], ",") {
		if id, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64); err == nil {
			accepted[id] = true
		}
	}
	var keep []bridge.RemoteLocation
	var dropped []int64
	for _, l := range h.Inventory() {
		if accepted[l.ID] {
			keep = append(keep, l)
		} else {
			dropped = append(dropped, l.ID)
		}
	}
	if err := h.retain(ctx, keep); err != nil {
		h.logger.Warn("following the locations the platform accepts", "err", err)
		return
	}
	if len(dropped) > 0 {
		h.logger.Warn("the platform does not accept these locations from this hub: serving none of their installations", "locations", dropped)
	}
	v := vals[0]
	h.accepted.Store(&v)
}

// retain drops from the replica what lies outside the hub's locations now,
// before the platform hears of them: a location given up (a reload, a
// location moved to another hub) is served no more, and should it come
// back, the platform sends its whole state again.
func (h *Hub) retain(ctx context.Context, locs []bridge.RemoteLocation) error {
	ids := make([]int64, len(locs))
	for i, l := range locs {
		ids[i] = l.ID
	}
	h.applyMu.Lock()
	n, err := h.store.RetainReplicaLocations(context.WithoutCancel(ctx), ids)
	h.applyMu.Unlock()
	if err != nil {
		return fmt.Errorf("dropping the replica of locations given up: %w", err)
	}
	if n > 0 {
		if h.Applied != nil {
			h.Applied()
		}
		h.logger.Info("replica: dropped the installations of locations this hub no longer holds", "installations", n)
	}
	return nil
}

func (h *Hub) snapshot(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var b bridge.ChangeBatch
	got, err := h.do(ctx, http.MethodGet, SnapshotPath, nil, nil, &b)
	if err != nil {
		return err
	}
	h.follow(ctx, got)
	b.Snapshot = true
	if err := h.apply(ctx, &b); err != nil {
		return err
	}
	h.logger.Info("replica replaced by the platform's snapshot", "installations", len(b.Installations), "tokens", len(b.Tokens), "cursor", b.Cursor)
	return nil
}

// poll waits for the changes after cursor and applies them. An inventory
// change cuts it short.
func (h *Hub) poll(ctx context.Context, st bridge.ReplicaState) error {
	cursor := st.Cursor
	ctx, cancel := context.WithTimeout(ctx, DefaultPollTimeout+pollGrace)
	defer cancel()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-h.reported:
			h.InventoryChanged() // for session to report
			cancel()
		case <-stop:
		}
	}()
	var hdr http.Header
	var silent atomic.Bool
	if h.heartbeats.Load() {
		// The platform sends 102 Processing every HeartbeatInterval while
		// the poll waits; silence means a dead connection. The watchdog is
		// armed once heartbeats were heard (on an earlier poll, or on this
		// one): a reverse proxy in front of the platform may swallow them,
		// and then the poll's own deadline is all there is.
		hdr = http.Header{HeartbeatHeader: {"1"}}
		var (
			wmu      sync.Mutex
			watchdog *time.Timer
			answered bool
		)
		arm := func() {
			wmu.Lock()
			defer wmu.Unlock()
			switch {
			case answered:
			case watchdog == nil:
				watchdog = time.AfterFunc(heartbeatSilence, func() { silent.Store(true); cancel() })
			default:
				watchdog.Reset(heartbeatSilence)
			}
		}
		disarm := func() {
			wmu.Lock()
			defer wmu.Unlock()
			answered = true
			if watchdog != nil {
				watchdog.Stop()
			}
		}
		defer disarm()
		if h.beatsHeard.Load() {
			arm()
		}
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
			Got1xxResponse: func(code int, _ textproto.MIMEHeader) error {
				if code == http.StatusProcessing {
					h.beatsHeard.Store(true)
					arm()
				}
				return nil
			},
		})
		// Once the answer is there, its body (however large) has the
		// poll's own deadline.
		ctx = context.WithValue(ctx, answeredKey{}, disarm)
	}
	var b bridge.ChangeBatch
	got, err := h.do(ctx, http.MethodGet, changesQuery(st, true), hdr, nil, &b)
	if err != nil {
		if silent.Load() {
			// Heard again before the watchdog is armed on the next poll.
			h.beatsHeard.Store(false)
			return fmt.Errorf("no word from the platform for %s on a long poll: the connection is dead", heartbeatSilence)
		}
		if errors.Is(err, context.Canceled) && len(h.reported) > 0 {
			return nil // cut short to report the inventory
		}
		return err
	}
	h.polled.Store(true)
	h.follow(ctx, got)
	if b.Snapshot {
		return errors.New("the platform sent a snapshot in answer to a poll")
	}
	if b.Cursor < cursor && b.Empty() {
		return nil
	}
	return h.apply(ctx, &b)
}

func (h *Hub) apply(ctx context.Context, b *bridge.ChangeBatch) error {
	h.applyMu.Lock()
	defer h.applyMu.Unlock()
	now := time.Now()
	if !b.Snapshot {
		// SyncNow and the long poll both read from the stored cursor: a
		// batch that ends before what was applied meanwhile is older
		// than the replica.
		st, err := h.store.ReplicaState(ctx)
		if err != nil {
			return fmt.Errorf("reading the replica's cursor: %w", err)
		}
		if !st.Synced || b.Cursor < st.Cursor {
			return nil
		}
	}
	if err := h.store.ApplyBatch(context.WithoutCancel(ctx), b, now); err != nil {
		return fmt.Errorf("storing the platform's changes: %w", err)
	}
	h.syncedAt.Store(now.UnixMilli())
	if !b.Empty() {
		if h.Applied != nil {
			h.Applied()
		}
		h.logger.Debug("replica updated", "cursor", b.Cursor, "installations", len(b.Installations), "tokens", len(b.Tokens),
			"deleted_installations", len(b.DeletedInstallations), "deleted_tokens", len(b.DeletedTokens))
	}
	return nil
}

// SyncNow fetches and applies the platform's changes after the replica's
// cursor without waiting for the long poll, for a token or installation
// the replica does not hold: a token just issued or refreshed is used at
// once, before the long poll brings it. It reports whether a sync that
// started after the call applied. It syncs only while the link is up, one
// at a time, at most one per minSyncInterval (callers meanwhile share the
// one in flight), so unknown tokens cannot flood the platform.
func (h *Hub) SyncNow(ctx context.Context) bool {
	asked := time.Now()
	for range 3 {
		if !h.Up() {
			return false
		}
		h.syncMu.Lock()
		if ch := h.syncing; ch != nil {
			started := h.syncStart
			h.syncMu.Unlock()
			select {
			case <-ch:
			case <-ctx.Done():
				return false
			}
			h.syncMu.Lock()
			ok := h.syncOK
			h.syncMu.Unlock()
			if !started.Before(asked) {
				return ok
			}
			continue // it started before the miss: it may not hold it
		}
		if wait := minSyncInterval - time.Since(h.syncStart); wait > 0 {
			h.syncMu.Unlock()
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				return false
			}
			continue
		}
		ch := make(chan struct{})
		h.syncing, h.syncStart = ch, time.Now()
		h.syncMu.Unlock()
		err := h.syncOnce(ctx)
		if err != nil {
			h.logger.Debug("sync on a replica miss", "err", err)
		}
		h.syncMu.Lock()
		h.syncing, h.syncOK = nil, err == nil
		close(ch)
		h.syncMu.Unlock()
		return err == nil
	}
	return false
}

func (h *Hub) syncOnce(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), syncTimeout)
	defer cancel()
	st, err := h.store.ReplicaState(ctx)
	if err != nil || !st.Synced {
		return fmt.Errorf("no replica to sync: %v", err)
	}
	var b bridge.ChangeBatch
	if _, err := h.do(ctx, http.MethodGet, changesQuery(st, false), nil, nil, &b); err != nil {
		return err
	}
	if b.Snapshot {
		return errors.New("the platform sent a snapshot in answer to a sync")
	}
	return h.apply(ctx, &b)
}

// changesQuery is the path of a changes request from the replica's
// cursor: a long poll, or an answer at once.
func changesQuery(st bridge.ReplicaState, wait bool) string {
	q := url.Values{"cursor": {strconv.FormatInt(st.Cursor, 10)}, "tag": {st.CursorTag}}
	if !wait {
		q.Set("wait", "0")
	}
	return ChangesPath + "?" + q.Encode()
}

// answeredKey is the context key of a function do calls once the answer's
// header is in.
type answeredKey struct{}

// do sends one link request with the hub's credentials and instance, and
// the headers in hdr; out, when set, receives the JSON answer. It returns
// the answer's header. An error answer is a *statusError.
func (h *Hub) do(ctx context.Context, method, path string, hdr http.Header, body []byte, out any) (http.Header, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, h.platform.String()+path, rd)
	if err != nil {
		return nil, err
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	req.SetBasicAuth(h.credentials())
	req.Header.Set(InstanceHeader, h.instance)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if f, ok := ctx.Value(answeredKey{}).(func()); ok {
		f()
	}
	if resp.StatusCode >= 300 {
		var e wire.ErrorBody
		json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&e)
		se := &statusError{Status: resp.StatusCode, Message: e.Message, Header: resp.Header,
			Removed: resp.StatusCode == http.StatusGone && resp.Header.Get(RemovedHeader) != "",
			Rekey:   resp.StatusCode == http.StatusUnauthorized && resp.Header.Get(RekeyHeader) != ""}
		if n, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && n > 0 {
			se.RetryAfter = time.Duration(min(n, 3600)) * time.Second
		}
		return resp.Header, se
	}
	if out != nil {
		// One byte past the limit tells a body that is too large from one
		// that is just at it.
		lr := &io.LimitedReader{R: resp.Body, N: MaxBatchBytes + 1}
		if err := decodeOne(lr, out); err != nil {
			if lr.N <= 0 {
				err = fmt.Errorf("larger than %d bytes", MaxBatchBytes)
			}
			return resp.Header, fmt.Errorf("reading the platform's answer: %w", err)
		}
	}
	return resp.Header, nil
}

// Authorizer is the token check of a hub: it answers from the replica,
// as a single daemon answers from its records. On a miss (an installation
// or a token hash the replica does not hold) it asks Sync, when set, for
// the platform's latest changes and checks once more: a token issued a
// moment ago works at once. A miss the sync could not settle (the link
// down or slow, and the platform has not said this hub holds nothing) is
// 503 with Retry-After: the token may be one the platform issued a moment
// ago, and a 401 or 404 would tell the client it is gone for good. A miss
// the sync settled is what a single daemon answers: 401 invalid_token for
// a token the hub does not know (an installation deleted at the platform,
// another hub's), 403 for a token of another installation.
type Authorizer struct {
	// Sync brings the replica up to date now; it reports whether it did.
	Sync func(ctx context.Context) bool
	// Settled reports whether the replica is known to hold all there is
	// (Hub.Settled), so a miss needs no sync to be final. Nil: never.
	Settled func() bool

	check *oauth.Server
	src   ReplicaSource
}

// unconfirmedRetry is the Retry-After of a token the hub cannot confirm
// yet.
const unconfirmedRetry = 5 * time.Second

// ReplicaSource is the replica as the hub's token check reads it.
type ReplicaSource interface {
	oauth.GrantSource
	// Installation returns ENOTFOUND when the hub holds no such
	// installation.
	Installation(ctx context.Context, id string) (*bridge.Installation, error)
}

// NewAuthorizer returns the hub's token check over its replica.
func NewAuthorizer(src ReplicaSource, logger *slog.Logger) *Authorizer {
	return &Authorizer{check: oauth.NewTokenCheck(src, logger), src: src}
}

// Authorize implements bridge.Authorizer.
func (a *Authorizer) Authorize(ctx context.Context, token, installationID string) (*bridge.Grant, error) {
	tried, synced := false, false
	sync := func() bool {
		if tried || a.Sync == nil {
			return false
		}
		tried = true
		synced = a.Sync(ctx)
		return synced
	}
	// unconfirmed: a miss no sync settled.
	unconfirmed := func() bool {
		return a.Sync != nil && !synced && (a.Settled == nil || !a.Settled())
	}
	for {
		_, err := a.src.Installation(ctx, installationID)
		if bridge.ErrorCode(err) == bridge.ENOTFOUND && sync() {
			continue
		}
		if err != nil && bridge.ErrorCode(err) != bridge.ENOTFOUND {
			return nil, err
		}
		missing := err != nil
		g, err := a.check.Authorize(ctx, token, installationID)
		if bridge.ErrorCode(err) == bridge.EUNAUTHORIZED && len(token) <= maxTokenLen {
			if _, terr := a.src.TokenGrant(ctx, oauth.Hash(token)); errors.Is(terr, bridge.ErrTokenUnknown) {
				if sync() {
					continue
				}
				missing = true
			}
		}
		if err != nil && missing && unconfirmed() {
			return nil, &bridge.Error{Code: bridge.EUNAVAILABLE, RetryAfter: unconfirmedRetry,
				Message: "this hub cannot confirm the token yet: its link to the platform is down or slow; try again shortly"}
		}
		return g, err
	}
}

// maxTokenLen bounds the tokens worth a sync: the platform's are far
// shorter.
const maxTokenLen = 512

// SetUsed makes f hear of every token the check accepts, with the
// installation and the time (a store.UsageWriter's Touch).
func (a *Authorizer) SetUsed(f func(installationID string, at time.Time)) { a.check.Used = f }

// Forget drops cached grants: call it when the replica changed.
func (a *Authorizer) Forget() { a.check.ForgetGrants() }

// InventoryOf lists a hub's locations and switches as a platform's consent
// page needs them.
func InventoryOf(hub *bridge.Hub) []bridge.RemoteLocation {
	var out []bridge.RemoteLocation
	for _, l := range hub.Locations() {
		rl := bridge.RemoteLocation{ID: l.ID, Name: l.Name, Switches: []bridge.RemoteSwitch{}}
		for _, id := range l.Switches {
			sw, ok := hub.Switch(id)
			if !ok {
				continue
			}
			rs := bridge.RemoteSwitch{ID: sw.ID, Name: sw.Name, Commands: []bridge.Command{}}
			for _, c := range bridge.Commands {
				if bridge.Supports(sw.Device, c) {
					rs.Commands = append(rs.Commands, c)
				}
			}
			rl.Switches = append(rl.Switches, rs)
		}
		out = append(out, rl)
	}
	return out
}
