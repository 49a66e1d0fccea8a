package mqtt

import (
	"errors"
	"sync"
	"syscall"
	"time"
)

// The driver's own reconnect back-off. paho's is switched off
// (MaxReconnectInterval and ConnectRetryInterval 0) because it remembers
// earlier outages: its delay resets only after twice the connect timeout
// without a failure, so a broker restarted every 20 s cost the hub 2, 3, 7,
// 15, then 29 s of control after it was back.
const (
	// stableAfter is how long a connection must have lived for the next
	// outage to be treated as a new one, retried at once.
	stableAfter = 10 * time.Second
	// briefLife is how long a connection must have lived to count as one
	// that served, even if not for stableAfter: after it the first retry
	// waits firstRetry, however many such outages came before (a broker
	// restarted every few seconds). A connection that ended sooner died
	// young (a second client with the hub's id, a broker that drops the
	// hub at once), and the waits after such deaths grow.
	briefLife = 2 * time.Second
	// firstRetry is the wait after the first failed attempt.
	firstRetry = 250 * time.Millisecond
	// refusedMax caps the wait while the broker's host refuses the
	// connection (nothing listens on the port: the broker is restarting).
	// Such an attempt costs a SYN and a RST, and the broker is back within
	// this of accepting connections.
	refusedMax = time.Second
	// maxReconnectInterval caps the wait for every other failure (a
	// timeout, a TLS or login refusal, a connection that died young: a
	// second client with the hub's id), which a quick retry does not cure.
	maxReconnectInterval = 30 * time.Second
)

// backoff decides how long to wait before each connection attempt. paho
// reports every attempt's start and failure synchronously on its connect
// goroutine (ConnectionNotificationConnecting, …Failed); an attempt that
// was not reported failed connected, and the next attempt's start is when
// that connection had ended.
type backoff struct {
	mu      sync.Mutex
	delay   time.Duration // the wait before the next attempt
	started time.Time     // the last attempt's start; zero before the first
	failed  bool          // the last attempt failed
}

// attempt is called as an attempt starts and returns how long to wait
// before making it.
func (b *backoff) attempt(now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.started.IsZero():
		b.delay = 0
	case b.failed:
		// failure set the delay.
	case now.Sub(b.started) >= stableAfter:
		b.delay = 0 // a connection that lived: a new outage
	case now.Sub(b.started) >= briefLife:
		b.delay = firstRetry // it served a while: the broker went away again
	default:
		b.delay = grow(b.delay, maxReconnectInterval) // it died young
	}
	b.failed = false
	b.started = now.Add(b.delay)
	return b.delay
}

// failure records that the current attempt failed with err.
func (b *backoff) failure(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failed = true
	limit := maxReconnectInterval
	if errors.Is(err, syscall.ECONNREFUSED) {
		limit = refusedMax
	}
	b.delay = grow(b.delay, limit)
}

// grow doubles d, from firstRetry, up to limit. A longer d (from failures
// of another kind) is cut down to limit.
func grow(d, limit time.Duration) time.Duration {
	if d < firstRetry {
		d = firstRetry
	} else {
		d *= 2
	}
	return min(d, limit)
}
