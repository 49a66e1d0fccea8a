// Package failures counts failures per key (a name, an address, a name at
// an address) and says how long a key that failed too often must wait
// before it is tried again: a few free failures, then a delay that doubles
// with every further failure, up to a maximum. A key that has not failed
// for a while is forgotten. The table is bounded: when it is full, the keys
// with the fewest failures go first (the oldest among equals), so a flood
// of new keys cannot wipe out the count of one being attacked. The embedded broker's
// logins keep their failures in a Table; the web login keeps its own in
// the database, where every platform process counts together, under the
// same Policy.
package failures

import (
	"slices"
	"sync"
	"time"
)

// Policy is how a Table counts.
type Policy struct {
	// FirstDelay is the wait after the first failure past a key's free
	// ones; each further failure doubles it, up to MaxDelay.
	FirstDelay, MaxDelay time.Duration
	// ForgetAfter: a key without a failure for this long starts over.
	ForgetAfter time.Duration
	// MaxKeys bounds the table.
	MaxKeys int
}

// Delay is how long after its last failure a key with count failures, of
// which free were free, must wait.
func (p Policy) Delay(count, free int) time.Duration {
	over := count - free
	if over < 0 {
		return 0
	}
	return min(p.FirstDelay<<min(over, 20), p.MaxDelay)
}

// Forgotten reports whether at now a key whose last failure was at last
// has started over.
func (p Policy) Forgotten(now, last time.Time) bool {
	return now.Sub(last) > p.ForgetAfter
}

// Wait is how long at now a key must still wait that failed count times,
// of which free were free, the last at last: 0 when it need not, or when
// its failures are forgotten.
func (p Policy) Wait(now, last time.Time, count, free int) time.Duration {
	if count == 0 || p.Forgotten(now, last) {
		return 0
	}
	if until := last.Add(p.Delay(count, free)); now.Before(until) {
		return until.Sub(now)
	}
	return 0
}

// Budget is a key and its free failures.
type Budget struct {
	Key  string
	Free int
}

// Table holds the failures. It is safe for concurrent use.
type Table struct {
	p    Policy
	mu   sync.Mutex
	keys map[string]*entry
}

type entry struct {
	count int
	last  time.Time
}

// New returns an empty table counting by p.
func New(p Policy) *Table {
	return &Table{p: p, keys: map[string]*entry{}}
}

// Wait returns how long the longest-waiting of the budgets' keys must still
// wait at now; 0 when none must.
func (t *Table) Wait(now time.Time, budgets ...Budget) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	var longest time.Duration
	for _, b := range budgets {
		if e := t.live(now, b.Key); e != nil {
			longest = max(longest, t.p.Wait(now, e.last, e.count, b.Free))
		}
	}
	return longest
}

// Count is key's failures at now (0 once forgotten).
func (t *Table) Count(now time.Time, key string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.live(now, key); e != nil {
		return e.count
	}
	return 0
}

// Fail counts one failure of each key at now and returns each key's count
// after it, in order.
func (t *Table) Fail(now time.Time, keys ...string) []int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.keys)+len(keys) > t.p.MaxKeys {
		t.evictLocked(now)
	}
	counts := make([]int, len(keys))
	for i, k := range keys {
		e := t.live(now, k)
		if e == nil {
			e = &entry{}
			t.keys[k] = e
		}
		e.count++
		e.last = now
		counts[i] = e.count
	}
	return counts
}

// Forget drops the keys' failures.
func (t *Table) Forget(keys ...string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, k := range keys {
		delete(t.keys, k)
	}
}

// Len is the number of keys held.
func (t *Table) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.keys)
}

// live is key's entry unless it is forgotten.
func (t *Table) live(now time.Time, key string) *entry {
	e := t.keys[key]
	if e == nil || t.p.Forgotten(now, e.last) {
		return nil
	}
	return e
}

// evictLocked makes room: first what is forgotten anyway, then the quarter
// of the keys with the fewest failures, the oldest first among equals. A
// flood of new keys (one failure each) makes room among its own: the
// count of a key being attacked, which has many, outlives it.
func (t *Table) evictLocked(now time.Time) {
	for k, e := range t.keys {
		if t.p.Forgotten(now, e.last) {
			delete(t.keys, k)
		}
	}
	if len(t.keys) < t.p.MaxKeys*3/4 {
		return
	}
	type aged struct {
		key   string
		count int
		last  time.Time
	}
	all := make([]aged, 0, len(t.keys))
	for k, e := range t.keys {
		all = append(all, aged{k, e.count, e.last})
	}
	slices.SortFunc(all, func(a, b aged) int {
		if a.count != b.count {
			return a.count - b.count
		}
		return a.last.Compare(b.last)
	})
	for _, a := range all[:len(all)/4] {
		delete(t.keys, a.key)
	}
}
