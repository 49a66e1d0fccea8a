package bridge_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
)

func state(v bridge.Value, available bool, at time.Time) bridge.State {
	return bridge.State{Value: v, Available: available, Updated: at}
}

// recv takes what the subscription holds now, without waiting.
func recv(s *bridge.Subscription) []bridge.Event {
	var out []bridge.Event
	for {
		select {
		case e, ok := <-s.Events():
			if !ok {
				return out
			}
			out = append(out, *e)
		default:
			return out
		}
	}
}

func describe(es []bridge.Event) string {
	s := ""
	for _, e := range es {
		s += fmt.Sprintf("[%d %s %q→%q %v %s]", e.Seq, e.SwitchID, e.Previous, e.Value, e.Available, e.Cause)
	}
	return s
}

// TestFeedCauses: start-up, device, availability, and a command's change
// (reported by the driver during the command, or only confirmed), each
// once; reports of what is already known are no change.
func TestFeedCauses(t *testing.T) {
	f := bridge.NewFeed(bridge.FeedOptions{})
	f.Seed("a", bridge.Off)
	sub, _, _ := f.Subscribe([]string{"a", "b"}, 0, "")
	t0 := time.Now()
	f.Notify("a", state(bridge.Off, true, t0))       // the stored value: no change
	f.Notify("a", state(bridge.On, true, t0.Add(1))) // a start-up policy
	f.Notify("b", state(bridge.On, true, t0.Add(2))) // first report: from unknown
	f.Notify("c", state(bridge.On, true, t0.Add(3))) // not subscribed
	f.Started()
	f.Notify("a", state(bridge.Off, true, t0.Add(4)))                // the button
	f.Notify("a", state(bridge.Off, true, t0.Add(5)))                // again: no change
	f.Notify("a", bridge.State{Value: bridge.Off})                   // availability only, unchanged: no change
	f.Notify("a", bridge.State{Value: bridge.Off, Available: false}) // gone
	f.Notify("a", state(bridge.On, false, t0.Add(3)))                // a value older than the feed's: no change
	got := recv(sub)
	want := "[1 a \"off\"→\"on\" true startup][2 b \"\"→\"on\" true startup][4 a \"on\"→\"off\" true device][5 a \"off\"→\"off\" false availability]"
	if describe(got) != want {
		t.Errorf("events\n%s\nwant\n%s", describe(got), want)
	}

	// Commands through the hub: a change the driver reports while the
	// command runs, and one only the confirmation tells.
	f.Notify("a", state(bridge.On, true, time.Now())) // 6: back, and on
	recv(sub)
	reporting := &device{}
	reporting.do = func(context.Context) error {
		f.Notify("a", state(bridge.Off, true, time.Now()))
		return nil
	}
	h := newHub(t, map[string]bridge.Device{"a": reporting, "b": &device{}})
	h.Feed = f
	if err := h.Command(context.Background(), []string{"a", "b"}, bridge.CommandOff); err != nil {
		t.Fatal(err)
	}
	// The change is in the subscription before the command returns, so a
	// stream has it before the 204.
	got = recv(sub)
	if describe(got) != "[7 a \"on\"→\"off\" true api][8 b \"on\"→\"off\" true api]" &&
		describe(got) != "[7 b \"on\"→\"off\" true api][8 a \"on\"→\"off\" true api]" {
		t.Errorf("a command's events: %s", describe(got))
	}
	// After the command, the same kind of report is the device's.
	f.Notify("b", state(bridge.On, true, time.Now()))
	if got := recv(sub); len(got) != 1 || got[0].Cause != bridge.CauseDevice {
		t.Errorf("after the command: %s", describe(got))
	}
}

// TestFeedResume: a subscriber resuming from an id gets exactly the kept
// events after it, for its switches; an id of another run, one from the
// future, or one older than the kept events asks for a snapshot.
func TestFeedResume(t *testing.T) {
	now := time.Now()
	clock := func() time.Time { return now }
	f := bridge.NewFeed(bridge.FeedOptions{Buffer: 4, MaxAge: time.Minute, Now: clock})
	f.Started()
	flip := func(id string, i int) {
		v := bridge.On
		if i%2 == 1 {
			v = bridge.Off
		}
		f.Notify(id, state(v, true, now.Add(time.Duration(i))))
	}
	sub, _, _ := f.Subscribe([]string{"a"}, 0, "")
	sub.Close()
	start := f.EventID(sub.Seq)
	flip("a", 0) // 1
	flip("b", 0) // 2
	flip("a", 1) // 3
	_, missed, ok := f.Subscribe([]string{"a"}, 0, start)
	if !ok || describe(missed) != "[1 a \"\"→\"on\" true device][3 a \"on\"→\"off\" true device]" {
		t.Errorf("resume from the start: %v %s", ok, describe(missed))
	}
	_, missed, ok = f.Subscribe([]string{"a"}, 0, f.EventID(3))
	if !ok || len(missed) != 0 {
		t.Errorf("resume from the last event: %v %s", ok, describe(missed))
	}
	for _, id := range []string{"", "x-1", f.EventID(4), "nonsense"} {
		if _, _, ok := f.Subscribe([]string{"a"}, 0, id); ok {
			t.Errorf("resumed from %q", id)
		}
	}
	// More events than the buffer: the oldest are forgotten.
	for i := 2; i < 12; i++ {
		flip("a", i)
	}
	if _, _, ok := f.Subscribe([]string{"a"}, 0, f.EventID(3)); ok {
		t.Error("resumed from an event no longer kept")
	}
	if _, missed, ok := f.Subscribe([]string{"a"}, 0, f.EventID(10)); !ok || len(missed) != 3 {
		t.Errorf("resume within the buffer: %v %s", ok, describe(missed))
	}
	// Too old: after MaxAge, nothing is kept.
	now = now.Add(2 * time.Minute)
	if _, _, ok := f.Subscribe([]string{"a"}, 0, f.EventID(12)); ok {
		t.Error("resumed from an event older than MaxAge")
	}
	if _, missed, ok := f.Subscribe([]string{"a"}, 0, f.EventID(13)); !ok || len(missed) != 0 {
		t.Errorf("resume from the latest event once all aged: %v %s", ok, describe(missed))
	}
	if id := f.EventID(1); id == bridge.NewFeed(bridge.FeedOptions{}).EventID(1) {
		t.Errorf("two runs share event id %s", id)
	}
}

// TestFeedDropsSlowSubscribers: a subscriber that does not read is dropped
// once its buffer is full; reporting never waits for it, and the others
// get every event.
func TestFeedDropsSlowSubscribers(t *testing.T) {
	f := bridge.NewFeed(bridge.FeedOptions{})
	f.Started()
	slow, _, _ := f.Subscribe([]string{"a"}, 4, "")
	fast, _, _ := f.Subscribe([]string{"a"}, 4, "")
	done := make(chan struct{})
	var got int
	go func() {
		defer close(done)
		for range fast.Events() {
			got++
		}
	}()
	t0 := time.Now()
	for i := range 1000 {
		v := bridge.On
		if i%2 == 1 {
			v = bridge.Off
		}
		f.Notify("a", state(v, true, t0.Add(time.Duration(i))))
		if i == 500 && !slow.Dropped() {
			t.Error("a subscriber 500 events behind is still subscribed")
		}
		// Keep fast within its buffer.
		for len(fast.Events()) > 2 {
			time.Sleep(time.Microsecond)
		}
	}
	fast.Close()
	<-done
	if got != 1000 {
		t.Errorf("the reading subscriber got %d of 1000 events", got)
	}
	if n := len(recv(slow)); n != 4 {
		t.Errorf("the dropped subscriber holds %d events, want its buffer of 4", n)
	}
	if f.Subscribers() != 0 {
		t.Errorf("%d subscribers left", f.Subscribers())
	}
}
