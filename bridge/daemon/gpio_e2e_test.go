package daemon_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"periph.io/x/conn/v3/gpio"

	"github.com/switchbridge/switchbridge/bridge/daemon/daemontest"
	"github.com/switchbridge/switchbridge/drivers"
	gpiodriver "github.com/switchbridge/switchbridge/drivers/gpio"
	"github.com/switchbridge/switchbridge/drivers/gpio/gpiotest"
)

// board is a hub with two relays and a door contact on fake GPIO lines.
type board struct {
	pump, lamp, door *gpiotest.Pin
	config           string
}

func newBoard(t *testing.T) *board {
	b := &board{
		pump: gpiotest.NewPin(t, false),
		lamp: gpiotest.NewPin(t, false),
		door: gpiotest.NewPin(t, false),
	}
	b.door.Set(gpio.Low) // closed: pulled to ground
	b.config = fmt.Sprintf(`
locations:
  - id: 1
    name: Shed
    switches:
      - {id: pump, name: Water pump, driver: gpio, pin: %s, active_low: true, startup: off}
      - {id: lamp, name: Shed lamp, driver: gpio, pin: %s}
      - {id: door, name: Shed door, driver: gpio, pin: %s, mode: input, active_low: true, detect: poll, poll_interval: 5ms}
`, b.pump.Name(), b.lamp.Name(), b.door.Name())
	return b
}

// gpioRegistry has the gpio driver on the lines registered in gpioreg
// (gpiotest pins), without periph's host drivers.
var gpioRegistry = drivers.Registry{{Name: "gpio", New: gpiodriver.NewHostless}}

func listed(t *testing.T, h *daemontest.Harness, g daemontest.Grant) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, s := range h.List(t, g) {
		out[s.Name] = value(s)
	}
	return out
}

// The installation API drives relays on GPIO lines: list, on, off, and 501
// for an input line, with nothing actuated.
func TestAPIOnGPIO(t *testing.T) {
	b := newBoard(t)
	dir := t.TempDir()
	h := daemontest.StartWith(t, daemontest.Options{Config: b.config, DataDir: dir, Registry: gpioRegistry})
	owner := h.AddUser(t, "ann", "ann-pw", 1)
	app := h.AddApp(t, owner, true, "https://client.example/cb")
	relays := h.Authorize(t, app, "ann", "ann-pw", 1, "pump", "lamp")

	// Start-up: pump off (its active-low line high), lamp off by restore
	// with nothing stored (its line low).
	if got := listed(t, h, relays); got["Water pump"] != "off" || got["Shed lamp"] != "off" || len(got) != 2 {
		t.Fatalf("list at start = %v, want both relays off", got)
	}
	if b.pump.Level() != gpio.High || b.lamp.Level() != gpio.Low {
		t.Fatalf("lines at start: pump %s, lamp %s; want High (active-low off) and Low", b.pump.Level(), b.lamp.Level())
	}

	for _, tt := range []struct {
		cmd        string
		pump, lamp gpio.Level
	}{
		{"on", gpio.Low, gpio.High},
		{"off", gpio.High, gpio.Low},
		{"on", gpio.Low, gpio.High},
	} {
		p := h.Command(t, relays, tt.cmd)
		if p.StatusCode != http.StatusNoContent {
			t.Fatalf("PUT %s = %d %s, want 204", tt.cmd, p.StatusCode, p.Body)
		}
		if b.pump.Level() != tt.pump || b.lamp.Level() != tt.lamp {
			t.Errorf("after %s: pump line %s, lamp line %s; want %s and %s", tt.cmd, b.pump.Level(), b.lamp.Level(), tt.pump, tt.lamp)
		}
		for name, v := range listed(t, h, relays) {
			if v != tt.cmd {
				t.Errorf("after %s, %s lists as %s", tt.cmd, name, v)
			}
		}
	}

	// An installation with the door contact: it lists what the line reads,
	// and any command is 501 before a relay is touched.
	// A second app, so the first installation keeps its selection.
	doorApp := h.AddApp(t, owner, true, "https://other.example/cb")
	withDoor := h.Authorize(t, doorApp, "ann", "ann-pw", 1, "pump", "door")
	if got := listed(t, h, withDoor); got["Shed door"] != "on" || got["Water pump"] != "on" {
		t.Fatalf("list with the door = %v, want door on (closed, active-low) and pump on", got)
	}
	writes := len(b.pump.Writes())
	for _, cmd := range []string{"off", "on"} {
		p := h.Command(t, withDoor, cmd)
		if p.StatusCode != http.StatusNotImplemented || !strings.Contains(p.Body, `"id":"door"`) {
			t.Errorf("PUT %s with an input selected = %d %s, want 501 naming the door", cmd, p.StatusCode, p.Body)
		}
	}
	if n := len(b.pump.Writes()); n != writes || b.pump.Level() != gpio.Low {
		t.Errorf("the pump was written %d times by refused commands (line %s)", n-writes, b.pump.Level())
	}
	if n := len(b.door.Writes()); n != 0 {
		t.Errorf("the input line was written %d times", n)
	}

	// The door opens: the list follows the line.
	b.door.Set(gpio.High)
	for i := 0; listed(t, h, withDoor)["Shed door"] != "off"; i++ {
		if i == 500 {
			t.Fatal("the door opened but still lists as on")
		}
		time.Sleep(5 * time.Millisecond)
	}

	// A restart (a power cut, as far as the relays know): the lamp restores
	// the stored on in its first write; the pump's startup: off wins over
	// its stored on.
	h.Stop()
	for name, p := range map[string]*gpiotest.Pin{"pump": b.pump, "lamp": b.lamp, "door": b.door} {
		if n := p.Closes(); n != 1 {
			t.Errorf("%s line released %d times at shutdown, want 1", name, n)
		}
	}
	lampWrites, pumpWrites := len(b.lamp.Writes()), len(b.pump.Writes())
	h2 := daemontest.StartWith(t, daemontest.Options{Config: b.config, DataDir: dir, Registry: gpioRegistry})
	if w := b.lamp.Writes()[lampWrites:]; len(w) != 1 || w[0] != gpio.High {
		t.Errorf("lamp writes at restart = %v, want exactly [High] (restored on)", w)
	}
	if w := b.pump.Writes()[pumpWrites:]; len(w) != 1 || w[0] != gpio.High {
		t.Errorf("pump writes at restart = %v, want exactly [High] (startup off, active-low)", w)
	}
	relays.URI = strings.Replace(relays.URI, h.URL, h2.URL, 1)
	if got := listed(t, h2, relays); got["Shed lamp"] != "on" || got["Water pump"] != "off" {
		t.Errorf("list after restart = %v, want lamp on (restored) and pump off", got)
	}
}

// Over the API: 429 naming the relay, and neither line written.
func TestAPIChangeCapOnGPIO(t *testing.T) {
	pump, lamp := gpiotest.NewPin(t, false), gpiotest.NewPin(t, false)
	h := daemontest.StartWith(t, daemontest.Options{DataDir: t.TempDir(), Registry: gpioRegistry, Config: fmt.Sprintf(`
locations:
  - id: 1
    name: Shed
    switches:
      - {id: pump, name: Water pump, driver: gpio, pin: %s, max_changes: {burst: 2, per: 1h}}
      - {id: lamp, name: Shed lamp, driver: gpio, pin: %s}
`, pump.Name(), lamp.Name())})
	owner := h.AddUser(t, "ann", "ann-pw", 1)
	app := h.AddApp(t, owner, true, "https://client.example/cb")
	g := h.Authorize(t, app, "ann", "ann-pw", 1, "pump", "lamp")
	for _, cmd := range []string{"on", "off"} {
		if p := h.Command(t, g, cmd); p.StatusCode != http.StatusNoContent {
			t.Fatalf("PUT %s = %d %s", cmd, p.StatusCode, p.Body)
		}
	}
	pumpWrites, lampWrites := len(pump.Writes()), len(lamp.Writes())
	p := h.Command(t, g, "on")
	if p.StatusCode != http.StatusTooManyRequests || !strings.Contains(p.Body, `"id":"pump"`) || !strings.Contains(p.Body, `"reason":"rate_limited"`) ||
		strings.Contains(p.Body, `"id":"lamp"`) {
		t.Fatalf("third PUT = %d %s, want 429 naming the pump only", p.StatusCode, p.Body)
	}
	if got := p.Header.Get("Retry-After"); got != "3600" {
		t.Errorf("Retry-After = %q, want 3600", got)
	}
	if len(pump.Writes()) != pumpWrites || len(lamp.Writes()) != lampWrites || pump.Level() != gpio.Low || lamp.Level() != gpio.Low {
		t.Errorf("a refused command wrote a line: pump %v, lamp %v", pump.Writes()[pumpWrites:], lamp.Writes()[lampWrites:])
	}
	if got := listed(t, h, g); got["Water pump"] != "off" || got["Shed lamp"] != "off" {
		t.Errorf("list after the refused on = %v, want both off", got)
	}
}
