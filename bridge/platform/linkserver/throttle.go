package linkserver

// The platform's throttle of wrong hub logins.

import (
	"time"

	"github.com/switchbridge/switchbridge/bridge/infra/failures"
)

// hubLoginPolicy is how wrong hub logins are counted: past a key's free
// failures, waits of 1 s doubling to 30 s; a key without a failure for a
// minute starts over; at most 4,096 keys.
var hubLoginPolicy = failures.Policy{FirstDelay: time.Second, MaxDelay: 30 * time.Second, ForgetAfter: time.Minute, MaxKeys: 4096}

// Free failures per key: the (hub id, address) pair waits after pairFree,
// the address alone only after addrFree, so one hub's wrong secret cannot
// lock out the other hubs behind the same address, while one address
// cannot try ids without end. An address is the client's behind
// server.trusted_proxies, IPv6 by its /64 (clientaddr.Key).
const (
	pairFree = 5
	addrFree = 50
)

// loginThrottle throttles wrong hub logins, over a failures.Table.
type loginThrottle struct{ t *failures.Table }

func newLoginThrottle() loginThrottle { return loginThrottle{failures.New(hubLoginPolicy)} }

func pairKey(id, addr string) string { return "pair:" + id + "\x00" + addr }
func addrOnly(addr string) string    { return "addr:" + addr }

// wait is how long hub id at addr must still wait before it may try.
func (l loginThrottle) wait(id, addr string, now time.Time) time.Duration {
	return l.t.Wait(now, failures.Budget{Key: pairKey(id, addr), Free: pairFree}, failures.Budget{Key: addrOnly(addr), Free: addrFree})
}

// fail counts a wrong login of hub id at addr.
func (l loginThrottle) fail(id, addr string, now time.Time) {
	l.t.Fail(now, pairKey(id, addr), addrOnly(addr))
}

// succeed forgets the pair's failures; the address keeps its count.
func (l loginThrottle) succeed(id, addr string) { l.t.Forget(pairKey(id, addr)) }
