package accounts_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge/store"
	"github.com/switchbridge/switchbridge/bridge/store/storetest"
)

// marks is a usage marker that records what it is asked to write, and can
// hold a write to show that Touch does not wait for it.
type marks struct {
	mu      sync.Mutex
	batches []map[string]time.Time
	hold    chan struct{}
	entered chan struct{} // told each time a write starts
}

func (m *marks) MarkUsed(_ context.Context, used map[string]time.Time) error {
	if m.entered != nil {
		m.entered <- struct{}{}
	}
	if m.hold != nil {
		<-m.hold
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.batches = append(m.batches, used)
	return nil
}

func (m *marks) all() map[string][]time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string][]time.Time{}
	for _, b := range m.batches {
		for id, at := range b {
			out[id] = append(out[id], at)
		}
	}
	return out
}

func TestUsageWriterWritesAtMostOncePerInterval(t *testing.T) {
	m := &marks{hold: make(chan struct{}), entered: make(chan struct{}, 4)}
	w := store.NewUsageWriter(m, nil)
	t0 := time.Now()
	w.Touch("a", t0)
	select {
	case <-m.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the first touch was not written")
	}
	// The first write is held: the touches after it must still return,
	// and not one of them may wait on the database.
	for i := range 100 {
		w.Touch("a", t0.Add(time.Duration(i)*time.Second/10))
	}
	w.Touch("b", t0)
	w.Touch("a", t0.Add(store.UsageInterval)) // a minute on: noted again
	close(m.hold)
	w.Close()
	w.Touch("a", t0.Add(3*store.UsageInterval)) // after Close: ignored, no panic

	got := m.all()
	if len(got["a"]) != 2 || !got["a"][0].Equal(t0) || !got["a"][1].Equal(t0.Add(store.UsageInterval)) {
		t.Errorf("writes for a: %v, want %v and a minute later", got["a"], t0)
	}
	if len(got["b"]) != 1 {
		t.Errorf("writes for b: %v, want one", got["b"])
	}
}

// Through the real database: the page reads what the writer wrote.
func TestUsageWriterIntoTheStore(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T) {
		ctx := context.Background()
		db := mustOpen(t, t.TempDir())
		_, _, in := seed(t, db)
		w := store.NewUsageWriter(db, nil)
		at := time.UnixMilli(time.Now().UnixMilli())
		w.Touch(in.ID, at)
		w.Close()
		got, err := db.Installation(ctx, in.ID)
		if err != nil || !got.LastUsedAt.Equal(at) {
			t.Errorf("last used %v (%v), want %v", got.LastUsedAt, err, at)
		}
	})
}
