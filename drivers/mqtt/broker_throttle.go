// The embedded broker's throttle on failed logins, per login and address.

package mqtt

import (
	"sync"
	"time"

	throttle "github.com/switchbridge/switchbridge/bridge/infra/failures"
)

// Failed broker logins are throttled as the web login's are (see
// bridge/platform/oauth's throttle.go for the reasoning): failures count against
// the (login, address) pair and against the address; past a few free
// failures each further try must wait a delay that doubles with every
// failure. A login tried while it must wait is refused without its
// password being checked, so guesses then learn nothing. A pair or
// address that has not failed is never slowed: a plug on its own address
// logs in at once while another address guesses its password. When one
// login fails from many addresses (loginAttack within loginWindow), each
// pair of it gets pairFreeUnderAttack free failures instead of pairFree.
// The counting is bridge/infra/failures', as the web login's is.
//
// The delays are shorter than the web login's: a plug given a new
// password retries by itself, and should be back within minutes.
const (
	pairFree            = 5
	pairFreeUnderAttack = 1
	addrFree            = 20
	firstDelay          = 5 * time.Second
	maxDelay            = 5 * time.Minute
	loginAttack         = 100
	loginWindow         = time.Hour
	forgetAfter         = 24 * time.Hour
	maxThrottled        = 10000
)

type loginThrottle struct {
	now func() time.Time
	// mu makes a login's check of its budget, its password and the
	// failure it may count one step (check): parallel guesses otherwise
	// all pass the same count before any is charged.
	mu sync.Mutex
	// failures counts per (login, address) pair and per address;
	// attacks counts a login's failures across addresses, forgotten after
	// loginWindow without one.
	failures, attacks *throttle.Table
}

func newLoginThrottle() *loginThrottle {
	return &loginThrottle{
		now:      time.Now,
		failures: throttle.New(throttle.Policy{FirstDelay: firstDelay, MaxDelay: maxDelay, ForgetAfter: forgetAfter, MaxKeys: maxThrottled}),
		attacks:  throttle.New(throttle.Policy{ForgetAfter: loginWindow, MaxKeys: maxThrottled}),
	}
}

func pairKey(login, addr string) string { return "pair:" + login + "\x00" + addr }
func addrKey(addr string) string        { return "addr:" + addr }

// wait returns how long a login of login from addr must still wait.
func (t *loginThrottle) wait(login, addr string) time.Duration {
	now := t.now()
	free := pairFree
	if t.attacks.Count(now, login) >= loginAttack {
		free = pairFreeUnderAttack
	}
	return t.failures.Wait(now, throttle.Budget{Key: pairKey(login, addr), Free: free}, throttle.Budget{Key: addrKey(addr), Free: addrFree})
}

// fail counts a failed login; it reports whether this failure put the
// login under attack, so that is logged once.
func (t *loginThrottle) fail(login, addr string) (attackStarted bool) {
	now := t.now()
	t.failures.Fail(now, pairKey(login, addr), addrKey(addr))
	return t.attacks.Fail(now, login)[0] == loginAttack
}

// succeed forgets the pair's failures; the address keeps its own.
func (t *loginThrottle) succeed(login, addr string) {
	t.failures.Forget(pairKey(login, addr))
}

// check is one login's throttled password check, as a single step: how
// long it must still wait (its password unchecked), else whether the
// password is right (the pair's failures forgotten) or wrong (counted;
// attackStarted as fail says). The check itself is a constant-time
// comparison of a few bytes, so holding the lock across it costs nothing
// a login would notice.
func (t *loginThrottle) check(login, addr string, password func() bool) (wait time.Duration, ok, attackStarted bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if wait := t.wait(login, addr); wait > 0 {
		return wait, false, false
	}
	if password() {
		t.succeed(login, addr)
		return 0, true, false
	}
	return 0, false, t.fail(login, addr)
}
