package link

import (
	"net/netip"
	"time"
)

// FailuresTable exposes the throttle's table for tests.
func FailuresTable() (fail func(id, addr string, now time.Time), wait func(id, addr string, now time.Time) time.Duration, size func() int) {
	f := newLoginThrottle()
	return f.fail, f.wait, f.t.Len
}

func mustPrefixesInternal(ps ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range ps {
		out = append(out, netip.MustParsePrefix(p))
	}
	return out
}

var MustPrefixes = mustPrefixesInternal

// PendingUsage is how many installations' uses h has not reported yet.
func PendingUsage(h *Follower) int {
	h.usage.mu.Lock()
	defer h.usage.mu.Unlock()
	return len(h.usage.pending)
}

// SyncWaiters is how many callers of h.SyncNow wait on a sync now.
func SyncWaiters(h *Follower) int { return int(h.syncWaiters.Load()) }
