package link

// When installations were last used at a hub, for the platform's connected
// apps page and `installation list`: the hub answers API requests from its
// replica, so only it knows.

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/switchbridge/switchbridge/bridge/wire"
)

// UsagePath is where a hub reports when its installations were last used.
const UsagePath = "/api/hub/v1/usage"

// MaxUsageEntries bounds one usage report, and what a hub keeps of uses
// not yet reported while its platform is away.
const MaxUsageEntries = 10000

// maxUsageBytes bounds the body of a usage report: MaxUsageEntries of
// installation ids and times.
const maxUsageBytes = 1 << 20

// Usage reports go out on a goroutine of their own, never before or
// instead of a poll. One report is bounded by usageTimeout, or twice the
// link's retransmission timeout when that is longer (a slow link); one
// that failed is sent again after usageRetry, merged with the uses noted
// meanwhile, or at once when the link comes back up.
const (
	usageTimeout = 3 * time.Second
	usageRetry   = 5 * time.Second
)

// Usage is a hub's usage report: per installation id, when one of its
// tokens was last accepted, in Unix seconds.
type Usage struct {
	Used map[string]int64 `json:"used"`
}

// UsageStore records the uses hubs report; bridge/store implements it.
type UsageStore interface {
	// MarkUsedAtHub records the uses of installations in the hub's
	// locations and ignores the others; it returns how many it recorded.
	MarkUsedAtHub(ctx context.Context, hubID string, used map[string]time.Time) (int, error)
}

func (p *Platform) handleUsage(w http.ResponseWriter, r *http.Request) {
	h := p.authenticate(w, r)
	if h == nil {
		return
	}
	done, ok := p.admit(w, r, h)
	if !ok {
		return
	}
	defer func() { done(r.Context().Err() == nil) }()
	us, ok := p.store.(UsageStore)
	if !ok {
		wire.WriteError(w, http.StatusNotFound, "this platform does not record usage", nil)
		return
	}
	var u Usage
	if err := decodeOne(http.MaxBytesReader(w, r.Body, maxUsageBytes), &u); err != nil {
		wire.WriteError(w, http.StatusBadRequest, "unreadable usage report: "+err.Error(), nil)
		return
	}
	if len(u.Used) > MaxUsageEntries {
		wire.WriteError(w, http.StatusBadRequest, "usage report: more than 10000 installations", nil)
		return
	}
	now := p.now()
	used := make(map[string]time.Time, len(u.Used))
	for id, sec := range u.Used {
		if id == "" || len(id) > 64 || sec <= 0 {
			continue
		}
		// A hub's clock may run ahead; a use is never later than now.
		at := time.Unix(sec, 0)
		if at.After(now) {
			at = now
		}
		used[id] = at
	}
	n, err := us.MarkUsedAtHub(r.Context(), h.ID, used)
	if err != nil {
		p.logger.Warn("hub link: recording a hub's usage report", "hub", h.ID, "err", err)
		wire.WriteErrorOf(w, err)
		return
	}
	if n < len(u.Used) {
		p.logger.Debug("hub link: a usage report named installations outside the hub's locations", "hub", h.ID,
			"reported", len(u.Used), "recorded", n)
	}
	w.WriteHeader(http.StatusNoContent)
}

// usageReports holds the uses a hub has not reported yet.
type usageReports struct {
	mu      sync.Mutex
	pending map[string]time.Time
}

// add notes uses, keeping the latest time of each installation; beyond
// MaxUsageEntries installations, new ones are dropped (a last-use time is
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
		} else if len(u.pending) < MaxUsageEntries {
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
	u := Usage{Used: make(map[string]int64, len(used))}
	for id, at := range used {
		u.Used[id] = at.Unix()
	}
	body, err := json.Marshal(u)
	if err == nil {
		ctx, cancel := context.WithTimeout(ctx, h.usageDeadline())
		defer cancel()
		_, err = h.do(ctx, http.MethodPut, UsagePath, nil, body, nil)
	}
	if err != nil {
		h.usage.add(used)
		h.logger.Debug("reporting when installations were last used; kept for the next report", "installations", len(used), "err", err)
		return false
	}
	h.logger.Debug("reported when installations were last used", "installations", len(used))
	return true
}
