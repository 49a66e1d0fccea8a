package gpio_test

import (
	"context"
	"fmt"
	"github.com/switchbridge/switchbridge/bridge/clocktest"
	"net/http"
	"strings"
	"testing"
	"time"

	"periph.io/x/conn/v3/gpio"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/bridge/daemon/daemontest"
	"github.com/switchbridge/switchbridge/drivers"
	gpiodriver "github.com/switchbridge/switchbridge/drivers/gpio"
	"github.com/switchbridge/switchbridge/drivers/virtual"
)

// capHub opens the switches of a config's location 1 through the drivers,
// as the daemon does, into a hub on a stepped clock.
func capHub(t *testing.T, switches string) (*bridge.Hub, *clocktest.Clock) {
	t.Helper()
	cfg, err := config.Load("test.yaml", config.Text("locations:\n  - id: 1\n    name: Shed\n    switches:\n"+switches))
	if err != nil {
		t.Fatal(err)
	}
	set, err := drivers.Build(cfg, drivers.Registry{{Name: "gpio", New: gpiodriver.NewOnFakeHost}, virtual.Registration()}, drivers.Env{})
	if err != nil {
		t.Fatal(err)
	}
	sws, err := set.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { set.Close() })
	loc := bridge.Location{ID: 1, Name: "Shed"}
	for _, s := range sws {
		loc.Switches = append(loc.Switches, s.ID)
	}
	h, err := bridge.NewHub([]bridge.Location{loc}, sws)
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktest.New()
	h.Now = clk.Now
	return h, clk
}

// A GPIO relay is capped by default at four commands, then one a second;
// the fifth command is refused before the line is written, and so is the
// virtual switch commanded with it. A virtual switch alone has no cap.
func TestRelayChangeCapByDefault(t *testing.T) {
	pump := gpiodriver.NewTestPin(t, false)
	h, clk := capHub(t, fmt.Sprintf("      - {id: pump, name: Pump, driver: gpio, pin: %s, startup: off}\n      - {id: fan, name: Fan, driver: virtual}\n", pump.Name()))
	ctx := context.Background()
	start := len(pump.Writes())
	cmds := []bridge.Command{bridge.CommandOn, bridge.CommandOff, bridge.CommandOn, bridge.CommandOff}
	for i, cmd := range cmds {
		if err := h.Command(ctx, []string{"pump", "fan"}, cmd); err != nil {
			t.Fatalf("command %d of the burst: %v", i, err)
		}
	}
	err := h.Command(ctx, []string{"pump", "fan"}, bridge.CommandOn)
	e, ok := err.(*bridge.Error)
	if !ok || e.Code != bridge.ETOOMANY || len(e.Failures) != 1 || e.Failures[0].SwitchID != "pump" || e.RetryAfter != time.Second {
		t.Fatalf("fifth command = %v, want ETOOMANY naming the pump, retry after 1s", err)
	}
	if w := pump.Writes()[start:]; len(w) != 4 || pump.Level() != gpio.Low {
		t.Errorf("pump line writes %v, level %s; want the 4 of the burst, ending Low", w, pump.Level())
	}
	if st, _ := h.StatesIn(1, []string{"fan"}); st[0].State.Value != bridge.Off {
		t.Errorf("the fan switched to %s with a refused command", st[0].State.Value)
	}

	clk.Add(time.Second)
	if err := h.Command(ctx, []string{"pump"}, bridge.CommandOn); err != nil {
		t.Fatalf("a second later: %v", err)
	}
	if pump.Level() != gpio.High {
		t.Error("the pump line did not follow the command after the refill")
	}
	for i := range 50 {
		if err := h.Command(ctx, []string{"fan"}, bridge.CommandOn); err != nil {
			t.Fatalf("virtual fan, command %d: %v (virtual switches have no default cap)", i, err)
		}
	}
}

// max_changes replaces the relay's default, or turns it off.
func TestRelayMaxChangesConfigured(t *testing.T) {
	slow, free := gpiodriver.NewTestPin(t, false), gpiodriver.NewTestPin(t, false)
	h, clk := capHub(t, fmt.Sprintf(
		"      - {id: slow, name: Slow, driver: gpio, pin: %s, max_changes: {burst: 1, per: 10s}}\n"+
			"      - {id: free, name: Free, driver: gpio, pin: %s, max_changes: off}\n"+
			"      - {id: fan, name: Fan, driver: virtual, max_changes: {burst: 2, per: 1m}}\n", slow.Name(), free.Name()))
	ctx := context.Background()
	for i := range 50 {
		if err := h.Command(ctx, []string{"free"}, bridge.Command([]string{"on", "off"}[i%2])); err != nil {
			t.Fatalf("max_changes: off, command %d: %v", i, err)
		}
	}
	if err := h.Command(ctx, []string{"slow"}, bridge.CommandOn); err != nil {
		t.Fatal(err)
	}
	clk.Add(9 * time.Second)
	if code := bridge.ErrorCode(h.Command(ctx, []string{"slow"}, bridge.CommandOff)); code != bridge.ETOOMANY {
		t.Errorf("slow's second command 9s later: %q, want %s", code, bridge.ETOOMANY)
	}
	clk.Add(time.Second)
	if err := h.Command(ctx, []string{"slow"}, bridge.CommandOff); err != nil {
		t.Errorf("slow's second command 10s later: %v", err)
	}
	for range 2 {
		if err := h.Command(ctx, []string{"fan"}, bridge.CommandOn); err != nil {
			t.Fatal(err)
		}
	}
	if code := bridge.ErrorCode(h.Command(ctx, []string{"fan"}, bridge.CommandOn)); code != bridge.ETOOMANY {
		t.Errorf("a virtual switch with max_changes: %q, want %s", code, bridge.ETOOMANY)
	}
}

// Over the API: 429 naming the relay, and neither line written.
func TestAPIChangeCapOnGPIO(t *testing.T) {
	pump, lamp := gpiodriver.NewTestPin(t, false), gpiodriver.NewTestPin(t, false)
	h := daemontest.StartWith(t, daemontest.Options{DataDir: t.TempDir(), Registry: registry, Config: fmt.Sprintf(`
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
