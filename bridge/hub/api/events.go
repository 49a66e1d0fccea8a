package api

// GET <uri>/events: the installation's switches as a Server-Sent Events
// stream. Subscribe first, then the snapshot, then the changes (so that no
// change falls between), each with an id a client resumes from.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
)

// Stream bounds and timings.
const (
	// DefaultStreamsPerInstallation caps one installation's open streams:
	// a client needs one, a few more cover reconnects that overlap.
	DefaultStreamsPerInstallation = 4
	// DefaultHeartbeat is how often a stream with nothing to say sends a
	// comment, so that proxies keep it and a client notices a dead one.
	DefaultHeartbeat = 15 * time.Second
	// streamRetry is the reconnection delay a stream asks of clients.
	streamRetry = 2 * time.Second
	// streamWriteWait is how long one write to a stream may take: a
	// reader that does not take its events in that time is dropped
	// rather than buffered for.
	streamWriteWait = 10 * time.Second
	// accessCheckEvery is how often open streams check that their access
	// still stands, so a removal ends them within two seconds.
	accessCheckEvery = 500 * time.Millisecond
	// streamBuffer is how many events a stream may fall behind the feed
	// (beyond what the connection's socket buffers hold) before it is
	// dropped.
	streamBuffer = 64
)

// StreamHandler serves a route that streams. It returns an error, answered
// as a handler's error, only before it has started the stream.
type StreamHandler func(c *Call, s *Stream) error

// Stream is what a streaming route writes to: an SSE response whose
// writes cannot be held up by a reader that does not read, and which ends
// when its access does.
type Stream struct {
	w  http.ResponseWriter
	rc *http.ResponseController
	// LastEventID is the client's Last-Event-ID header: the id of the
	// last event it saw, when it reconnects.
	LastEventID string
	// Feed is the hub's change feed.
	Feed *bridge.Feed
	// Done is closed when the client went away; Ended when the stream
	// must end for the hub: its token, grant or installation is gone, or
	// the hub shuts down. (Two channels rather than one merged: merging
	// would cost a goroutine per stream.)
	Done, Ended <-chan struct{}
	// Heartbeat is how often a comment is sent when nothing else is.
	Heartbeat time.Duration
	// Sent, when set, is told of each event written ("snapshot", "switch").
	Sent    func(kind string)
	started bool

	h         *Handler
	o         *openStream
	handedOff bool // to the streamer
}

// Start sends the stream's headers and the reconnection delay.
func (s *Stream) Start() error {
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	// nginx would otherwise buffer the stream.
	h.Set("X-Accel-Buffering", "no")
	s.w.WriteHeader(http.StatusOK)
	s.started = true
	// The server's timeouts are for requests that answer and end: a
	// stream lives on. Reads: the client sends nothing more, and a read
	// deadline would end the request's context. Writes get their own
	// deadline, each.
	_ = s.rc.SetReadDeadline(time.Time{})
	return s.write("retry: " + strconv.FormatInt(streamRetry.Milliseconds(), 10) + "\n\n")
}

// Event writes one event.
func (s *Stream) Event(kind, id string, data []byte) error {
	var b strings.Builder
	b.Grow(len(data) + len(kind) + len(id) + 24)
	b.WriteString("id: ")
	b.WriteString(id)
	b.WriteString("\nevent: ")
	b.WriteString(kind)
	b.WriteString("\ndata: ")
	b.Write(data) // JSON without newlines: one data line
	b.WriteString("\n\n")
	if err := s.write(b.String()); err != nil {
		return err
	}
	if s.Sent != nil {
		s.Sent(kind)
	}
	return nil
}

// Comment writes a comment line, which clients ignore.
func (s *Stream) Comment(text string) error { return s.write(": " + text + "\n\n") }

func (s *Stream) write(text string) error {
	if err := s.rc.SetWriteDeadline(time.Now().Add(streamWriteWait)); err != nil {
		return err
	}
	if _, err := s.w.Write([]byte(text)); err != nil {
		return err
	}
	return s.rc.Flush()
}

// Event is one change as the stream and webhooks send it.
type Event struct {
	ID        string        `json:"id"`
	Name      string        `json:"name"`
	Value     *bridge.Value `json:"value"`
	Previous  *bridge.Value `json:"previous"`
	Available bool          `json:"available"`
	At        time.Time     `json:"at"`
	Cause     bridge.Cause  `json:"cause"`
	// Own is true when the change came from a command of the installation
	// the event is sent to, and absent otherwise: whether another app
	// commanded the switch is not the receiving app's to know.
	Own      bool       `json:"own,omitempty"`
	LastSeen *time.Time `json:"last_seen,omitempty"`
	Power    Measured   `json:"power,omitzero"`
	Energy   Measured   `json:"energy,omitzero"`
}

// EventOf is the API's view of a feed event as installation receives it;
// name is the switch's name.
func EventOf(e bridge.Event, name, installation string) Event {
	out := Event{ID: e.SwitchID, Name: name, Available: e.Available, At: e.At.UTC(), Cause: e.Cause, Own: e.OwnedBy(installation), LastSeen: lastSeen(e.LastSeen)}
	if v := e.Value; v != "" {
		out.Value = &v
	}
	if v := e.Previous; v != "" {
		out.Previous = &v
	}
	out.Power, out.Energy = measured(e.Reading, e.Stale)
	return out
}

// streamEvents is GET /events.
func streamEvents(c *Call, s *Stream) error {
	ids := c.Grant.SwitchIDs
	if ids == nil {
		ids = []string{} // a view of no switches, never of all of them
	}
	view := s.Feed.View(c.Grant.InstallationID, ids)
	sub, missed, resumed := view.Subscribe(streamBuffer, s.LastEventID)
	defer func() {
		if !s.handedOff {
			sub.Close()
		}
	}()
	var snapshot []byte
	if !resumed {
		// Taken after subscribing: any change after it is in sub.
		list, err := listSwitches(c)
		if err != nil {
			return err
		}
		if snapshot, err = json.Marshal(list); err != nil {
			return err
		}
	}
	// The missed events end at the subscription's position.
	first := sub.Pos - uint64(len(missed))
	var chunks []sseChunk
	if !resumed {
		chunks = append(chunks, sseChunk{"snapshot", sseEvent("snapshot", view.EventID(sub.Pos), snapshot)})
	}
	last := sub.Seq
	for i := range missed {
		chunks = append(chunks, sseChunk{"switch", appendSwitchEvent(nil, view, first+1+uint64(i), c.handler.eventData(&missed[i], c.Grant.InstallationID))})
		last = missed[i].Seq
	}
	if s.handOff(ids, view, sub, chunks, last) {
		return nil
	}
	if err := s.Start(); err != nil {
		return nil
	}
	if !resumed {
		if s.Event("snapshot", view.EventID(sub.Pos), snapshot) != nil {
			return nil
		}
	}
	pos := first
	for _, e := range missed {
		pos++
		if sendEvent(c, s, view.EventID(pos), e) != nil {
			return nil
		}
	}
	heartbeat := time.NewTicker(s.Heartbeat)
	defer heartbeat.Stop()
	for {
		select {
		case e, ok := <-sub.Events():
			if !ok {
				// Fallen behind: the client resumes from its last id.
				c.log().Info("event stream dropped: the client does not keep up")
				return nil
			}
			pos++
			if sendEvent(c, s, view.EventID(pos), *e) != nil {
				return nil
			}
		case <-heartbeat.C:
			if s.Comment("heartbeat") != nil {
				return nil
			}
		case <-s.Done:
			return nil
		case <-s.Ended:
			return nil
		}
	}
}

func sendEvent(c *Call, s *Stream, id string, e bridge.Event) error {
	name := e.SwitchID
	if sw, ok := c.Switchboard.Switch(e.SwitchID); ok {
		name = sw.Name
	}
	b, err := json.Marshal(EventOf(e, name, c.Grant.InstallationID))
	if err != nil {
		return err
	}
	return s.Event("switch", id, b)
}

// streams holds the open streams: how many each installation has, and what
// each needs to check that its access still stands.
type streams struct {
	mu       sync.Mutex
	perInst  map[string]int
	open     map[*openStream]struct{}
	watching bool
	closed   bool // the hub shuts down
}

type openStream struct {
	token, installation string
	grant               *bridge.Grant
	end                 chan struct{}
	once                sync.Once
	out                 atomic.Pointer[streamOut] // once handed to the streamer
	connHolder
}

// stop ends the stream: it tells the goroutine serving it, or closes the
// connection the streamer writes.
func (o *openStream) stop() {
	o.once.Do(func() { close(o.end) })
	o.closeConn()
}

// serveStream runs a streaming route for an authorized call.
func (h *Handler) serveStream(w http.ResponseWriter, r *http.Request, c *Call, token string, handle StreamHandler) int {
	if h.opts.Feed == nil {
		return h.writeError(w, bridge.Errorf(bridge.ENOTFOUND, "this hub serves no events"))
	}
	max := h.opts.StreamsPerInstallation
	if max == 0 {
		max = DefaultStreamsPerInstallation
	}
	o := &openStream{token: token, installation: c.Grant.InstallationID, grant: c.Grant, end: make(chan struct{})}
	err := h.streams.add(o, max)
	if bridge.ErrorCode(err) == bridge.ETOOMANY && h.streams.dropGone(o.installation) {
		// A client that went away while the streamer wrote its stream
		// is noticed only at the next write; a reconnecting client must
		// not wait for that.
		err = h.streams.add(o, max)
	}
	if err != nil {
		return h.writeError(w, err)
	}
	o.release = func() {
		h.streams.remove(o)
		if h.opts.StreamsChanged != nil {
			h.opts.StreamsChanged(-1)
		}
	}
	if h.opts.StreamsChanged != nil {
		h.opts.StreamsChanged(1)
	}
	h.watchAccess()
	s := &Stream{w: w, rc: http.NewResponseController(w), LastEventID: r.Header.Get("Last-Event-ID"),
		Feed: h.opts.Feed, Done: r.Context().Done(), Ended: o.end, Heartbeat: h.heartbeat(), Sent: h.opts.EventSent, h: h, o: o}
	defer func() {
		if !s.handedOff {
			o.giveBack()
		}
	}()
	if err := handle(c, s); err != nil && !s.started {
		return h.writeError(w, err)
	}
	return http.StatusOK
}

func (h *Handler) heartbeat() time.Duration {
	if h.opts.Heartbeat <= 0 {
		return DefaultHeartbeat
	}
	return h.opts.Heartbeat
}

// dropGone ends the handed-off streams of an installation whose clients
// have gone, and reports whether there were any.
func (ss *streams) dropGone(installation string) bool {
	ss.mu.Lock()
	var mine []*openStream
	for o := range ss.open {
		if o.installation == installation {
			mine = append(mine, o)
		}
	}
	ss.mu.Unlock()
	dropped := false
	for _, o := range mine {
		if o.gone() {
			o.stop()
			dropped = true
		}
	}
	return dropped
}

func (ss *streams) add(o *openStream, max int) error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.closed {
		return bridge.Errorf(bridge.EUNAVAILABLE, "the hub is shutting down")
	}
	if ss.perInst[o.installation] >= max {
		return &bridge.Error{Code: bridge.ETOOMANY, RetryAfter: streamRetry,
			Message: fmt.Sprintf("this installation already has %d open event streams, the most it may have", max)}
	}
	if ss.perInst == nil {
		ss.perInst, ss.open = map[string]int{}, map[*openStream]struct{}{}
	}
	ss.perInst[o.installation]++
	ss.open[o] = struct{}{}
	return nil
}

func (ss *streams) remove(o *openStream) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	delete(ss.open, o)
	if ss.perInst[o.installation]--; ss.perInst[o.installation] <= 0 {
		delete(ss.perInst, o.installation)
	}
}

// CloseStreams ends every open stream and refuses new ones: an
// http.Server's Shutdown waits for requests to end, and a stream does not
// by itself.
func (h *Handler) CloseStreams() {
	h.streams.mu.Lock()
	h.streams.closed = true
	open := make([]*openStream, 0, len(h.streams.open))
	for o := range h.streams.open {
		open = append(open, o)
	}
	h.streams.mu.Unlock()
	for _, o := range open {
		o.stop() // gives the place back, under streams.mu
	}
	h.streamerOnce.Do(func() {}) // none starts from now on
	if st := h.streamer.Load(); st != nil {
		st.stop()
	}
}

// commandWait bounds how long a command's answer waits for its changes to
// be written to its installation's event streams: as long as one write to
// a stream may block before its client is dropped, so that only a stream
// of the installation's own that does not read makes its command wait
// that long. Healthy streams are written within microseconds; 100 ms was
// passed on a loaded machine (the race detector, four test binaries on
// two cores), and the 204 then came before the change it caused.
const commandWait = handoffWriteWait

// streamsCaughtUp waits until the changes in the feed so far (a command's
// own, which the hub put there before the command returned) are written
// to the installation's streams that want them, so that a client sees its
// change on its stream before or with the command's 204. Only its own: a
// stream of another installation that does not read delays no one else's
// answer. Bounded: a command's answer never waits long for streams.
func (h *Handler) streamsCaughtUp(installation string) {
	st := h.streamer.Load()
	if st == nil || h.opts.Feed == nil {
		return
	}
	deadline := time.NewTimer(commandWait)
	defer deadline.Stop()
	seq := h.opts.Feed.Seq()
	if !st.waitWritten(seq, deadline) {
		return
	}
	var outs []*streamOut
	h.streams.mu.Lock()
	for o := range h.streams.open {
		if o.installation == installation {
			if out := o.out.Load(); out != nil {
				outs = append(outs, out)
			}
		}
	}
	h.streams.mu.Unlock()
	for _, out := range outs {
		if !out.waitFlushed(seq, deadline) {
			return
		}
	}
}

// watchAccess starts, unless it runs, the one goroutine that checks the
// access of every open stream: it re-checks each stream's token when the
// access generation moved (a revocation, an uninstall, changed switches,
// in any process), and ends a stream whose token expired. It stops when
// no stream is left.
func (h *Handler) watchAccess() {
	h.streams.mu.Lock()
	defer h.streams.mu.Unlock()
	if h.streams.watching {
		return
	}
	h.streams.watching = true
	go h.runAccessWatch()
}

func (h *Handler) runAccessWatch() {
	ctx := context.Background()
	var gen int64
	known := false
	t := time.NewTicker(accessCheckEvery)
	defer t.Stop()
	for range t.C {
		h.streams.mu.Lock()
		if len(h.streams.open) == 0 {
			h.streams.watching = false
			h.streams.mu.Unlock()
			return
		}
		open := make([]*openStream, 0, len(h.streams.open))
		for o := range h.streams.open {
			open = append(open, o)
		}
		h.streams.mu.Unlock()

		recheck := true
		if h.opts.AccessGeneration != nil {
			n, err := h.opts.AccessGeneration(ctx)
			recheck = err != nil || !known || n != gen
			gen, known = n, err == nil
		}
		now := h.now()
		for _, o := range open {
			if !now.Before(o.grant.ExpiresAt) {
				o.stop()
				continue
			}
			if !recheck {
				continue
			}
			g, err := h.auth.Authorize(ctx, o.token, o.installation)
			switch bridge.ErrorCode(err) {
			case "":
				if g.LocationID != o.grant.LocationID || !slices.Equal(g.SwitchIDs, o.grant.SwitchIDs) {
					// A new grant: the client starts again with a
					// snapshot of what it now may see.
					o.stop()
				}
			case bridge.EUNAUTHORIZED, bridge.EFORBIDDEN, bridge.ENOTFOUND:
				o.stop()
			default:
				known = false // try again next time
			}
		}
	}
}

func (h *Handler) now() time.Time {
	if h.opts.Now != nil {
		return h.opts.Now()
	}
	return time.Now()
}
