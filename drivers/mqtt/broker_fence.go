// The embedded broker's retained-message fence: mochi v2.7.9 writes a
// topic's retained path (TopicsIndex.RetainMessage) under its index lock
// but reads it, when it sends a new wildcard subscription the retained
// messages that match (scanMessages), without that lock. A client
// subscribing with a wildcard (the hub's discovery filters, such as
// shellies/+/online, or a plug's own cmnd/<topic>/#) while another stores
// a retained message on a topic the filter matches makes that a data
// race: harmless while the string stays the same, a torn read when a
// topic first gets or loses its retained message. The fence keeps the two
// apart from the outside, through mochi's hooks, until mochi locks the
// read itself.

package mqtt

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// fenceWait bounds each side's wait for the other. The sides hold the
// fence without I/O, except a subscription across the writing of its
// SUBACK (mochi has no hook between that write and the scan): a client
// that stops reading could hold a scan's side until its keepalive ends
// it, and no retained message may wait that long. Past the bound the
// write goes ahead unfenced, as it did without the fence, and is counted.
const fenceWait = time.Second

// retainFence lets writes of retained messages and scans of them for a
// new wildcard subscription happen side by side with their own kind but
// never with the other, each side waiting at most wait.
type retainFence struct {
	wait time.Duration

	mu      sync.Mutex
	scans   int // subscriptions between SUBACK and their scan's end
	writes  int // retained messages being stored
	held    map[*mochi.Client]*fenceHeld
	changed chan struct{} // closed, and replaced, at every exit

	forced atomic.Int64 // entries that went ahead at the bound
}

// fenceHeld is what one client holds of the fence. A client's packets,
// and then its will, come one at a time in its own goroutine; scans and
// writes are counted apart all the same, so that no order of its hooks
// (a way out that never came, before an entry past the bound) can leave
// the fence's counts wrong.
type fenceHeld struct{ scans, writes int }

func newRetainFence(wait time.Duration) *retainFence {
	return &retainFence{wait: wait, held: map[*mochi.Client]*fenceHeld{}, changed: make(chan struct{})}
}

// enter takes the fence for cl, as a writer or as a scan, once the other
// side has left it or f.wait has passed.
func (f *retainFence) enter(cl *mochi.Client, write bool) {
	var timer *time.Timer
	forced := false
	for {
		f.mu.Lock()
		clear := f.writes == 0
		if write {
			clear = f.scans == 0
		}
		if clear || forced {
			h := f.held[cl]
			if h == nil {
				h = &fenceHeld{}
				f.held[cl] = h
			}
			if write {
				f.writes++
				h.writes++
			} else {
				f.scans++
				h.scans++
			}
			f.mu.Unlock()
			if timer != nil {
				timer.Stop()
			}
			if forced {
				f.forced.Add(1)
			}
			return
		}
		changed := f.changed
		f.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(f.wait)
		}
		select {
		case <-changed:
		case <-timer.C:
			forced = true
		}
	}
}

// leave gives back whatever cl holds of the fence.
func (f *retainFence) leave(cl *mochi.Client) {
	f.mu.Lock()
	defer f.mu.Unlock()
	h, ok := f.held[cl]
	if !ok {
		return
	}
	delete(f.held, cl)
	f.scans -= h.scans
	f.writes -= h.writes
	close(f.changed)
	f.changed = make(chan struct{})
}

// fenceHook is the fence's part that must run before the other hooks:
// a publish enters as a writer before any hook can drop it, so that its
// way out (OnRetainMessage, or OnPacketProcessed when it was not kept)
// always follows.
type fenceHook struct {
	mochi.HookBase
	f *retainFence
}

func (h *fenceHook) ID() string { return "switchbridge-retain-fence" }

func (h *fenceHook) Provides(b byte) bool {
	switch b {
	case mochi.OnSubscribed, mochi.OnPublish, mochi.OnRetainMessage, mochi.OnPacketProcessed, mochi.OnDisconnect:
		return true
	}
	return false
}

// OnSubscribed enters as a scan when the SUBSCRIBE has a wildcard filter
// (an exact filter reads the retained store under its own lock): mochi
// scans after writing the SUBACK, which follows this hook.
func (h *fenceHook) OnSubscribed(cl *mochi.Client, pk packets.Packet, _ []byte) {
	for _, s := range pk.Filters {
		if strings.ContainsAny(s.Filter, "+#") {
			h.f.enter(cl, false)
			return
		}
	}
}

func (h *fenceHook) OnPublish(cl *mochi.Client, pk packets.Packet) (packets.Packet, error) {
	if pk.FixedHeader.Retain {
		h.f.enter(cl, true)
	}
	return pk, nil
}

// OnRetainMessage follows the store's write: a publish's or a will's.
func (h *fenceHook) OnRetainMessage(cl *mochi.Client, _ packets.Packet, _ int64) { h.f.leave(cl) }

// OnPacketProcessed ends a SUBSCRIBE's scan, and a retained publish that
// a hook refused or did not keep.
func (h *fenceHook) OnPacketProcessed(cl *mochi.Client, pk packets.Packet, _ error) {
	if t := pk.FixedHeader.Type; t == packets.Subscribe || t == packets.Publish && pk.FixedHeader.Retain {
		h.f.leave(cl)
	}
}

// OnDisconnect gives back what a client left holding: it comes after its
// will, the last thing it can store.
func (h *fenceHook) OnDisconnect(cl *mochi.Client, _ error, _ bool) { h.f.leave(cl) }

// fenceWillHook is the fence's part that must run after the auth hook,
// which may take a will's retain flag away (its login's share is full): a
// will enters as a writer only when it will be stored now (a delayed
// will, MQTT 5's, is stored later by mochi's loop, unfenced).
type fenceWillHook struct {
	mochi.HookBase
	f *retainFence
}

func (h *fenceWillHook) ID() string { return "switchbridge-retain-fence-will" }

func (h *fenceWillHook) Provides(b byte) bool { return b == mochi.OnWill }

func (h *fenceWillHook) OnWill(cl *mochi.Client, will mochi.Will) (mochi.Will, error) {
	if will.Retain && cl.Properties.Will.WillDelayInterval == 0 {
		h.f.enter(cl, true)
	}
	return will, nil
}
