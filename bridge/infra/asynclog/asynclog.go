// Package asynclog is the daemon's log writer: a request hands its log
// lines to a bounded buffer and never waits for the journal or a slow
// terminal; one goroutine writes them out within FlushEvery, and all of
// them at Close. A line that finds the buffer full is dropped and counted,
// never waited for.
package asynclog

import (
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// FlushEvery is the longest a line waits in the buffer, so a crash loses
// at most the lines of this last moment.
const FlushEvery = 50 * time.Millisecond

// DefaultSize is the default buffer: about two thousand typical lines, so
// that a burst (a reload, a broker outage across many plugs) fits while
// the writer waits for the output.
const DefaultSize = 512 << 10

// Writer is an io.Writer whose Write only copies. Each Write is one log
// line (log/slog's handlers write a record at once), kept or dropped
// whole.
type Writer struct {
	out  io.Writer
	size int

	mu      sync.Mutex
	pending []byte // lines not yet written
	spare   []byte // the other buffer, swapped in while pending is written
	closed  bool

	// outMu orders writes to out: the drainer's, Flush's and those after
	// Close.
	outMu sync.Mutex

	wake     chan struct{} // pending went from empty to not, or filled up
	stop     chan struct{}
	stopped  chan struct{}
	stopOnce sync.Once

	dropped atomic.Uint64
	lines   atomic.Uint64
}

// New starts a Writer to out with a buffer of size bytes (DefaultSize
// when size <= 0). Close it to write what is left and stop its goroutine.
func New(out io.Writer, size int) *Writer {
	if size <= 0 {
		size = DefaultSize
	}
	w := &Writer{
		out: out, size: size,
		pending: make([]byte, 0, 4096), spare: make([]byte, 0, 4096),
		wake: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{}),
	}
	go w.drain()
	return w
}

// Write queues p, a whole line, and returns at once. A line that does not
// fit in what is left of the buffer is dropped and counted. After Close,
// Write writes through, so that the lines of the last steps of a shutdown
// are kept.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		w.outMu.Lock()
		defer w.outMu.Unlock()
		return w.out.Write(p)
	}
	if len(w.pending)+len(p) > w.size {
		w.mu.Unlock()
		w.dropped.Add(1)
		return len(p), nil
	}
	first := len(w.pending) == 0
	w.pending = append(w.pending, p...)
	full := len(w.pending) > w.size/2
	w.mu.Unlock()
	w.lines.Add(1)
	if first || full {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
	return len(p), nil
}

// Dropped is how many lines found the buffer full since New.
func (w *Writer) Dropped() uint64 { return w.dropped.Load() }

// Lines is how many lines were queued since New.
func (w *Writer) Lines() uint64 { return w.lines.Load() }

// drain writes the pending lines out: FlushEvery after the first of them
// arrived (lines arriving meanwhile go in the same write), or at once when
// the buffer is half full. An idle daemon wakes for nothing.
func (w *Writer) drain() {
	defer close(w.stopped)
	timer := time.NewTimer(FlushEvery)
	timer.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-w.wake:
		}
		timer.Reset(FlushEvery)
		select {
		case <-w.stop:
			timer.Stop()
			return
		case <-timer.C:
		case <-w.wake: // half full: write now
			timer.Stop()
		}
		w.Flush()
	}
}

// Flush writes out every line queued so far and returns when they are
// written.
func (w *Writer) Flush() error {
	w.outMu.Lock()
	defer w.outMu.Unlock()
	w.mu.Lock()
	batch := w.pending
	w.pending = w.spare[:0]
	w.mu.Unlock()
	var err error
	if len(batch) > 0 {
		_, err = w.out.Write(batch)
	}
	w.mu.Lock()
	// The batch's array is the next spare, unless a burst made it grow
	// far past what is normal: let that one go.
	if cap(batch) <= 64<<10 {
		w.spare = batch[:0]
	} else {
		w.spare = make([]byte, 0, 4096)
	}
	w.mu.Unlock()
	return err
}

// Close writes out what is queued, stops the goroutine, and makes later
// writes go straight through. It is safe to call more than once.
func (w *Writer) Close() error {
	w.stopOnce.Do(func() { close(w.stop) })
	<-w.stopped
	// Lines written between the drainer's stop and closed being set are
	// in pending: Flush after setting closed takes them all, and no new
	// one can arrive in pending then.
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	return w.Flush()
}
