package asynclog

import (
	"context"
	"io"
	"log/slog"
)

// queued is a record waiting to be formatted by its handler.
type queued struct {
	h slog.Handler
	r slog.Record
}

// Handler returns a log/slog handler that formats with the handler
// format makes, writing to w, but not on the caller's goroutine: a record
// whose values are all plain (strings, numbers, booleans, times and
// durations, in groups or not) is queued as it is and formatted by the
// writer's goroutine with the lines around it, so a request that logs
// pays for a copy of the record, not for its formatting. A record holding
// anything else (an error, a value that formats itself, any other value)
// could change before then, so it is formatted at once, after the records
// queued before it. Lines keep their order either way.
//
// The queue holds at most a size/256 records (two thousand by default); a
// record that finds it full is dropped and counted with the lines.
func (w *Writer) Handler(format func(out io.Writer) slog.Handler) slog.Handler {
	return &handler{w: w, inner: format(sink{w})}
}

// sink is where the formatting handlers write: straight to the pending
// lines, since they only write from formatQueued or from Handle's
// immediate path, both in order under fmtMu.
type sink struct{ w *Writer }

func (s sink) Write(p []byte) (int, error) { return s.w.queue(p) }

type handler struct {
	w     *Writer
	inner slog.Handler
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool { return h.inner.Enabled(ctx, l) }

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	return &handler{w: h.w, inner: h.inner.WithAttrs(as)}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{w: h.w, inner: h.inner.WithGroup(name)}
}

func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	w := h.w
	if plain(r) {
		w.mu.Lock()
		if !w.closed {
			if len(w.records) >= w.maxRecords {
				w.mu.Unlock()
				w.dropped.Add(1)
				return nil
			}
			w.records = append(w.records, queued{h: h.inner, r: r.Clone()})
			n := len(w.records)
			w.mu.Unlock()
			if n == 1 || n > w.maxRecords/2 {
				w.wakeDrainer()
			}
			return nil
		}
		w.mu.Unlock()
	}
	// Formatted now, after what is queued; still written by the drainer,
	// unless the writer is closed.
	w.fmtMu.Lock()
	w.formatQueued()
	err := h.inner.Handle(ctx, r)
	w.fmtMu.Unlock()
	w.mu.Lock()
	closed := w.closed
	w.mu.Unlock()
	if closed {
		return w.Flush()
	}
	return err
}

// formatQueued formats the queued records into the pending lines, in
// order. Called with fmtMu held.
func (w *Writer) formatQueued() {
	w.mu.Lock()
	batch := w.records
	if len(batch) == 0 {
		w.mu.Unlock()
		return
	}
	w.records = w.spareRecs[:0]
	w.spareRecs = nil
	w.mu.Unlock()
	ctx := context.Background()
	for i := range batch {
		// The handlers write to sink, which does not fail; a line that
		// does not fit is counted there.
		_ = batch[i].h.Handle(ctx, batch[i].r)
		batch[i] = queued{} // let the record's values go
	}
	w.mu.Lock()
	// As with the lines: keep the array unless a burst made it large.
	if cap(batch) <= 256 {
		w.spareRecs = batch[:0]
	}
	w.mu.Unlock()
}

// plain reports whether every value of r is one that cannot change after
// the call: formatting it later writes what formatting it now would.
func plain(r slog.Record) bool {
	ok := true
	r.Attrs(func(a slog.Attr) bool {
		ok = plainValue(a.Value)
		return ok
	})
	return ok
}

func plainValue(v slog.Value) bool {
	switch v.Kind() {
	case slog.KindString, slog.KindInt64, slog.KindUint64, slog.KindFloat64, slog.KindBool, slog.KindDuration, slog.KindTime:
		return true
	case slog.KindGroup:
		for _, a := range v.Group() {
			if !plainValue(a.Value) {
				return false
			}
		}
		return true
	}
	return false
}
