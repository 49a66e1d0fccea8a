package link

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
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

// Back-off between attempts to reach the platform.
const (
	minBackoff = time.Second
	maxBackoff = 30 * time.Second
	// A link that lived this long was healthy: the next break starts the
	// back-off from minBackoff again.
	healthyLink = time.Minute
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
	secret   string
	store    ReplicaStore
	logger   *slog.Logger
	client   *http.Client

	reported chan struct{} // an inventory change waits to be reported
	usage    usageReports  // uses not yet reported (usage.go)
	up       atomic.Bool
	syncedAt atomic.Int64 // unix ms of the platform's last answer
	// refused is the platform's last refusal of the inventory or the
	// credentials, "" while the link is fine.
	mu      sync.Mutex
	refused string
	removed atomic.Bool // the platform said this hub was removed

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
	h := &Hub{platform: u, hubID: hubID, secret: secret, store: st, logger: logger, reported: make(chan struct{}, 1),
		client: &http.Client{Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			MaxIdleConns:          2,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   10 * time.Second,
			ResponseHeaderTimeout: DefaultPollTimeout + 20*time.Second,
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
			Help: "1 while the platform refuses this hub (a wrong or rotated secret, a conflicting inventory; the hub serves its replica), 2 once it said the hub was removed (the replica is emptied), else 0."},
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
	for ctx.Err() == nil {
		start := time.Now()
		err := h.session(ctx)
		wasUp := h.up.Swap(false)
		if ctx.Err() != nil {
			return
		}
		if time.Since(start) > healthyLink {
			backoff = minBackoff
		}
		var se *statusError
		switch {
		case errors.As(err, &se) && se.Removed:
			h.removedByPlatform(ctx, se.Message)
		case errors.As(err, &se) && (se.Status == http.StatusConflict || se.Status == http.StatusUnauthorized || se.Status == http.StatusBadRequest):
			h.logger.Error("the platform refused this hub: "+bridge.Untrusted(se.Message).String()+"; serving the installations and tokens the replica holds",
				"platform", h.platform.String(), "status", se.Status)
		case wasUp:
			h.logger.Warn("platform link lost: serving the installations and tokens the replica holds until it is back",
				"platform", h.platform.String(), "err", err, "replica_age_seconds", int64(h.ReplicaAge().Seconds()))
		default:
			h.logger.Warn("platform unreachable: serving the installations and tokens the replica holds",
				"platform", h.platform.String(), "err", err, "retry_in_seconds", backoff.Seconds())
		}
		// Full jitter on the upper half: many hubs that lost one platform
		// do not all call it again at once.
		d := backoff/2 + rand.N(backoff/2+1)
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
		backoff = min(backoff*2, maxBackoff)
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
func (h *Hub) removedByPlatform(ctx context.Context, msg string) {
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
	if first {
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
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err = h.do(ctx, http.MethodPut, InventoryPath, body, nil)
	var se *statusError
	if errors.As(err, &se) {
		h.setRefused(se.Message)
	}
	return err
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
	if _, err := h.do(ctx, http.MethodGet, SnapshotPath, nil, &b); err != nil {
		return err
	}
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
	ctx, cancel := context.WithTimeout(ctx, DefaultPollTimeout+30*time.Second)
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
	var b bridge.ChangeBatch
	_, err := h.do(ctx, http.MethodGet, changesQuery(st, true), nil, &b)
	if err != nil {
		if errors.Is(err, context.Canceled) && len(h.reported) > 0 {
			return nil // cut short to report the inventory
		}
		return err
	}
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
	if _, err := h.do(ctx, http.MethodGet, changesQuery(st, false), nil, &b); err != nil {
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

// do sends one link request with the hub's credentials; out, when set,
// receives the JSON answer. An error answer is a *statusError.
func (h *Hub) do(ctx context.Context, method, path string, body []byte, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, h.platform.String()+path, rd)
	if err != nil {
		return 0, err
	}
	req.SetBasicAuth(h.hubID, h.secret)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		var e wire.ErrorBody
		json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&e)
		return resp.StatusCode, &statusError{Status: resp.StatusCode, Message: e.Message,
			Removed: resp.StatusCode == http.StatusGone && resp.Header.Get(RemovedHeader) != ""}
	}
	if out != nil {
		// One byte past the limit tells a body that is too large from one
		// that is just at it.
		lr := &io.LimitedReader{R: resp.Body, N: MaxBatchBytes + 1}
		if err := decodeOne(lr, out); err != nil {
			if lr.N <= 0 {
				err = fmt.Errorf("larger than %d bytes", MaxBatchBytes)
			}
			return resp.StatusCode, fmt.Errorf("reading the platform's answer: %w", err)
		}
	}
	return resp.StatusCode, nil
}

// Authorizer is the token check of a hub: it answers from the replica.
// An installation the replica does not hold is not on this hub (404),
// whatever the token; the rest is the platform's own check (oauth) over
// the replica. On a miss (an installation or a token hash the replica
// does not hold) it asks Sync, when set, for the platform's latest changes
// and checks once more: a token issued a moment ago works at once.
type Authorizer struct {
	// Sync brings the replica up to date now; it reports whether it did.
	Sync func(ctx context.Context) bool

	check *oauth.Server
	src   ReplicaSource
}

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
	synced := false
	sync := func() bool {
		if synced || a.Sync == nil {
			return false
		}
		synced = true
		return a.Sync(ctx)
	}
	for {
		_, err := a.src.Installation(ctx, installationID)
		if bridge.ErrorCode(err) == bridge.ENOTFOUND && sync() {
			continue
		}
		if bridge.ErrorCode(err) == bridge.ENOTFOUND {
			return nil, bridge.Errorf(bridge.ENOTFOUND, "no installation %q on this hub", installationID)
		}
		if err != nil {
			return nil, err
		}
		g, err := a.check.Authorize(ctx, token, installationID)
		if bridge.ErrorCode(err) == bridge.EUNAUTHORIZED && len(token) <= maxTokenLen {
			if _, terr := a.src.TokenGrant(ctx, oauth.Hash(token)); errors.Is(terr, bridge.ErrTokenUnknown) && sync() {
				continue
			}
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
