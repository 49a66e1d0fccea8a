package store

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// UsageWriter records when installations' tokens were last used, for the
// connected apps page, without making a request wait on the disk: Touch
// only notes the time in memory, at most once per UsageInterval per
// installation, and one goroutine writes what was noted in one
// transaction. A write that fails is logged and dropped: a last-use time
// is a hint to the user, not worth retrying over the switches' own writes.
type UsageWriter struct {
	db     usageMarker
	logger *slog.Logger

	mu      sync.Mutex
	noted   map[string]time.Time // last time noted per installation
	pending map[string]time.Time // noted, not yet written
	closed  bool
	wake    chan struct{}
	done    chan struct{}
}

// UsageInterval is how often at most an installation's last use is
// written: a client polling every second costs one write a minute.
const UsageInterval = time.Minute

// maxNoted bounds the memory of noted times: ids of installations removed
// since would otherwise stay. Forgetting them only costs one more write.
const maxNoted = 10000

type usageMarker interface {
	MarkUsed(ctx context.Context, used map[string]time.Time) error
}

// NewUsageWriter starts a writer into db.
func NewUsageWriter(db usageMarker, logger *slog.Logger) *UsageWriter {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	w := &UsageWriter{db: db, logger: logger, noted: map[string]time.Time{}, pending: map[string]time.Time{},
		wake: make(chan struct{}, 1), done: make(chan struct{})}
	go w.run()
	return w
}

// Touch notes that installation id was used at; it never blocks on the
// database.
func (w *UsageWriter) Touch(id string, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	if last, ok := w.noted[id]; ok && at.Sub(last) < UsageInterval {
		return
	}
	if len(w.noted) >= maxNoted {
		clear(w.noted)
	}
	w.noted[id] = at
	w.pending[id] = at
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *UsageWriter) run() {
	defer close(w.done)
	for range w.wake {
		w.flush()
	}
	w.flush()
}

func (w *UsageWriter) flush() {
	w.mu.Lock()
	batch := w.pending
	w.pending = map[string]time.Time{}
	w.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	if err := w.db.MarkUsed(context.Background(), batch); err != nil {
		w.logger.Warn("recording when installations were last used", "installations", len(batch), "err", err)
	}
}

// Close writes what is noted and stops the writer.
func (w *UsageWriter) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	close(w.wake)
	w.mu.Unlock()
	<-w.done
	return nil
}
