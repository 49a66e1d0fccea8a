package api

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/switchbridge/switchbridge/bridge"
)

// spy is a device that counts every use of it: a switch no grant covers
// must never be looked at.
type spy struct{ uses *atomic.Int64 }

func (s spy) State() bridge.State {
	s.uses.Add(1)
	return bridge.State{Value: bridge.On, Available: true}
}

func (s spy) Do(context.Context, bridge.Command) error {
	s.uses.Add(1)
	return nil
}

func (s spy) Supports(bridge.Command) bool {
	s.uses.Add(1)
	return true
}

// grantOfLamp grants token "tok" lamp of location 1 in installation A.
type grantOfLamp struct{}

func (grantOfLamp) Authorize(_ context.Context, token, installation string) (*bridge.Grant, error) {
	if token != "tok" || installation != "A" {
		return nil, bridge.Errorf(bridge.EUNAUTHORIZED, "unknown token")
	}
	return &bridge.Grant{InstallationID: "A", LocationID: 1, SwitchIDs: []string{"lamp"}}, nil
}

// TestUngrantedSwitchTakesThePathOfAMissingOne (issue 34, item 3): for a
// switch the hub has but the grant does not cover, every path answers as
// for a switch the hub never had, by the same code: the answers are the
// same but for the id, the hub never touches the switch's device, and
// serving either costs the same allocations, allocation for allocation.
// Timing alone cannot show this on a loaded machine: a little more work
// for a switch that exists costs less than the noise of one request. Work
// that reads the switch's device (the spy counts it) or makes anything of
// the switch (its state, its name in a message: allocations) fails here
// deterministically; a bare map lookup, which allocates nothing and costs
// nanoseconds, would not. (Under the race detector, whose sync.Pool drops
// at random, allocations are not compared.) TestNotFoundTimingAlike
// (bridge/daemon) times the real hub besides.
func TestUngrantedSwitchTakesThePathOfAMissingOne(t *testing.T) {
	uses := &atomic.Int64{}
	hub, err := bridge.NewSwitchboard([]bridge.Location{{ID: 1, Name: "Home", Switches: []string{"lamp", "attic"}}, {ID: 2, Name: "Garage", Switches: []string{"garage"}}},
		[]*bridge.Switch{{ID: "lamp", Name: "Lamp", Driver: "test", LocationID: 1, Device: lamp{}},
			{ID: "attic", Name: "Attic", Driver: "test", LocationID: 1, Device: spy{uses}},
			{ID: "garage", Name: "Garage", Driver: "test", LocationID: 2, Device: spy{uses}}}, bridge.SwitchboardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Every request counts alike; with the rate limit off, none is refused for it.
	h := New(hub, grantOfLamp{}, nil, Options{RateLimit: &RateLimit{}})
	mux := http.NewServeMux()
	h.Register(mux)
	serve := func(method, path string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, "/api/apps/installations/A"+path, nil)
		req.Header.Set("Authorization", "Bearer tok")
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		return rec
	}
	// An answer with the id in it replaced, and without its random
	// request id.
	answer := func(rec *httptest.ResponseRecorder, id string) string {
		hd := rec.Header().Clone()
		hd.Del("X-Request-Id")
		var lines []string
		for k, vs := range hd {
			lines = append(lines, k+": "+strings.Join(vs, ", "))
		}
		slices.Sort(lines)
		return fmt.Sprintf("%d\n%s\n%s", rec.Code, strings.Join(lines, "\n"), strings.ReplaceAll(rec.Body.String(), id, "<id>"))
	}
	// What f allocates, the least of three counts: another goroutine
	// of the test binary (a timer's, the runtime's) can only add to one.
	allocs := func(f func()) float64 {
		return min(testing.AllocsPerRun(100, f), testing.AllocsPerRun(100, f), testing.AllocsPerRun(100, f))
	}
	// Each existing id against one the hub never had, of its length.
	pairs := [][2]string{{"attic", "ghost"}, {"garage", "nohere"}}
	paths := []struct{ method, path string }{
		{http.MethodGet, "/switches/%s"},
		{http.MethodHead, "/switches/%s"},
		{http.MethodPut, "/switches/%s/on"},
		{http.MethodPut, "/switches/%s/off"},
		{http.MethodPut, "/switches/%s/toggle"},
		{http.MethodPut, "/switches/%s"},
		{http.MethodGet, "/switches/%s/on"},
		{http.MethodDelete, "/switches/%s"},
	}
	for _, p := range paths {
		for _, pair := range pairs {
			there, never := fmt.Sprintf(p.path, pair[0]), fmt.Sprintf(p.path, pair[1])
			a, b := answer(serve(p.method, there), pair[0]), answer(serve(p.method, never), pair[1])
			if a != b {
				t.Errorf("%s %s answered\n%s\nbut %s\n%s", p.method, there, a, never, b)
			}
			if raceDetector {
				continue
			}
			ka, kb := allocs(func() { serve(p.method, there) }), allocs(func() { serve(p.method, never) })
			if ka != kb {
				t.Errorf("%s %s: %v allocations, %s: %v; the same code path makes the same", p.method, there, ka, never, kb)
			}
		}
	}
	if n := uses.Load(); n != 0 {
		t.Errorf("the devices of switches no grant covers were used %d times", n)
	}
	// The spy does count: a read of the switch's state is a use.
	if _, err := hub.States([]string{"attic"}); err != nil || uses.Load() != 1 {
		t.Errorf("reading attic's state: %v, %d uses counted, want 1", err, uses.Load())
	}
}
