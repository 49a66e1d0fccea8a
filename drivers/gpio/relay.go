package gpio

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"time"

	"periph.io/x/conn/v3/gpio"

	"github.com/switchbridge/switchbridge/bridge"
)

// relay is an output line. Its state is the level the hub last wrote: periph
// (host v3.8.5, gpioioctl) turns an output into a pulled-up input when it is
// read, which can switch a relay on, so the line is never read, and never
// asked its function, which reads it too.
type relay struct {
	sw        string
	name      string
	pin       gpio.PinIO
	activeLow bool
	notify    func(string, bridge.State)

	mu     sync.Mutex // serialises writes, so the stored state matches the line
	state  bridge.State
	closed bool
}

// openRelay drives the line to its start-up level. That first Out both makes
// the line an output and sets its level: the hub never writes another level
// first. (periph's gpioioctl may still hold the line low for the two system
// calls between requesting it and setting it; bcm283x sets the level first.)
func (d *driver) openRelay(sp spec, p gpio.PinIO) (*relay, error) {
	v, why := d.startValue(sp)
	l := level(v, sp.activeLow)
	if err := p.Out(l); err != nil {
		return nil, fmt.Errorf("setting it as an output at %s: %w%s", l, err, busyHint(err))
	}
	d.env.Logger.Info("relay ready", "switch", sp.id, "pin", sp.where(), "value", string(v), "level", l.String(), "startup", why)
	// An output line is never read (see gpio.go): its last_seen is the
	// hub's last write to it.
	now := time.Now()
	return &relay{
		sw: sp.id, name: sp.where(), pin: p, activeLow: sp.activeLow, notify: d.env.Notify,
		state: bridge.State{Value: v, Available: true, Updated: now, LastSeen: now},
	}, nil
}

// startValue is the value an output takes at start-up, and why.
// On a config reload the relay keeps the value it had: the policy is for
// start-up, and a reload must not switch anything.
func (d *driver) startValue(sp spec) (bridge.Value, string) {
	if d.env.Reload {
		if v, ok := d.env.LastValue(sp.id); ok && (v == bridge.On || v == bridge.Off) {
			return v, "reload: kept"
		}
	}
	switch sp.startup {
	case StartupOn:
		return bridge.On, "on"
	case StartupOff:
		return bridge.Off, "off"
	}
	if v, ok := d.env.LastValue(sp.id); ok && (v == bridge.On || v == bridge.Off) {
		return v, "restore: stored value"
	}
	return bridge.Off, "restore: nothing stored, off"
}

func (r *relay) id() string { return r.sw }

// relayMaxChanges is a relay's cap on commands when its switch sets no
// max_changes.
var relayMaxChanges = bridge.ChangeLimit{Burst: 4, Per: time.Second}

// DefaultMaxChanges implements bridge.ChangeLimiter. A relay is a
// mechanical contact rated for a number of operations, and what a stuck
// client loop, or a hostile one, does to it at line speed is weld or burn
// it, or the motor or lamp behind it: four commands at once (a scene
// switching on and back off), then one a second.
func (r *relay) DefaultMaxChanges() bridge.ChangeLimit { return relayMaxChanges }

// State implements bridge.Device.
func (r *relay) State() bridge.State {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state
}

// Supports implements bridge.CommandSupporter.
func (r *relay) Supports(cmd bridge.Command) bool {
	return cmd == bridge.CommandOn || cmd == bridge.CommandOff
}

// Do implements bridge.Commander. A write to a GPIO line does not block, so
// ctx is only checked before it.
func (r *relay) Do(ctx context.Context, cmd bridge.Command) error {
	if !r.Supports(cmd) {
		return fmt.Errorf("gpio relay %s: %q: %w", r.sw, cmd, errors.ErrUnsupported)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	v := cmd.Value()
	l := level(v, r.activeLow)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return fmt.Errorf("gpio relay %s: line %s is released: %w", r.sw, r.name, bridge.ErrUnavailable)
	}
	if err := r.pin.Out(l); err != nil {
		return fmt.Errorf("gpio relay %s: writing %s to line %s: %w", r.sw, l, r.name, err)
	}
	now := time.Now()
	r.state = bridge.State{Value: v, Available: true, Updated: now, LastSeen: now}
	// Notify under the lock: two commands racing must be stored in the
	// order they reached the line, or a restore would bring back the loser.
	r.notify(r.sw, r.state)
	return nil
}

func (r *relay) close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	r.state.Available = false
	err := releaseLine(r.pin)
	unclaim(r.pin)
	if err != nil {
		return fmt.Errorf("switch %q: releasing GPIO line %s: %w", r.sw, r.name, err)
	}
	return nil
}

// busyHint explains the kernel's EBUSY, which periph passes on as text only.
func busyHint(err error) string {
	if errors.Is(err, syscall.EBUSY) || strings.Contains(err.Error(), syscall.EBUSY.Error()) {
		return " (busy: another program holds the line; gpioinfo shows which)"
	}
	return ""
}
