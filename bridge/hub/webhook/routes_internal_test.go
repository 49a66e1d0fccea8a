package webhook

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
)

// routesStore holds webhooks in memory; its first read of every webhook
// takes the list as it is, then waits for hold to be closed before it
// returns it (a read in flight while a webhook is registered).
type routesStore struct {
	Store   // the rest is not used here: calling it panics
	mu      sync.Mutex
	hooks   []*bridge.Webhook
	reads   int
	entered chan struct{}
	hold    chan struct{}
}

func (s *routesStore) Webhooks(_ context.Context, installationID string) ([]*bridge.Webhook, error) {
	s.mu.Lock()
	list := slices.Clone(s.hooks)
	s.reads++
	first := s.reads == 1
	s.mu.Unlock()
	if first {
		close(s.entered)
		<-s.hold
	}
	return list, nil
}

func (s *routesStore) add(w *bridge.Webhook) {
	s.mu.Lock()
	s.hooks = append(s.hooks, w)
	s.mu.Unlock()
}

type oneInstallation struct{}

func (oneInstallation) Installation(_ context.Context, id string) (*bridge.Installation, error) {
	return &bridge.Installation{ID: id, SwitchIDs: []string{"lamp"}}, nil
}

func (oneInstallation) GrantLive(context.Context, string, time.Time) (bool, error) { return true, nil }

// A webhook registered while the switches' routes were being read from
// the store is routed its switch's next change: the map read before it was
// stored must not be kept for routesAge.
func TestRoutesReadDuringARegistrationAreNotKept(t *testing.T) {
	st := &routesStore{entered: make(chan struct{}), hold: make(chan struct{})}
	feed := bridge.NewFeed(bridge.FeedOptions{})
	s := New(st, oneInstallation{}, feed, nil, nil, nil)
	ctx := context.Background()

	type result struct {
		r   map[string][]route
		err error
	}
	inFlight := make(chan result, 1)
	go func() {
		r, err := s.routing(ctx)
		inFlight <- result{r, err}
	}()
	select {
	case <-st.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("routing did not read the webhooks")
	}
	// Register's last two steps, while that read is in flight.
	st.add(&bridge.Webhook{ID: "wh_new", InstallationID: "inst-1", URL: "https://example.test/hook"})
	s.forgetRoutes()
	close(st.hold)
	old := <-inFlight
	if old.err != nil {
		t.Fatal(old.err)
	}
	if len(old.r["lamp"]) != 0 {
		t.Fatalf("the read in flight saw the new webhook: %v", old.r)
	}

	r, err := s.routing(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := r["lamp"]; !slices.Equal(got, []route{{"wh_new", "inst-1"}}) {
		t.Errorf("routes for lamp after the registration = %v, want [wh_new]", got)
	}
}
