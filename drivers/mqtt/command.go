package mqtt

// A command to one plug: held while the plug has not been heard from since
// the connection came back, published once, confirmed by the plug's own
// report or failed with the reason, and never sent after its request was
// answered.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/switchbridge/switchbridge/bridge"
)

// maxResends bounds the copies of a held command (see await).
const maxResends = 2

// waiter is a command waiting for the plug to report target.
type waiter struct {
	target bridge.Value
	done   chan error // buffered; receives once
	hint   string     // a rejection seen while waiting; guarded by the device's mu
}

// Do implements bridge.Commander. It publishes the command (once the plug
// is back, when it is reconnecting: see holdUntilHeard) and returns when
// the plug reports the commanded value on its state topic, when it is or
// becomes unreachable (bridge.ErrUnavailable, at once), or at the earlier of
// ctx's deadline and the confirm timeout (context.DeadlineExceeded).
func (dev *device) Do(ctx context.Context, cmd bridge.Command) error {
	if !dev.Supports(cmd) {
		return dev.readOnly()
	}
	target := cmd.Value()
	timeout := dev.d.set.ConfirmTimeout.Std()
	// The hub's deadline usually comes first already; a context of its own
	// (and its timer) per plug is made only when confirm_timeout is shorter.
	if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > timeout {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	select {
	case dev.cmd <- struct{}{}:
		defer func() { <-dev.cmd }()
	case <-ctx.Done():
		return dev.ctxErr(ctx, timeout)
	}
	held, err := dev.holdUntilHeard(ctx, timeout)
	if err != nil {
		return err
	}

	w := &waiter{target: target, done: make(chan error, 1)}
	dev.mu.Lock()
	if why := dev.whyUnavailableLocked(); why != "" {
		dev.mu.Unlock()
		return dev.unavailable(why)
	}
	// Firmware that reports only changes (ESPHome, Shelly Gen1) stays
	// silent when told to be what it already said it is; that report is the
	// confirmation.
	already := !dev.updated.IsZero() && dev.value == target && !dev.plug.repeatsState
	// A command sent before the plug's own word since the connection came
	// back (held for it, or sent on the strength of retained copies) may
	// be lost: it is sent again at the plug's next messages (see await).
	resend := held || !dev.heardLive
	dev.waiters = append(dev.waiters, w)
	dev.mu.Unlock()
	defer dev.drop(w)

	var m message
	if dev.plug.requests != nil {
		var id uint64
		id, m = dev.d.request(dev, target)
		defer dev.d.forget(id)
	} else {
		m = dev.plug.command(target)
	}
	// paho's Publish can block (up to its write timeout) while a dying
	// connection drains its queue, and its token may never complete, so
	// the driver's publisher makes the call aside and hands back the token,
	// which is waited for here beside the plug's report, until this call
	// returns at the latest. The token matters only when the publish
	// failed or, for a plug already in the target state, as the sign that
	// the command is out: in the common case the plug's report is the one
	// thing that wakes this call.
	return dev.await(ctx, w, m, already, resend, timeout)
}

// await hands m to the publisher and waits for the plug's confirmation
// (w), the publish's failure or, when already, its completion, or ctx. A
// method of its own, apart from Do's rarer paths, keeps the stack of the
// goroutine the hub runs each switch's command in from growing.
//
// With resend, a command sent before the plug's own word since the
// connection came back is sent again, up to maxResends times, at the
// plug's next messages while it is not confirmed: firmware that announces
// itself before it subscribes to its commands (Tasmota does) loses a
// command sent at its announcement, and a broker with persistence hands
// out the plug's retained "online" before the plug is back. On and off
// are idempotent, so a second copy of a command that was not lost changes
// nothing; the copies go through the publisher too, which drops them once
// ctx has ended.
func (dev *device) await(ctx context.Context, w *waiter, m message, already, resend bool, timeout time.Duration) error {
	job := publishJob{ctx: ctx, m: m, tok: make(chan paho.Token, 1)}
	select {
	case dev.d.outbox <- job:
	case <-ctx.Done():
		return dev.ctxErr(ctx, timeout)
	}
	handed := job.tok
	var (
		tok     paho.Token
		sent    <-chan struct{}
		next    <-chan struct{} // the plug's next message, while resending
		resends int
	)
	if resend {
		dev.mu.Lock()
		next = dev.changeLocked()
		dev.mu.Unlock()
	}
	for {
		select {
		case err := <-w.done:
			if err != nil {
				return dev.wrap(err)
			}
			return nil
		case <-next:
			next = nil
			if len(w.done) > 0 {
				continue // the message was the answer: taken above
			}
			resends++
			select {
			case dev.d.outbox <- publishJob{ctx: ctx, m: m, tok: make(chan paho.Token, 1)}:
			case <-ctx.Done():
				return dev.gaveUp(ctx, w, timeout)
			}
			if resends < maxResends {
				dev.mu.Lock()
				next = dev.changeLocked()
				dev.mu.Unlock()
			}
		case tok = <-handed:
			handed, sent = nil, tok.Done()
		case <-sent:
			sent = nil
			if err := tok.Error(); err != nil {
				return dev.publishErr(m, err)
			}
			if already {
				return nil
			}
		case <-ctx.Done():
			return dev.gaveUp(ctx, w, timeout)
		}
	}
}

// holdUntilHeard returns once a command can be sent to the plug with a
// chance of reaching it. After the broker connection comes back (a broker
// restart, a network cut), the plug reconnects on its own schedule,
// usually a little after the hub; a command published before it has
// subscribed again is lost, and its request would wait out its whole
// deadline for a confirmation that cannot come. So when the hub has not
// heard from the plug since the connection came back, and knows it will
// (the hub asks it for its state at every connect, or it announces
// itself), the command waits for the plug's first message (its "online",
// its state, any message on its topics) and is sent then. It waits
// within ctx: a command whose request has been answered is never sent,
// and one whose plug did not come back in time fails as unavailable.
// A plug the hub has no way to hear from (it neither answers questions
// nor announces itself) is commanded at once, as before.
//
// held reports whether the command waited.
func (dev *device) holdUntilHeard(ctx context.Context, timeout time.Duration) (held bool, err error) {
	for ; ; held = true {
		dev.mu.Lock()
		if why := dev.whyUnavailableLocked(); why != "" {
			dev.mu.Unlock()
			return held, dev.unavailable(why)
		}
		if dev.heard || !(dev.announced || dev.plug.askable()) {
			dev.mu.Unlock()
			return held, nil
		}
		change := dev.changeLocked()
		dev.mu.Unlock()
		select {
		case <-change:
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				// Unavailable, not a timeout: nothing was sent, so
				// nothing can have switched.
				return held, dev.unavailable("not heard from since the MQTT broker connection came back; the command waited for it and was not sent")
			}
			return held, dev.ctxErr(ctx, timeout)
		}
	}
}

func (dev *device) readOnly() error {
	return fmt.Errorf("mqtt switch %s is read-only (no command_topic): %w", dev.id, errors.ErrUnsupported)
}

func (dev *device) unavailable(why string) error {
	return fmt.Errorf("mqtt switch %s: %s: %w", dev.id, why, bridge.ErrUnavailable)
}

func (dev *device) wrap(err error) error { return fmt.Errorf("mqtt switch %s: %w", dev.id, err) }

func (dev *device) publishErr(m message, err error) error {
	return fmt.Errorf("mqtt switch %s: publishing to %s: %v: %w", dev.id, m.topic, err, bridge.ErrUnavailable)
}

// gaveUp is the error of a command whose ctx ended first, with the
// firmware's rejection of a command meanwhile, if any.
func (dev *device) gaveUp(ctx context.Context, w *waiter, timeout time.Duration) error {
	err := dev.ctxErr(ctx, timeout)
	dev.mu.Lock()
	hint := w.hint
	dev.mu.Unlock()
	if hint != "" {
		dev.d.log.Warn("command not confirmed; the firmware rejected a command meanwhile", "switch", dev.id, "answer", bridge.Untrusted(hint))
		err = fmt.Errorf("%w; meanwhile %s", err, hint)
	}
	return err
}

// publishJob is a command for the driver's publisher: the message, the
// context of the command that waits for it, and where the token goes.
type publishJob struct {
	ctx context.Context
	m   message
	tok chan paho.Token // buffered: the publisher never waits on it
}

// publisher publishes the commands of Do, one after another, until Close.
// One long-lived goroutine rather than one per command: paho hands every
// publish to its one writer anyway, and a goroutine started per command
// cost its start and the growth of its stack into paho's Publish. A
// command whose caller no longer waits is dropped, never sent late.
func (d *driver) publisher() {
	for {
		select {
		case j := <-d.outbox:
			if j.ctx.Err() != nil {
				continue
			}
			j.tok <- d.publish(j.m)
		case <-d.stop:
			return
		}
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
