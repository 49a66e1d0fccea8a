package api

import (
	"fmt"
	"net/http"
	"net/textproto"
	"strconv"
	"sync"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
)

// RateLimit caps the requests of one installation: at most Requests in a
// window of Per that starts at its first request, as the original platform
// counted (250 in 60 seconds, then nothing until the next window). The
// zero RateLimit sets no cap.
type RateLimit struct {
	Requests int
	Per      time.Duration
}

// DefaultRateLimit is the original platform's limit.
var DefaultRateLimit = RateLimit{Requests: 250, Per: time.Minute}

func (l RateLimit) on() bool { return l.Requests > 0 && l.Per > 0 }

// rateLimiter counts requests per installation. It is told only of
// installations a valid token was presented for, so a bogus id never gets
// an entry; entries of windows that ended are swept once per window, so
// the map holds at most the installations active in the last two windows.
type rateLimiter struct {
	mu      sync.Mutex
	windows map[string]rateWindow
	swept   time.Time
}

type rateWindow struct {
	start time.Time
	count int
}

// rateState is what the headers of one answer say.
type rateState struct {
	remaining int
	reset     time.Duration // until the window ends
	allowed   bool
}

// take counts one request of installation id at now, unless the window's
// requests are used up.
func (l *rateLimiter) take(id string, lim RateLimit, now time.Time) rateState {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.windows == nil {
		l.windows = map[string]rateWindow{}
	}
	if since := now.Sub(l.swept); since >= lim.Per || since < 0 {
		for k, w := range l.windows {
			if ended(w, lim, now) {
				delete(l.windows, k)
			}
		}
		l.swept = now
	}
	w, ok := l.windows[id]
	if !ok || ended(w, lim, now) {
		w = rateWindow{start: now}
	}
	st := rateState{reset: w.start.Add(lim.Per).Sub(now)}
	if w.count < lim.Requests {
		w.count++
		st.allowed = true
	}
	st.remaining = lim.Requests - w.count
	l.windows[id] = w
	return st
}

// ended reports whether w is over at now; a clock that stepped back ends
// it too, rather than stretching it.
func ended(w rateWindow, lim RateLimit, now time.Time) bool {
	since := now.Sub(w.start)
	return since >= lim.Per || since < 0
}

// limitRate counts the request against its installation's limit and sets
// the X-RateLimit headers on the answer. X-RateLimit-Reset is in seconds
// until the window ends, rounded up, as Retry-After is. Beyond the limit it
// returns the ETOOMANY to answer with.
func (h *Handler) limitRate(w http.ResponseWriter, installationID string) error {
	lim, st, err := h.take(installationID, "an installation may make %d requests per %s")
	if !lim.on() {
		return nil
	}
	hd := w.Header()
	hd[limitHeader] = []string{strconv.Itoa(lim.Requests)}
	hd[remainingHeader] = []string{strconv.Itoa(st.remaining)}
	hd[resetHeader] = []string{strconv.FormatInt(seconds(st.reset), 10)}
	return err
}

// take counts one request of key against the limit; err is the ETOOMANY
// beyond it, its message saying the limit as what (a format of the
// requests and the window).
func (h *Handler) take(key, what string) (RateLimit, rateState, error) {
	lim := *h.opts.RateLimit
	if !lim.on() {
		return lim, rateState{allowed: true}, nil
	}
	now := time.Now
	if h.opts.Now != nil {
		now = h.opts.Now
	}
	st := h.limiter.take(key, lim, now())
	if st.allowed {
		return lim, st, nil
	}
	reset := seconds(st.reset)
	return lim, st, &bridge.Error{
		Code:       bridge.ETOOMANY,
		Message:    fmt.Sprintf("rate limit exceeded: "+what+"; try again in %d s", lim.Requests, lim.Per, reset),
		RetryAfter: time.Duration(reset) * time.Second,
	}
}

// The X-RateLimit headers' names as Header.Set would write them: set
// straight into the map, they are not canonicalized again (a copy of the
// name each) on every request.
var (
	limitHeader     = textproto.CanonicalMIMEHeaderKey("X-RateLimit-Limit")
	remainingHeader = textproto.CanonicalMIMEHeaderKey("X-RateLimit-Remaining")
	resetHeader     = textproto.CanonicalMIMEHeaderKey("X-RateLimit-Reset")
)

// seconds rounds d up to whole seconds, at least one: a client told 0
// would retry at once.
func seconds(d time.Duration) int64 {
	s := int64((d + time.Second - 1) / time.Second)
	return max(s, 1)
}

// Limit counts one request of key against the installation rate limit,
// as an installation's requests are counted: the owner's console counts
// each owner's commands under a key of their own, so an owner switches
// no faster than an app may. Beyond the limit it returns the ETOOMANY to
// show.
func (h *Handler) Limit(key string) error {
	_, _, err := h.take(key, "at most %d commands per %s")
	return err
}
