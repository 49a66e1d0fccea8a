package gpio_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"periph.io/x/conn/v3/gpio"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/bridge/infra/clocktest"
	"github.com/switchbridge/switchbridge/drivers"
	gpiodriver "github.com/switchbridge/switchbridge/drivers/gpio"
	"github.com/switchbridge/switchbridge/drivers/gpio/gpiotest"
	"github.com/switchbridge/switchbridge/drivers/virtual"
)

// capHub opens the switches of a config's location 1 through the drivers,
// as the daemon does, into a hub on a stepped clock.
func capHub(t *testing.T, switches string) (*bridge.Switchboard, *clocktest.Clock) {
	t.Helper()
	cfg, err := config.Load("test.yaml", config.Text("locations:\n  - id: 1\n    name: Shed\n    switches:\n"+switches))
	if err != nil {
		t.Fatal(err)
	}
	set, err := drivers.Build(cfg, drivers.Registry{{Name: "gpio", New: gpiodriver.NewHostless}, virtual.Registration()}, drivers.Env{})
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
	clk := clocktest.New()
	h, err := bridge.NewSwitchboard([]bridge.Location{loc}, sws, bridge.SwitchboardOptions{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	return h, clk
}

// A GPIO relay is capped by default at four commands, then one a second;
// the fifth command is refused before the line is written, and so is the
// virtual switch commanded with it. A virtual switch alone has no cap.
func TestRelayChangeCapByDefault(t *testing.T) {
	pump := gpiotest.NewPin(t, false)
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
	slow, free := gpiotest.NewPin(t, false), gpiotest.NewPin(t, false)
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
