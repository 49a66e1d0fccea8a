package bridge_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
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
	bridge.Configure(h, func(o *bridge.SwitchboardOptions) { o.Feed = f })
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
// events after it, for its switches; an id of another run, of another
// installation or grant, one from the future, or one older than the kept
// events asks for a snapshot.
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
	v := f.View("inst", []string{"a"})
	resume := func(id string) ([]bridge.Event, bool) {
		s, missed, ok := v.Subscribe(0, id)
		s.Close()
		return missed, ok
	}
	sub, _, _ := v.Subscribe(0, "")
	sub.Close()
	start := v.EventID(sub.Pos)
	flip("a", 0) // 1, the view's 1
	flip("b", 0) // 2
	flip("a", 1) // 3, the view's 2
	missed, ok := resume(start)
	if !ok || describe(missed) != "[1 a \"\"→\"on\" true device][3 a \"on\"→\"off\" true device]" {
		t.Errorf("resume from the start: %v %s", ok, describe(missed))
	}
	if missed, ok := resume(v.EventID(2)); !ok || len(missed) != 0 {
		t.Errorf("resume from the last event: %v %s", ok, describe(missed))
	}
	if missed, ok := resume(f.View("inst", []string{"a", "a"}).EventID(1)); !ok || describe(missed) != "[3 a \"on\"→\"off\" true device]" {
		t.Errorf("resume through another view of the same grant: %v %s", ok, describe(missed))
	}
	for _, id := range []string{"", "x-1", "nonsense", v.EventID(3), v.EventID(1) + "0", v.EventID(1) + " ", "+" + v.EventID(1),
		strings.TrimRight(v.EventID(0), "0123456789") + "-1",
		f.View("other", []string{"a"}).EventID(1), f.View("inst", []string{"a", "b"}).EventID(1), f.View("inst", nil).EventID(1),
		bridge.NewFeed(bridge.FeedOptions{}).View("inst", []string{"a"}).EventID(1),
	} {
		if _, ok := resume(id); ok {
			t.Errorf("resumed from %q", id)
		}
	}
	// More events than the buffer: the oldest are forgotten. The kept
	// four are the view's 9 to 12.
	for i := 2; i < 12; i++ {
		flip("a", i)
	}
	if _, ok := resume(v.EventID(2)); ok {
		t.Error("resumed from an event no longer kept")
	}
	if _, ok := resume(v.EventID(7)); ok {
		t.Error("resumed from just before the kept events")
	}
	if missed, ok := resume(v.EventID(8)); !ok || len(missed) != 4 {
		t.Errorf("resume from the last event not kept: %v %s", ok, describe(missed))
	}
	if missed, ok := resume(v.EventID(9)); !ok || len(missed) != 3 {
		t.Errorf("resume within the buffer: %v %s", ok, describe(missed))
	}
	// Too old: after MaxAge, nothing is kept.
	now = now.Add(2 * time.Minute)
	if _, ok := resume(v.EventID(11)); ok {
		t.Error("resumed from an event older than MaxAge")
	}
	if missed, ok := resume(v.EventID(12)); !ok || len(missed) != 0 {
		t.Errorf("resume from the latest event once all aged: %v %s", ok, describe(missed))
	}
}

// TestFeedResumeOwnSwitchesOnly: whether a view resumes depends on the
// changes of its own switches alone. However often other switches change
// while its client is away (here 25 times the buffer), it gets exactly the
// events it missed; a change of one of its switches that this switch no
// longer keeps (more of its own since than the buffer) asks for a snapshot.
func TestFeedResumeOwnSwitchesOnly(t *testing.T) {
	f := bridge.NewFeed(bridge.FeedOptions{Buffer: 4, MaxAge: time.Minute})
	f.Started()
	at := time.Now()
	flip := func(id string, i int) {
		v := bridge.On
		if i%2 == 1 {
			v = bridge.Off
		}
		at = at.Add(time.Millisecond)
		f.Notify(id, state(v, true, at))
	}
	v := f.View("inst", []string{"a", "b"})
	resume := func(id string) ([]bridge.Event, bool) {
		s, missed, ok := v.Subscribe(0, id)
		s.Close()
		return missed, ok
	}
	sub, _, _ := v.Subscribe(0, "")
	sub.Close()
	start := v.EventID(sub.Pos)
	flip("a", 0)
	for i := range 100 {
		flip("other", i)
	}
	flip("b", 0)
	for i := range 100 {
		flip("other", i+100)
	}
	if missed, ok := resume(start); !ok || describe(missed) != "[1 a \"\"→\"on\" true device][102 b \"\"→\"on\" true device]" {
		t.Errorf("resume past 200 changes of another switch: %v %s", ok, describe(missed))
	}
	// a's first change is still kept, but b changed since more often
	// than b keeps: a resumption from before b's first change misses
	// some of b's for good.
	for i := 1; i <= 4; i++ {
		flip("b", i)
	}
	if missed, ok := resume(start); ok {
		t.Errorf("resumed past changes of b no longer kept: %s", describe(missed))
	}
	if missed, ok := resume(v.EventID(2)); !ok || len(missed) != 4 {
		t.Errorf("resume from b's first change: %v %s", ok, describe(missed))
	}
	// Each switch keeps its own: the view's missed changes may be more
	// than the buffer, as long as each switch still keeps its part.
	for i := 1; i <= 3; i++ {
		flip("a", i)
	}
	if missed, ok := resume(v.EventID(2)); !ok || len(missed) != 7 {
		t.Errorf("resume from b's first change, 4 of b's and 3 of a's since: %v %s", ok, describe(missed))
	}
	if missed, ok := resume(v.EventID(1)); ok {
		t.Errorf("resumed past b's first change, no longer kept: %s", describe(missed))
	}
}

// TestFeedViewIDs: a view numbers its own events one by one, however many
// changes other switches had between them, so its ids tell nothing of
// those; its numbers start where no other view's do.
func TestFeedViewIDs(t *testing.T) {
	run := func(others int) (ids []string) {
		f := bridge.NewFeed(bridge.FeedOptions{})
		f.Started()
		at := time.Now()
		flip := func(id string, i int) {
			v := bridge.On
			if i%2 == 1 {
				v = bridge.Off
			}
			at = at.Add(time.Millisecond)
			f.Notify(id, state(v, true, at))
		}
		v := f.View("inst", []string{"a"})
		s, _, _ := v.Subscribe(100, "")
		defer s.Close()
		ids = append(ids, v.EventID(s.Pos))
		flip("a", 0)
		for i := range others {
			flip("b", i)
		}
		flip("a", 1)
		for i := range others {
			flip("c", i)
		}
		flip("a", 2)
		got := recv(s)
		if len(got) != 3 {
			t.Fatalf("%d events of a, want 3", len(got))
		}
		// The resumed events carry the same ids as the live ones.
		_, missed, ok := v.Subscribe(0, ids[0])
		if !ok || len(missed) != 3 {
			t.Fatalf("resume from the snapshot: %v %s", ok, describe(missed))
		}
		for i := range got {
			ids = append(ids, v.EventID(s.Pos+uint64(i)+1))
		}
		return ids
	}
	number := func(id string) uint64 {
		_, n, _ := strings.Cut(id, "-")
		u, err := strconv.ParseUint(n, 10, 64)
		if err != nil {
			t.Fatalf("id %q: %v", id, err)
		}
		return u
	}
	steps := func(ids []string) (d []uint64) {
		for i := 1; i < len(ids); i++ {
			d = append(d, number(ids[i])-number(ids[i-1]))
		}
		return d
	}
	quiet, busy := run(0), run(50)
	if fmt.Sprint(steps(quiet)) != "[1 1 1]" || fmt.Sprint(steps(busy)) != "[1 1 1]" {
		t.Errorf("steps between a view's ids: %v with no other changes, %v with 50 between each, want [1 1 1] both", steps(quiet), steps(busy))
	}
	if len(quiet[0]) > 40 {
		t.Errorf("id %q: long", quiet[0])
	}

	f := bridge.NewFeed(bridge.FeedOptions{})
	a, b := f.View("one", []string{"a", "b"}), f.View("two", []string{"a", "b"})
	if a.EventID(1) == b.EventID(1) || number(a.EventID(1)) == number(b.EventID(1)) {
		t.Errorf("two installations' views share ids or numbers: %s %s", a.EventID(1), b.EventID(1))
	}
	if again := f.View("one", []string{"b", "a"}); again.EventID(5) != a.EventID(5) {
		t.Errorf("one installation's grant, another view: %s, %s", again.EventID(5), a.EventID(5))
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

// BenchmarkFeedView is an installation's view, made once per stream
// opened: one HMAC-SHA256 of its installation and switches. Measured on
// the 2-core development machine, shared and loaded: 2.7-3.6 µs, 18
// allocations, for an installation of 10 switches (a stream's token check
// costs more).
func BenchmarkFeedView(b *testing.B) {
	f := bridge.NewFeed(bridge.FeedOptions{})
	ids := make([]string, 10)
	for i := range ids {
		ids[i] = fmt.Sprintf("switch-%d", i)
	}
	b.ReportAllocs()
	for b.Loop() {
		f.View("6f1e0c52-8d7a-4c1b-9f00-2b3c4d5e6f70", ids)
	}
}

// TestFeedLastSeen: a sign of life alone is no event, and every event
// carries the latest last_seen the feed heard of (a command's
// confirmation counts as one), never an older one.
func TestFeedLastSeen(t *testing.T) {
	f := bridge.NewFeed(bridge.FeedOptions{})
	f.Started()
	sub, _, _ := f.Subscribe([]string{"a"}, 0, "")
	t0 := time.Now()
	f.Notify("a", bridge.State{Value: bridge.Off, Available: false}) // not heard from yet
	f.Notify("a", bridge.State{Value: bridge.Off, Available: true, Updated: t0, LastSeen: t0})
	f.Notify("a", bridge.State{Value: bridge.Off, Available: true, Updated: t0, LastSeen: t0.Add(time.Second)}) // telemetry
	if es := recv(sub); len(es) != 1 || !es[0].Available || !es[0].LastSeen.Equal(t0) {
		t.Fatalf("events %s, want one (available) carrying last_seen %s", describe(es), t0)
	}
	f.Notify("a", bridge.State{Value: bridge.On, Available: true, Updated: t0.Add(2 * time.Second), LastSeen: t0.Add(-time.Hour)})
	if es := recv(sub); len(es) != 1 || !es[0].LastSeen.Equal(t0.Add(time.Second)) {
		t.Fatalf("events %s, want one carrying the latest last_seen, not an older one", describe(es))
	}
}
