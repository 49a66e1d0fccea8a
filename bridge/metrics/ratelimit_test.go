package metrics_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/metrics"
)

// A command refused by a switch's change cap is counted as rate_limited
// and, like the unsupported precheck, not timed: no device was touched.
func TestRateLimitedCommandsCountedNotTimed(t *testing.T) {
	lamp := &plug{st: bridge.State{Value: bridge.Off, Available: true}}
	m := metrics.New(metrics.Options{})
	hub, err := bridge.NewSwitchboard([]bridge.Location{{ID: 1, Name: "Hall", Switches: []string{"lamp"}}},
		[]*bridge.Switch{{ID: "lamp", Name: "Lamp", Driver: "gpio", LocationID: 1, Device: lamp,
			MaxChanges: &bridge.ChangeLimit{Burst: 1, Per: time.Hour}}}, bridge.SwitchboardOptions{Observe: m.ObserveCommand})
	if err != nil {
		t.Fatal(err)
	}
	m.WatchSwitches(hub)
	for range 3 {
		hub.Command(context.Background(), []string{"lamp"}, bridge.CommandOn)
	}
	want := `
# HELP switchbridge_switch_commands_total Switches' parts in commands (a command to three switches counts three), by switch and outcome (ok, unsupported, rate_limited, timeout, unavailable, failed).
# TYPE switchbridge_switch_commands_total counter
switchbridge_switch_commands_total{outcome="ok",switch="lamp"} 1
switchbridge_switch_commands_total{outcome="rate_limited",switch="lamp"} 2
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "switchbridge_switch_commands_total"); err != nil {
		t.Error(err)
	}
	if got := histograms(t, m, "switchbridge_switch_command_duration_seconds")["gpio/on"].GetSampleCount(); got != 1 {
		t.Errorf("command_duration_seconds{gpio/on} count = %d, want 1 (the command that ran)", got)
	}
}
