// Package recentlog keeps the daemon's last warnings and errors in memory,
// for the owner's console: what the log said lately that needs
// attention, without a shell and journalctl. It wraps the daemon's
// slog.Handler and passes every record on unchanged.
package recentlog

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// Keep is how many records a Ring holds; MaxText bounds one record's text
// (a message with its attributes), so a record quoting a hostile input at
// length cannot fill the memory.
const (
	Keep    = 20
	MaxText = 400
)

// Record is one kept log record.
type Record struct {
	Time  time.Time
	Level slog.Level
	// Text is the message and its attributes as key=value pairs.
	Text string
}

// Ring holds the last Keep records at or above a level.
type Ring struct {
	level slog.Level
	mu    sync.Mutex
	recs  []Record
	next  int
	full  bool
}

// NewRing returns a Ring of the records at level or above (slog.LevelWarn
// for the console's).
func NewRing(level slog.Level) *Ring { return &Ring{level: level, recs: make([]Record, Keep)} }

// Records returns the kept records, newest first.
func (r *Ring) Records() []Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.next
	if r.full {
		n = Keep
	}
	out := make([]Record, 0, n)
	for i := 1; i <= n; i++ {
		out = append(out, r.recs[(r.next-i+Keep)%Keep])
	}
	return out
}

func (r *Ring) add(rec Record) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs[r.next] = rec
	r.next = (r.next + 1) % Keep
	if r.next == 0 {
		r.full = true
	}
}

// Wrap returns a handler that passes every record to next and keeps
// those at the ring's level or above.
func (r *Ring) Wrap(next slog.Handler) slog.Handler { return &handler{ring: r, next: next} }

type handler struct {
	ring   *Ring
	next   slog.Handler
	prefix string // the attributes and groups of With and WithGroup, as text
	group  string
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.ring.level || h.next.Enabled(ctx, l)
}

func (h *handler) Handle(ctx context.Context, rec slog.Record) error {
	if rec.Level >= h.ring.level {
		var b strings.Builder
		b.WriteString(rec.Message)
		b.WriteString(h.prefix)
		rec.Attrs(func(a slog.Attr) bool {
			writeAttr(&b, h.group, a)
			return b.Len() < MaxText
		})
		text := b.String()
		if len(text) > MaxText {
			text = strings.ToValidUTF8(text[:MaxText], "") + "…"
		}
		h.ring.add(Record{Time: rec.Time, Level: rec.Level, Text: text})
	}
	if !h.next.Enabled(ctx, rec.Level) {
		return nil
	}
	return h.next.Handle(ctx, rec)
}

func writeAttr(b *strings.Builder, group string, a slog.Attr) {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return
	}
	key := a.Key
	if group != "" {
		key = group + "." + key
	}
	if a.Value.Kind() == slog.KindGroup {
		for _, ga := range a.Value.Group() {
			writeAttr(b, key, ga)
		}
		return
	}
	b.WriteByte(' ')
	b.WriteString(key)
	b.WriteByte('=')
	b.WriteString(a.Value.String())
}

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	var b strings.Builder
	b.WriteString(h.prefix)
	for _, a := range as {
		writeAttr(&b, h.group, a)
	}
	return &handler{ring: h.ring, next: h.next.WithAttrs(as), prefix: b.String(), group: h.group}
}

func (h *handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	g := name
	if h.group != "" {
		g = h.group + "." + name
	}
	return &handler{ring: h.ring, next: h.next.WithGroup(name), prefix: h.prefix, group: g}
}
