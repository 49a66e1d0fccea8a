package mqtt

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/drivers/mqtt/mqtttest"
)

// simulator is one firmware's simulated device: start starts it on a
// broker, and keys are the keys (besides profile) of a switch that
// reaches its first relay. The contract test runs the device; the broker
// rules and fuzzing tests take a registered profile's plug from keys.
type simulator struct {
	keys  string
	start func(t *testing.T, broker string) mqtttest.Plug
}

// simulators holds one simulator per registered profile: the contract test
// runs each profile against its own, and fails for a profile that has none.
// A simulator lives in mqtttest and sends what the firmware sends
// (as the firmware documents it), not what the driver expects.
var simulators = map[string]simulator{
	"tasmota": {"topic: contract", func(t *testing.T, url string) mqtttest.Plug {
		return mqtttest.NewTasmota(t, url, mqtttest.TasmotaOptions{Topic: "contract"})
	}},
	"shelly-gen1": {"device_id: shelly1-c0ffee", func(t *testing.T, url string) mqtttest.Plug {
		return mqtttest.NewShellyGen1(t, url, "shelly1-c0ffee", 1, true)
	}},
	"shelly-rpc": {"prefix: shellyplus1-c0ffee", func(t *testing.T, url string) mqtttest.Plug {
		return mqtttest.NewShellyRPC(t, url, "shellyplus1-c0ffee", 1, false)
	}},
	"zigbee2mqtt": {"base_topic: contract, friendly_name: hall/lamp", func(t *testing.T, url string) mqtttest.Plug {
		return mqtttest.NewZ2M(t, url, "contract", mqtttest.Z2MAvailabilityJSON, mqtttest.Z2MDevice{Name: "hall/lamp"})
	}},
	"esphome": {"prefix: contract, object_id: relay", func(t *testing.T, url string) mqtttest.Plug {
		return mqtttest.NewESPHome(t, url, "contract", "relay")
	}},
	// Not under contract/: ESPHome's prefix contract has its availability
	// on contract/status, and its retained "offline" once reached the
	// broker after this plug's "online" (1 in 40 runs under load).
	"generic": {"command_topic: generic/set, state_topic: generic/state, availability_topic: generic/status", func(t *testing.T, url string) mqtttest.Plug {
		return mqtttest.NewGeneric(t, url, mqtttest.GenericOptions{CommandTopic: "generic/set", StateTopic: "generic/state",
			Retain: true, AvailabilityTopic: "generic/status"})
	}},
}

// TestProfilesHaveSimulators fails for a registered profile that the
// contract test cannot run, and for a simulator of no profile.
func TestProfilesHaveSimulators(t *testing.T) {
	if len(profiles) == 0 {
		t.Fatal("no profile is registered")
	}
	for _, p := range profiles {
		if _, ok := simulators[p.name]; !ok {
			t.Errorf("profile %s has no simulator: add one for its firmware to mqtttest, sending what the firmware documents it sends, and list it in simulators (contract_test.go)", p.name)
		}
	}
	for name := range simulators {
		if _, ok := lookupProfile(name); !ok {
			t.Errorf("simulators lists %s, which is not a registered profile", name)
		}
	}
}

// TestProfileContract runs every registered profile against its simulator
// on a real Mosquitto: the hub learns the state the device has when it
// starts, switches it off and on, follows a change made at the device,
// sees the device go offline through its last will, and after the device
// restarts learns the state it came back with and commands it again.
func TestProfileContract(t *testing.T) {
	b := mqtttest.StartMosquitto(t)
	for _, p := range profiles {
		t.Run(p.name, func(t *testing.T) {
			sim, ok := simulators[p.name]
			if !ok {
				t.Fatalf("profile %s has no simulator (see TestProfilesHaveSimulators)", p.name)
			}
			dev, opts := sim.start(t, b.URL), sim.keys
			dev.Set(true) // switched on at the device before the hub starts
			h := startHub(t, hubConfig("broker: "+b.URL+"\nclient_id: contract-"+p.name+"\nconfirm_timeout: 2s",
				"id: plug, name: Plug, profile: "+p.name+", "+opts))
			const id = "plug"

			// List and initial state.
			if !slices.ContainsFunc(h.Switches(), func(s *bridge.Switch) bool { return s.ID == id }) {
				t.Fatalf("the hub does not list the switch")
			}
			expect(t, h, "the state the device had at start-up", true, bridge.On)

			// Off, then on, each confirmed by the device.
			for _, c := range []struct {
				cmd  bridge.Command
				want bridge.Value
			}{{bridge.CommandOff, bridge.Off}, {bridge.CommandOn, bridge.On}} {
				if err := command(h, id, c.cmd); err != nil {
					t.Fatalf("%s: %v", c.want, err)
				}
				if dev.On() != (c.want == bridge.On) {
					t.Fatalf("%s confirmed, but the device is on=%v", c.want, dev.On())
				}
				expect(t, h, "the commanded "+string(c.want), true, c.want)
			}

			// A change made at the device.
			dev.Set(false)
			expect(t, h, "a change made at the device", true, bridge.Off)

			// Offline: the broker publishes the device's last will.
			dev.Crash()
			expect(t, h, "the device's last will", false, bridge.Off)
			err := command(h, id, bridge.CommandOn)
			if r := failures(err)[id]; r != bridge.FailUnavailable {
				t.Fatalf("a command to an offline device: reason %q, want %q (err %v)", r, bridge.FailUnavailable, err)
			}

			// Restart: switched on by hand while away, which it could not
			// report; it comes back and the hub learns that.
			dev.Set(true)
			dev.Start()
			expect(t, h, "the state the device came back with", true, bridge.On)
			if err := command(h, id, bridge.CommandOff); err != nil {
				t.Fatalf("off after the restart: %v", err)
			}
			if dev.On() {
				t.Fatal("off confirmed after the restart, but the device is on")
			}
		})
	}
}

// command runs cmd on one switch within a bounded time: longer than any
// confirm_timeout a test here sets (20 s at most), so that the plug's
// deadline ends a command, not this one.
func command(h *testHub, id string, cmd bridge.Command) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return h.Command(ctx, []string{id}, cmd)
}

// expect waits until the switch plug is (un)available with value.
func expect(t *testing.T, h *testHub, what string, available bool, value bridge.Value) {
	t.Helper()
	var st bridge.State
	deadline := time.Now().Add(5 * time.Second)
	for {
		st = h.state(t, "plug")
		if st.Available == available && st.Value == value {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the switch is %+v after 5s, want available=%v value %s", what, st, available, value)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
