package bridge_test

import (
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
)

// TestFeedReadings: readings alone make an event at most once per
// ReadingEvery per switch, an on/off change carries the latest reading at
// once, and a reading that did not change makes none.
func TestFeedReadings(t *testing.T) {
	clock := time.Date(2024, 1, 1, 12, 0, 0, 0, time.UTC)
	f := bridge.NewFeed(bridge.FeedOptions{Now: func() time.Time { return clock }, ReadingEvery: 10 * time.Second})
	f.Started()
	sub, _, _ := f.Subscribe([]string{"p"}, 0, "")
	st := func(v bridge.Value, watts float64) bridge.State {
		return bridge.State{Value: v, Available: true, Updated: clock.Add(-time.Hour), LastSeen: clock,
			Reading: &bridge.Reading{Power: watts, Has: bridge.HasPower, At: clock}}
	}
	f.Notify("p", st(bridge.On, 100)) // first report: a change, with its reading
	for i := range 9 {                // a report every second: one event in 10 s
		clock = clock.Add(time.Second)
		f.Notify("p", st(bridge.On, 101+float64(i)))
	}
	clock = clock.Add(time.Second)
	f.Notify("p", st(bridge.On, 120)) // 10 s after the last: an event
	clock = clock.Add(time.Second)
	f.Notify("p", st(bridge.On, 120)) // nothing new
	clock = clock.Add(time.Second)
	off := st(bridge.Off, 0)
	off.Updated = clock
	f.Notify("p", off) // an on/off change: at once, with its reading
	got := recv(sub)
	if len(got) != 3 {
		t.Fatalf("got %d events, want 3: %s", len(got), describe(got))
	}
	for i, want := range []struct {
		cause bridge.Cause
		watts float64
	}{{bridge.CauseDevice, 100}, {bridge.CauseReading, 120}, {bridge.CauseDevice, 0}} {
		e := got[i]
		if e.Cause != want.cause || e.Reading == nil || e.Reading.Power != want.watts || e.Stale {
			t.Errorf("event %d: cause %s reading %+v stale %v, want %s with %g W", i, e.Cause, e.Reading, e.Stale, want.cause, want.watts)
		}
	}
}
