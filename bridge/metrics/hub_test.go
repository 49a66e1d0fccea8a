package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/metrics"
)

// plug is a fake device: a cached state, a scripted Do and, when only is
// set, support for that one command.
type plug struct {
	mu   sync.Mutex
	st   bridge.State
	only bridge.Command
	do   func(ctx context.Context, cmd bridge.Command) error
}

func (p *plug) State() bridge.State {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.st
}

func (p *plug) set(st bridge.State) {
	p.mu.Lock()
	p.st = st
	p.mu.Unlock()
}

func (p *plug) Supports(cmd bridge.Command) bool { return p.only == "" || p.only == cmd }

func (p *plug) Do(ctx context.Context, cmd bridge.Command) error {
	if p.do != nil {
		if err := p.do(ctx, cmd); err != nil {
			return err
		}
	}
	p.set(bridge.State{Value: cmd.Value(), Available: true, Updated: time.Now()})
	return nil
}

var (
	_ bridge.Device           = (*plug)(nil)
	_ bridge.Commander        = (*plug)(nil)
	_ bridge.CommandSupporter = (*plug)(nil)
)

// testHub is a hub of five switches in two locations, one per outcome.
type testHub struct {
	*bridge.Switchboard
	locs                            []bridge.Location
	lamp, pump, fan, heater, bell   *plug
	lampSw, pumpSw, fanSw, heaterSw *bridge.Switch
	bellSw                          *bridge.Switch
}

func mustTestHub(tb testing.TB) *testHub {
	tb.Helper()
	h := &testHub{
		lamp: &plug{st: bridge.State{Value: bridge.On, Available: true}},
		pump: &plug{st: bridge.State{Value: bridge.Off}, do: func(context.Context, bridge.Command) error {
			return fmt.Errorf("pump: %w", bridge.ErrUnavailable)
		}},
		fan: &plug{st: bridge.State{Available: true}, do: func(ctx context.Context, _ bridge.Command) error {
			<-ctx.Done()
			return ctx.Err()
		}},
		heater: &plug{st: bridge.State{Value: bridge.Off, Available: true}, do: func(context.Context, bridge.Command) error {
			return errors.New("relay stuck")
		}},
		bell: &plug{st: bridge.State{Value: bridge.On, Available: true}, only: bridge.CommandOn},
	}
	h.locs = []bridge.Location{
		{ID: 1, Name: "Hall", Switches: []string{"lamp", "heater", "bell"}},
		{ID: 2, Name: "Garden", Switches: []string{"pump", "fan"}},
	}
	h.lampSw = &bridge.Switch{ID: "lamp", Name: "Lamp", Driver: "gpio", LocationID: 1, Device: h.lamp}
	h.heaterSw = &bridge.Switch{ID: "heater", Name: "Heater", Driver: "mqtt", LocationID: 1, Device: h.heater}
	h.bellSw = &bridge.Switch{ID: "bell", Name: "Bell", Driver: "gpio", LocationID: 1, Device: h.bell}
	h.pumpSw = &bridge.Switch{ID: "pump", Name: "Pump", Driver: "mqtt", LocationID: 2, Device: h.pump}
	h.fanSw = &bridge.Switch{ID: "fan", Name: "Fan", Driver: "mqtt", LocationID: 2, Device: h.fan}
	hub, err := bridge.NewSwitchboard(h.locs, []*bridge.Switch{h.lampSw, h.heaterSw, h.bellSw, h.pumpSw, h.fanSw}, bridge.SwitchboardOptions{Timeout: 30 * time.Millisecond})
	if err != nil {
		tb.Fatal(err)
	}
	h.Switchboard = hub
	return h
}

// observedBy rebuilds the switchboard over the same switches with obs
// told of every command.
func (h *testHub) observedBy(obs bridge.CommandObserver) {
	o := h.Switchboard.Options()
	o.Observe = obs
	sb, err := bridge.NewSwitchboard(h.locs, h.Switchboard.Switches(), o)
	if err != nil {
		panic(err)
	}
	h.Switchboard = sb
}

// runScript drives one command per outcome through the hub.
func runScript(tb testing.TB, h *testHub) {
	tb.Helper()
	ctx := context.Background()
	if err := h.Command(ctx, []string{"lamp"}, bridge.CommandOn); err != nil {
		tb.Fatalf("lamp on: %v", err)
	}
	err := h.Command(ctx, []string{"lamp", "pump", "fan", "heater"}, bridge.CommandOff)
	if got := bridge.ErrorCode(err); got != bridge.EDEVICE {
		tb.Fatalf("off on a failing set: code %q (%v), want %q", got, err, bridge.EDEVICE)
	}
	err = h.Command(ctx, []string{"lamp", "bell"}, bridge.CommandOff)
	if got := bridge.ErrorCode(err); got != bridge.ENOTIMPLEMENTED {
		tb.Fatalf("off with the bell: code %q (%v), want %q", got, err, bridge.ENOTIMPLEMENTED)
	}
}

func TestCommandOutcomes(t *testing.T) {
	h := mustTestHub(t)
	m := metrics.New(metrics.Options{Switches: h.Switchboard})
	h.observedBy(m.ObserveCommand)
	runScript(t, h)

	want := `
# HELP switchbridge_switch_commands_total Switches' parts in commands (a command to three switches counts three), by switch and outcome (ok, unsupported, rate_limited, timeout, unavailable, failed).
# TYPE switchbridge_switch_commands_total counter
switchbridge_switch_commands_total{outcome="failed",switch="heater"} 1
switchbridge_switch_commands_total{outcome="ok",switch="lamp"} 2
switchbridge_switch_commands_total{outcome="timeout",switch="fan"} 1
switchbridge_switch_commands_total{outcome="unavailable",switch="pump"} 1
switchbridge_switch_commands_total{outcome="unsupported",switch="bell"} 1
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "switchbridge_switch_commands_total"); err != nil {
		t.Error(err)
	}

	// The unsupported precheck is counted above but not timed.
	hists := histograms(t, m, "switchbridge_switch_command_duration_seconds")
	for key, n := range map[string]uint64{"gpio/on": 1, "gpio/off": 1, "mqtt/off": 3} {
		if got := hists[key].GetSampleCount(); got != n {
			t.Errorf("command_duration_seconds{%s} count = %d, want %d", key, got, n)
		}
	}
	if len(hists) != 3 {
		t.Errorf("command_duration_seconds has %d series, want 3: %v", len(hists), keys(hists))
	}
	// The timed-out fan alone waited out the 30ms deadline.
	if sum := hists["mqtt/off"].GetSampleSum(); sum < 0.03 {
		t.Errorf("mqtt off duration sum = %gs, want at least the 30ms deadline", sum)
	}
}

func TestSwitchGaugesFollowTheHub(t *testing.T) {
	h := mustTestHub(t)
	m := metrics.New(metrics.Options{Switches: h.Switchboard})

	want := `
# HELP switchbridge_switch_available Whether the switch's device is reachable (1), or unreachable or not heard from since the hub started (0). location is the location's id.
# TYPE switchbridge_switch_available gauge
switchbridge_switch_available{location="1",switch="bell"} 1
switchbridge_switch_available{location="1",switch="heater"} 1
switchbridge_switch_available{location="1",switch="lamp"} 1
switchbridge_switch_available{location="2",switch="fan"} 1
switchbridge_switch_available{location="2",switch="pump"} 0
# HELP switchbridge_switch_state Whether the switch is on (1) or off (0); absent while its value is unknown. location is the location's id.
# TYPE switchbridge_switch_state gauge
switchbridge_switch_state{location="1",switch="bell"} 1
switchbridge_switch_state{location="1",switch="heater"} 0
switchbridge_switch_state{location="1",switch="lamp"} 1
switchbridge_switch_state{location="2",switch="pump"} 0
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want),
		"switchbridge_switch_state", "switchbridge_switch_available"); err != nil {
		t.Error(err)
	}

	// A state report is visible at the next scrape with nothing else to do.
	h.fan.set(bridge.State{Value: bridge.On, Available: true})
	h.lamp.set(bridge.State{Value: bridge.Off, Available: false})
	want = `
# HELP switchbridge_switch_state Whether the switch is on (1) or off (0); absent while its value is unknown. location is the location's id.
# TYPE switchbridge_switch_state gauge
switchbridge_switch_state{location="1",switch="bell"} 1
switchbridge_switch_state{location="1",switch="heater"} 0
switchbridge_switch_state{location="1",switch="lamp"} 0
switchbridge_switch_state{location="2",switch="fan"} 1
switchbridge_switch_state{location="2",switch="pump"} 0
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "switchbridge_switch_state"); err != nil {
		t.Error(err)
	}
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(`
# HELP switchbridge_switch_available Whether the switch's device is reachable (1), or unreachable or not heard from since the hub started (0). location is the location's id.
# TYPE switchbridge_switch_available gauge
switchbridge_switch_available{location="1",switch="bell"} 1
switchbridge_switch_available{location="1",switch="heater"} 1
switchbridge_switch_available{location="1",switch="lamp"} 0
switchbridge_switch_available{location="2",switch="fan"} 1
switchbridge_switch_available{location="2",switch="pump"} 0
`), "switchbridge_switch_available"); err != nil {
		t.Error(err)
	}

	// last_seen: a series only for a device heard from, in seconds to the
	// fraction, built from the cache at scrape time.
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(""), "switchbridge_switch_last_seen_timestamp_seconds"); err != nil {
		t.Errorf("a device never heard from has a last_seen series: %v", err)
	}
	h.fan.set(bridge.State{Value: bridge.On, Available: true, LastSeen: time.Unix(1700000000, 250e6)})
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(`
# HELP switchbridge_switch_last_seen_timestamp_seconds When the hub last heard from the switch's device, in seconds since the epoch; absent while never. location is the location's id.
# TYPE switchbridge_switch_last_seen_timestamp_seconds gauge
switchbridge_switch_last_seen_timestamp_seconds{location="2",switch="fan"} 1.70000000025e+09
`), "switchbridge_switch_last_seen_timestamp_seconds"); err != nil {
		t.Error(err)
	}

	// Renaming a location keeps its switches' series: their location label
	// is its id, and the name is in switchbridge_location_info.
	renamed := slices.Clone(h.locs)
	renamed[0].Name = "Hallway"
	if err := h.Replace(renamed, []*bridge.Switch{h.lampSw, h.heaterSw, h.bellSw, h.pumpSw, h.fanSw}); err != nil {
		t.Fatal(err)
	}
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(`
# HELP switchbridge_location_info Each configured location, always 1: its id (location, as on the switch metrics) and its name.
# TYPE switchbridge_location_info gauge
switchbridge_location_info{location="1",name="Hallway"} 1
switchbridge_location_info{location="2",name="Garden"} 1
`), "switchbridge_location_info"); err != nil {
		t.Error(err)
	}
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(`
# HELP switchbridge_switch_state Whether the switch is on (1) or off (0); absent while its value is unknown. location is the location's id.
# TYPE switchbridge_switch_state gauge
switchbridge_switch_state{location="1",switch="bell"} 1
switchbridge_switch_state{location="1",switch="heater"} 0
switchbridge_switch_state{location="1",switch="lamp"} 0
switchbridge_switch_state{location="2",switch="fan"} 1
switchbridge_switch_state{location="2",switch="pump"} 0
`), "switchbridge_switch_state"); err != nil {
		t.Errorf("after renaming a location: %v", err)
	}

	// A reload that drops a switch drops its series.
	if err := h.Replace(h.locs, []*bridge.Switch{h.lampSw, h.fanSw}); err != nil {
		t.Fatal(err)
	}
	if n := countSeries(t, m, "switchbridge_switch_available"); n != 2 {
		t.Errorf("after reload to 2 switches: %d availability series, want 2", n)
	}
	if n := countSeries(t, m, "switchbridge_switch_state"); n != 2 {
		t.Errorf("after reload to 2 switches: %d state series, want 2", n)
	}
}

// histograms returns a histogram family's series keyed "driver/command".
func histograms(tb testing.TB, m *metrics.Metrics, name string) map[string]*dto.Histogram {
	tb.Helper()
	out := map[string]*dto.Histogram{}
	for _, mt := range family(tb, m, name).GetMetric() {
		l := labels(mt)
		out[l["driver"]+"/"+l["command"]] = mt.GetHistogram()
	}
	return out
}

func family(tb testing.TB, m *metrics.Metrics, name string) *dto.MetricFamily {
	tb.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		tb.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf
		}
	}
	return &dto.MetricFamily{}
}

func countSeries(tb testing.TB, m *metrics.Metrics, name string) int {
	tb.Helper()
	n, err := testutil.GatherAndCount(m.Registry(), name)
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, lp := range m.GetLabel() {
		out[lp.GetName()] = lp.GetValue()
	}
	return out
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
