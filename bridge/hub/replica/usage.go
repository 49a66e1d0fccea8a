package replica

// When installations were last used at this hub, reported to the platform
// for its connected apps page and `installation list`: the hub answers
// API requests from its replica, so only it knows.

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/switchbridge/switchbridge/bridge/link"
)

// Usage reports go out on a goroutine of their own, never before or
// instead of a poll. One report is bounded by usageTimeout, or twice the
// link's retransmission timeout when that is longer (a slow link); one
// that failed is sent again after usageRetry, merged with the uses noted
// meanwhile, or at once when the link comes back up.
const (
	usageTimeout = 3 * time.Second
	usageRetry   = 5 * time.Second
)

// usageReports holds the uses a hub has not reported yet.
type usageReports struct {
	mu      sync.Mutex
	pending map[string]time.Time
}

// add notes uses, keeping the latest time of each installation; beyond
// link.MaxUsageEntries installations, new ones are dropped (a last-use time is
// a hint, not worth unbounded memory while the platform is away).
func (u *usageReports) add(used map[string]time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.pending == nil {
		u.pending = map[string]time.Time{}
	}
	for id, at := range used {
		if cur, ok := u.pending[id]; ok {
			if at.After(cur) {
				u.pending[id] = at
			}
		} else if len(u.pending) < link.MaxUsageEntries {
			u.pending[id] = at
		}
	}
}

// take returns the pending uses and forgets them.
func (u *usageReports) take() map[string]time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	p := u.pending
	u.pending = nil
	return p
}

// MarkUsed notes when installations' tokens were last accepted at this
// hub; the link reports them to the platform in the background while it
// is up, and what cannot be reported now once it can. It never blocks or
// fails: it is a store.UsageWriter's sink.
func (h *Follower) MarkUsed(_ context.Context, used map[string]time.Time) error {
	h.usage.add(used)
	h.kickUsage()
	return nil
}

// kickUsage asks the usage reporter to report what is pending.
func (h *Follower) kickUsage() {
	select {
	case h.usageKick <- struct{}{}:
	default:
	}
}

// reportUsageWhileRunning reports pending uses until ctx ends: when there
// are new ones, when the link comes up, and after a failure every
// usageRetry. One report at a time, so a slow link merges the uses noted
// meanwhile into the next.
func (h *Follower) reportUsageWhileRunning(ctx context.Context) {
	retry := time.NewTimer(usageRetry)
	retry.Stop()
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.usageKick:
		case <-retry.C:
		}
		if !h.Up() {
			// The next session kicks it; and should the link be up again
			// without a new session (a poll retried on a fresh
			// connection), the retry does.
			retry.Reset(usageRetry)
			continue
		}
		if !h.reportUsage(ctx) {
			retry.Reset(usageRetry)
		}
	}
}

// reportUsage sends the pending uses to the platform and reports whether
// it did; on failure they wait for the next report.
func (h *Follower) reportUsage(ctx context.Context) bool {
	used := h.usage.take()
	if len(used) == 0 {
		return true
	}
	u := link.Usage{Used: make(map[string]int64, len(used))}
	for id, at := range used {
		u.Used[id] = at.Unix()
	}
	body, err := json.Marshal(u)
	if err == nil {
		ctx, cancel := context.WithTimeout(ctx, h.usageDeadline())
		defer cancel()
		_, err = h.do(ctx, http.MethodPut, link.UsagePath, nil, body, nil)
	}
	if err != nil {
		h.usage.add(used)
		h.logger.Debug("reporting when installations were last used; kept for the next report", "installations", len(used), "err", err)
		return false
	}
	h.logger.Debug("reported when installations were last used", "installations", len(used))
	return true
}
