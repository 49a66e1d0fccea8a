package daemontest

// The leak test's deployments: their switches, their simulated plugs and
// what changes the switches no grant of the script covers. A single box
// (bridge/daemon) and a platform with a hub (cmd/switchbridge) build their
// sides from these, and differ only in how they run the hub and how they
// watch it take the changes in.

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/drivers/mqtt/mqtttest"
)

// LeakLocations is the locations of a side, as YAML list items for a
// config's locations key: LeakGranted in location home ("Home") and, with
// extras, LeakExtra among them and (garage) in location garage. The plugs'
// topics begin with prefix, so that two sides share a broker.
func LeakLocations(prefix string, home, garage int64, extras bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  - id: %d\n    name: Home\n    switches:\n", home)
	sw := func(add bool, format string, args ...any) {
		if add {
			fmt.Fprintf(&b, "      - {"+format+"}\n", args...)
		}
	}
	sw(true, "id: kitchen, name: Kitchen light, driver: virtual, initial: off")
	sw(extras, "id: attic, name: Attic heater, driver: mqtt, profile: tasmota, topic: %s-attic", prefix)
	sw(true, "id: hall, name: Hall lamp, driver: virtual, initial: on")
	sw(extras, "id: porch, name: Porch light, driver: mqtt, profile: tasmota, topic: %s-porch", prefix)
	sw(extras, "id: cellar, name: Cellar fan, driver: virtual, initial: on")
	sw(true, "id: lamp, name: Desk lamp, driver: mqtt, profile: tasmota, topic: %s-lamp", prefix)
	sw(extras, "id: shed, name: Shed pump, driver: mqtt, profile: tasmota, topic: %s-shed", prefix)
	sw(extras, "id: bell, name: Door bell, driver: virtual, commands: [on]")
	sw(extras, "id: broken, name: Broken plug, driver: virtual, fail: true")
	if extras {
		fmt.Fprintf(&b, "  - id: %d\n    name: Garage\n    switches:\n", garage)
		sw(true, "id: garage, name: Garage door, driver: virtual, initial: off")
	}
	return b.String()
}

// LeakServer is the server keys both sides share, as indented lines: a
// rate limit the script uses up within an hour's window, and readings
// alone making an event once an hour, so that only the lamp's first
// reading is one.
const LeakServer = "  rate_limit: {requests: 300, per: 1h}\n  power_events_every: 1h\n"

// LeakMadeUpInstallation is the other installation of the side without
// extras, which has none: an id of the form a hub makes.
const LeakMadeUpInstallation = "6f1c1d7e-8a44-4b5e-9a2f-3c0d5e7b9a10"

// LeakPlugs are the simulated plugs of a side: the lamp and, with extras,
// attic, porch and shed, as LeakLocations configures them.
type LeakPlugs struct {
	Lamp, Attic, Porch, Shed *mqtttest.Tasmota
}

// StartLeakPlugs connects the plugs of a side to broker. Start them before
// the hub, which asks them their state when it subscribes.
func StartLeakPlugs(tb testing.TB, broker, prefix string, extras bool) *LeakPlugs {
	tb.Helper()
	plug := func(id string) *mqtttest.Tasmota {
		return mqtttest.NewTasmota(tb, broker, mqtttest.TasmotaOptions{Topic: prefix + "-" + id})
	}
	p := &LeakPlugs{Lamp: plug("lamp")}
	if extras {
		p.Attic, p.Porch, p.Shed = plug("attic"), plug("porch"), plug("shed")
	}
	return p
}

// Press and Meter are LeakSide's, for the lamp.
func (p *LeakPlugs) Press(_ testing.TB, on bool) { p.Lamp.Set(on) }
func (p *LeakPlugs) Meter(_ testing.TB, watts, kWh float64) {
	p.Lamp.Sensor(watts, 230, watts/230, kWh)
}

// LeakChange is a change of an extra switch, as the hub took it in.
type LeakChange struct {
	ID, Value string
	Available bool
}

// LeakExtras changes the extra switches of a side: its plugs at their
// buttons, meters and network, its virtual switches through the
// installations of other apps and users.
type LeakExtras struct {
	Plugs *LeakPlugs
	// API is the hub; X is an installation of attic, porch, cellar and
	// shed, Y another user's of garage.
	API  *Harness
	X, Y Grant
	// Changes are the extra plugs' changes as the hub takes them in (its
	// feed, or X's event stream).
	Changes <-chan LeakChange
}

// Settle brings the extra plugs to where the script starts: each heard
// from, attic on and metering, shed gone (unavailable, with a last_seen).
func (e *LeakExtras) Settle(tb testing.TB) {
	tb.Helper()
	p := e.Plugs
	p.Attic.Set(true)
	p.Attic.Sensor(60, 230, 0.261, 3.2)
	e.await(tb, "attic", "on", func(c LeakChange) bool { return c.Value == "on" })
	p.Shed.Crash()
	e.await(tb, "shed", "gone", func(c LeakChange) bool { return !c.Available })
}

// Disturb is LeakSide's: "changes" or "flood".
func (e *LeakExtras) Disturb(tb testing.TB, step string) {
	tb.Helper()
	if step == "flood" {
		e.flood(tb)
		return
	}
	p := e.Plugs
	// Pressed from whatever state the plug is in: what the script did
	// must not keep the extra switches from changing.
	press := func(plug *mqtttest.Tasmota, id string) {
		tb.Helper()
		on := !plug.On()
		want := map[bool]string{true: "on", false: "off"}[on]
		plug.Set(on)
		e.await(tb, id, want, func(c LeakChange) bool { return c.Value == want })
	}
	p.Attic.Sensor(75, 230, 0.326, 3.3)
	press(p.Attic, "attic")
	press(p.Attic, "attic")
	press(p.Porch, "porch")
	press(p.Porch, "porch")
	p.Shed.Start()
	e.await(tb, "shed", "back", func(c LeakChange) bool { return c.Available })
	p.Shed.Crash()
	e.await(tb, "shed", "gone again", func(c LeakChange) bool { return !c.Available })
	// A virtual switch's command is in the feed before its 204.
	for _, c := range []struct {
		g    Grant
		path string
	}{{e.X, "/switches/cellar/off"}, {e.X, "/switches/cellar/on"}, {e.Y, "/switches/garage/on"}, {e.Y, "/switches/garage/off"}} {
		if p := e.API.Call(tb, http.MethodPut, c.g.URI+c.path, c.g.Token.AccessToken); p.StatusCode != http.StatusNoContent {
			tb.Fatalf("another installation's PUT %s = %d %s", c.path, p.StatusCode, p.Body)
		}
	}
}

// flood switches the porch plug at its button, on and off, until the hub
// has taken in LeakFlood of its changes: each press waits for its change,
// and a press whose report was lost is made again.
func (e *LeakExtras) flood(tb testing.TB) {
	tb.Helper()
	on := e.Plugs.Porch.On()
	for n, presses := 0, 0; n < LeakFlood; n++ {
		on = !on
		want := map[bool]string{true: "on", false: "off"}[on]
		for changed := false; !changed; {
			if presses++; presses > 2*LeakFlood {
				tb.Fatalf("the porch plug changed %d times in %d presses", n, presses)
			}
			e.Plugs.Porch.Set(on)
			changed = e.next(func(c LeakChange) bool { return c.ID == "porch" && c.Value == want }, 2*time.Second)
		}
	}
}

// await waits, at most 10 s, for a change of switch id that satisfies
// cond.
func (e *LeakExtras) await(tb testing.TB, id, what string, cond func(LeakChange) bool) {
	tb.Helper()
	if !e.next(func(c LeakChange) bool { return c.ID == id && cond(c) }, 10*time.Second) {
		tb.Fatalf("the hub did not see %s %s within 10 s", id, what)
	}
}

// next waits, at most d, for a change that satisfies cond, passing over
// others.
func (e *LeakExtras) next(cond func(LeakChange) bool, d time.Duration) bool {
	timeout := time.After(d)
	for {
		select {
		case c, ok := <-e.Changes:
			if !ok {
				return false
			}
			if cond(c) {
				return true
			}
		case <-timeout:
			return false
		}
	}
}
