package hubstore

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/store"
)

// saver records saved values and fails while failing is set.
type saver struct {
	mu      sync.Mutex
	failing bool
	saved   map[string]bridge.Value
}

func (s *saver) FoldJournalAudited(_ context.Context, vs []store.SwitchValue, _ []bridge.AuditRecord, _ store.JournalMark) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failing {
		return errors.New("disk full")
	}
	for _, v := range vs {
		s.saved[v.SwitchID] = v.Value
	}
	return nil
}

func (s *saver) PruneAudit(context.Context, time.Duration, int) (int64, error) { return 0, nil }
func (s *saver) AuditRows(context.Context) (int64, error)                      { return 0, nil }

func (s *saver) get(id string) bridge.Value {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.saved[id]
}

func newTestWriter(t *testing.T, sv *saver) *ValueWriter {
	t.Helper()
	j, err := store.OpenJournal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	w := NewValueWriter(sv, j, AuditBounds{}, slog.New(slog.DiscardHandler))
	t.Cleanup(func() { w.Close() })
	return w
}

func TestConfirmationDoesNotOverwriteANewerReport(t *testing.T) {
	sv := &saver{saved: map[string]bridge.Value{}}
	w := newTestWriter(t, sv)
	confirmed := time.Now()
	// The plug confirmed "on", then someone pressed its button: it reported
	// "off" before the command (waiting on a slower plug) stored its result.
	w.Notify("x", bridge.State{Value: bridge.Off, Updated: confirmed.Add(time.Second)})
	if err := w.Persist(bridge.On, map[string]time.Time{"x": confirmed}, nil); err != nil {
		t.Fatal(err)
	}
	if v, _ := w.Value("x"); v != bridge.Off {
		t.Errorf("value = %s, want the newer report (off)", v)
	}
	w.fold()
	if got := sv.get("x"); got != bridge.Off {
		t.Errorf("stored %s, want off", got)
	}
}

func TestFailedWriteIsRetriedWithoutNewReports(t *testing.T) {
	sv := &saver{saved: map[string]bridge.Value{}, failing: true}
	w := newTestWriter(t, sv)
	w.Notify("x", bridge.State{Value: bridge.On, Updated: time.Now()})
	time.Sleep(2 * coalesce) // the first write has failed by now
	if sv.get("x") != "" {
		t.Fatal("saved while failing")
	}
	sv.mu.Lock()
	sv.failing = false
	sv.mu.Unlock()
	deadline := time.Now().Add(5 * time.Second)
	for sv.get("x") != bridge.On {
		if time.Now().After(deadline) {
			t.Fatal("the value was never written after the database recovered")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestPersistFailsOnlyWhenNothingCouldStoreIt(t *testing.T) {
	sv := &saver{saved: map[string]bridge.Value{}, failing: true}
	w := newTestWriter(t, sv)
	// The journal works: the database failing does not matter yet.
	if err := w.Persist(bridge.On, map[string]time.Time{"x": time.Now()}, nil); err != nil {
		t.Errorf("Persist with a working journal: %v", err)
	}
	// Journal gone too: the command must hear of it.
	w.journal.Close()
	if err := w.Persist(bridge.Off, map[string]time.Time{"x": time.Now()}, nil); err == nil {
		t.Error("Persist succeeded with neither journal nor database")
	}
}

// TestTimelessStateStoresNothing: a driver passing on availability with the
// value LastValue gave it (no Updated) must not overwrite a newer report,
// as it would if the writer stamped it with the time it arrived.
func TestTimelessStateStoresNothing(t *testing.T) {
	sv := &saver{saved: map[string]bridge.Value{}}
	w := newTestWriter(t, sv)
	w.Notify("x", bridge.State{Value: bridge.On, Available: true, Updated: time.Now()})
	w.Notify("x", bridge.State{Value: bridge.Off, Available: true}) // the stale start-up value
	if v, _ := w.Value("x"); v != bridge.On {
		t.Errorf("value = %s, want the reported on", v)
	}
	w.fold()
	if got := sv.get("x"); got != bridge.On {
		t.Errorf("stored %s, want on", got)
	}
}
