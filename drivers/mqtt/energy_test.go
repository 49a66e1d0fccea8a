package mqtt

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/drivers"
	"github.com/switchbridge/switchbridge/drivers/mqtt/mqtttest"
)

// memoryEnergy is an energy store in memory that counts its writes.
type memoryEnergy struct {
	mu     sync.Mutex
	recs   map[string]bridge.EnergyRecord
	writes int
}

func (m *memoryEnergy) EnergyRecords(context.Context) ([]bridge.EnergyRecord, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []bridge.EnergyRecord
	for _, r := range m.recs {
		out = append(out, r)
	}
	return out, nil
}

func (m *memoryEnergy) SaveEnergy(_ context.Context, rs []bridge.EnergyRecord) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range rs {
		m.recs[r.SwitchID] = r
	}
	m.writes++
	return nil
}

// openMeters opens the drivers of cfg with store as the hub's database.
func openMeters(t *testing.T, cfg string, store any) (*drivers.Set, map[string]bridge.Device) {
	t.Helper()
	c, err := config.Load("test.yaml", config.Text(cfg))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	set, err := drivers.Build(c, drivers.Registry{Registration()}, drivers.Env{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sws, err := set.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	devs := map[string]bridge.Device{}
	for _, s := range sws {
		devs[s.ID] = s.Device
	}
	return set, devs
}

// TestEnergyReadings, on Mosquitto and the embedded broker: a Tasmota POW
// and a Shelly Plug S report as their firmware does; the totals follow,
// never go back when the device's counter resets (Tasmota's EnergyTotal
// 0, the Shelly's power-up), ignore a jump, and carry on from the store
// after the driver is closed and opened again.
func TestEnergyReadings(t *testing.T) {
	t.Run("mosquitto", func(t *testing.T) {
		b := mqtttest.StartMosquitto(t)
		energySuite(t, b.URL, "broker: "+b.URL)
	})
	t.Run("embedded", func(t *testing.T) {
		addr := fmt.Sprintf("127.0.0.1:%d", mqtttest.FreePort(t))
		energySuite(t, "tcp://"+addr, "broker: embedded\nlisten: "+addr)
	})
}

func energySuite(t *testing.T, url, section string) {
	cfg := hubConfig(section,
		"id: pow, name: POW, profile: tasmota, topic: pow",
		"id: plugs, name: Plug S, profile: shelly-gen1, device_id: shellyplug-s-7AECF4",
		"id: lamp, name: Lamp, profile: generic, state_topic: lamp/state, command_topic: lamp/set")
	store := &memoryEnergy{recs: map[string]bridge.EnergyRecord{}}
	set, devs := openMeters(t, cfg, store)
	pow := mqtttest.NewTasmota(t, url, mqtttest.TasmotaOptions{Topic: "pow"})
	plug := mqtttest.NewShellyGen1(t, url, "shellyplug-s-7AECF4", 1, false)

	reading := func(id string) *bridge.Reading { return devs[id].State().Reading }
	waitEnergy := func(id string, want float64, send func()) {
		t.Helper()
		// The simulators' first messages may race the hub's subscription:
		// send again until the reading is in.
		deadline := time.Now().Add(5 * time.Second)
		for {
			send()
			time.Sleep(20 * time.Millisecond)
			if r := reading(id); r != nil && math.Abs(r.Energy-want) < 1e-9 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: reading %+v, want energy %g", id, reading(id), want)
			}
		}
	}
	waitEnergy("pow", 10, func() { pow.Sensor(150, 230, 0.652, 10) })
	if r := reading("pow"); r.Power != 150 || r.Voltage != 230 || r.Current != 0.652 || r.Has != bridge.HasPower|bridge.HasVoltage|bridge.HasCurrent|bridge.HasEnergy {
		t.Errorf("pow reading %+v", r)
	}
	waitEnergy("pow", 10.002, func() { pow.Sensor(150, 230, 0.652, 10.002) })
	waitEnergy("pow", 10.003, func() { pow.Sensor(150, 230, 0.652, 0.001) }) // EnergyTotal 0, then 1 Wh
	pow.Sensor(150, 230, 0.652, 5000)                                        // a jump: ignored
	waitEnergy("pow", 10.004, func() { pow.Sensor(150, 230, 0.652, 5000.001) })

	waitEnergy("plugs", 0.01, func() { plug.Meter(0, 50.5, 600) }) // 600 Wmin
	if r := reading("plugs"); r.Power != 50.5 {
		t.Errorf("plug power %g, want 50.5", r.Power)
	}
	waitEnergy("plugs", 0.011, func() { plug.Meter(0, 50.5, 660) })
	waitEnergy("plugs", 0.0111, func() { plug.Meter(0, 50.5, 6) }) // powered up again: 6 Wmin since
	if reading("lamp") != nil {
		t.Errorf("a plug without a meter has a reading: %+v", reading("lamp"))
	}

	// The resets were written at once; closing writes the rest.
	if err := set.Close(); err != nil {
		t.Fatal(err)
	}
	// Closing writes the exact totals, each its own ceiling: a restart
	// adds nothing.
	store.mu.Lock()
	if r := store.recs["pow"]; math.Abs(r.Total-10.004) > 1e-9 || r.Device != 5000.001 || r.Ceiling != r.Total {
		t.Errorf("stored pow %+v, want total 10.004 at device 5000.001, the ceiling the total", r)
	}
	if r := store.recs["plugs"]; math.Abs(r.Total-0.0111) > 1e-9 || r.Ceiling != r.Total {
		t.Errorf("stored plug %+v, want total 0.0111, the ceiling the total", r)
	}
	store.mu.Unlock()

	// Opened again (a hub restart): the totals go on from the store, and a
	// device that rebooted meanwhile does not take them back.
	set2, devs2 := openMeters(t, cfg, store)
	defer set2.Close()
	devs = devs2
	waitEnergy("plugs", 0.0111+0.00005, func() { plug.Meter(0, 10, 3) }) // 3 Wmin: below the stored 6
	// pow's subscription is up once a message at the counter it had at
	// shutdown shows its stored total (the first may reach the broker
	// before the reopened driver subscribed, as waitEnergy resends for).
	waitEnergy("pow", 10.004, func() { pow.Sensor(150, 230, 0.652, 5000.001) })
	// One message: pow's total passes the ceiling written at shutdown, and
	// is shown held there until a record with a reserve is written (at
	// once: nothing of pow was written since the driver opened); the
	// write then shows it, without another message from the plug.
	pow.Sensor(150, 230, 0.652, 5000.002)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		r := reading("pow")
		if r != nil && r.Energy > 10.004+1e-9 {
			if math.Abs(r.Energy-10.005) > 1e-9 {
				t.Errorf("pow shows %g, want 10.005", r.Energy)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pow's total is not shown past the ceiling written at shutdown: %+v", r)
		}
	}
	store.mu.Lock()
	if r := store.recs["pow"]; math.Abs(r.Total-10.005) > 1e-9 || r.Ceiling < 10.005+bridge.EnergySlack-1e-9 {
		t.Errorf("stored pow %+v, want total 10.005 and a reserve above it", r)
	}
	store.mu.Unlock()
}
