package gpio

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"periph.io/x/conn/v3/driver/driverreg"
	"periph.io/x/conn/v3/gpio"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/drivers"
	"github.com/switchbridge/switchbridge/drivers/gpio/gpiotest"
)

func TestLevelMapping(t *testing.T) {
	tests := []struct {
		activeLow bool
		v         bridge.Value
		l         gpio.Level
	}{
		{false, bridge.On, gpio.High},
		{false, bridge.Off, gpio.Low},
		{true, bridge.On, gpio.Low},
		{true, bridge.Off, gpio.High},
	}
	for _, tt := range tests {
		if got := level(tt.v, tt.activeLow); got != tt.l {
			t.Errorf("level(%s, active_low=%t) = %s, want %s", tt.v, tt.activeLow, got, tt.l)
		}
		if got := value(tt.l, tt.activeLow); got != tt.v {
			t.Errorf("value(%s, active_low=%t) = %s, want %s", tt.l, tt.activeLow, got, tt.v)
		}
	}
}

// A command reaches the line at the right level for the board, both ways.
func TestRelayActiveLow(t *testing.T) {
	t.Parallel()
	tests := []struct {
		activeLow bool
		cmd       bridge.Command
		want      gpio.Level
	}{
		{false, bridge.CommandOn, gpio.High},
		{false, bridge.CommandOff, gpio.Low},
		{true, bridge.CommandOn, gpio.Low},
		{true, bridge.CommandOff, gpio.High},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("active_low=%t/%s", tt.activeLow, tt.cmd), func(t *testing.T) {
			t.Parallel()
			rec := &recorder{}
			p := gpiotest.NewPin(t, false)
			d := newTestDriver(t, nil, rec)
			// Start at the opposite value so the command has to change the line.
			start := "on"
			if tt.cmd == bridge.CommandOn {
				start = "off"
			}
			mustAdd(t, d, "r", fmt.Sprintf("{pin: %s, active_low: %t, startup: %s}", p.N, tt.activeLow, start))
			dev := mustOpen(t, d)["r"]
			if got := p.Level(); got == tt.want {
				t.Fatalf("startup %s left the line at %s already", start, got)
			}
			if err := dev.(bridge.Commander).Do(context.Background(), tt.cmd); err != nil {
				t.Fatal(err)
			}
			if got := p.Level(); got != tt.want {
				t.Errorf("line at %s after %s, want %s", got, tt.cmd, tt.want)
			}
			if got := dev.State(); got.Value != tt.cmd.Value() || !got.Available {
				t.Errorf("State() = %+v, want %s and available", got, tt.cmd.Value())
			}
			if vs := rec.values("r"); len(vs) != 2 || vs[1] != tt.cmd.Value() {
				t.Errorf("notified %v, want [%s %s]", vs, start, tt.cmd.Value())
			}
		})
	}
}

// Every start-up policy writes its level in the very first Out, and only
// once: no moment at the other level, no read of the line.
func TestStartupPolicies(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		startup string // "" leaves the key out
		stored  bridge.Value
		want    bridge.Value
	}{
		{"default with nothing stored", "", "", bridge.Off},
		{"default restores on", "", bridge.On, bridge.On},
		{"restore on", "restore", bridge.On, bridge.On},
		{"restore off", "restore", bridge.Off, bridge.Off},
		{"restore with nothing stored", "restore", "", bridge.Off},
		{"restore ignores a bad stored value", "restore", "dimmed", bridge.Off},
		{"off over a stored on", "off", bridge.On, bridge.Off},
		{"on over a stored off", "on", bridge.Off, bridge.On},
		{"on with nothing stored", "on", "", bridge.On},
	}
	for _, tt := range tests {
		for _, activeLow := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/active_low=%t", tt.name, activeLow), func(t *testing.T) {
				t.Parallel()
				rec := &recorder{}
				if tt.stored != "" {
					rec.stored = map[string]bridge.Value{"r": tt.stored}
				}
				p := gpiotest.NewPin(t, false)
				// The fake starts at the level that means the opposite value,
				// so a missing write would show.
				p.Set(level(tt.want, activeLow) == gpio.Low)
				d := newTestDriver(t, nil, rec)
				opts := fmt.Sprintf("{pin: %s, active_low: %t", p.N, activeLow)
				if tt.startup != "" {
					opts += ", startup: " + tt.startup
				}
				mustAdd(t, d, "r", opts+"}")
				dev := mustOpen(t, d)["r"]

				want := level(tt.want, activeLow)
				if w := p.Writes(); len(w) != 1 || w[0] != want {
					t.Errorf("writes = %v, want exactly [%s]", w, want)
				}
				if got := p.Level(); got != want {
					t.Errorf("line at %s, want %s", got, want)
				}
				if got := dev.State().Value; got != tt.want {
					t.Errorf("State().Value = %q, want %q", got, tt.want)
				}
				if vs := rec.values("r"); len(vs) != 1 || vs[0] != tt.want {
					t.Errorf("notified %v, want [%s]", vs, tt.want)
				}
			})
		}
	}
}

// An input reports its level through active_low and debounces: a level that
// does not hold for the debounce time is ignored. Time is stepped by hand.
func TestInputDebounce(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	p := gpiotest.NewPin(t, false)
	p.Set(gpio.High) // idle high: a contact to ground with a pull-up
	d := newTestDriver(t, nil, rec)
	s := newStepper()
	d.wait = s.wait
	mustAdd(t, d, "door", fmt.Sprintf("{pin: %s, mode: input, active_low: true, detect: poll, debounce: 50ms, poll_interval: 10ms}", p.N))
	dev := mustOpen(t, d)["door"]
	if got := dev.State().Value; got != bridge.Off {
		t.Fatalf("idle high with active_low: State = %q, want off", got)
	}

	const interval, debounce = 10 * time.Millisecond, 50 * time.Millisecond
	if w := s.next(t); w != interval {
		t.Fatalf("first wait %s, want the poll interval %s", w, interval)
	}
	p.Set(gpio.Low) // the contact closes... and bounces
	s.step(t)
	if w := s.next(t); w != debounce {
		t.Fatalf("after a change the watcher waited %s, want the debounce %s", w, debounce)
	}
	p.Set(gpio.High)
	s.step(t)
	if w := s.next(t); w != interval {
		t.Fatalf("after a bounce the watcher waited %s, want the poll interval", w)
	}
	if got := dev.State().Value; got != bridge.Off {
		t.Fatalf("a bounce shorter than debounce changed the state to %q", got)
	}
	p.Set(gpio.Low) // closes for good
	s.step(t)
	if w := s.next(t); w != debounce {
		t.Fatalf("waited %s, want the debounce", w)
	}
	s.step(t)
	s.next(t) // back to polling: the change is recorded by now
	if got := dev.State(); got.Value != bridge.On || !got.Available {
		t.Fatalf("held low past debounce: State = %+v, want on", got)
	}
	if vs := rec.values("door"); len(vs) != 2 || vs[0] != bridge.Off || vs[1] != bridge.On {
		t.Errorf("notified %v, want [off on]", vs)
	}
	if w := p.Writes(); len(w) != 0 {
		t.Errorf("an input was written: %v", w)
	}
}

// Edge detection: the watcher wakes on the edge, not on a poll.
func TestInputEdges(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	p := gpiotest.NewPin(t, true)
	d := newTestDriver(t, nil, rec)
	mustAdd(t, d, "button", fmt.Sprintf("{pin: %s, mode: input, pull: down, debounce: 1ms, poll_interval: 1m}", p.N))
	dev := mustOpen(t, d)["button"]
	if got := p.InCalls(); len(got) != 1 || got[0] != (gpiotest.InCall{Pull: gpio.PullDown, Edge: gpio.BothEdges}) {
		t.Fatalf("In calls = %v, want one In(PullDown, BothEdges)", got)
	}
	if got := dev.State().Value; got != bridge.Off {
		t.Fatalf("pulled down, active high: State = %q, want off", got)
	}
	// The poll interval is a minute, so only the edge can make this pass in time.
	for _, l := range []gpio.Level{gpio.High, gpio.Low, gpio.High} {
		select {
		case p.EdgesChan <- l:
		case <-ctxTimeout(t).Done():
			t.Fatal("the watcher is not waiting for edges")
		}
		want := value(l, false)
		eventually(t, "state "+string(want), func() bool { return dev.State().Value == want })
	}
	if vs := rec.values("button"); len(vs) != 4 {
		t.Errorf("notified %v, want off and three changes", vs)
	}
	closeWaking(t, d, p, gpio.High)
}

// closeWaking closes d while feeding edges at level l (no change) to p:
// gpiotest's WaitForEdge ignores Halt, so the watcher would otherwise sit out
// its whole poll interval.
func closeWaking(t *testing.T, d *driver, p *gpiotest.Pin, l gpio.Level) {
	t.Helper()
	closed := make(chan error, 1)
	go func() { closed <- d.Close() }()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case err := <-closed:
			if err != nil {
				t.Error(err)
			}
			return
		case <-deadline:
			t.Fatal("Close did not return")
		case <-tick.C:
			select {
			case p.EdgesChan <- l:
			default: // the watcher is not waiting right now
			}
		}
	}
}

func ctxTimeout(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// A line that cannot report edges is polled instead, with a warning.
func TestInputFallsBackToPolling(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	p := gpiotest.NewPin(t, false) // gpiotest refuses edges without EdgesChan
	d := newTestDriver(t, nil, rec)
	mustAdd(t, d, "door", fmt.Sprintf("{pin: %s, mode: input, pull: up, debounce: 0s, poll_interval: 1ms}", p.N))
	dev := mustOpen(t, d)["door"]
	want := []gpiotest.InCall{{Pull: gpio.PullUp, Edge: gpio.BothEdges}, {Pull: gpio.PullUp, Edge: gpio.NoEdge}}
	if got := p.InCalls(); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("In calls = %v, want %v", got, want)
	}
	if !strings.Contains(rec.log(), "polling it instead") {
		t.Errorf("no warning about polling in the log:\n%s", rec.log())
	}
	if got := dev.State().Value; got != bridge.On {
		t.Fatalf("pulled up, active high: State = %q, want on", got)
	}
	p.Set(gpio.Low)
	eventually(t, "the polled change", func() bool { return dev.State().Value == bridge.Off })
}

// An input runs no command: the device says so before anything is touched,
// and the hub turns that into ENOTIMPLEMENTED (the API's 501).
func TestInputIsUnsupported(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	in, out := gpiotest.NewPin(t, false), gpiotest.NewPin(t, false)
	d := newTestDriver(t, nil, rec)
	mustAdd(t, d, "relay", fmt.Sprintf("{pin: %s, startup: off}", out.N))
	mustAdd(t, d, "door", fmt.Sprintf("{pin: %s, mode: input, detect: poll}", in.N))
	devs := mustOpen(t, d)
	for _, cmd := range bridge.Commands {
		if bridge.Supports(devs["door"], cmd) {
			t.Errorf("input supports %q", cmd)
		}
		if !bridge.Supports(devs["relay"], cmd) {
			t.Errorf("output does not support %q", cmd)
		}
		if err := devs["door"].(bridge.Commander).Do(context.Background(), cmd); !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("input Do(%s) = %v, want ErrUnsupported", cmd, err)
		}
	}
	hub, err := bridge.NewSwitchboard([]bridge.Location{{ID: 1, Name: "Home"}}, []*bridge.Switch{
		{ID: "relay", Name: "Relay", Driver: "gpio", LocationID: 1, Device: devs["relay"]},
		{ID: "door", Name: "Door", Driver: "gpio", LocationID: 1, Device: devs["door"]},
	}, bridge.SwitchboardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	err = hub.Command(context.Background(), []string{"relay", "door"}, bridge.CommandOn)
	if bridge.ErrorCode(err) != bridge.ENOTIMPLEMENTED {
		t.Fatalf("hub.Command = %v, want %s", err, bridge.ENOTIMPLEMENTED)
	}
	if w := out.Writes(); len(w) != 1 {
		t.Errorf("the relay was written %v; a refused command must touch nothing", w)
	}
	if w := in.Writes(); len(w) != 0 {
		t.Errorf("the input was written %v", w)
	}
}

// A line that does not exist fails Open with the switch and the pin named,
// before any line is touched.
func TestMissingPin(t *testing.T) {
	t.Parallel()
	good := gpiotest.NewPin(t, false)
	tests := []struct {
		name string
		opts string
		want []string
	}{
		{"by name", "{pin: NO_SUCH_LINE}", []string{`switch "lost"`, `"NO_SUCH_LINE" not found`, "known: "}},
		{"unknown chip", "{chip: gpiochip9, line: 3}", []string{`switch "lost"`, "gpiochip9 line 3", `no GPIO chip "gpiochip9"`}},
		{"offset past the chip", "{chip: gpiochip0, line: 5}", []string{`switch "lost"`, "gpiochip0 line 5", "has 1 lines"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &fakeHost{chips: map[string][]gpio.PinIO{"gpiochip0": {gpiotest.NewPin(t, false)}}}
			d := newTestDriver(t, h, &recorder{})
			mustAdd(t, d, "fine", fmt.Sprintf("{pin: %s, startup: on}", good.N))
			mustAdd(t, d, "lost", tt.opts)
			devs, err := d.Open(context.Background())
			if err == nil {
				d.Close()
				t.Fatal("Open succeeded with a missing line")
			}
			if devs != nil {
				t.Errorf("Open returned devices with its error: %v", devs)
			}
			if !containsAll(err.Error(), tt.want...) {
				t.Errorf("error %q does not contain all of %q", err, tt.want)
			}
			if w := good.Writes(); len(w) != 0 {
				t.Errorf("the existing relay was written %v before the missing line was found", w)
			}
			assertUnclaimed(t, good)
		})
	}
}

// A line that is busy fails Open naming the switch and the line, and every
// line taken before it is released: never half the relays opened.
func TestBusyPinReleasesOthers(t *testing.T) {
	t.Parallel()
	t.Run("held by another driver in this process", func(t *testing.T) {
		t.Parallel()
		a, b := gpiotest.NewPin(t, false), gpiotest.NewPin(t, false)
		holder := newTestDriver(t, nil, &recorder{})
		mustAdd(t, holder, "old", fmt.Sprintf("{pin: %s}", b.N))
		mustOpen(t, holder)

		d := newTestDriver(t, nil, &recorder{})
		mustAdd(t, d, "first", fmt.Sprintf("{pin: %s, startup: off}", a.N))
		mustAdd(t, d, "second", fmt.Sprintf("{pin: %s, startup: off}", b.N))
		_, err := d.Open(context.Background())
		if err == nil || !containsAll(err.Error(), `switch "second"`, b.N, `busy: already held by switch "old"`) {
			t.Fatalf("Open error = %v, want switch, pin and holder named", err)
		}
		if a.Closes() != 1 {
			t.Errorf("the line opened before the busy one was closed %d times, want 1", a.Closes())
		}
		assertUnclaimed(t, a)
		if w := b.Writes(); len(w) != 1 {
			t.Errorf("the held line was written %v by the second driver", w)
		}
	})
	t.Run("refused by the kernel", func(t *testing.T) {
		t.Parallel()
		a, b, c := gpiotest.NewPin(t, false), gpiotest.NewPin(t, false), gpiotest.NewPin(t, false)
		b.FailNextOut(errors.New("GPIOLine.Out(): line_request ioctl: device or resource busy"))
		d := newTestDriver(t, nil, &recorder{})
		mustAdd(t, d, "one", fmt.Sprintf("{pin: %s}", a.N))
		mustAdd(t, d, "two", fmt.Sprintf("{pin: %s}", b.N))
		mustAdd(t, d, "three", fmt.Sprintf("{pin: %s}", c.N))
		_, err := d.Open(context.Background())
		if err == nil || !containsAll(err.Error(), `switch "two"`, b.N, "device or resource busy", "another program holds the line") {
			t.Fatalf("Open error = %v, want switch, pin and busy named", err)
		}
		if a.Closes() != 1 || b.Closes() != 1 {
			t.Errorf("closes: first %d, busy %d; want both released once", a.Closes(), b.Closes())
		}
		if w := c.Writes(); len(w) != 0 || c.Closes() != 0 {
			t.Errorf("the line after the busy one was touched: writes %v, closes %d", w, c.Closes())
		}
		for _, p := range []*gpiotest.Pin{a, b, c} {
			assertUnclaimed(t, p)
		}
	})
}

// assertUnclaimed checks that no driver holds p, by opening it again.
func assertUnclaimed(t *testing.T, p *gpiotest.Pin) {
	t.Helper()
	if err := claim(p, "probe"); err != nil {
		t.Errorf("line %s is still held after a failed Open: %v", p.N, err)
		return
	}
	unclaim(p)
}

// The driver never reads, asks the function of or re-inputs an output line,
// whatever it is asked. gpiotest.Pin reports any such call as a test failure.
func TestNeverReadsOutputs(t *testing.T) {
	t.Parallel()
	rec := &recorder{stored: map[string]bridge.Value{"a": bridge.On}}
	a, b := gpiotest.NewPin(t, false), gpiotest.NewPin(t, false)
	d := newTestDriver(t, nil, rec)
	mustAdd(t, d, "a", fmt.Sprintf("{pin: %s, active_low: true}", a.N))
	mustAdd(t, d, "b", fmt.Sprintf("{pin: %s, startup: on}", b.N))
	devs, err := d.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// Without the relays' default change cap: ten commands in a row are
	// the point here.
	noCap := &bridge.ChangeLimit{}
	hub, err := bridge.NewSwitchboard([]bridge.Location{{ID: 1, Name: "Home"}}, []*bridge.Switch{
		{ID: "a", Driver: "gpio", LocationID: 1, Device: devs["a"], MaxChanges: noCap},
		{ID: "b", Driver: "gpio", LocationID: 1, Device: devs["b"], MaxChanges: noCap},
	}, bridge.SwitchboardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		cmd := bridge.Commands[i%2]
		if err := hub.Command(context.Background(), []string{"a", "b"}, cmd); err != nil {
			t.Fatal(err)
		}
		sts, err := hub.States([]string{"a", "b"})
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range sts {
			if st.State.Value != cmd.Value() {
				t.Errorf("%s after %s: %q", st.Switch.ID, cmd, st.State.Value)
			}
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if n := len(a.Writes()) + len(b.Writes()); n != 22 {
		t.Errorf("%d writes, want 2 at start-up and 20 commands", n)
	}
}

// The guard itself must catch a read, or the test above proves nothing.
func TestGuardPinCatchesReads(t *testing.T) {
	p := gpiotest.NewPin(t, false)
	var caught []string
	p.Report = func(format string, args ...any) { caught = append(caught, fmt.Sprintf(format, args...)) }
	p.Read() // an input: fine
	if len(caught) != 0 {
		t.Fatalf("a read of an input was reported: %v", caught)
	}
	if err := p.Out(gpio.High); err != nil {
		t.Fatal(err)
	}
	p.Read()
	p.Func()
	_ = p.Function()
	_ = p.In(gpio.PullUp, gpio.NoEdge)
	if len(caught) != 4 {
		t.Fatalf("caught %d misuses of an output, want 4: %v", len(caught), caught)
	}
}

// Many commands at once on one relay: the line, the state and the last
// stored value agree at the end (run with -race).
func TestConcurrentCommands(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	p := gpiotest.NewPin(t, false)
	d := newTestDriver(t, nil, rec)
	mustAdd(t, d, "r", fmt.Sprintf("{pin: %s, active_low: true, startup: off}", p.N))
	dev := mustOpen(t, d)["r"]
	cmdr := dev.(bridge.Commander)

	const workers, each = 16, 50
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				cmd := bridge.Commands[(w+i)%2]
				if err := cmdr.Do(context.Background(), cmd); err != nil {
					t.Error(err)
					return
				}
				_ = dev.State()
			}
		}()
	}
	wg.Wait()

	st := dev.State()
	w := p.Writes()
	vs := rec.values("r")
	if len(w) != 1+workers*each || len(vs) != 1+workers*each {
		t.Fatalf("%d writes and %d notifications, want %d each", len(w), len(vs), 1+workers*each)
	}
	if got := p.Level(); got != level(st.Value, true) || w[len(w)-1] != got {
		t.Errorf("line at %s, last write %s, state %q: they disagree", got, w[len(w)-1], st.Value)
	}
	if last := vs[len(vs)-1]; last != st.Value {
		t.Errorf("last stored value %q, state %q: a restore would bring back the wrong one", last, st.Value)
	}
	for i := range w {
		if value(w[i], true) != vs[i] {
			t.Fatalf("write %d was %s but the value stored was %q: out of order", i, w[i], vs[i])
		}
	}
}

func TestCloseReleasesLines(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	out, in := gpiotest.NewPin(t, false), gpiotest.NewPin(t, false)
	d := newTestDriver(t, nil, rec)
	mustAdd(t, d, "relay", fmt.Sprintf("{pin: %s}", out.N))
	mustAdd(t, d, "door", fmt.Sprintf("{pin: %s, mode: input, detect: poll, poll_interval: 1ms}", in.N))
	devs, err := d.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c := devs["door"].(*contact)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.done:
	default:
		t.Error("the input watcher still runs after Close")
	}
	if out.Closes() != 1 || in.Closes() != 1 {
		t.Errorf("closes: relay %d, input %d; want 1 each", out.Closes(), in.Closes())
	}
	err = devs["relay"].(bridge.Commander).Do(context.Background(), bridge.CommandOn)
	if !errors.Is(err, bridge.ErrUnavailable) {
		t.Errorf("Do after Close = %v, want ErrUnavailable", err)
	}
	if devs["relay"].State().Available || devs["door"].State().Available {
		t.Error("devices still available after Close")
	}
	if err := d.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	// The lines are free again: a new driver (a reloaded config) gets them.
	d2 := newTestDriver(t, nil, rec)
	mustAdd(t, d2, "relay", fmt.Sprintf("{pin: %s}", out.N))
	mustAdd(t, d2, "door", fmt.Sprintf("{pin: %s, mode: input, detect: poll}", in.N))
	mustOpen(t, d2)
}

// A line the kernel left unnamed is reached by chip and offset.
func TestChipAndLine(t *testing.T) {
	t.Parallel()
	lines := []*gpiotest.Pin{gpiotest.NewPin(t, false), gpiotest.NewPin(t, false), gpiotest.NewPin(t, false)}
	h := &fakeHost{chips: map[string][]gpio.PinIO{"gpiochip2": {lines[0], lines[1], lines[2]}}}
	d := newTestDriver(t, h, &recorder{})
	mustAdd(t, d, "r", "{chip: gpiochip2, line: 1, startup: on}")
	dev := mustOpen(t, d)["r"]
	if w := lines[1].Writes(); len(w) != 1 || w[0] != gpio.High {
		t.Errorf("line 1 writes %v, want [High]", w)
	}
	if len(lines[0].Writes())+len(lines[2].Writes()) != 0 {
		t.Error("another line of the chip was written")
	}
	if dev.State().Value != bridge.On {
		t.Errorf("State = %q, want on", dev.State().Value)
	}
}

// fakeImpl names a periph host driver in a fake init state.
type fakeImpl string

func (f fakeImpl) String() string        { return string(f) }
func (fakeImpl) Prerequisites() []string { return nil }
func (fakeImpl) After() []string         { return nil }
func (fakeImpl) Init() (bool, error)     { return true, nil }

func failure(name, msg string) driverreg.DriverFailure {
	return driverreg.DriverFailure{D: fakeImpl(name), Err: errors.New(msg)}
}

// periph reports host driver failures in its state, not as an error; they
// must reach the log. A registry error fails Open before any line is touched.
func TestHostInitIsLogged(t *testing.T) {
	t.Parallel()
	t.Run("failed and skipped drivers", func(t *testing.T) {
		t.Parallel()
		rec := &recorder{}
		h := &fakeHost{state: &driverreg.State{
			Failed:  []driverreg.DriverFailure{failure("bcm2835-gpio", "open /dev/gpiomem: permission denied")},
			Skipped: []driverreg.DriverFailure{failure("ioctl-gpio", "no GPIO chips found")},
		}}
		p := gpiotest.NewPin(t, false)
		d := newTestDriver(t, h, rec)
		mustAdd(t, d, "r", fmt.Sprintf("{pin: %s}", p.N))
		mustOpen(t, d)
		log := rec.log()
		for _, want := range []string{"level=WARN", "bcm2835-gpio", "permission denied", "ioctl-gpio (no GPIO chips found)"} {
			if !strings.Contains(log, want) {
				t.Errorf("log lacks %q:\n%s", want, log)
			}
		}
	})
	t.Run("registry error", func(t *testing.T) {
		t.Parallel()
		h := &fakeHost{initErr: errors.New("driver cycle")}
		p := gpiotest.NewPin(t, false)
		d := newTestDriver(t, h, &recorder{})
		mustAdd(t, d, "r", fmt.Sprintf("{pin: %s}", p.N))
		_, err := d.Open(context.Background())
		if err == nil || !strings.Contains(err.Error(), "driver cycle") {
			t.Fatalf("Open = %v, want the init error", err)
		}
		if len(p.Writes()) != 0 {
			t.Error("a line was written although periph failed to start")
		}
	})
}

// Bad options are config problems with the line of the key, found without
// touching any hardware.
func TestAddRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, opts string
		line       int
		want       string
	}{
		{"unknown key", "pin: GPIO17\nactive_lo: true", 2, `unknown key "active_lo"`},
		{"no line", "active_low: true", 1, "gpio needs pin"},
		{"pin and chip", "pin: GPIO17\nchip: gpiochip0\nline: 4", 1, "either pin or chip and line"},
		{"chip without line", "chip: gpiochip0", 1, "chip needs line"},
		{"line without chip", "line: 4", 1, "line needs chip"},
		{"negative line", "chip: gpiochip0\nline: -1", 2, "offset of 0 or more"},
		{"line not a number", "chip: gpiochip0\nline: four", 2, "cannot unmarshal"},
		{"bad startup", "pin: GPIO17\nstartup: last", 2, "startup must be restore, off or on"},
		{"bad mode", "pin: GPIO17\nmode: pwm", 2, "mode must be output or input"},
		{"startup on an input", "pin: GPIO17\nmode: input\nstartup: on", 3, "startup applies to outputs"},
		{"pull on an output", "pin: GPIO17\npull: up", 2, "pull applies to mode: input only"},
		{"debounce on an output", "pin: GPIO17\ndebounce: 5ms", 2, "debounce applies to mode: input only"},
		{"bad pull", "pin: GPIO17\nmode: input\npull: sideways", 3, "pull must be up, down or none"},
		{"bad detect", "pin: GPIO17\nmode: input\ndetect: magic", 3, "detect must be edge or poll"},
		{"negative debounce", "pin: GPIO17\nmode: input\ndebounce: -1s", 3, "debounce must be between"},
		{"poll too fast", "pin: GPIO17\nmode: input\npoll_interval: 1us", 3, "poll_interval must be between"},
		{"bad duration", "pin: GPIO17\nmode: input\ndebounce: soon", 3, "not a duration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := &fakeHost{}
			var touched bool
			pl := h.platform()
			pl.init = func() (*driverreg.State, error) { touched = true; return nil, nil }
			d, err := newDriver((&recorder{}).env(), pl)
			if err != nil {
				t.Fatal(err)
			}
			err = d.Add(drivers.Spec{ID: "s", Options: options(t, tt.opts), Line: 1})
			var ps *config.Problems
			if !errors.As(err, &ps) {
				t.Fatalf("Add = %v, want *config.Problems", err)
			}
			if len(ps.List) != 1 || ps.List[0].Line != tt.line || !strings.Contains(ps.List[0].Msg, tt.want) {
				t.Errorf("problems %v, want one at line %d containing %q", ps.List, tt.line, tt.want)
			}
			if touched {
				t.Error("Add reached the hardware")
			}
		})
	}
}

func TestAddRejectsDuplicateLine(t *testing.T) {
	t.Parallel()
	d := newTestDriver(t, nil, &recorder{})
	if err := d.Add(drivers.Spec{ID: "a", Options: options(t, "{pin: GPIO17}"), Line: 10}); err != nil {
		t.Fatal(err)
	}
	err := d.Add(drivers.Spec{ID: "b", Options: options(t, "{pin: GPIO17, active_low: true}"), Line: 12})
	if err == nil || !containsAll(err.Error(), `switch "b"`, "GPIO17", `already used by switch "a" at line 10`) {
		t.Errorf("Add of a second switch on GPIO17 = %v", err)
	}
	if err := d.Add(drivers.Spec{ID: "c", Options: options(t, "{chip: gpiochip0, line: 17}"), Line: 14}); err != nil {
		t.Errorf("a chip line with no name is a different key: %v", err)
	}
}

func TestNewRejectsSettings(t *testing.T) {
	env := (&recorder{}).env()
	env.Settings = options(t, "{chips: 2}")
	if _, err := New(env); err == nil {
		t.Error("New accepted a gpio settings section")
	}
}

// Outside tests, chip lookups go to gpioioctl; with no chips (a machine
// without /dev/gpiochip*, before host init) the message says so.
func TestIoctlLineWithoutChips(t *testing.T) {
	if _, err := ioctlLine("gpiochip0", 0); err == nil {
		t.Skip("this machine has GPIO chips")
	} else if !strings.Contains(err.Error(), "no GPIO chip") {
		t.Errorf("ioctlLine = %v, want a message about missing chips", err)
	}
}

// A config reload keeps each relay at its current value: the start-up policy
// does not apply, so a reload never switches a relay.
func TestReloadKeepsRelayValue(t *testing.T) {
	t.Parallel()
	for _, startup := range []string{"off", "on", "restore"} {
		for _, current := range []bridge.Value{bridge.On, bridge.Off} {
			rec := &recorder{stored: map[string]bridge.Value{"r": current}}
			p := gpiotest.NewPin(t, false)
			env := rec.env()
			env.Reload = true
			d, err := newDriver(env, (&fakeHost{}).platform())
			if err != nil {
				t.Fatal(err)
			}
			mustAdd(t, d, "r", fmt.Sprintf("{pin: %s, startup: %s}", p.N, startup))
			mustOpen(t, d)
			if w := p.Writes(); len(w) != 1 || w[0] != level(current, false) {
				t.Errorf("startup %s, value %s: reload wrote %v, want [%s]", startup, current, w, level(current, false))
			}
		}
	}
}

// A contact's last_seen is its last read of the line, changed or not; a
// relay's, which is never read, the hub's last write to it.
func TestLastSeen(t *testing.T) {
	t.Parallel()
	p := gpiotest.NewPin(t, false)
	d := newTestDriver(t, nil, &recorder{})
	s := newStepper()
	d.wait = s.wait
	mustAdd(t, d, "door", fmt.Sprintf("{pin: %s, mode: input, detect: poll, poll_interval: 10ms}", p.N))
	dev := mustOpen(t, d)["door"]
	opened := dev.State().LastSeen
	if opened.IsZero() {
		t.Fatal("a contact read at open has no last_seen")
	}
	s.next(t)
	before := time.Now()
	s.step(t) // a poll that finds the same level
	s.next(t)
	if st := dev.State(); st.LastSeen.Before(before) || !st.Updated.Before(before) {
		t.Errorf("after a poll with no change: last_seen %s, updated %s; want last_seen at the poll (after %s), updated unchanged", st.LastSeen, st.Updated, before)
	}

	out := gpiotest.NewPin(t, false)
	rd := newTestDriver(t, nil, &recorder{})
	mustAdd(t, rd, "lamp", fmt.Sprintf("{pin: %s, mode: output, startup: off}", out.N))
	relay := mustOpen(t, rd)["lamp"]
	before = time.Now()
	if err := relay.(bridge.Commander).Do(context.Background(), bridge.CommandOn); err != nil {
		t.Fatal(err)
	}
	if st := relay.State(); st.LastSeen.Before(before) {
		t.Errorf("a relay's last_seen %s is not its last write (after %s)", st.LastSeen, before)
	}
}

// Two names of one line, as periph resolves them on a Raspberry Pi (the
// number, the chipset name, the header position), are one line: the
// second switch is refused at its line, naming the first.
func TestAddRejectsOneLineUnderTwoNames(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ first, second string }{
		{"GPIO17", "17"},
		{"17", "GPIO17"},
		{"P1_11", "GPIO17"},
		{"017", "P1_11"},
		{"GPIO2", "P1_3"},
	} {
		d := newTestDriver(t, nil, &recorder{})
		if err := d.Add(drivers.Spec{ID: "a", Options: options(t, "{pin: \""+c.first+"\"}"), Line: 10}); err != nil {
			t.Fatal(err)
		}
		err := d.Add(drivers.Spec{ID: "b", Options: options(t, "{pin: \""+c.second+"\"}"), Line: 12})
		if err == nil || !containsAll(err.Error(), `switch "b"`, c.second, `already used by switch "a" at line 10`) {
			t.Errorf("%s then %s: %v, want the second refused", c.first, c.second, err)
		}
	}
	d := newTestDriver(t, nil, &recorder{})
	for i, pin := range []string{"GPIO17", "GPIO27", "18", "P1_13x"} {
		if err := d.Add(drivers.Spec{ID: fmt.Sprint("s", i), Options: options(t, "{pin: \""+pin+"\"}"), Line: 10 + i}); err != nil {
			t.Errorf("%s: %v, want distinct lines accepted", pin, err)
		}
	}
}
