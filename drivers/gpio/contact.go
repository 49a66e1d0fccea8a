package gpio

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"periph.io/x/conn/v3/gpio"

	"github.com/switchbridge/switchbridge/bridge"
)

// contact is an input line: a wall switch, a door sensor. It reports what it
// reads and runs no command.
type contact struct {
	sw        string
	name      string
	pin       gpio.PinIO
	activeLow bool
	edges     bool // false: polled
	debounce  time.Duration
	interval  time.Duration
	notify    func(string, bridge.State)
	log       *slog.Logger
	wait      func(ctx context.Context, d time.Duration) bool

	mu    sync.Mutex
	state bridge.State

	stable    gpio.Level // the debounced level; owned by watch once it runs
	cancel    context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once
}

// openContact sets the line as an input, asking for edge events unless the
// config says to poll or the line cannot report them, and reads its level.
func (d *driver) openContact(sp spec, p gpio.PinIO) (*contact, error) {
	log := d.env.Logger.With("switch", sp.id, "pin", sp.where())
	edges := sp.edges
	if edges {
		if err := p.In(sp.pull, gpio.BothEdges); err != nil {
			log.Warn("GPIO line cannot report edges; polling it instead", "poll_interval_seconds", sp.interval.Seconds(), "err", err)
			edges = false
		}
	}
	if !edges {
		if err := p.In(sp.pull, gpio.NoEdge); err != nil {
			return nil, fmt.Errorf("setting it as an input: %w%s", err, busyHint(err))
		}
	}
	wait := d.wait
	if wait == nil {
		wait = sleep
	}
	l := p.Read()
	now := time.Now()
	c := &contact{
		sw: sp.id, name: sp.where(), pin: p, activeLow: sp.activeLow,
		edges: edges, debounce: sp.debounce, interval: sp.interval,
		notify: d.env.Notify, log: log, wait: wait, stable: l,
		state: bridge.State{Value: value(l, sp.activeLow), Available: true, Updated: now, LastSeen: now},
	}
	log.Info("contact ready", "value", string(c.state.Value), "level", l.String(), "edges", edges)
	return c, nil
}

func (c *contact) id() string { return c.sw }

// State implements bridge.Device.
func (c *contact) State() bridge.State {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state
}

// Supports implements bridge.CommandSupporter: an input runs no command.
func (c *contact) Supports(bridge.Command) bool { return false }

// Do implements bridge.Commander so the hub can tell "unsupported" from "not
// a commander"; it never touches the line.
func (c *contact) Do(_ context.Context, cmd bridge.Command) error {
	return fmt.Errorf("gpio input %s is read-only: %q: %w", c.sw, cmd, errors.ErrUnsupported)
}

// start runs the watcher until close.
func (c *contact) start() {
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.done = make(chan struct{})
	go c.watch(ctx)
}

// watch follows the line. A new level counts once it is read twice,
// debounce apart; a contact that bounces is looked at again on its next
// edge or poll. While waiting for edges it still re-reads the line every
// interval, so a lost edge cannot leave the state wrong for long.
func (c *contact) watch(ctx context.Context) {
	defer close(c.done)
	for ctx.Err() == nil {
		if c.edges {
			c.pin.WaitForEdge(c.interval)
		} else if !c.wait(ctx, c.interval) {
			return
		}
		if ctx.Err() != nil {
			return
		}
		l := c.pin.Read()
		c.seen()
		if l == c.stable {
			continue
		}
		if c.debounce > 0 {
			if !c.wait(ctx, c.debounce) {
				return
			}
			if c.pin.Read() != l {
				continue
			}
		}
		c.stable = l
		c.set(l)
	}
}

// seen notes a read of the line: a contact's last_seen is its last read,
// changed or not (no notification: a sign of life alone is no change).
func (c *contact) seen() {
	c.mu.Lock()
	c.state.LastSeen = time.Now()
	c.mu.Unlock()
}

func (c *contact) set(l gpio.Level) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	c.state = bridge.State{Value: value(l, c.activeLow), Available: true, Updated: now, LastSeen: now}
	c.notify(c.sw, c.state)
	c.log.Debug("contact changed", "value", string(c.state.Value), "level", l.String())
}

func (c *contact) close() error {
	var err error
	c.closeOnce.Do(func() {
		if c.cancel != nil {
			c.cancel()
			// Interrupts a gpioioctl WaitForEdge; elsewhere the wait ends
			// within one interval.
			_ = c.pin.Halt()
			<-c.done
		}
		c.mu.Lock()
		c.state.Available = false
		c.mu.Unlock()
		err = releaseLine(c.pin)
		unclaim(c.pin)
	})
	if err != nil {
		return fmt.Errorf("switch %q: releasing GPIO line %s: %w", c.sw, c.name, err)
	}
	return nil
}

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
