package oauth

import (
	"context"
	"sort"
	"strings"
	"sync"
	"time"
)

// Login throttling slows password guessing without handing anyone a way to
// lock a user out. A lock on the user name alone is such a way: five wrong
// passwords from anywhere would keep the real user out from everywhere.
// So failures count against three keys, and only the first two ever make
// a login wait:
//
//   - the (user name, address) pair: pairFree failures are free, then each
//     further try must wait a delay that doubles with every failure, from
//     firstDelay up to maxDelay. An attacker at one address gets a few
//     guesses an hour; the user at any other address is not slowed at all.
//   - the address, across all names: addrFree failures, then the same
//     delays. It stops one address spraying guesses over many names. It
//     can only slow people who share the attacker's address (a household
//     behind one NAT, or everyone behind a reverse proxy not listed in
//     server.trusted_proxies), which is why its allowance is higher.
//   - the user name, across all addresses: when more than userAttack
//     failures for one name arrive within userWindow (someone is guessing
//     from many addresses), every pair of that name gets only
//     pairFreeUnderAttack free failures instead of pairFree. A pair that has
//     not failed still gets its try at once, so the user from a clean
//     address is never kept out: a cap that refused clean addresses too
//     would be the lockout weapon again. The price is that an attacker
//     with many addresses gets about one guess per address per delay;
//     the hub logs the attack so the owner can act.
//
// An address is the client's, behind trusted proxies (clientAddr), and an
// IPv6 client counts by its /64. A correct password clears its pair.
const (
	pairFree            = 5
	pairFreeUnderAttack = 1
	addrFree            = 30
	firstDelay          = 30 * time.Second
	maxDelay            = 15 * time.Minute
	userAttack          = 100
	userWindow          = time.Hour
	forgetAfter         = 24 * time.Hour // a key without failures for this long starts over
	maxThrottled        = 10000

	maxBcryptJobs = 2 // bcrypt is slow on a Pi; more at once only queues on the CPU
	// maxBcryptQueue bounds the logins waiting for a password check: more
	// would only hold connections and memory while a flood is served.
	maxBcryptQueue = 16
	// busyRetry is the wait told to a login refused because the queue is full.
	busyRetry = 5 * time.Second
)

type throttle struct {
	mu   sync.Mutex
	keys map[string]*failures
	// bcrypt bounds the password checks running at once; queued counts
	// the logins waiting for one of its slots.
	bcrypt chan struct{}
	queued int
}

type failures struct {
	count int
	last  time.Time
	// For a user name: the failures since windowStart.
	window      int
	windowStart time.Time
}

// loginKeys are a login's throttling keys: its user name (case-folded, as
// names are looked up) and its client address key.
type loginKeys struct{ name, addr string }

func (k loginKeys) pair() string     { return "pair:" + k.name + "\x00" + k.addr }
func (k loginKeys) nameKey() string  { return "name:" + k.name }
func (k loginKeys) addrOnly() string { return "addr:" + k.addr }

func newLoginKeys(name, addr string) loginKeys {
	return loginKeys{name: strings.ToLower(name), addr: addr}
}

func newThrottle() *throttle {
	return &throttle{keys: map[string]*failures{}, bcrypt: make(chan struct{}, maxBcryptJobs)}
}

// delay is how long after its last failure a key with count failures, of
// which free were free, must wait.
func delay(count, free int) time.Duration {
	over := count - free
	if over < 0 {
		return 0
	}
	return min(firstDelay<<min(over, 10), maxDelay)
}

// wait returns how long the login must still wait, 0 when it may be tried.
func (t *throttle) wait(now time.Time, k loginKeys) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	free := pairFree
	if t.underAttackLocked(now, k) {
		free = pairFreeUnderAttack
	}
	var longest time.Duration
	for _, c := range []struct {
		key  string
		free int
	}{{k.pair(), free}, {k.addrOnly(), addrFree}} {
		f, ok := t.keys[c.key]
		if !ok || now.Sub(f.last) > forgetAfter {
			continue
		}
		if until := f.last.Add(delay(f.count, c.free)); now.Before(until) {
			longest = max(longest, until.Sub(now))
		}
	}
	return longest
}

func (t *throttle) underAttackLocked(now time.Time, k loginKeys) bool {
	f, ok := t.keys[k.nameKey()]
	return ok && now.Sub(f.windowStart) < userWindow && f.window >= userAttack
}

// fail counts a failed login. It reports whether this failure put the user
// name under attack, so the caller can log it once.
func (t *throttle) fail(now time.Time, k loginKeys) (attackStarted bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.keys) >= maxThrottled-3 {
		t.evictLocked(now)
	}
	for _, key := range []string{k.pair(), k.addrOnly(), k.nameKey()} {
		f := t.keys[key]
		if f == nil || now.Sub(f.last) > forgetAfter {
			f = &failures{}
			t.keys[key] = f
		}
		f.count++
		f.last = now
	}
	n := t.keys[k.nameKey()]
	if now.Sub(n.windowStart) >= userWindow {
		n.window, n.windowStart = 0, now
	}
	n.window++
	return n.window == userAttack
}

// evictLocked makes room: first what is forgotten anyway, then the quarter
// of keys whose last failure is oldest, so a flood of new keys cannot
// wipe out the count of a key being attacked right now.
func (t *throttle) evictLocked(now time.Time) {
	for k, f := range t.keys {
		if now.Sub(f.last) > forgetAfter {
			delete(t.keys, k)
		}
	}
	if len(t.keys) < maxThrottled*3/4 {
		return
	}
	type aged struct {
		key  string
		last time.Time
	}
	all := make([]aged, 0, len(t.keys))
	for k, f := range t.keys {
		all = append(all, aged{k, f.last})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].last.Before(all[j].last) })
	for _, a := range all[:len(all)/4] {
		delete(t.keys, a.key)
	}
}

// succeed forgets the failures of the pair after a correct login. The
// address and the name keep theirs: an attacker who logs in to an account
// of their own must not wipe out their address's record.
func (t *throttle) succeed(k loginKeys) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.keys, k.pair())
}

// checkOutcome is how a bounded password check went.
type checkOutcome int

const (
	checked   checkOutcome = iota
	queueFull              // too many logins waiting: refused at once
	gaveUp                 // the client went away while waiting
)

// check runs a password check with at most maxBcryptJobs at once and at
// most maxBcryptQueue waiting for a turn; beyond that it refuses at once.
func (t *throttle) check(ctx context.Context, f func()) checkOutcome {
	select {
	case t.bcrypt <- struct{}{}: // a free slot: no need to queue
	default:
		t.mu.Lock()
		if t.queued >= maxBcryptQueue {
			t.mu.Unlock()
			return queueFull
		}
		t.queued++
		t.mu.Unlock()
		var ok bool
		select {
		case t.bcrypt <- struct{}{}:
			ok = true
		case <-ctx.Done():
		}
		t.mu.Lock()
		t.queued--
		t.mu.Unlock()
		if !ok {
			return gaveUp
		}
	}
	defer func() { <-t.bcrypt }()
	f()
	return checked
}
