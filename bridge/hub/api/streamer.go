package api

// One goroutine writes every open event stream. A stream served by its
// own request goroutine costs that goroutine's stack, net/http's
// background reader goroutine and buffers, some 40 KB; a thousand streams
// would be 40 MB of a Pi's memory. Once a stream has sent its snapshot,
// its connection is taken over (hijacked) and handed to the streamer,
// which keeps only the connection, the set of switches it may see and its
// place in its installation's view of the feed: each change is encoded
// once and queued, under each stream's own id, for every stream that
// wants it.
//
// The streamer never writes a socket itself. A stream's queue is written
// by a goroutine that runs only while the queue holds something, so a
// stream at rest costs no goroutine, and a client that does not read holds
// up only its own stream: its queue grows until it is more than maxQueued
// behind, or a write waits handoffWriteWait, and the stream is dropped.
// Other streams, and the commands that wait for their own installation's
// streams, go on meanwhile.

import (
	"bytes"
	"encoding/json"
	"errors"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
)

const (
	// streamerBuffer is how far the streamer may fall behind the feed
	// before it drops every stream (each resumes with its last id).
	streamerBuffer = 4096
	// handoffWriteWait bounds one write to a handed-off stream: the
	// socket's buffer takes a healthy client's events at once, so a write
	// that waits means a client that does not read, which is dropped.
	handoffWriteWait = time.Second
	// maxQueued is how far, in bytes, a handed-off stream may fall behind
	// what its connection took (beyond the socket's own buffers) before
	// it is dropped: some 2,000 events, half what the streamer itself may
	// fall behind the feed, so that a burst (a group command, a plug that
	// flaps) with the stream's writer not yet scheduled drops no client
	// that reads, and a client that does not costs at most this much.
	maxQueued = 512 << 10
	// keepQueueCap is the largest buffer a stream at rest keeps for its
	// next events; a burst's larger buffers go back to the collector.
	keepQueueCap = 4096
)

// handedOff is a stream the streamer writes.
type handedOff struct {
	conn     net.Conn
	o        *openStream
	out      *streamOut
	switches map[string]bool
	view     *bridge.View
	sub      *bridge.Subscription // its own, until the streamer adopts it
	last     uint64               // the last event written (bridge.Event.Seq)
	pos      uint64               // its position in view
}

// streamOut is what is queued for a handed-off stream and how much of it
// its client took: the streamer queues, the stream's writer writes, and a
// command waits for its installation's streams to have written its change.
type streamOut struct {
	mu      sync.Mutex
	pend    []byte        // queued, not yet being written
	spare   []byte        // the buffer of the last write, for the next queue
	events  int           // switch events in pend
	queued  uint64        // the last feed event queued (bridge.Event.Seq)
	flushed uint64        // the last feed event written to the connection
	writing bool          // a writer goroutine runs
	dead    bool          // dropped: nothing more is queued or written
	wake    chan struct{} // closed, and replaced, when flushed moves or the stream dies
}

func newStreamOut(last uint64) *streamOut {
	return &streamOut{queued: last, flushed: last, wake: make(chan struct{})}
}

// notify wakes the commands waiting for the stream; under out.mu.
func (out *streamOut) notify() {
	close(out.wake)
	out.wake = make(chan struct{})
}

// kill marks the stream dropped.
func (out *streamOut) kill() {
	out.mu.Lock()
	if !out.dead {
		out.dead = true
		out.notify()
	}
	out.mu.Unlock()
}

// waitFlushed waits, until deadline, for the stream to have written every
// event up to seq it was given (or to have been dropped). It reports
// false when the deadline passed first.
func (out *streamOut) waitFlushed(seq uint64, deadline *time.Timer) bool {
	for {
		out.mu.Lock()
		done := out.dead || out.flushed >= seq || out.flushed >= out.queued
		wake := out.wake
		out.mu.Unlock()
		if done {
			return true
		}
		select {
		case <-wake:
		case <-deadline.C:
			return false
		}
	}
}

type streamer struct {
	h    *Handler
	sub  *bridge.Subscription
	add  chan *handedOff
	quit chan struct{}           // closed by CloseStreams
	live map[*handedOff]struct{} // owned by run
	buf  []byte                  // owned by run: one stream's event

	// done is the last event of the feed written to every stream that
	// wants it; wake is closed, and replaced, each time it moves.
	mu   sync.Mutex
	done uint64
	wake chan struct{}
}

// written records that every event up to seq was queued.
func (st *streamer) written(seq uint64) {
	st.mu.Lock()
	st.done = seq
	close(st.wake)
	st.wake = make(chan struct{})
	st.mu.Unlock()
}

// waitWritten waits, until deadline, for every event up to seq to have
// been queued for the streams that want it. It reports false when the
// deadline passed or the streamer stopped first.
func (st *streamer) waitWritten(seq uint64, deadline *time.Timer) bool {
	for {
		st.mu.Lock()
		done, wake := st.done, st.wake
		st.mu.Unlock()
		if done >= seq {
			return true
		}
		select {
		case <-wake:
		case <-deadline.C:
			return false
		case <-st.quit:
			return false
		}
	}
}

// streamerFor starts the handler's streamer on first use; nil once
// CloseStreams ran.
func (h *Handler) streamerFor() *streamer {
	h.streamerOnce.Do(func() {
		sub, _, _ := h.opts.Feed.Subscribe(nil, streamerBuffer, "")
		st := &streamer{h: h, sub: sub, add: make(chan *handedOff), quit: make(chan struct{}), live: map[*handedOff]struct{}{},
			wake: make(chan struct{}), done: sub.Seq}
		h.streamer.Store(st)
		go st.run()
	})
	return h.streamer.Load()
}

// sseChunk is an encoded event and its type.
type sseChunk struct {
	kind string
	b    []byte
}

// handOff takes the stream's connection over, writes the response's head
// and first events itself, and gives the stream to the streamer. It
// reports false, having written nothing, when the connection cannot be
// taken over (HTTP/2, a test's recorder); the caller then serves the
// stream itself.
func (s *Stream) handOff(switches []string, view *bridge.View, sub *bridge.Subscription, first []sseChunk, last uint64) bool {
	if s.h == nil || s.o == nil {
		return false
	}
	conn, _, err := s.rc.Hijack()
	if err != nil {
		return false
	}
	// The request was read whole (it has no body): nothing the stream
	// needs waits in the reader Hijack hands back.
	s.started, s.handedOff = true, true
	conn.SetDeadline(time.Time{})
	// The head carries what was set for every answer (X-Request-Id, the
	// rate limit's headers, the server's own) and the stream's.
	hd := s.w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Accel-Buffering", "no")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Connection", "close")
	var head bytes.Buffer
	head.WriteString("HTTP/1.1 200 OK\r\n")
	hd.Write(&head)
	head.WriteString("\r\nretry: " + strconv.FormatInt(streamRetry.Milliseconds(), 10) + "\n\n")
	buf := head.Bytes()
	for _, c := range first {
		buf = append(buf, c.b...)
	}
	ho := &handedOff{conn: conn, o: s.o, out: newStreamOut(last), switches: make(map[string]bool, len(switches)), view: view, sub: sub, last: last, pos: sub.Pos}
	for _, id := range switches {
		ho.switches[id] = true
	}
	s.o.setConn(conn)
	s.o.out.Store(ho.out)
	conn.SetWriteDeadline(time.Now().Add(streamWriteWait))
	if _, err := conn.Write(buf); err != nil {
		sub.Close()
		s.o.stop()
		return true
	}
	if s.Sent != nil {
		for _, c := range first {
			s.Sent(c.kind)
		}
	}
	st := s.h.streamerFor()
	if st == nil { // the hub shuts down
		sub.Close()
		s.o.stop()
		return true
	}
	select {
	case st.add <- ho:
	case <-st.quit:
		sub.Close()
		s.o.stop()
	}
	return true
}

func (st *streamer) run() {
	heartbeat := time.NewTicker(st.h.heartbeat())
	defer heartbeat.Stop()
	for {
		select {
		case <-st.quit:
			for ho := range st.live {
				st.drop(ho)
			}
			st.sub.Close()
			return
		case ho := <-st.add:
			st.adopt(ho)
		case e, ok := <-st.sub.Events():
			if !ok {
				// Fallen behind the feed: every stream ends, and each
				// client resumes from its last event.
				for ho := range st.live {
					st.drop(ho)
				}
				st.sub, _, _ = st.h.opts.Feed.Subscribe(nil, streamerBuffer, "")
				st.written(st.sub.Seq)
				continue
			}
			st.send(e)
			st.written(e.Seq)
		case <-heartbeat.C:
			for ho := range st.live {
				st.queue(ho, heartbeatComment, 0)
			}
		}
	}
}

func (st *streamer) stop() {
	select {
	case <-st.quit:
	default:
		close(st.quit)
	}
}

// adopt writes what the stream's own subscription holds and takes the
// stream on: from now on the streamer's subscription, which began before
// this, has every later event (those up to ho.last are skipped).
func (st *streamer) adopt(ho *handedOff) {
	for {
		select {
		case e, ok := <-ho.sub.Events():
			if !ok {
				st.drop(ho) // fell behind before it was adopted
				return
			}
			if e.Seq > ho.last {
				if !st.sendTo(ho, e, st.h.eventData(e, ho.view.Installation())) {
					return
				}
			}
			continue
		default:
		}
		break
	}
	ho.sub.Close()
	st.live[ho] = struct{}{}
}

func (st *streamer) send(e *bridge.Event) {
	// One encoding for every stream the event is not own to; those of the
	// commanding installations (usually one) have their own.
	var data []byte
	for ho := range st.live {
		if !ho.switches[e.SwitchID] || e.Seq <= ho.last {
			continue
		}
		if in := ho.view.Installation(); e.OwnedBy(in) {
			st.sendTo(ho, e, st.h.eventData(e, in))
			continue
		}
		if data == nil {
			data = st.h.eventData(e, "")
		}
		st.sendTo(ho, e, data)
	}
}

// heartbeatComment is what a stream with nothing to say sends.
var heartbeatComment = []byte(": heartbeat\n\n")

// sendTo queues event e, its data encoded, for one stream under the
// stream's next id.
func (st *streamer) sendTo(ho *handedOff, e *bridge.Event, data []byte) bool {
	st.buf = appendSwitchEvent(st.buf[:0], ho.view, ho.pos+1, data)
	if !st.queue(ho, st.buf, e.Seq) {
		return false
	}
	ho.last, ho.pos = e.Seq, ho.pos+1
	return true
}

// queue adds b, feed event seq framed (0 for a comment), to what the
// stream is to write, and starts the stream's writer unless it runs. It
// drops the stream, and reports false, when the stream is gone or more
// than maxQueued behind what its connection took.
func (st *streamer) queue(ho *handedOff, b []byte, seq uint64) bool {
	out := ho.out
	out.mu.Lock()
	if out.dead || len(out.pend)+len(b) > maxQueued {
		out.mu.Unlock()
		st.drop(ho)
		return false
	}
	out.pend = append(out.pend, b...)
	if seq != 0 {
		out.events++
		out.queued = seq
	}
	start := !out.writing
	out.writing = true
	out.mu.Unlock()
	if start {
		go st.h.writeQueued(ho)
	}
	return true
}

// writeQueued writes what is queued for a stream until nothing is, then
// ends; a write that fails or waits handoffWriteWait drops the stream.
// It runs beside the streamer and touches only the stream.
func (h *Handler) writeQueued(ho *handedOff) {
	out := ho.out
	for {
		out.mu.Lock()
		if out.dead || len(out.pend) == 0 {
			out.writing = false
			out.mu.Unlock()
			return
		}
		b, seq, n := out.pend, out.queued, out.events
		out.pend, out.spare, out.events = out.spare[:0], nil, 0
		out.mu.Unlock()

		ho.conn.SetWriteDeadline(time.Now().Add(handoffWriteWait))
		_, err := ho.conn.Write(b)

		out.mu.Lock()
		if cap(b) <= keepQueueCap {
			out.spare = b[:0]
		}
		if err != nil {
			out.dead, out.writing = true, false
		} else {
			out.flushed = seq
		}
		out.notify()
		out.mu.Unlock()
		if err != nil {
			ho.o.stop() // the streamer forgets it at its next event or heartbeat
			return
		}
		if h.opts.EventSent != nil {
			for range n {
				h.opts.EventSent("switch")
			}
		}
	}
}

// drop ends a stream and forgets it.
func (st *streamer) drop(ho *handedOff) {
	delete(st.live, ho)
	ho.out.kill()
	ho.o.stop()
}

// eventData is one event's data as a stream of installation sends it.
func (h *Handler) eventData(e *bridge.Event, installation string) []byte {
	name := e.SwitchID
	if sw, ok := h.hub.Switch(e.SwitchID); ok {
		name = sw.Name
	}
	data, _ := json.Marshal(EventOf(*e, name, installation))
	return data
}

// appendSwitchEvent appends a switch event in the SSE format, at position
// pos of view, to b.
func appendSwitchEvent(b []byte, view *bridge.View, pos uint64, data []byte) []byte {
	b = append(b, "id: "...)
	b = view.AppendEventID(b, pos)
	b = append(b, "\nevent: switch\ndata: "...)
	b = append(b, data...)
	return append(b, "\n\n"...)
}

// sseEvent is one event in the SSE format; data is JSON, on one line.
func sseEvent(kind, id string, data []byte) []byte {
	b := make([]byte, 0, len(data)+len(kind)+len(id)+24)
	b = append(b, "id: "...)
	b = append(b, id...)
	b = append(b, "\nevent: "...)
	b = append(b, kind...)
	b = append(b, "\ndata: "...)
	b = append(b, data...)
	return append(b, "\n\n"...)
}

// connHolder is what a handed-off stream holds: its connection, closed
// when the stream ends, and the release of its place, given back once.
type connHolder struct {
	mu          sync.Mutex
	conn        net.Conn
	release     func()
	releaseOnce sync.Once
}

func (c *connHolder) setConn(conn net.Conn) {
	c.mu.Lock()
	c.conn = conn
	c.mu.Unlock()
}

// closeConn closes a handed-off stream's connection and gives its place
// back.
func (c *connHolder) closeConn() {
	c.mu.Lock()
	conn := c.conn
	c.mu.Unlock()
	if conn != nil {
		conn.Close()
		c.giveBack()
	}
}

func (c *connHolder) giveBack() {
	c.releaseOnce.Do(func() {
		if c.release != nil {
			c.release()
		}
	})
}

// gone reports whether a handed-off stream's client has closed its end:
// a read that must not wait finds the end of the stream rather than
// nothing to read yet.
func (c *connHolder) gone() bool {
	c.mu.Lock()
	conn := c.conn
	c.mu.Unlock()
	if conn == nil {
		return false
	}
	// Not time.Now(): a deadline already passed fails the read before it
	// looks at the socket.
	conn.SetReadDeadline(time.Now().Add(time.Millisecond))
	var b [1]byte
	_, err := conn.Read(b[:])
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}
