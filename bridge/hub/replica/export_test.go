package replica

// PendingUsage is how many installations' uses h has not reported yet.
func PendingUsage(h *Follower) int {
	h.usage.mu.Lock()
	defer h.usage.mu.Unlock()
	return len(h.usage.pending)
}

// SyncWaiters is how many callers of h.SyncNow wait on a sync now.
func SyncWaiters(h *Follower) int { return int(h.syncWaiters.Load()) }
