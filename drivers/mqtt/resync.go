package mqtt

// Asking plugs for their state again after a connection comes back, until
// each has answered.

import "time"

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
