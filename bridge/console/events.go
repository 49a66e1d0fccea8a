package console

// GET /console/events: the switches page's live values, as server-sent
// events named "switch" (liveSwitch's JSON) from the hub's own feed. It
// subscribes first, then sends every switch as it is (so a page that
// reconnects is current again, and no change falls between), then each
// change. One goroutine per stream, which an owner's few tabs afford; the
// streams are bounded in number, each by a subscription buffer (a page
// that does not keep up is dropped and reconnects) and by a write
// deadline, and end when the page goes, when the owner's login ends, and
// when the hub shuts down (CloseStreams).

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"
)

const (
	// maxLiveStreams bounds the open streams of the whole console: an
	// owner's tabs and phones, with room for reconnects that overlap.
	maxLiveStreams = 16
	// liveBuffer is how many changes a stream may fall behind the feed
	// before it is dropped (the page reconnects and is sent every switch
	// again).
	liveBuffer = 64
	// liveRetry is the reconnection delay a stream asks of the page.
	liveRetry = 2 * time.Second
	// liveWriteWait bounds one write: a page that does not read its
	// events in that time is dropped rather than buffered for.
	liveWriteWait = 10 * time.Second
)

// liveHeartbeat is how often a stream with nothing to say sends a
// comment, so that proxies keep it and a dead page is noticed; the
// owner's login is checked again then. A variable for the tests.
var liveHeartbeat = 15 * time.Second

// liveStreams counts the open streams and ends them at shutdown.
type liveStreams struct {
	mu     sync.Mutex
	open   int
	closed bool
	done   chan struct{} // closed by CloseStreams
}

// add takes a stream's place; false when there is none, or the hub shuts
// down.
func (l *liveStreams) add() (done <-chan struct{}, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done == nil {
		l.done = make(chan struct{})
	}
	if l.closed || l.open >= maxLiveStreams {
		return nil, false
	}
	l.open++
	return l.done, true
}

func (l *liveStreams) remove() {
	l.mu.Lock()
	l.open--
	l.mu.Unlock()
}

// CloseStreams ends the console's open event streams and refuses new
// ones: an http.Server's Shutdown waits for requests to end, and a stream
// does not by itself.
func (c *Console) CloseStreams() {
	l := &c.live
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.closed = true
	if l.done == nil {
		l.done = make(chan struct{})
	}
	close(l.done)
}

func (c *Console) events(q *Request) {
	h := c.opts.Hub
	if h.Feed == nil {
		c.ErrorPage(q.W, q.R, q.V, http.StatusNotFound, "This hub keeps no feed of its switches' changes.")
		return
	}
	done, ok := c.live.add()
	if !ok {
		q.W.Header().Set("Retry-After", strconv.Itoa(int(liveRetry.Seconds())))
		c.ErrorPage(q.W, q.R, q.V, http.StatusServiceUnavailable, "Too many pages with live values are open, or the hub is shutting down: reload this page in a while.")
		return
	}
	defer c.live.remove()
	sub, _, _ := h.Feed.Subscribe(nil, liveBuffer, "")
	defer sub.Close()

	w, rc := q.W, http.NewResponseController(q.W)
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	// nginx would otherwise buffer the stream.
	hd.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	// The server's timeouts are for requests that answer and end: the
	// page sends nothing more (a read deadline would end the request's
	// context), and each write has a deadline of its own.
	_ = rc.SetReadDeadline(time.Time{})
	write := func(b []byte) bool {
		if rc.SetWriteDeadline(time.Now().Add(liveWriteWait)) != nil {
			return false
		}
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !write([]byte("retry: " + strconv.FormatInt(liveRetry.Milliseconds(), 10) + "\n\n")) {
		return
	}
	now := time.Now()
	for _, sw := range h.Switchboard.Switches() {
		st := sw.Device.State()
		if !write(liveEvent(liveOf(sw.ID, st.Value, st.Available, st.LastSeen, st.Reading, st.Stale(now)))) {
			return
		}
	}
	heartbeat := time.NewTicker(liveHeartbeat)
	defer heartbeat.Stop()
	for {
		select {
		case e, ok := <-sub.Events():
			if !ok {
				return // fallen behind: the page reconnects and is sent every switch
			}
			if !write(liveEvent(liveOf(e.SwitchID, e.Value, e.Available, e.LastSeen, e.Reading, e.Stale))) {
				return
			}
		case <-heartbeat.C:
			// A logout, an expired session, an owner no longer one: the
			// page stops being told.
			if v, err := c.opts.Gate.Visitor(q.R); err != nil || v == nil || !v.User.Owner {
				return
			}
			if !write([]byte(": heartbeat\n\n")) {
				return
			}
		case <-q.R.Context().Done():
			return
		case <-done:
			return
		}
	}
}

// liveEvent is one switch as an event of the stream.
func liveEvent(s liveSwitch) []byte {
	b, _ := json.Marshal(s) // strings and a bool
	out := make([]byte, 0, len(b)+24)
	out = append(out, "event: switch\ndata: "...)
	out = append(out, b...) // JSON without newlines: one data line
	return append(out, "\n\n"...)
}
