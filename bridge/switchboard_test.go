package bridge_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
)

// device is a test device whose Do runs a function.
type device struct {
	mu       sync.Mutex
	value    bridge.Value
	calls    atomic.Int32
	supports map[bridge.Command]bool // nil: all
	do       func(ctx context.Context) error
}

func (d *device) State() bridge.State {
	d.mu.Lock()
	defer d.mu.Unlock()
	return bridge.State{Value: d.value, Available: true}
}

func (d *device) Supports(c bridge.Command) bool { return d.supports == nil || d.supports[c] }

func (d *device) Do(ctx context.Context, c bridge.Command) error {
	d.calls.Add(1)
	if d.do != nil {
		if err := d.do(ctx); err != nil {
			return err
		}
	}
	d.mu.Lock()
	d.value = c.Value()
	d.mu.Unlock()
	return nil
}

// readOnly is a Device without Commander.
type readOnly struct{}

func (readOnly) State() bridge.State { return bridge.State{Value: bridge.On} }

func newHub(t testing.TB, devs map[string]bridge.Device) *bridge.Switchboard {
	t.Helper()
	loc := bridge.Location{ID: 1, Name: "Home"}
	var sws []*bridge.Switch
	for id, d := range devs {
		loc.Switches = append(loc.Switches, id)
		sws = append(sws, &bridge.Switch{ID: id, Name: "name of " + id, Driver: "test", LocationID: 1, Device: d})
	}
	h, err := bridge.NewSwitchboard([]bridge.Location{loc}, sws, bridge.SwitchboardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestCommandFansOutConcurrently(t *testing.T) {
	// Every device waits until all have been called: run one after another,
	// the first would wait forever (until its deadline) and the command fail.
	const n = 10
	var arrived sync.WaitGroup
	arrived.Add(n)
	devs := map[string]bridge.Device{}
	for i := range n {
		devs[fmt.Sprint("s", i)] = &device{do: func(ctx context.Context) error {
			arrived.Done()
			done := make(chan struct{})
			go func() { arrived.Wait(); close(done) }()
			select {
			case <-done:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}}
	}
	h := newHub(t, devs)
	bridge.Configure(h, func(o *bridge.SwitchboardOptions) { o.Timeout = 10 * time.Second })
	ids := make([]string, 0, n)
	for id := range devs {
		ids = append(ids, id)
	}
	if err := h.Command(context.Background(), ids, bridge.CommandOn); err != nil {
		t.Fatalf("command: %v", err)
	}
	for id, d := range devs {
		if d.State().Value != bridge.On {
			t.Errorf("%s not on", id)
		}
	}
}

func TestCommandOutcomes(t *testing.T) {
	slow := func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
	cases := []struct {
		name     string
		devs     map[string]bridge.Device
		cmd      bridge.Command
		code     string
		failures map[string]string // id → reason
		called   bool              // whether any device may have been called
	}{
		{"all ok", map[string]bridge.Device{"a": &device{}, "b": &device{}}, bridge.CommandOn, "", nil, true},
		{"invalid command", map[string]bridge.Device{"a": &device{}}, "toggle", bridge.EINVALID, nil, false},
		{"one lacks the command", map[string]bridge.Device{"a": &device{}, "b": &device{supports: map[bridge.Command]bool{bridge.CommandOn: true}}},
			bridge.CommandOff, bridge.ENOTIMPLEMENTED, map[string]string{"b": bridge.FailUnsupported}, false},
		{"read-only device", map[string]bridge.Device{"a": &device{}, "r": readOnly{}}, bridge.CommandOn, bridge.ENOTIMPLEMENTED, map[string]string{"r": bridge.FailUnsupported}, false},
		{"one times out", map[string]bridge.Device{"a": &device{}, "b": &device{do: slow}}, bridge.CommandOn, bridge.EDEVICE, map[string]string{"b": bridge.FailTimeout}, true},
		{"one unavailable", map[string]bridge.Device{"a": &device{}, "b": &device{do: func(context.Context) error { return fmt.Errorf("plug: %w", bridge.ErrUnavailable) }}},
			bridge.CommandOn, bridge.EDEVICE, map[string]string{"b": bridge.FailUnavailable}, true},
		{"one fails", map[string]bridge.Device{"a": &device{}, "b": &device{do: func(context.Context) error { return errors.New("boom") }}},
			bridge.CommandOn, bridge.EDEVICE, map[string]string{"b": bridge.FailError}, true},
		{"driver says unsupported late", map[string]bridge.Device{"b": &device{do: func(context.Context) error { return fmt.Errorf("x: %w", errors.ErrUnsupported) }}},
			bridge.CommandOn, bridge.ENOTIMPLEMENTED, map[string]string{"b": bridge.FailUnsupported}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHub(t, c.devs)
			bridge.Configure(h, func(o *bridge.SwitchboardOptions) { o.Timeout = 50 * time.Millisecond })
			var observed atomic.Int32
			bridge.Configure(h, func(o *bridge.SwitchboardOptions) {
				o.Observe = func(*bridge.Switch, bridge.Command, string, time.Duration) { observed.Add(1) }
			})
			var ids []string
			for id := range c.devs {
				ids = append(ids, id)
			}
			err := h.Command(context.Background(), ids, c.cmd)
			if got := bridge.ErrorCode(err); got != c.code {
				t.Fatalf("code = %q (%v), want %q", got, err, c.code)
			}
			var e *bridge.Error
			if errors.As(err, &e) && c.failures != nil {
				if len(e.Failures) != len(c.failures) {
					t.Errorf("failures = %+v, want %v", e.Failures, c.failures)
				}
				for _, f := range e.Failures {
					if c.failures[f.SwitchID] != f.Reason {
						t.Errorf("failure %s: reason %s, want %s", f.SwitchID, f.Reason, c.failures[f.SwitchID])
					}
				}
			}
			calls := 0
			for _, d := range c.devs {
				if dd, ok := d.(*device); ok {
					calls += int(dd.calls.Load())
				}
			}
			if !c.called && calls > 0 {
				t.Errorf("%d devices were actuated; a refused command must touch none", calls)
			}
			if c.code != bridge.EINVALID && observed.Load() == 0 {
				t.Error("the observer was not told")
			}
		})
	}
}

func TestCommandSurvivesClientGoingAway(t *testing.T) {
	release := make(chan struct{})
	d := &device{do: func(ctx context.Context) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}}
	h := newHub(t, map[string]bridge.Device{"a": d})
	bridge.Configure(h, func(o *bridge.SwitchboardOptions) { o.Timeout = 5 * time.Second })
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- h.Command(ctx, []string{"a"}, bridge.CommandOn) }()
	for d.calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel() // the HTTP client hung up
	close(release)
	if err := <-errc; err != nil {
		t.Fatalf("command aborted by the caller's cancel: %v", err)
	}
	if d.State().Value != bridge.On {
		t.Error("switch did not finish its command")
	}
}

func TestStatesAndMissingSwitches(t *testing.T) {
	h := newHub(t, map[string]bridge.Device{"a": &device{value: bridge.On}, "b": &device{}})
	st, err := h.States([]string{"b", "a"})
	if err != nil {
		t.Fatal(err)
	}
	if st[0].Switch.ID != "b" || st[0].State.Value != "" || st[1].State.Value != bridge.On {
		t.Errorf("states = %+v", st)
	}
	if _, err := h.States([]string{"a", "gone"}); bridge.ErrorCode(err) != bridge.ENOTFOUND {
		t.Errorf("missing switch: %v, want not_found", err)
	}
}

func TestNewHubRejectsBadTables(t *testing.T) {
	dev := &device{}
	cases := map[string]struct {
		locs []bridge.Location
		sws  []*bridge.Switch
	}{
		"duplicate switch":   {[]bridge.Location{{ID: 1}}, []*bridge.Switch{{ID: "a", LocationID: 1, Device: dev}, {ID: "a", LocationID: 1, Device: dev}}},
		"unknown location":   {[]bridge.Location{{ID: 1}}, []*bridge.Switch{{ID: "a", LocationID: 2, Device: dev}}},
		"duplicate location": {[]bridge.Location{{ID: 1}, {ID: 1}}, nil},
		"no device":          {[]bridge.Location{{ID: 1}}, []*bridge.Switch{{ID: "a", LocationID: 1}}},
	}
	for name, c := range cases {
		if _, err := bridge.NewSwitchboard(c.locs, c.sws, bridge.SwitchboardOptions{}); bridge.ErrorCode(err) != bridge.EINVALID {
			t.Errorf("%s: %v, want invalid", name, err)
		}
	}
}

func TestParseCommandAndValue(t *testing.T) {
	for _, s := range []string{"on", "off"} {
		if _, err := bridge.ParseCommand(s); err != nil {
			t.Errorf("ParseCommand(%q): %v", s, err)
		}
		if _, err := bridge.ParseValue(s); err != nil {
			t.Errorf("ParseValue(%q): %v", s, err)
		}
	}
	for _, s := range []string{"", "ON", "toggle", "on ", "1"} {
		if _, err := bridge.ParseCommand(s); bridge.ErrorCode(err) != bridge.EINVALID {
			t.Errorf("ParseCommand(%q) = %v, want invalid", s, err)
		}
	}
}

func TestPersistGetsTheConfirmedSwitches(t *testing.T) {
	h := newHub(t, map[string]bridge.Device{
		"a":   &device{},
		"b":   &device{},
		"bad": &device{do: func(context.Context) error { return errors.New("boom") }},
	})
	var got map[string]time.Time
	var gotValue bridge.Value
	bridge.Configure(h, func(o *bridge.SwitchboardOptions) {
		o.Persist = func(v bridge.Value, at map[string]time.Time, _ []bridge.AuditRecord) error {
			got, gotValue = at, v
			return nil
		}
	})
	before := time.Now()
	h.Command(context.Background(), []string{"a", "bad", "b"}, bridge.CommandOff)
	if len(got) != 2 || got["a"].Before(before) || got["b"].IsZero() || gotValue != bridge.Off {
		t.Errorf("Persist(%s, %v), want a and b with their confirmation times: only what confirmed", gotValue, got)
	}
	got = nil
	h.Command(context.Background(), []string{"bad"}, bridge.CommandOn)
	if got != nil {
		t.Errorf("Persist called with %v when nothing confirmed", got)
	}
	// A value that cannot be stored is not answered as a success.
	bridge.Configure(h, func(o *bridge.SwitchboardOptions) {
		o.Persist = func(bridge.Value, map[string]time.Time, []bridge.AuditRecord) error { return errors.New("disk full") }
	})
	if err := h.Command(context.Background(), []string{"a"}, bridge.CommandOn); bridge.ErrorCode(err) != bridge.EUNAVAILABLE {
		t.Errorf("command whose state could not be stored: %v, want unavailable", err)
	}
}

// TestPersistFailureSaysWhatSwitched: when storing fails after the devices
// confirmed, the error names the switches that did switch and the ones
// that failed, in a message on one line (it is a 503's body and a log line).
func TestPersistFailureSaysWhatSwitched(t *testing.T) {
	h := newHub(t, map[string]bridge.Device{
		"a":   &device{},
		"bad": &device{do: func(context.Context) error { return errors.New("boom") }},
	})
	bridge.Configure(h, func(o *bridge.SwitchboardOptions) {
		o.Persist = func(bridge.Value, map[string]time.Time, []bridge.AuditRecord) error {
			return errors.Join(errors.New("journal: no space left on device"), errors.New("database: database or disk is full"))
		}
	})
	err := h.Command(context.Background(), []string{"a", "bad"}, bridge.CommandOn)
	var e *bridge.Error
	if !errors.As(err, &e) || e.Code != bridge.EUNAVAILABLE {
		t.Fatalf("err = %v, want unavailable", err)
	}
	if strings.Contains(e.Message, "\n") || !strings.Contains(e.Message, "no space left on device") || !strings.Contains(e.Message, "disk is full") {
		t.Errorf("message %q: want both causes on one line", e.Message)
	}
	if len(e.NotStored) != 1 || e.NotStored[0] != "a" {
		t.Errorf("NotStored = %v, want [a]: it switched", e.NotStored)
	}
	if len(e.Failures) != 1 || e.Failures[0].SwitchID != "bad" {
		t.Errorf("Failures = %+v, want bad", e.Failures)
	}
}
