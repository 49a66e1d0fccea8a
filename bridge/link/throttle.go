package link

// The platform's throttle of wrong hub logins.

import (
	"slices"
	"sync"
	"time"
)

// failures throttles wrong hub logins. Failures count against two keys:
// the (hub id, address) pair, which waits after pairFree failures a
// minute, and the address alone, which waits only after addrFree, so one
// hub's wrong secret cannot lock out the other hubs behind the same
// address, while one address cannot try ids without end. An address is
// the client's behind server.trusted_proxies, IPv6 by its /64
// (oauth.ClientKey). The table is bounded: when full, the entries whose
// last failure is oldest go first, so a flood of new keys cannot wipe out
// the count of a key being throttled.
type failures struct {
	mu sync.Mutex
	m  map[string]*failed
}

type failed struct {
	n     int
	until time.Time
	last  time.Time
}

const (
	pairFree   = 5
	addrFree   = 50
	maxTracked = 4096
)

func newFailures() *failures { return &failures{m: map[string]*failed{}} }

func pairKey(id, addr string) string { return "pair:" + id + "\x00" + addr }
func addrOnly(addr string) string    { return "addr:" + addr }

func (f *failures) wait(id, addr string, now time.Time) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	var longest time.Duration
	for _, k := range []string{pairKey(id, addr), addrOnly(addr)} {
		if e := f.m[k]; e != nil && now.Before(e.until) {
			longest = max(longest, e.until.Sub(now))
		}
	}
	return longest
}

func (f *failures) fail(id, addr string, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range []struct {
		key  string
		free int
	}{{pairKey(id, addr), pairFree}, {addrOnly(addr), addrFree}} {
		e := f.m[c.key]
		if e == nil || now.Sub(e.last) > time.Minute {
			if e == nil && len(f.m) >= maxTracked {
				f.evictLocked(now)
			}
			e = &failed{}
			f.m[c.key] = e
		}
		e.n++
		e.last = now
		if e.n > c.free {
			e.until = now.Add(min(time.Duration(e.n-c.free)*time.Second, 30*time.Second))
		}
	}
}

// evictLocked drops a quarter of the entries: those not making anyone
// wait first, then those whose last failure is oldest, so a flood of new
// keys cannot free a key that is being throttled.
func (f *failures) evictLocked(now time.Time) {
	type aged struct {
		key      string
		blocking bool
		last     time.Time
	}
	all := make([]aged, 0, len(f.m))
	for k, e := range f.m {
		all = append(all, aged{k, now.Before(e.until), e.last})
	}
	slices.SortFunc(all, func(a, b aged) int {
		if a.blocking != b.blocking {
			if a.blocking {
				return 1
			}
			return -1
		}
		return a.last.Compare(b.last)
	})
	for _, a := range all[:max(len(all)/4, 1)] {
		delete(f.m, a.key)
	}
}

// succeed forgets the pair's failures; the address keeps its count.
func (f *failures) succeed(id, addr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.m, pairKey(id, addr))
}

// size is how many keys the table tracks, for tests.
func (f *failures) size() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.m)
}
