package oauth

import (
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Login throttling. Each failed login counts against the user name tried
// and against the client's address; past a number of failures that key is
// locked for a while, doubling with each further failure. A correct
// password does not get through a lock, so guessing gains nothing by
// going on. The address limit is higher than the name limit because a
// reverse proxy puts a whole household behind one address.
const (
	nameFailures  = 5
	addrFailures  = 20
	firstLockout  = 30 * time.Second
	maxLockout    = 15 * time.Minute
	forgetAfter   = time.Hour // a key without failures for this long starts over
	maxThrottled  = 10000
	maxBcryptJobs = 2 // bcrypt is slow on a Pi; more at once only queues on the CPU
)

type throttle struct {
	mu   sync.Mutex
	keys map[string]*failures
	// bcrypt bounds the password checks running at once.
	bcrypt chan struct{}
}

type failures struct {
	count  int
	last   time.Time
	locked time.Time // until when
}

func newThrottle() *throttle {
	return &throttle{keys: map[string]*failures{}, bcrypt: make(chan struct{}, maxBcryptJobs)}
}

func loginKeys(r *http.Request, name string) (nameKey, addrKey string) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return "name:" + strings.ToLower(name), "addr:" + host
}

// wait returns how long the keys are still locked, 0 when a login may be tried.
func (t *throttle) wait(now time.Time, keys ...string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	var longest time.Duration
	for _, k := range keys {
		if f, ok := t.keys[k]; ok && now.Before(f.locked) {
			longest = max(longest, f.locked.Sub(now))
		}
	}
	return longest
}

// fail counts a failed login against the keys.
func (t *throttle) fail(now time.Time, nameKey, addrKey string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.keys) >= maxThrottled {
		for k, f := range t.keys {
			if now.Sub(f.last) > forgetAfter && !now.Before(f.locked) {
				delete(t.keys, k)
			}
		}
		if len(t.keys) >= maxThrottled {
			// A flood of distinct keys: forget the ones not locked, so the
			// flood cannot be used to lift a lock.
			for k, f := range t.keys {
				if !now.Before(f.locked) {
					delete(t.keys, k)
				}
			}
		}
	}
	for _, k := range []struct {
		key   string
		limit int
	}{{nameKey, nameFailures}, {addrKey, addrFailures}} {
		f := t.keys[k.key]
		if f == nil || now.Sub(f.last) > forgetAfter {
			f = &failures{}
			t.keys[k.key] = f
		}
		f.count++
		f.last = now
		if over := f.count - k.limit; over >= 0 {
			lock := firstLockout << min(over, 10)
			f.locked = now.Add(min(lock, maxLockout))
		}
	}
}

// succeed forgets the failures of a user name after a correct login.
func (t *throttle) succeed(nameKey string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.keys, nameKey)
}

// check runs a password check with at most maxBcryptJobs at once; it gives
// up when the request is cancelled while waiting.
func (t *throttle) check(r *http.Request, f func()) bool {
	select {
	case t.bcrypt <- struct{}{}:
	case <-r.Context().Done():
		return false
	}
	defer func() { <-t.bcrypt }()
	f()
	return true
}
