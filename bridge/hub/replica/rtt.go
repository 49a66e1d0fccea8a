package replica

// The hub's estimate of its link's round trip, and the deadlines derived
// from it: a hub on a slow uplink (LTE, satellite) waits as long as its
// link needs, and on a fast one no less than the fixed values below.

import (
	"sync"
	"time"

	"github.com/switchbridge/switchbridge/bridge/link"
)

// rttEstimate is a smoothed round-trip time as RFC 6298 §2 keeps it for
// TCP's retransmission timer: SRTT and RTTVAR, with alpha 1/8 and beta
// 1/4, and RTO = SRTT + max(G, 4·RTTVAR). Samples are the time from
// writing a request to the first byte of its answer (the hub's own
// requests but the snapshot, whose answer waits on the platform's work)
// and from sending a long poll to its first 102 Processing, which a
// platform sends as soon as it accepts the poll.
type rttEstimate struct {
	mu      sync.Mutex
	srtt    time.Duration
	rttvar  time.Duration
	samples int
}

// rttGranularity is RFC 6298's G, the clock's granularity: the least
// margin RTO keeps over SRTT. maxRTT bounds a sample and the timeout, so
// one stalled answer cannot push every deadline out for long.
const (
	rttGranularity = 50 * time.Millisecond
	maxRTT         = time.Minute
)

// sample adds a measured round trip.
func (e *rttEstimate) sample(r time.Duration) {
	r = min(max(r, 0), maxRTT)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.samples == 0 {
		e.srtt, e.rttvar = r, r/2
	} else {
		d := e.srtt - r
		if d < 0 {
			d = -d
		}
		e.rttvar = (3*e.rttvar + d) / 4
		e.srtt = (7*e.srtt + r) / 8
	}
	e.samples++
}

// smoothed returns SRTT and RTTVAR; ok false before the first sample.
func (e *rttEstimate) smoothed() (srtt, rttvar time.Duration, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.srtt, e.rttvar, e.samples > 0
}

// rto is the retransmission timeout, SRTT + max(G, 4·RTTVAR); 0 before
// the first sample.
func (e *rttEstimate) rto() time.Duration {
	srtt, rttvar, ok := e.smoothed()
	if !ok {
		return 0
	}
	return min(srtt+max(rttGranularity, 4*rttvar), maxRTT)
}

// Deadlines that follow the round trip. Each is today's fixed value on a
// fast link (RTO near zero) and grows with RTO on a slow one.

// syncDeadline bounds a sync on a replica miss: twice RTO covers a new
// connection's handshake and the request itself.
func (h *Follower) syncDeadline() time.Duration { return max(syncTimeout, 2*h.rtt.rto()) }

// firstBeatDeadline is how long a poll waits for its first heartbeat: the
// platform sends one as it accepts the poll, a round trip away.
func (h *Follower) firstBeatDeadline() time.Duration { return heartbeatSilence + h.rtt.rto() }

// beatSilence is how long a poll that heard a heartbeat waits for the
// next: they leave the platform every link.HeartbeatInterval and arrive as
// spread as the round trip varies.
func (h *Follower) beatSilence() time.Duration {
	srtt, _, _ := h.rtt.smoothed()
	return heartbeatSilence + h.rtt.rto() - srtt
}

// pollDeadline bounds a long poll: the platform answers after
// link.DefaultPollTimeout, which reaches the hub a round trip after it sent
// the poll.
func (h *Follower) pollDeadline() time.Duration {
	return link.DefaultPollTimeout + pollGrace + h.rtt.rto()
}

// requestDeadline bounds the inventory report.
func (h *Follower) requestDeadline() time.Duration { return requestTimeout + 2*h.rtt.rto() }

// usageDeadline bounds a usage report: usageTimeout, or on a slow link
// twice RTO (a new connection's handshake and the request), as a sync.
func (h *Follower) usageDeadline() time.Duration { return max(usageTimeout, 2*h.rtt.rto()) }
