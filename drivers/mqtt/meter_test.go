package mqtt

import (
	"math"
	"testing"

	"github.com/switchbridge/switchbridge/bridge"
)

// TestMeterParsers reads each firmware's readings as its documentation
// shows them.
func TestMeterParsers(t *testing.T) {
	tasmotaSensor := []byte(`{"Time":"2024-01-01T12:00:00","ENERGY":{"TotalStartTime":"2023-01-01T00:00:00","Total":12.345,"Yesterday":1.2,"Today":0.5,"Period":3,"Power":150,"ApparentPower":160,"ReactivePower":20,"Factor":0.94,"Voltage":230,"Current":0.652}}`)
	tasmotaStatus10 := []byte(`{"StatusSNS":{"Time":"2024-01-01T12:00:00","ENERGY":{"TotalStartTime":"2023-01-01T00:00:00","Total":12.346,"Yesterday":1.2,"Today":0.5,"Power":151,"Voltage":231,"Current":0.653}}}`)
	tasmotaDual := []byte(`{"ENERGY":{"Total":[1.5,2.5],"Power":[10,20],"Voltage":230,"Current":[0.1,0.2]}}`)
	tests := []struct {
		name string
		got  *meterReport
		want *meterReport
	}{
		{"tasmota SENSOR", parseTasmotaEnergy(tasmotaSensor, 0), &meterReport{power: 150, voltage: 230, current: 0.652, energy: 12.345, has: 15}},
		{"tasmota STATUS10", parseTasmotaEnergy(tasmotaStatus10, 1), &meterReport{power: 151, voltage: 231, current: 0.653, energy: 12.346, has: 15}},
		{"tasmota second channel", parseTasmotaEnergy(tasmotaDual, 2), &meterReport{power: 20, voltage: 230, current: 0.2, energy: 2.5, has: 15}},
		{"tasmota channel past the arrays", parseTasmotaEnergy(tasmotaDual, 5), &meterReport{voltage: 230, has: bridge.HasVoltage}},
		{"tasmota without ENERGY", parseTasmotaEnergy([]byte(`{"Time":"x","AM2301":{"Temperature":20}}`), 0), nil},
		{"tasmota negative total", parseTasmotaEnergy([]byte(`{"ENERGY":{"Total":-3}}`), 0), nil},
		{"shelly status", parseShellyMeter([]byte(`{"id":0,"source":"init","output":true,"apower":8.9,"voltage":237.5,"current":0.068,"aenergy":{"total":6.532,"by_minute":[45.3,45.3,45.3],"minute_ts":1654511040},"temperature":{"tC":23.5,"tF":74.4}}`)), &meterReport{power: 8.9, voltage: 237.5, current: 0.068, energy: 0.006532, has: 15}},
		{"shelly partial", parseShellyMeter([]byte(`{"id":0,"apower":3.5}`)), &meterReport{power: 3.5, has: bridge.HasPower}},
		{"shelly none", parseShellyMeter([]byte(`{"id":0,"output":true}`)), nil},
		{"z2m", parseZ2MMeter([]byte(`{"state":"ON","power":45.2,"voltage":229,"current":0.21,"energy":3.41,"linkquality":120}`), ""), &meterReport{power: 45.2, voltage: 229, current: 0.21, energy: 3.41, has: 15}},
		{"z2m endpoint", parseZ2MMeter([]byte(`{"state_l1":"ON","power_l1":5,"power_l2":7,"energy":1}`), "l2"), &meterReport{power: 7, energy: 1, has: bridge.HasPower | bridge.HasEnergy}},
		{"z2m string", parseZ2MMeter([]byte(`{"power":"45"}`), ""), nil},
		{"not json", parseZ2MMeter([]byte(`power`), ""), nil},
	}
	for _, tt := range tests {
		if tt.want == nil || tt.got == nil {
			if tt.want != tt.got {
				t.Errorf("%s: got %v, want %v", tt.name, tt.got, tt.want)
			}
			continue
		}
		if tt.got.has != tt.want.has || !near(tt.got.power, tt.want.power) || !near(tt.got.voltage, tt.want.voltage) ||
			!near(tt.got.current, tt.want.current) || !near(tt.got.energy, tt.want.energy) {
			t.Errorf("%s: got %v has %b, want %v has %b", tt.name, tt.got, tt.got.has, tt.want, tt.want.has)
		}
	}

	// Shelly Gen1: plain numbers, energy in watt-minutes.
	if r := numberParser(bridge.HasEnergy, 1.0/60000)([]byte("6000")); r.meter == nil || !near(r.meter.energy, 0.1) {
		t.Errorf("shelly gen1 energy 6000 Wmin: %+v, want 0.1 kWh", r.meter)
	}
	for _, bad := range []string{"", "NaN", "Inf", "1e400", "abc", "-5"} {
		if r := numberParser(bridge.HasEnergy, 1)([]byte(bad)); r.meter != nil {
			t.Errorf("energy %q: %+v, want nothing", bad, r.meter)
		}
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
