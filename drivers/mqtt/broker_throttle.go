// The embedded broker's throttle on failed logins, per login and address.

package mqtt

import (
	"sort"
	"sync"
	"time"
)

// Failed broker logins are throttled as the web login's are (see
// bridge/oauth's throttle.go for the reasoning): failures count against
// the (login, address) pair and against the address; past a few free
// failures each further try must wait a delay that doubles with every
// failure. A login tried while it must wait is refused without its
// password being checked, so guesses then learn nothing. A pair or
// address that has not failed is never slowed: a plug on its own address
// logs in at once while another address guesses its password. When one
// login fails from many addresses (loginAttack within loginWindow), each
// pair of it gets pairFreeUnderAttack free failures instead of pairFree.
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
	now  func() time.Time
	mu   sync.Mutex
	keys map[string]*loginFailures
}

type loginFailures struct {
	count int
	last  time.Time
	// For a login: the failures since windowStart.
	window      int
	windowStart time.Time
}

func newLoginThrottle() *loginThrottle {
	return &loginThrottle{now: time.Now, keys: map[string]*loginFailures{}}
}

func pairKey(login, addr string) string { return "pair:" + login + "\x00" + addr }
func addrKey(addr string) string        { return "addr:" + addr }
func loginKey(login string) string      { return "login:" + login }

// failDelay is how long after its last failure a key with count failures,
// of which free were free, must wait.
func failDelay(count, free int) time.Duration {
	over := count - free
	if over < 0 {
		return 0
	}
	return min(firstDelay<<min(over, 10), maxDelay)
}

// wait returns how long a login of login from addr must still wait.
func (t *loginThrottle) wait(login, addr string) time.Duration {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	free := pairFree
	if f, ok := t.keys[loginKey(login)]; ok && now.Sub(f.windowStart) < loginWindow && f.window >= loginAttack {
		free = pairFreeUnderAttack
	}
	var longest time.Duration
	for _, k := range []struct {
		key  string
		free int
	}{{pairKey(login, addr), free}, {addrKey(addr), addrFree}} {
		f, ok := t.keys[k.key]
		if !ok || now.Sub(f.last) > forgetAfter {
			continue
		}
		if until := f.last.Add(failDelay(f.count, k.free)); now.Before(until) {
			longest = max(longest, until.Sub(now))
		}
	}
	return longest
}

// fail counts a failed login; it reports whether this failure put the
// login under attack, so that is logged once.
func (t *loginThrottle) fail(login, addr string) (attackStarted bool) {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.keys) >= maxThrottled-3 {
		t.evictLocked(now)
	}
	for _, key := range []string{pairKey(login, addr), addrKey(addr), loginKey(login)} {
		f := t.keys[key]
		if f == nil || now.Sub(f.last) > forgetAfter {
			f = &loginFailures{}
			t.keys[key] = f
		}
		f.count++
		f.last = now
	}
	n := t.keys[loginKey(login)]
	if now.Sub(n.windowStart) >= loginWindow {
		n.window, n.windowStart = 0, now
	}
	n.window++
	return n.window == loginAttack
}

// succeed forgets the pair's failures; the address keeps its own.
func (t *loginThrottle) succeed(login, addr string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.keys, pairKey(login, addr))
}

// evictLocked makes room: first what is forgotten anyway, then the
// quarter of keys whose last failure is oldest.
func (t *loginThrottle) evictLocked(now time.Time) {
	for k, f := range t.keys {
		if now.Sub(f.last) > forgetAfter {
			delete(t.keys, k)
		}
	}
	if len(t.keys) < maxThrottled*3/4 {
		return
	}
	keys := make([]string, 0, len(t.keys))
	for k := range t.keys {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return t.keys[keys[i]].last.Before(t.keys[keys[j]].last) })
	for _, k := range keys[:len(keys)/4] {
		delete(t.keys, k)
	}
}
