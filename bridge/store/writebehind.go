package store

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
)

// ValueWriter is the write-behind for switch values: it stores the values
// drivers report without making them wait on the disk. The latest value
// per switch is queued and written to the database in batches by one
// goroutine. A command, which must not be answered before its values are
// durable, appends them to the value journal instead (one write); each
// batch written to the database empties the journal again.
type ValueWriter struct {
	db      valueFolder
	journal *Journal
	logger  *slog.Logger

	// wmu serialises journal appends and database flushes, so a flush
	// knows everything journaled before it is in its batch.
	wmu       sync.Mutex
	journaled map[string]bridge.Value // queued values already in the journal; under wmu

	mu   sync.Mutex
	last map[string]bridge.Value
	// at is when each switch's last value was learnt, by this process's
	// clock (with its monotonic reading, so a wall-clock step cannot reorder
	// reports): a value learnt earlier, such as a command's confirmation
	// stored after the device already reported a newer change, is dropped.
	at     map[string]time.Time
	queue  map[string]bridge.State // reported, not yet in the database
	closed bool
	wake   chan struct{}
	stop   chan struct{} // closed by close: no more waiting to coalesce
	done   chan struct{}
}

// valueFolder is the part of the database the writer needs.
type valueFolder interface {
	FoldJournal(ctx context.Context, vs []SwitchValue, mark JournalMark) error
}

// NewValueWriter starts a writer into db that journals commands' values in
// journal, which it then owns: Close closes it. Without a journal (nil) a
// command's values go to the database before Persist returns.
func NewValueWriter(db valueFolder, journal *Journal, logger *slog.Logger) *ValueWriter {
	w := &ValueWriter{db: db, journal: journal, logger: logger, journaled: map[string]bridge.Value{},
		last: map[string]bridge.Value{}, at: map[string]time.Time{}, queue: map[string]bridge.State{},
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	return w
}

// Notify takes in a state a driver reports. Only a value the driver learnt,
// which comes with its time (drivers.Env.Notify), is stored: a state with a
// zero Updated only passes on availability, and its value is the one
// LastValue gave the driver, which must not overwrite anything newer.
func (w *ValueWriter) Notify(id string, st bridge.State) {
	if st.Value == "" || st.Updated.IsZero() {
		return
	}
	w.mu.Lock()
	if w.closed || st.Updated.Before(w.at[id]) {
		w.mu.Unlock()
		return
	}
	w.at[id] = st.Updated
	if w.last[id] == st.Value {
		w.mu.Unlock()
		return
	}
	w.last[id] = st.Value
	w.queue[id] = st
	// Under the lock, so close cannot shut the channel between check and send.
	select {
	case w.wake <- struct{}{}:
	default:
	}
	w.mu.Unlock()
}

// coalesce is how long reported values gather before the background
// writer stores them: plugs that report every few seconds cost one SD-card
// write per window, not one per message.
const coalesce = 500 * time.Millisecond

func (w *ValueWriter) run() {
	defer close(w.done)
	for range w.wake {
		t := time.NewTimer(coalesce)
		select {
		case <-t.C:
		case <-w.stop:
			t.Stop()
		}
		w.flush()
	}
	w.flush()
}

// Value is the last value reported for a switch since start-up.
func (w *ValueWriter) Value(id string) (bridge.Value, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	v, ok := w.last[id]
	return v, ok
}

func toValue(id string, st bridge.State) SwitchValue {
	at := st.Updated
	if at.IsZero() {
		at = time.Now()
	}
	return SwitchValue{SwitchID: id, Value: st.Value, At: at}
}

// Persist records that a command left switches at v (each as of its
// confirmation) and makes every value reported so far durable before it
// returns: it appends those not yet journaled to the journal. Should the
// journal fail, it writes the database instead; only when both fail does
// it return an error, and the command is not answered as a success.
func (w *ValueWriter) Persist(v bridge.Value, confirmedAt map[string]time.Time) error {
	for id, at := range confirmedAt {
		w.Notify(id, bridge.State{Value: v, Available: true, Updated: at})
	}
	w.wmu.Lock()
	defer w.wmu.Unlock()
	w.mu.Lock()
	var batch []SwitchValue
	for id, st := range w.queue {
		if w.journaled[id] != st.Value {
			batch = append(batch, toValue(id, st))
		}
	}
	w.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	if w.journal == nil {
		return w.flushLocked()
	}
	if err := w.journal.Append(batch); err != nil {
		w.logger.Warn("value journal: writing the database instead", "err", err)
		if ferr := w.flushLocked(); ferr != nil {
			// One line: it ends up in a 503's message and a log line.
			return fmt.Errorf("value journal: %v; database: %v", err, ferr)
		}
		return nil
	}
	for _, v := range batch {
		w.journaled[v.SwitchID] = v.Value
	}
	return nil
}

func (w *ValueWriter) flush() {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	w.flushLocked()
}

func (w *ValueWriter) flushLocked() error {
	w.mu.Lock()
	q := w.queue
	w.queue = map[string]bridge.State{}
	w.mu.Unlock()
	if len(q) == 0 {
		return nil
	}
	batch := make([]SwitchValue, 0, len(q))
	for id, st := range q {
		batch = append(batch, toValue(id, st))
	}
	// wmu holds off appends: everything journaled so far is in this batch
	// (or replaced by a newer value in it), and the database records so in
	// the same transaction.
	var mark JournalMark
	if w.journal != nil {
		mark = w.journal.Mark()
	}
	if err := w.db.FoldJournal(context.Background(), batch, mark); err != nil {
		w.logger.Warn("storing switch values; will retry", "switches", len(batch), "err", err)
		// Put back what no newer report replaced; the journal keeps what it has.
		w.mu.Lock()
		for id, st := range q {
			if _, newer := w.queue[id]; !newer {
				w.queue[id] = st
			}
		}
		if !w.closed {
			select { // try again after the next coalescing window
			case w.wake <- struct{}{}:
			default:
			}
		}
		w.mu.Unlock()
		return err
	}
	// Everything journaled so far was in the queue this batch took (or was
	// replaced by a newer value in it), so the journal is no longer needed.
	if w.journal != nil {
		if err := w.journal.Compact(); err != nil {
			w.logger.Warn("value journal: compacting", "err", err)
		}
	}
	clear(w.journaled)
	return nil
}

// Close stores what is queued, stops the writer and closes its journal.
func (w *ValueWriter) Close() error {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	close(w.stop)
	close(w.wake)
	<-w.done
	if w.journal == nil {
		return nil
	}
	return w.journal.Close()
}
