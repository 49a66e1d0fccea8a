package mqtt

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/switchbridge/switchbridge/bridge"
)

// device is one plug as the hub sees it.
type device struct {
	d    *driver
	id   string
	line int // of its switch in the config
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
	// live counts the value reports the plug sent (not the broker's
	// retained copies); a resync stops asking once it moves.
	live uint64
	// asking is the current resync's number; a timer of an older one
	// does nothing. requery is its pending re-ask, if any.
	asking  uint64
	requery *time.Timer
	// heard is set by any message from or about the plug (a report, its
	// availability, its gateway's, an answer, anything on its topics,
	// retained copies included) since the broker connection last went
	// down. announced is set once the plug has ever said it was online or
	// offline: such firmware says so again when it comes back. A command
	// for a plug not heard from since the connection came back, which is
	// askable or announced, waits for it (see holdUntilHeard).
	heard, announced bool
	// heardLive is heard without the retained copies: after a restart of
	// a broker with persistence, a retained "online" may predate the
	// outage, and the plug may not be back yet.
	heardLive bool
	// change is closed (and replaced) when heard, the availability or the
	// connection changes: what a held command waits on.
	change chan struct{}
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
func (dev *device) Supports(bridge.Command) bool { return dev.plug.commandable() }

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

// maxResends bounds the copies of a held command (see await).
const maxResends = 2

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

// changeLocked is the channel closed at the plug's next change.
func (dev *device) changeLocked() <-chan struct{} {
	if dev.change == nil {
		dev.change = make(chan struct{})
	}
	return dev.change
}

// changedLocked wakes the commands held in holdUntilHeard.
func (dev *device) changedLocked() {
	if dev.change != nil {
		close(dev.change)
		dev.change = nil
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
		if !r.retained {
			dev.live++
		}
	}
	if r.avail != availUnknown || r.bridge != availUnknown {
		dev.announced = true
	}
	// force is the connection coming up, not a message.
	if !force {
		dev.heard = true
		dev.heardLive = dev.heardLive || !r.retained
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
	// After the waiters have their answers: a held command woken here
	// finds its confirmation already in, and does not send a copy.
	if dev.heard || why != was {
		dev.changedLocked()
	}
	st := dev.stateLocked()
	dev.mu.Unlock()

	if why != was && why != "" && dev.d.ready.Load() {
		dev.d.log.Warn("switch unavailable", "switch", dev.id, "reason", bridge.Untrusted(why))
	} else if why != was && why == "" && !force {
		dev.d.log.Info("switch available again", "switch", dev.id)
	}
	if cameOnline && dev.d.ready.Load() {
		go dev.d.resync(dev) // not from here: this goroutine must never wait on the client
	}
	if r.rejected != "" && len(keep) == 0 {
		dev.d.log.Debug("firmware rejected a command or query", "switch", dev.id, "answer", bridge.Untrusted(r.rejected))
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
	dev.stopAskingLocked()
	dev.avail, dev.gateway = availUnknown, availUnknown
	dev.heard, dev.heardLive = false, false
	dev.changedLocked()
	for _, w := range dev.waiters {
		w.done <- fmt.Errorf("the MQTT broker connection is down: %w", bridge.ErrUnavailable)
	}
	clear(dev.waiters)
	dev.waiters = dev.waiters[:0]
	st := dev.stateLocked()
	dev.mu.Unlock()
	dev.d.notify(dev.id, st)
}

// resync asks the plug for its state now and again at each of
// requeryAfter until it sends a live report. The first question is lost
// when the firmware announces itself (online) before it subscribes to its
// command topic, or when it is still connecting as the hub's subscription
// is confirmed; and a plug that reports nothing on connecting would then
// stay as it was before an outage. A resync replaces the plug's previous
// one, so each plug has at most one timer, and each resync asks at most
// 1+len(requeryAfter) times.
func (d *driver) resync(dev *device) {
	if !dev.plug.askable() || d.closed.Load() {
		return
	}
	dev.mu.Lock()
	dev.stopAskingLocked()
	n, seen := dev.asking, dev.live
	dev.mu.Unlock()
	d.query(dev)
	dev.askAgain(n, seen, d.requery, 0)
}

// requeryAfter is when a resync asks again, counted from its first
// question, unless the plug has reported meanwhile.
var requeryAfter = []time.Duration{time.Second, 3 * time.Second}

// askAgain arms the timer for re-ask i of resync n, whose schedule is
// after.
func (dev *device) askAgain(n, seen uint64, after []time.Duration, i int) {
	if i >= len(after) {
		return
	}
	wait := after[i]
	if i > 0 {
		wait -= after[i-1]
	}
	dev.mu.Lock()
	defer dev.mu.Unlock()
	if dev.asking != n {
		return
	}
	dev.requery = time.AfterFunc(wait, func() {
		dev.mu.Lock()
		current := dev.asking == n && dev.live == seen
		dev.mu.Unlock()
		// A reconnect starts a resync of its own; while the broker is
		// away a question would only wait in paho's queue.
		if !current || !dev.d.connected() {
			return
		}
		dev.d.query(dev)
		dev.askAgain(n, seen, after, i+1)
	})
}

// stopAskingLocked ends the plug's resync.
func (dev *device) stopAskingLocked() {
	dev.asking++
	if dev.requery != nil {
		dev.requery.Stop()
		dev.requery = nil
	}
}
