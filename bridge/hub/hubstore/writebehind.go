package hubstore

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/store"
)

// ValueWriter is the write-behind for switch values: it stores the values
// drivers report without making them wait on the disk. The latest value
// per switch is queued and written to the database in batches by one
// goroutine. A command, which must not be answered before its values are
// durable, appends them to the value journal instead (one write); each
// batch written to the database drops from the journal what it stored.
// Commands go on appending while a batch's transaction runs.
//
// A command's audit records ride the same way: journaled in the write of
// its values, stored with the next batch (in its transaction), after which
// the writer keeps the audit log within its bounds.
type ValueWriter struct {
	db      valueFolder
	journal *store.Journal
	logger  *slog.Logger
	bounds  AuditBounds

	// fmu serialises folds (the database writes of batches) and the audit
	// log's pruning.
	fmu sync.Mutex
	// auditRows is how many records the database holds, counted once and
	// then followed, so that the row bound costs a query only when it is
	// passed; -1 until counted. Under fmu.
	auditRows int64

	// wmu serialises journal appends and a fold's taking of its batch, so
	// that the batch holds everything journaled before the journal's
	// mark taken with it. It is not held while the batch is written: a
	// command appends to the journal while a fold's transaction runs.
	wmu sync.Mutex
	// journaled is the queued values already in the journal since the
	// last batch was taken; under wmu.
	journaled map[string]bridge.Value
	// audit is the records not yet in the database (in the journal, or
	// in memory alone while neither journal nor database takes them);
	// under wmu.
	audit []bridge.AuditRecord
	// auditDropped is set once the log said records were dropped; under
	// wmu.
	auditDropped bool

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
	FoldJournalAudited(ctx context.Context, vs []store.SwitchValue, recs []bridge.AuditRecord, mark store.JournalMark) error
	PruneAudit(ctx context.Context, maxAge time.Duration, maxRows int) (int64, error)
	AuditRows(ctx context.Context) (int64, error)
}

// AuditBounds bound the audit log (audit.max_age, audit.max_rows): a
// record older than MaxAge goes, and past MaxRows records the oldest go.
// bridge.DefaultAuditMaxAge and DefaultAuditMaxRows stand for a zero.
type AuditBounds struct {
	MaxAge  time.Duration
	MaxRows int
}

// NewValueWriter starts a writer into db that journals commands' values
// and audit records in journal, which it then owns: Close closes it.
// Without a journal (nil) they go to the database before Persist returns.
// The audit log is kept within bounds.
func NewValueWriter(db valueFolder, journal *store.Journal, bounds AuditBounds, logger *slog.Logger) *ValueWriter {
	if bounds.MaxAge <= 0 {
		bounds.MaxAge = bridge.DefaultAuditMaxAge
	}
	if bounds.MaxRows <= 0 {
		bounds.MaxRows = bridge.DefaultAuditMaxRows
	}
	w := &ValueWriter{db: db, journal: journal, logger: logger, bounds: bounds, auditRows: -1, journaled: map[string]bridge.Value{},
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
	w.wakeLocked()
	w.mu.Unlock()
}

// wakeLocked has the background writer store what waits, after its
// coalescing window. Under mu, so close cannot shut the channel between
// check and send.
func (w *ValueWriter) wakeLocked() {
	if w.closed {
		return
	}
	select {
	case w.wake <- struct{}{}:
	default:
	}
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
		w.fold()
	}
	w.fold()
}

// Value is the last value reported for a switch since start-up.
func (w *ValueWriter) Value(id string) (bridge.Value, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	v, ok := w.last[id]
	return v, ok
}

func toValue(id string, st bridge.State) store.SwitchValue {
	at := st.Updated
	if at.IsZero() {
		at = time.Now()
	}
	return store.SwitchValue{SwitchID: id, Value: st.Value, At: at}
}

// Persist records that a command left switches at v (each as of its
// confirmation), with the command's audit records, and makes every value
// reported so far and the records durable before it returns: it appends
// them to the journal in one write (bridge.Switchboard.Persist). Should
// the journal fail, it writes the database instead; only when both fail
// does it return an error, and the command is not answered as a success.
// Records that neither took are kept in memory and stored with the next
// batch that succeeds (a crash loses them).
func (w *ValueWriter) Persist(v bridge.Value, confirmedAt map[string]time.Time, recs []bridge.AuditRecord) error {
	for id, at := range confirmedAt {
		w.Notify(id, bridge.State{Value: v, Available: true, Updated: at})
	}
	jerr, done := w.journalize(recs)
	if done {
		return nil
	}
	if err := w.fold(); err != nil {
		if jerr != nil {
			// One line: it ends up in a 503's message and a log line.
			err = fmt.Errorf("value journal: %v; database: %v", jerr, err)
		}
		return w.logLost(err)
	}
	return nil
}

// journalize appends the queued values not yet journaled and recs to the
// journal, done when they are there (or when there is nothing to keep).
// Otherwise, without a journal or when it failed (the error), the records
// wait in memory for the fold that is to store them.
func (w *ValueWriter) journalize(recs []bridge.AuditRecord) (jerr error, done bool) {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	w.mu.Lock()
	var batch []store.SwitchValue
	for id, st := range w.queue {
		if w.journaled[id] != st.Value {
			batch = append(batch, toValue(id, st))
		}
	}
	w.mu.Unlock()
	if len(batch) == 0 && len(recs) == 0 {
		return nil, true
	}
	w.keepAudit(recs)
	if w.journal == nil {
		return nil, false
	}
	if err := w.journal.AppendAudited(batch, recs); err != nil {
		w.logger.Warn("value journal: writing the database instead", "err", err)
		return err, false
	}
	for _, v := range batch {
		w.journaled[v.SwitchID] = v.Value
	}
	if len(recs) > 0 {
		// Into the database with the next batch: a command that changed
		// no value has not woken the writer.
		w.mu.Lock()
		w.wakeLocked()
		w.mu.Unlock()
	}
	return nil, true
}

// keepAudit adds recs to the records waiting for the database, keeping at
// most the row bound of them (the oldest go first, as the bound would
// prune them): a database that stays unwritable must not fill the memory.
func (w *ValueWriter) keepAudit(recs []bridge.AuditRecord) {
	w.audit = append(w.audit, recs...)
	if over := len(w.audit) - w.bounds.MaxRows; over > 0 {
		w.audit = append(w.audit[:0], w.audit[over:]...)
		if !w.auditDropped {
			w.auditDropped = true
			w.logger.Warn("audit log: the database has not taken records for a while; dropping the oldest waiting, past audit.max_rows", "max_rows", w.bounds.MaxRows)
		}
	}
}

// logLost logs err, when set, with the audit records it leaves in memory
// alone: a command refused before any device, or where nothing confirmed,
// answers as it would have, and its records would otherwise be lost
// without a line.
func (w *ValueWriter) logLost(err error) error {
	if err == nil {
		return nil
	}
	w.wmu.Lock()
	n := len(w.audit)
	w.wmu.Unlock()
	if n > 0 {
		w.logger.Warn("audit log: records not stored yet, kept in memory and retried with the next write", "records", n, "err", err)
	}
	return err
}

// PruneAudit applies the audit log's bounds now: after each batch with
// records the writer does it itself, but records age while no command
// comes, so the daemon calls this now and then.
func (w *ValueWriter) PruneAudit() {
	w.fmu.Lock()
	defer w.fmu.Unlock()
	w.pruneAuditLocked(0)
}

// pruneAuditLocked deletes the records past the bounds, added being how
// many the last batch stored. The age bound is one indexed delete; the
// row bound needs the count, followed here, and a query only once passed.
// Under fmu.
func (w *ValueWriter) pruneAuditLocked(added int) {
	ctx := context.Background()
	if w.auditRows >= 0 {
		w.auditRows += int64(added)
	} else if n, err := w.db.AuditRows(ctx); err != nil {
		w.logger.Warn("audit log: counting records; pruning by age only this time", "err", err)
	} else {
		w.auditRows = n
	}
	maxRows := 0
	if w.auditRows > int64(w.bounds.MaxRows) {
		maxRows = w.bounds.MaxRows
	}
	n, err := w.db.PruneAudit(ctx, w.bounds.MaxAge, maxRows)
	if err != nil {
		w.logger.Warn("audit log: pruning; will try again after the next command", "err", err)
		w.auditRows = -1
		return
	}
	if w.auditRows >= 0 {
		w.auditRows -= n
	}
}

// batch is what one fold stores: the queued values, the records waiting
// and how far the journal held them.
type batch struct {
	queue map[string]bridge.State
	audit []bridge.AuditRecord
	mark  store.JournalMark
}

// fold stores what waits in the database, with how far the journal held
// it, then drops that much of the journal. Commands go on appending to the
// journal while the transaction runs: what they append is past the mark,
// for the next fold (Journal.CompactTo keeps it).
func (w *ValueWriter) fold() error {
	w.fmu.Lock()
	defer w.fmu.Unlock()
	b := w.take()
	if len(b.queue) == 0 && len(b.audit) == 0 {
		return nil
	}
	values := make([]store.SwitchValue, 0, len(b.queue))
	for id, st := range b.queue {
		values = append(values, toValue(id, st))
	}
	if err := w.db.FoldJournalAudited(context.Background(), values, b.audit, b.mark); err != nil {
		w.logger.Warn("storing switch values; will retry", "switches", len(values), "audit_records", len(b.audit), "err", err)
		w.putBack(b)
		return err
	}
	w.wmu.Lock()
	w.auditDropped = false
	w.wmu.Unlock()
	if w.journal != nil {
		if err := w.journal.CompactTo(b.mark); err != nil {
			w.logger.Warn("value journal: compacting", "err", err)
		}
	}
	if len(b.audit) > 0 {
		w.pruneAuditLocked(len(b.audit))
	}
	return nil
}

// take takes what the next fold stores. Under wmu, no append is half
// done: everything journaled up to the mark is in the batch (or replaced
// by a newer value in it).
func (w *ValueWriter) take() batch {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	w.mu.Lock()
	b := batch{queue: w.queue, audit: w.audit}
	w.queue = map[string]bridge.State{}
	w.mu.Unlock()
	w.audit = nil
	// What is journaled from now on is past the mark, whatever the
	// journal held before: a value reported again must be journaled again.
	w.journaled = map[string]bridge.Value{}
	if w.journal != nil {
		b.mark = w.journal.Mark()
	}
	return b
}

// putBack returns a batch the database did not take to what waits: its
// values where no newer report replaced them, its records before the ones
// kept since. The journal keeps all it had.
func (w *ValueWriter) putBack(b batch) {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	w.audit = append(b.audit, w.audit...)
	w.keepAudit(nil)
	w.mu.Lock()
	for id, st := range b.queue {
		if _, newer := w.queue[id]; !newer {
			w.queue[id] = st
		}
	}
	w.wakeLocked() // try again after the next coalescing window
	w.mu.Unlock()
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
