package gpio

import (
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"

	"periph.io/x/conn/v3/driver/driverreg"
	"periph.io/x/conn/v3/gpio"
	"periph.io/x/conn/v3/gpio/gpioreg"
	"periph.io/x/host/v3"
	"periph.io/x/host/v3/gpioioctl"
)

// platform is how the driver reaches the machine's GPIO lines. The daemon
// uses periph's host drivers; tests swap in gpiotest pins.
type platform struct {
	// init loads periph's host drivers. Per-driver failures come back in the
	// state, not as the error.
	init func() (*driverreg.State, error)
	// byName returns the line registered under name, or nil.
	byName func(name string) gpio.PinIO
	// chipLine returns the line at offset on a GPIO chip, for lines the
	// kernel left unnamed.
	chipLine func(chip string, offset int) (gpio.PinIO, error)
	// names lists the registered line names, for "not found" messages.
	names func() []string
}

// system is the platform of the machine the daemon runs on.
var system = platform{
	// host.Init caches its state after the first call; the Once also keeps a
	// config reload from paying for the driver scan's locking again.
	init:     sync.OnceValues(host.Init),
	byName:   gpioreg.ByName,
	chipLine: ioctlLine,
	names:    registeredNames,
}

// hostless reaches only the lines registered in gpioreg, without loading
// periph's host drivers, and no chip lines.
var hostless = platform{
	init:   func() (*driverreg.State, error) { return &driverreg.State{}, nil },
	byName: gpioreg.ByName,
	chipLine: func(chip string, _ int) (gpio.PinIO, error) {
		return nil, fmt.Errorf("no GPIO chip %q", chip)
	},
	names: registeredNames,
}

func registeredNames() []string {
	all := gpioreg.All()
	out := make([]string, 0, len(all))
	for _, p := range all {
		out = append(out, p.Name())
	}
	return out
}

// ioctlLine finds a line of a kernel GPIO chip. chip is matched against
// each chip's kernel name (gpiochip0), label (pinctrl-bcm2711) and device
// path (/dev/gpiochip0); a bare number n means gpiochipn.
func ioctlLine(chip string, offset int) (gpio.PinIO, error) {
	var found []string
	for _, c := range gpioioctl.Chips {
		if !chipMatches(c, chip) {
			found = append(found, c.Name())
			continue
		}
		if offset < 0 || offset >= c.LineCount() {
			return nil, fmt.Errorf("chip %s has %d lines (offsets 0 to %d), not offset %d", c.Name(), c.LineCount(), c.LineCount()-1, offset)
		}
		// ByNumber returns a typed nil when out of range; the check above
		// keeps it from being wrapped into a non-nil interface.
		if l := c.ByNumber(offset); l != nil {
			return l, nil
		}
		return nil, fmt.Errorf("chip %s has no line at offset %d", c.Name(), offset)
	}
	if len(found) == 0 {
		return nil, errors.New("no GPIO chips found (is /dev/gpiochip* present and readable by the daemon's user?)")
	}
	return nil, fmt.Errorf("no GPIO chip %q (found: %s)", chip, strings.Join(found, ", "))
}

func chipMatches(c *gpioioctl.GPIOChip, want string) bool {
	if want == c.Name() || want == c.Label() || want == c.Path() {
		return true
	}
	return isDigits(want) && c.Name() == "gpiochip"+want
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// logHostState reports what periph's host drivers did. Init returns an error
// only for registry faults; a driver that could not load (no access to
// /dev/gpiomem, say) is only visible here.
func logHostState(log *slog.Logger, st *driverreg.State) {
	if st == nil {
		return
	}
	for _, f := range st.Failed {
		log.Warn("periph host driver failed to load", "periph_driver", implName(f.D), "err", f.Err)
	}
	if len(st.Skipped) > 0 {
		parts := make([]string, len(st.Skipped))
		for i, f := range st.Skipped {
			parts[i] = fmt.Sprintf("%s (%v)", implName(f.D), f.Err)
		}
		log.Info("periph host drivers skipped", "periph_drivers", strings.Join(parts, "; "))
	}
	if len(st.Loaded) > 0 {
		names := make([]string, len(st.Loaded))
		for i, d := range st.Loaded {
			names[i] = implName(d)
		}
		log.Debug("periph host drivers loaded", "periph_drivers", strings.Join(names, ", "))
	}
}

func implName(d interface{ String() string }) string {
	if d == nil {
		return "unknown"
	}
	return d.String()
}

// realPin follows gpioreg aliases ("17" for GPIO17) to the pin behind them,
// so two names for one line are seen as one line.
func realPin(p gpio.PinIO) gpio.PinIO {
	for range 8 { // aliases of aliases are legal but short
		r, ok := p.(gpio.RealPin)
		if !ok {
			return p
		}
		p = r.Real()
	}
	return p
}

// claims records which switch holds each line in this process. The kernel
// refuses a second request for a line from another process, but periph keeps
// one object per line and would happily share it between two drivers here
// (an old and a new config during a reload), and the first to close would
// release the line under the second.
var claims = struct {
	sync.Mutex
	held map[gpio.PinIO]string
}{held: map[gpio.PinIO]string{}}

// claim marks p as held by switchID, or says who holds it.
func claim(p gpio.PinIO, switchID string) error {
	key := realPin(p)
	if !reflect.TypeOf(key).Comparable() {
		return nil
	}
	claims.Lock()
	defer claims.Unlock()
	if owner, ok := claims.held[key]; ok {
		return fmt.Errorf("busy: already held by switch %q", owner)
	}
	claims.held[key] = switchID
	return nil
}

func unclaim(p gpio.PinIO) {
	key := realPin(p)
	if !reflect.TypeOf(key).Comparable() {
		return
	}
	claims.Lock()
	delete(claims.held, key)
	claims.Unlock()
}

// releaseLine stops whatever the line is doing and gives it back to the
// kernel. periph's Halt only interrupts waits; a gpioioctl line holds its
// request until Close.
func releaseLine(p gpio.PinIO) error {
	err := p.Halt()
	switch c := realPin(p).(type) {
	case interface{ Close() error }:
		err = errors.Join(err, c.Close())
	case interface{ Close() }:
		c.Close()
	}
	return err
}
