package mqtt

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
)

// device is one plug as the hub sees it.
type device struct {
	d    *driver
	id   string
	plug *plug
	// cmd holds a token while a command runs, so a plug has one command in
	// flight at a time and each confirmation belongs to one command.
	cmd chan struct{}

	mu      sync.Mutex
	value   bridge.Value
	updated time.Time
	avail   availability // the plug's own availability topic
	gateway availability // Zigbee2MQTT's bridge/state
	waiters []*waiter
}

// waiter is a command waiting for the plug to report target.
type waiter struct {
	target bridge.Value
	done   chan error // buffered; receives once
	hint   string     // a rejection seen while waiting; guarded by the device's mu
}

// State implements bridge.Device from the cache; it never waits.
func (dev *device) State() bridge.State {
	dev.mu.Lock()
	defer dev.mu.Unlock()
	return dev.stateLocked()
}

func (dev *device) stateLocked() bridge.State {
	return bridge.State{Value: dev.value, Available: dev.whyUnavailableLocked() == "", Updated: dev.updated}
}

// whyUnavailableLocked says why a command cannot reach the plug now, or "".
func (dev *device) whyUnavailableLocked() string {
	switch {
	case dev.d.closed.Load():
		return "the hub is shutting down"
	case !dev.d.connected():
		return fmt.Sprintf("the MQTT broker %s is not connected", dev.d.url)
	case dev.avail == availOffline:
		return "the plug reports itself offline"
	case dev.gateway == availOffline:
		return "its Zigbee2MQTT bridge is offline"
	}
	return ""
}

// Supports implements bridge.CommandSupporter: a generic plug without a
// command topic is read-only.
func (dev *device) Supports(bridge.Command) bool { return dev.plug.command != nil }

// Do implements bridge.Commander. It publishes the command and returns when
// the plug reports the commanded value on its state topic, when it is or
// becomes unreachable (bridge.ErrUnavailable, at once), or at the earlier of
// ctx's deadline and the confirm timeout (context.DeadlineExceeded).
func (dev *device) Do(ctx context.Context, cmd bridge.Command) error {
	if !dev.Supports(cmd) {
		return fmt.Errorf("mqtt switch %s is read-only (no command_topic): %w", dev.id, errors.ErrUnsupported)
	}
	target := cmd.Value()
	timeout := dev.d.set.ConfirmTimeout.Std()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	select {
	case dev.cmd <- struct{}{}:
		defer func() { <-dev.cmd }()
	case <-ctx.Done():
		return dev.ctxErr(ctx, timeout)
	}

	w := &waiter{target: target, done: make(chan error, 1)}
	dev.mu.Lock()
	if why := dev.whyUnavailableLocked(); why != "" {
		dev.mu.Unlock()
		return fmt.Errorf("mqtt switch %s: %s: %w", dev.id, why, bridge.ErrUnavailable)
	}
	// Firmware that reports only changes (ESPHome, Shelly Gen1) stays
	// silent when told to be what it already said it is; that report is the
	// confirmation.
	already := !dev.updated.IsZero() && dev.value == target && !dev.plug.repeatsState
	dev.waiters = append(dev.waiters, w)
	dev.mu.Unlock()
	defer dev.drop(w)

	var m message
	if dev.plug.rpc >= 0 {
		var id uint64
		id, m = dev.d.rpcFrame(dev, target)
		defer dev.d.forget(id)
	} else {
		m = dev.plug.command(target)
	}
	// paho's Publish can block (up to its write timeout) while a dying
	// connection drains its queue, and its token may never complete, so
	// both are waited for aside, until this call returns at the latest.
	// This goroutine speaks only when the publish failed or, for a plug
	// already in the target state, when the command is out: in the common
	// case the plug's report is the one thing that wakes this call.
	sent := make(chan error, 1)
	go func() {
		tok := dev.d.publish(m)
		select {
		case <-tok.Done():
			if err := tok.Error(); err != nil {
				sent <- fmt.Errorf("mqtt switch %s: publishing to %s: %v: %w", dev.id, m.topic, err, bridge.ErrUnavailable)
			} else if already {
				sent <- nil
			}
		case <-ctx.Done():
		}
	}()
	select {
	case err := <-w.done:
		if err != nil {
			return fmt.Errorf("mqtt switch %s: %w", dev.id, err)
		}
		return nil
	case err := <-sent:
		return err
	case <-ctx.Done():
		err := dev.ctxErr(ctx, timeout)
		dev.mu.Lock()
		hint := w.hint
		dev.mu.Unlock()
		if hint != "" {
			dev.d.log.Warn("command not confirmed; the firmware rejected a command meanwhile", "switch", dev.id, "answer", hint)
			err = fmt.Errorf("%w; meanwhile %s", err, hint)
		}
		return err
	}
}

func (dev *device) ctxErr(ctx context.Context, timeout time.Duration) error {
	err := ctx.Err()
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("mqtt switch %s: no confirmation on its state topic before the deadline (confirm_timeout %s): %w", dev.id, timeout, err)
	}
	return fmt.Errorf("mqtt switch %s: %w", dev.id, err)
}

func (dev *device) drop(w *waiter) {
	dev.mu.Lock()
	dev.waiters = slices.DeleteFunc(dev.waiters, func(x *waiter) bool { return x == w })
	dev.mu.Unlock()
}

// apply takes in what one message said. It never blocks: it runs on the
// MQTT client's message goroutine. force notifies the hub even when the
// report is empty (a connection came up).
func (dev *device) apply(r report, force bool) {
	dev.mu.Lock()
	was := dev.whyUnavailableLocked()
	// A plug (or its Zigbee2MQTT bridge) that comes online may have
	// changed while away, and Zigbee2MQTT does not retain states: ask.
	cameOnline := (r.avail == availOnline && dev.avail != availOnline) || (r.bridge == availOnline && dev.gateway != availOnline)
	if r.avail != availUnknown {
		dev.avail = r.avail
	}
	if r.bridge != availUnknown {
		dev.gateway = r.bridge
	}
	if r.value != "" {
		dev.value, dev.updated = r.value, time.Now()
	}
	why := dev.whyUnavailableLocked()
	keep := dev.waiters[:0]
	for _, w := range dev.waiters {
		switch {
		case why != "":
			w.done <- fmt.Errorf("%s: %w", why, bridge.ErrUnavailable)
		case r.failure != "":
			w.done <- errors.New(r.failure)
		case r.rejected != "":
			w.hint = r.rejected
			keep = append(keep, w)
		case r.value != "" && r.value == w.target:
			w.done <- nil
		default:
			keep = append(keep, w)
		}
	}
	clear(dev.waiters[len(keep):])
	dev.waiters = keep
	st := dev.stateLocked()
	dev.mu.Unlock()

	if why != was && why != "" && dev.d.ready.Load() {
		dev.d.log.Warn("switch unavailable", "switch", dev.id, "reason", why)
	} else if why != was && why == "" && !force {
		dev.d.log.Info("switch available again", "switch", dev.id)
	}
	if cameOnline && dev.d.ready.Load() {
		go dev.d.query(dev) // not from here: this goroutine must never wait on the client
	}
	if r.rejected != "" && len(keep) == 0 {
		dev.d.log.Debug("firmware rejected a command or query", "switch", dev.id, "answer", r.rejected)
	}
	if force || r.value != "" || r.avail != availUnknown || r.bridge != availUnknown {
		dev.d.notify(dev.id, st)
	}
}

// down forgets the plug's availability (it is learnt again from the
// retained messages after reconnecting), fails waiting commands and tells
// the hub the plug is unavailable.
func (dev *device) down() {
	dev.mu.Lock()
	dev.avail, dev.gateway = availUnknown, availUnknown
	for _, w := range dev.waiters {
		w.done <- fmt.Errorf("the MQTT broker connection is down: %w", bridge.ErrUnavailable)
	}
	clear(dev.waiters)
	dev.waiters = dev.waiters[:0]
	st := dev.stateLocked()
	dev.mu.Unlock()
	dev.d.notify(dev.id, st)
}
