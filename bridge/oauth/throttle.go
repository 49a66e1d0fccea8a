package oauth

import (
	"context"
	"sort"
	"strings"
	"sync"
	"time"
)

// Login throttling slows password guessing without handing anyone a way to
// lock a user out of a browser they use. A lock on the user name alone is
// such a way: wrong passwords from anywhere would keep the real user out
// from everywhere. So failures count against four keys:
//
//   - the (user name, address) pair: pairFree failures are free, then each
//     further try must wait a delay that doubles with every failure, from
//     firstDelay up to maxDelay. An attacker at one address gets a few
//     guesses an hour at one name.
//   - the address, across all names: addrFree failures, then the same
//     delays. It stops one address spraying guesses over many names. It
//     also slows people who share the attacker's address (a household
//     behind one NAT), except in browsers they have logged in from before.
//   - the user name, across all addresses: userFree failures, then the same
//     delays, so many addresses guessing one password get about one guess
//     per delay between them, not one per address.
//   - a device: a browser in which the user has logged in before carries a
//     device cookie for that user (device.go, the OWASP "device cookie"
//     pattern). Its logins as that user count only against the device key,
//     with deviceFree free failures, and never against the three keys
//     above: whatever an attacker does elsewhere, the user's own browser
//     keeps its own allowance. A stolen cookie is worth deviceFree guesses
//     and then the same delays.
//
// An address is the client's, behind trusted proxies (clientAddr), and an
// IPv6 client counts by its /64. A correct password clears the pair, the
// name's count and the device's.
const (
	pairFree    = 5
	addrFree    = 10
	userFree    = 10
	deviceFree  = 5
	firstDelay  = 30 * time.Second
	maxDelay    = 15 * time.Minute
	forgetAfter = 24 * time.Hour // a key without failures for this long starts over
	// maxThrottled bounds the table; the least recently failed key goes first.
	maxThrottled = 10000

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
}

// loginKeys are a login's throttling keys: its user name (case-folded, as
// names are looked up), its client address key, and the id of the
// browser's valid device cookie for that user ("" when it has none).
type loginKeys struct{ name, addr, device string }

func (k loginKeys) pair() string      { return "pair:" + k.name + "\x00" + k.addr }
func (k loginKeys) nameKey() string   { return "name:" + k.name }
func (k loginKeys) addrOnly() string  { return "addr:" + k.addr }
func (k loginKeys) deviceKey() string { return "device:" + k.device }

func newLoginKeys(name, addr string) loginKeys {
	return loginKeys{name: strings.ToLower(name), addr: addr}
}

// fromDevice returns the keys of the same login from a browser whose
// device cookie for the user has this id.
func (k loginKeys) fromDevice(id string) loginKeys {
	k.device = id
	return k
}

// budget is a key and its free failures.
type budget struct {
	key  string
	free int
}

// budgets are the keys a login counts against: its device's alone when it
// has one, else the pair, the address and the name.
func (k loginKeys) budgets() []budget {
	if k.device != "" {
		return []budget{{k.deviceKey(), deviceFree}}
	}
	return []budget{{k.pair(), pairFree}, {k.addrOnly(), addrFree}, {k.nameKey(), userFree}}
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
	var longest time.Duration
	for _, b := range k.budgets() {
		f, ok := t.keys[b.key]
		if !ok || now.Sub(f.last) > forgetAfter {
			continue
		}
		if until := f.last.Add(delay(f.count, b.free)); now.Before(until) {
			longest = max(longest, until.Sub(now))
		}
	}
	return longest
}

// fail counts a failed login. It reports whether this failure used up the
// user name's allowance across addresses, so the caller can log it once.
func (t *throttle) fail(now time.Time, k loginKeys) (nameSpent bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.keys) >= maxThrottled-3 {
		t.evictLocked(now)
	}
	for _, b := range k.budgets() {
		f := t.keys[b.key]
		if f == nil || now.Sub(f.last) > forgetAfter {
			f = &failures{}
			t.keys[b.key] = f
		}
		f.count++
		f.last = now
		if b.key == k.nameKey() && f.count == userFree {
			nameSpent = true
		}
	}
	return nameSpent
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

// succeed forgets the failures of the pair, the name and the device after
// a correct login: only someone who knows the password can clear them. The
// address keeps its record: an attacker who logs in to an account of
// their own must not wipe out their address's failures.
func (t *throttle) succeed(k loginKeys) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.keys, k.pair())
	delete(t.keys, k.nameKey())
	if k.device != "" {
		delete(t.keys, k.deviceKey())
	}
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
