package bridge_test

import (
	"context"
	"github.com/switchbridge/switchbridge/bridge/infra/clocktest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
)

// relayLike is a device whose driver caps it by default, as a GPIO relay's
// does.
type relayLike struct {
	device
	limit bridge.ChangeLimit
}

func (r *relayLike) DefaultMaxChanges() bridge.ChangeLimit { return r.limit }

// cappedHub is a hub of switches with the given caps (nil: the device's
// default) on a stepped clock, recording what Observe is told.
func cappedHub(t *testing.T, devs map[string]bridge.Device, caps map[string]*bridge.ChangeLimit) (*bridge.Switchboard, *clocktest.Clock, *[]string) {
	t.Helper()
	loc := bridge.Location{ID: 1, Name: "Home"}
	var sws []*bridge.Switch
	for id, d := range devs {
		loc.Switches = append(loc.Switches, id)
		sws = append(sws, &bridge.Switch{ID: id, Name: "name of " + id, Driver: "test", LocationID: 1, Device: d, MaxChanges: caps[id]})
	}
	h, err := bridge.NewSwitchboard([]bridge.Location{loc}, sws, bridge.SwitchboardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := clocktest.New()
	bridge.Configure(h, func(o *bridge.SwitchboardOptions) { o.Now = c.Now })
	var mu sync.Mutex
	var observed []string
	bridge.Configure(h, func(o *bridge.SwitchboardOptions) {
		o.Observe = func(sw *bridge.Switch, _ bridge.Command, outcome string, _ time.Duration) {
			mu.Lock()
			observed = append(observed, sw.ID+":"+outcome)
			mu.Unlock()
		}
	})
	return h, c, &observed
}

// wantTooOften checks err is ETOOMANY naming exactly ids, with a wait.
func wantTooOften(t *testing.T, err error, wait time.Duration, ids ...string) {
	t.Helper()
	e, ok := err.(*bridge.Error)
	if !ok || e.Code != bridge.ETOOMANY {
		t.Fatalf("err = %v, want %s", err, bridge.ETOOMANY)
	}
	var got []string
	for _, f := range e.Failures {
		if f.Reason != bridge.FailRateLimited || f.Name == "" || f.Message == "" {
			t.Errorf("failure %+v: want reason %s, a name and a message", f, bridge.FailRateLimited)
		}
		got = append(got, f.SwitchID)
	}
	slices.Sort(got)
	if !slices.Equal(got, ids) {
		t.Errorf("refused switches = %v, want %v (%s)", got, ids, e.Message)
	}
	if e.RetryAfter != wait {
		t.Errorf("RetryAfter = %s, want %s", e.RetryAfter, wait)
	}
}

// A command past a switch's cap is refused naming it, and no switch of
// the command is touched; the bucket refills at one per Per.
func TestChangeCapRefusesAndSwitchesNothing(t *testing.T) {
	lamp, fan := &device{}, &device{}
	h, clk, observed := cappedHub(t, map[string]bridge.Device{"lamp": lamp, "fan": fan},
		map[string]*bridge.ChangeLimit{"lamp": {Burst: 2, Per: 2 * time.Second}})
	ctx := context.Background()
	both := []string{"fan", "lamp"}
	for _, cmd := range []bridge.Command{bridge.CommandOn, bridge.CommandOff} {
		if err := h.Command(ctx, both, cmd); err != nil {
			t.Fatalf("%s within the burst: %v", cmd, err)
		}
	}
	err := h.Command(ctx, both, bridge.CommandOn)
	wantTooOften(t, err, 2*time.Second, "lamp")
	if lamp.calls.Load() != 2 || fan.calls.Load() != 2 {
		t.Errorf("device calls lamp %d, fan %d: the refused command reached a device", lamp.calls.Load(), fan.calls.Load())
	}
	if lamp.State().Value != bridge.Off || fan.State().Value != bridge.Off {
		t.Errorf("states after the refused on: lamp %q, fan %q; want both off", lamp.State().Value, fan.State().Value)
	}
	if !slices.Contains(*observed, "lamp:"+bridge.FailRateLimited) || slices.Contains(*observed, "fan:"+bridge.FailRateLimited) {
		t.Errorf("observed %v: want lamp rate_limited, fan not", *observed)
	}

	// The switch without a cap alone is never refused.
	for i := range 10 {
		if err := h.Command(ctx, []string{"fan"}, bridge.CommandOn); err != nil {
			t.Fatalf("fan alone, command %d: %v", i, err)
		}
	}

	// Part of the wait is not enough; all of it gives room for one.
	clk.Add(time.Second)
	wantTooOften(t, h.Command(ctx, both, bridge.CommandOn), time.Second, "lamp")
	clk.Add(time.Second)
	if err := h.Command(ctx, both, bridge.CommandOn); err != nil {
		t.Fatalf("after the refill: %v", err)
	}
	if lamp.State().Value != bridge.On {
		t.Error("the lamp did not switch after the refill")
	}
	wantTooOften(t, h.Command(ctx, both, bridge.CommandOff), 2*time.Second, "lamp")

	// A long pause refills the bucket to its burst, not beyond.
	clk.Add(time.Hour)
	for i := range 2 {
		if err := h.Command(ctx, []string{"lamp"}, bridge.CommandOff); err != nil {
			t.Fatalf("after a pause, command %d: %v", i, err)
		}
	}
	wantTooOften(t, h.Command(ctx, []string{"lamp"}, bridge.CommandOff), 2*time.Second, "lamp")
}

// A refused command uses no switch's cap: two capped switches, one used
// up; the other keeps what it had.
func TestChangeCapIsAllOrNothing(t *testing.T) {
	a, b := &device{}, &device{}
	h, _, _ := cappedHub(t, map[string]bridge.Device{"a": a, "b": b},
		map[string]*bridge.ChangeLimit{"a": {Burst: 1, Per: time.Minute}, "b": {Burst: 2, Per: time.Minute}})
	ctx := context.Background()
	if err := h.Command(ctx, []string{"a", "b"}, bridge.CommandOn); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		wantTooOften(t, h.Command(ctx, []string{"a", "b"}, bridge.CommandOff), time.Minute, "a")
	}
	// b was charged once: it has one command left, then none.
	if err := h.Command(ctx, []string{"b"}, bridge.CommandOff); err != nil {
		t.Fatalf("b's second command: %v (a refused command used b's cap)", err)
	}
	wantTooOften(t, h.Command(ctx, []string{"b"}, bridge.CommandOn), time.Minute, "b")
	if a.calls.Load() != 1 || b.calls.Load() != 2 {
		t.Errorf("calls a %d b %d, want 1 and 2", a.calls.Load(), b.calls.Load())
	}
}

// The unsupported precheck comes first: a 501 uses no cap.
func TestUnsupportedCommandUsesNoCap(t *testing.T) {
	lamp := &device{}
	bell := &device{supports: map[bridge.Command]bool{bridge.CommandOn: true}}
	h, _, _ := cappedHub(t, map[string]bridge.Device{"lamp": lamp, "bell": bell},
		map[string]*bridge.ChangeLimit{"lamp": {Burst: 1, Per: time.Minute}})
	ctx := context.Background()
	for range 3 {
		if code := bridge.ErrorCode(h.Command(ctx, []string{"lamp", "bell"}, bridge.CommandOff)); code != bridge.ENOTIMPLEMENTED {
			t.Fatalf("off with the bell: %s, want %s", code, bridge.ENOTIMPLEMENTED)
		}
	}
	if err := h.Command(ctx, []string{"lamp"}, bridge.CommandOn); err != nil {
		t.Fatalf("lamp after refused 501s: %v", err)
	}
}

// The device's default applies when the config sets none; a configured
// cap, or a zero one (max_changes: off), replaces it.
func TestChangeCapDefaultsFromDevice(t *testing.T) {
	def := bridge.ChangeLimit{Burst: 1, Per: time.Second}
	h, _, _ := cappedHub(t, map[string]bridge.Device{
		"relay": &relayLike{limit: def}, "unlimited": &relayLike{limit: def}, "wider": &relayLike{limit: def}, "plain": &device{},
	}, map[string]*bridge.ChangeLimit{"unlimited": {}, "wider": {Burst: 3, Per: time.Second}})
	ctx := context.Background()
	for id, allowed := range map[string]int{"relay": 1, "wider": 3, "unlimited": 20, "plain": 20} {
		for i := range allowed {
			if err := h.Command(ctx, []string{id}, bridge.CommandOn); err != nil {
				t.Fatalf("%s command %d: %v", id, i, err)
			}
		}
		if id == "relay" || id == "wider" {
			wantTooOften(t, h.Command(ctx, []string{id}, bridge.CommandOn), time.Second, id)
		}
	}
	if got := (&bridge.Switch{Device: &device{}}).Limit(); got.On() {
		t.Errorf("a device without a default has cap %s", got)
	}
}

// A reload that keeps a switch keeps its bucket (a reload is no way around
// the cap); a switch that is removed is forgotten.
func TestChangeCapSurvivesReload(t *testing.T) {
	lamp := &device{}
	caps := map[string]*bridge.ChangeLimit{"lamp": {Burst: 1, Per: time.Minute}}
	h, clk, _ := cappedHub(t, map[string]bridge.Device{"lamp": lamp}, caps)
	ctx := context.Background()
	if err := h.Command(ctx, []string{"lamp"}, bridge.CommandOn); err != nil {
		t.Fatal(err)
	}
	loc := []bridge.Location{{ID: 1, Name: "Home", Switches: []string{"lamp"}}}
	sw := &bridge.Switch{ID: "lamp", Name: "Lamp", Driver: "test", LocationID: 1, Device: lamp, MaxChanges: caps["lamp"]}
	if err := h.Replace(loc, []*bridge.Switch{sw}); err != nil {
		t.Fatal(err)
	}
	wantTooOften(t, h.Command(ctx, []string{"lamp"}, bridge.CommandOff), time.Minute, "lamp")

	// Removed, then back: a fresh bucket.
	if err := h.Replace([]bridge.Location{{ID: 1, Name: "Home"}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := h.Replace(loc, []*bridge.Switch{sw}); err != nil {
		t.Fatal(err)
	}
	if err := h.Command(ctx, []string{"lamp"}, bridge.CommandOff); err != nil {
		t.Fatalf("after the switch was removed and added again: %v", err)
	}
	clk.Add(30 * time.Second)
	wantTooOften(t, h.Command(ctx, []string{"lamp"}, bridge.CommandOn), 30*time.Second, "lamp")
}

// Concurrent commands never get more than the burst through.
func TestChangeCapUnderConcurrency(t *testing.T) {
	lamp := &device{}
	h, _, _ := cappedHub(t, map[string]bridge.Device{"lamp": lamp},
		map[string]*bridge.ChangeLimit{"lamp": {Burst: 4, Per: time.Hour}})
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() { h.Command(context.Background(), []string{"lamp"}, bridge.CommandOn) })
	}
	wg.Wait()
	if n := lamp.calls.Load(); n != 4 {
		t.Errorf("%d of 32 concurrent commands reached the device, want 4", n)
	}
}
