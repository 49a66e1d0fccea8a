package oauth

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/infra/failures"
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
// An address is the client's, behind trusted proxies (clientaddr.Of), and an
// IPv6 client counts by its /64. A login's failure is counted before its
// password is checked, in the same step as the check of the counts
// (charge), and taken back when the password was right; a correct password
// also clears the pair, the name's count and the device's.
//
// The counts are kept in the database (LoginFailures), so that the
// processes of one platform count together: a guesser whose tries a load
// balancer spreads over N processes must not get N allowances. A key is
// stored as its HMAC under the signing key, not as a plain hash: it names
// a user and an address, and a plain hash of those could be reversed by
// trying every address. The rule for one key is bridge/infra/failures' Policy,
// the embedded broker's too.
const (
	pairFree    = 5
	addrFree    = 10
	userFree    = 10
	deviceFree  = 5
	firstDelay  = 30 * time.Second
	maxDelay    = 15 * time.Minute
	forgetAfter = 24 * time.Hour // a key without failures for this long starts over
	// maxThrottled bounds the table; the least recently failed keys go
	// first.
	maxThrottled = 10000

	// maxBcryptJobs bounds one process's password checks at once: bcrypt
	// is slow on a Pi, and more at once only queue on the CPU.
	maxBcryptJobs = 2
	// maxBcryptQueue bounds the logins waiting for a password check: more
	// would only hold connections and memory while a flood is served.
	maxBcryptQueue = 16
	// busyRetry is the wait told to a login refused because the queue is full.
	busyRetry = 5 * time.Second
)

// policy is the login throttle's: the delays and how long failures are
// remembered.
var policy = failures.Policy{FirstDelay: firstDelay, MaxDelay: maxDelay, ForgetAfter: forgetAfter, MaxKeys: maxThrottled}

type throttle struct {
	store LoginFailures
	key   *signingKey
	// maxKeys is the table's bound, policy.MaxKeys but in tests.
	maxKeys int

	mu sync.Mutex
	// bcrypt bounds the password checks running at once; queued counts
	// the logins waiting for one of its slots.
	bcrypt chan struct{}
	queued int
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

// budgets are the keys a login counts against: its device's alone when it
// has one, else the pair, the address and the name.
func (k loginKeys) budgets() []failures.Budget {
	if k.device != "" {
		return []failures.Budget{{Key: k.deviceKey(), Free: deviceFree}}
	}
	return []failures.Budget{{Key: k.pair(), Free: pairFree}, {Key: k.addrOnly(), Free: addrFree}, {Key: k.nameKey(), Free: userFree}}
}

func newThrottle(st LoginFailures, key *signingKey) *throttle {
	return &throttle{store: st, key: key, maxKeys: policy.MaxKeys, bcrypt: make(chan struct{}, maxBcryptJobs)}
}

// stored returns the keys as they are stored: their HMACs.
func (t *throttle) stored(ctx context.Context, keys ...string) ([][]byte, error) {
	out := make([][]byte, len(keys))
	for i, k := range keys {
		sum, err := t.key.sum(ctx, "login-failures", k)
		if err != nil {
			return nil, err
		}
		out[i] = sum
	}
	return out, nil
}

// wait returns how long the login must still wait, 0 when it may be tried.
func (t *throttle) wait(ctx context.Context, now time.Time, k loginKeys) (time.Duration, error) {
	bs := k.budgets()
	keys := make([]string, len(bs))
	for i, b := range bs {
		keys[i] = b.Key
	}
	stored, err := t.stored(ctx, keys...)
	if err != nil {
		return 0, err
	}
	counts, err := t.store.LoginFailures(ctx, now.Add(-policy.ForgetAfter), stored...)
	if err != nil {
		return 0, err
	}
	var longest time.Duration
	for i, b := range bs {
		longest = max(longest, policy.Wait(now, counts[i].Last, counts[i].Count, b.Free))
	}
	return longest, nil
}

// charge is a login's failure counted in advance against its budgets, so
// that it can be taken back when the password is right.
type charge struct {
	keys   loginKeys
	at     time.Time
	stored [][]byte              // the budgets' keys as stored, in budgets' order
	before []bridge.FailureCount // their counts before the charge
}

// charge checks the login's budgets and, when none of them makes it wait,
// counts a failure against each: one step in the database, which no other
// login of this or any process can come between, taken before the
// password is checked. Checking first and counting after the password
// check let parallel guesses all pass on the same count: the last free
// failure was checked once per password-check slot of every process. It
// returns the charge, or how long the login must wait (nothing counted).
func (t *throttle) charge(ctx context.Context, now time.Time, k loginKeys) (*charge, time.Duration, error) {
	bs := k.budgets()
	keys := make([]string, len(bs))
	for i, b := range bs {
		keys[i] = b.Key
	}
	stored, err := t.stored(ctx, keys...)
	if err != nil {
		return nil, 0, err
	}
	var wait time.Duration
	before, charged, err := t.store.ChargeLoginFailure(ctx, now, now.Add(-policy.ForgetAfter), t.maxKeys, func(counts []bridge.FailureCount) bool {
		wait = 0
		for i, b := range bs {
			wait = max(wait, policy.Wait(now, counts[i].Last, counts[i].Count, b.Free))
		}
		return wait == 0
	}, stored...)
	if err != nil {
		return nil, 0, err
	}
	if !charged {
		return nil, wait, nil
	}
	return &charge{keys: k, at: now, stored: stored, before: before}, 0, nil
}

// nameSpent reports whether the charge, now that the password was wrong,
// used up the user name's allowance across addresses, so the caller can
// log it once.
func (c *charge) nameSpent() bool {
	for i, b := range c.keys.budgets() {
		if b.Key == c.keys.nameKey() && c.before[i].Count+1 == userFree {
			return true
		}
	}
	return false
}

// succeed settles the charge of a correct login: it forgets the failures
// of the pair, the name and the device (only someone who knows the
// password can clear them) and takes back the address's charge. The
// address keeps its earlier record: an attacker who logs in to an account
// of their own must not wipe out their address's failures.
func (t *throttle) succeed(ctx context.Context, c *charge) error {
	k := c.keys
	keys := []string{k.pair(), k.nameKey()}
	if k.device != "" {
		keys = append(keys, k.deviceKey())
	}
	stored, err := t.stored(ctx, keys...)
	if err != nil {
		return err
	}
	if err := t.store.ForgetLoginFailures(ctx, stored...); err != nil {
		return err
	}
	for i, b := range k.budgets() {
		if b.Key == k.addrOnly() {
			return t.store.UndoLoginFailure(ctx, c.at, c.stored[i], c.before[i])
		}
	}
	return nil
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
