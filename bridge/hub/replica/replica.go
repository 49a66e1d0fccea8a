package replica

// The hub's replica of the platform's records: applying change batches and
// snapshots, syncing at once on a miss, and dropping what lies outside the
// locations the hub holds (given up, not accepted, or the hub removed).

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/link"
)

// Store is the hub's store of its replica; bridge/hub/hubstore implements it.
type Store interface {
	ReplicaState(ctx context.Context) (bridge.ReplicaState, error)
	// ApplyBatch applies a batch and stores its cursor in one transaction.
	ApplyBatch(ctx context.Context, b *bridge.ChangeBatch, at time.Time) error
	// RetainReplicaLocations drops the installations outside locs, with
	// their tokens, and says how many.
	RetainReplicaLocations(ctx context.Context, locs []int64) (int, error)
	// ClearReplica empties the replica and forgets its cursor.
	ClearReplica(ctx context.Context) error
}

// Syncs at once on a replica miss (SyncNow): at most one at a time and one
// per minSyncInterval, so bogus tokens cannot flood the platform, each
// bounded by syncTimeout, or twice the link's RTO when longer (rtt.go).
const (
	minSyncInterval = 200 * time.Millisecond
	syncTimeout     = 2 * time.Second
)

// removedByPlatform empties the replica of a hub the platform removed: its
// installations were uninstalled there, and unlike an outage nothing will
// bring their revocations.
func (h *Follower) removedByPlatform(ctx context.Context, msg string, rekey bool) {
	h.setRefused(msg)
	first := !h.removed.Swap(true)
	h.applyMu.Lock()
	err := h.store.ClearReplica(context.WithoutCancel(ctx))
	h.applyMu.Unlock()
	if err != nil {
		h.logger.Error("the platform removed this hub, but emptying the replica failed", "err", err)
		return
	}
	if h.opts.Applied != nil {
		h.opts.Applied()
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

// follow drops from the replica the locations the platform no longer
// accepts from this hub (link.LocationsHeader): another process with this
// hub's credentials took them, or an inventory the platform refused left
// them elsewhere. Their changes no longer reach this hub, so what the
// replica holds of them is frozen: it serves none of it.
func (h *Follower) follow(ctx context.Context, hdr http.Header) {
	vals, ok := hdr[link.LocationsHeader]
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
	for _, l := range h.opts.Inventory() {
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
func (h *Follower) retain(ctx context.Context, locs []bridge.RemoteLocation) error {
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
		if h.opts.Applied != nil {
			h.opts.Applied()
		}
		h.logger.Info("replica: dropped the installations of locations this hub no longer holds", "installations", n)
	}
	return nil
}

// apply stores a batch of changes, or a snapshot the session asked for
// when the replica stood at from. It reports whether it stored it.
//
// A batch that ends before what was applied meanwhile is older than the
// replica: SyncNow and the long poll both read from the stored cursor.
//
// A snapshot replaces the replica whatever its cursor, as one must after
// the platform was restored from an older backup. But while it was on its
// way a sync on a miss may have moved the replica on (from a cursor the
// platform still held, though the long poll's was compacted away), to
// changes made after the platform computed the snapshot: a token issued a
// moment ago. Such a snapshot is older than the replica and is dropped;
// the session follows the changes from the replica's cursor (and fetches
// another snapshot should the platform refuse that one too). Cursors are
// compared only then: the sync's was one the platform held, so both are
// of its change log as it is now.
func (h *Follower) apply(ctx context.Context, b *bridge.ChangeBatch, from *bridge.ReplicaState) (bool, error) {
	h.applyMu.Lock()
	defer h.applyMu.Unlock()
	now := time.Now()
	st, err := h.store.ReplicaState(ctx)
	if err != nil {
		return false, fmt.Errorf("reading the replica's cursor: %w", err)
	}
	switch {
	case !b.Snapshot && (!st.Synced || b.Cursor < st.Cursor):
		return false, nil
	case b.Snapshot && !sameCursor(st, *from) && st.Synced && b.Cursor < st.Cursor:
		h.logger.Info("the platform's snapshot is older than the replica, which a sync brought past it meanwhile: keeping the replica and following its changes",
			"snapshot_cursor", b.Cursor, "replica_cursor", st.Cursor)
		return false, nil
	}
	if err := h.store.ApplyBatch(context.WithoutCancel(ctx), b, now); err != nil {
		return false, fmt.Errorf("storing the platform's changes: %w", err)
	}
	h.syncedAt.Store(now.UnixMilli())
	if !b.Empty() {
		if h.opts.Applied != nil {
			h.opts.Applied()
		}
		h.logger.Debug("replica updated", "cursor", b.Cursor, "installations", len(b.Installations), "tokens", len(b.Tokens),
			"deleted_installations", len(b.DeletedInstallations), "deleted_tokens", len(b.DeletedTokens))
	}
	return true, nil
}

// sameCursor reports whether two states of the replica stand at the same
// point: nothing was applied in between.
func sameCursor(a, b bridge.ReplicaState) bool {
	return a.Synced == b.Synced && a.Cursor == b.Cursor && a.CursorTag == b.CursorTag
}

// SyncNow fetches and applies the platform's changes after the replica's
// cursor without waiting for the long poll, for a token or installation
// the replica does not hold: a token just issued or refreshed is used at
// once, before the long poll brings it. It reports whether a sync that
// started after the call applied. It syncs only while the link is up, one
// at a time, at most one per minSyncInterval (callers meanwhile share the
// one in flight, or the one that ended since they asked), so unknown
// tokens cannot flood the platform.
func (h *Follower) SyncNow(ctx context.Context) bool {
	asked := time.Now()
	// Bounded: a sync in flight that started before the call ends, the
	// interval passes, and then a sync that started after the call either
	// is there to share or is this caller's.
	for range 4 {
		if !h.Up() {
			h.syncOutcome("link_down")
			return false
		}
		h.syncMu.Lock()
		ch, started := h.syncing, h.syncStart
		if ch != nil {
			h.syncMu.Unlock()
			h.syncWaiters.Add(1)
			select {
			case <-ch:
			case <-ctx.Done():
			}
			h.syncWaiters.Add(-1)
			if ctx.Err() != nil {
				return false
			}
			if !started.Before(asked) {
				h.syncMu.Lock()
				ok := h.syncOK
				h.syncMu.Unlock()
				return ok
			}
			continue // it started before the miss: it may not hold it
		}
		if !started.IsZero() && !started.Before(asked) {
			// One started after the miss and ended meanwhile.
			ok := h.syncOK
			h.syncMu.Unlock()
			return ok
		}
		if wait := minSyncInterval - time.Since(started); wait > 0 {
			h.syncMu.Unlock()
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				return false
			}
			continue
		}
		ch = make(chan struct{})
		h.syncing, h.syncStart = ch, time.Now()
		h.syncMu.Unlock()
		err := h.syncOnce(ctx)
		if err != nil {
			h.logger.Debug("sync on a replica miss", "err", err)
			h.syncOutcome("failed")
		} else {
			h.syncOutcome("applied")
		}
		h.syncMu.Lock()
		h.syncing, h.syncOK = nil, err == nil
		close(ch)
		h.syncMu.Unlock()
		return err == nil
	}
	return false
}

func (h *Follower) syncOnce(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.syncDeadline())
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
	_, err = h.apply(ctx, &b, nil)
	return err
}

// syncOutcome counts a sync on a miss, or a miss that could not sync.
func (h *Follower) syncOutcome(outcome string) { h.syncs.WithLabelValues(outcome).Inc() }
