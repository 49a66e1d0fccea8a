package metrics_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/metrics"
)

// meterDevice is a device whose state is given, reading included.
type meterDevice struct {
	st      bridge.State
	profile string
}

func (d meterDevice) State() bridge.State { return d.st }
func (d meterDevice) Profile() string     { return d.profile }

type fixedSwitches struct {
	sws  []*bridge.Switch
	locs []*bridge.Location
}

func (f fixedSwitches) Switches() []*bridge.Switch    { return f.sws }
func (f fixedSwitches) Locations() []*bridge.Location { return f.locs }

// TestSwitchReadings: power, voltage and current while fresh, the energy
// total always (a counter), nothing for a device without a meter, and the
// info series for every switch; the whole passes the linter.
func TestSwitchReadings(t *testing.T) {
	now := time.Now()
	fresh := &bridge.Reading{Power: 151.5, Voltage: 230, Current: 0.66, Energy: 12.25, Has: bridge.HasPower | bridge.HasVoltage | bridge.HasCurrent | bridge.HasEnergy, At: now}
	stale := &bridge.Reading{Power: 40, Energy: 3.5, Has: bridge.HasPower | bridge.HasEnergy, At: now.Add(-bridge.ReadingStaleAfter - time.Minute)}
	src := fixedSwitches{
		locs: []*bridge.Location{{ID: 1, Name: "Home"}},
		sws: []*bridge.Switch{
			{ID: "heater", Name: "Heater", Driver: "mqtt", LocationID: 1, Device: meterDevice{bridge.State{Value: bridge.On, Available: true, Reading: fresh}, "tasmota"}},
			{ID: "lamp", Name: "Lamp", Driver: "mqtt", LocationID: 1, Device: meterDevice{bridge.State{Value: bridge.Off, Available: true, Reading: stale}, "shelly-gen1"}},
			{ID: "relay", Name: "Relay", Driver: "gpio", LocationID: 1, Device: meterDevice{st: bridge.State{Value: bridge.Off, Available: true}}},
		},
	}
	m := metrics.New(metrics.Options{Switches: src})
	want := `
# HELP switchbridge_switch_current_amperes The current the switch's device last measured; absent where not reported and while stale.
# TYPE switchbridge_switch_current_amperes gauge
switchbridge_switch_current_amperes{switch="heater"} 0.66
# HELP switchbridge_switch_energy_kwh_total The hub's running total of the energy the switch's device measured, in kWh: it never decreases, across device resets and hub restarts.
# TYPE switchbridge_switch_energy_kwh_total counter
switchbridge_switch_energy_kwh_total{switch="heater"} 12.25
switchbridge_switch_energy_kwh_total{switch="lamp"} 3.5
# HELP switchbridge_switch_info Each configured switch, always 1: its name, location id, driver and profile (empty for a driver without profiles), for joins.
# TYPE switchbridge_switch_info gauge
switchbridge_switch_info{driver="gpio",location="1",name="Relay",profile="",switch="relay"} 1
switchbridge_switch_info{driver="mqtt",location="1",name="Heater",profile="tasmota",switch="heater"} 1
switchbridge_switch_info{driver="mqtt",location="1",name="Lamp",profile="shelly-gen1",switch="lamp"} 1
# HELP switchbridge_switch_power_watts What the switch's device last measured it drawing, in watts; absent for a device without a meter and while the reading is stale.
# TYPE switchbridge_switch_power_watts gauge
switchbridge_switch_power_watts{switch="heater"} 151.5
# HELP switchbridge_switch_voltage_volts The voltage the switch's device last measured; absent where not reported and while stale.
# TYPE switchbridge_switch_voltage_volts gauge
switchbridge_switch_voltage_volts{switch="heater"} 230
`
	names := []string{"switchbridge_switch_current_amperes", "switchbridge_switch_energy_kwh_total", "switchbridge_switch_info", "switchbridge_switch_power_watts", "switchbridge_switch_voltage_volts"}
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	problems, err := testutil.GatherAndLint(m.Registry())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "switchbridge_switch_") {
			t.Errorf("lint: %s: %s", p.Metric, p.Text)
		}
	}
}
