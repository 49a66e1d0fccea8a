package mqtt

import (
	"log/slog"
	"sync"
	"testing"
	"time"
)

// A Gen1 device online before the hub is asked to announce itself, and
// asked again (twice at most) while it is not listed: a first question
// that reached it before it subscribed is not the end of it. Once it is
// listed, or discovery stopped, no more questions.
func TestGen1AskedAgainUntilListed(t *testing.T) {
	waits := []time.Duration{10 * time.Millisecond, 20 * time.Millisecond}

	asks := func(x *discovery) (count func() int) {
		var mu sync.Mutex
		n := 0
		x.ask = func(m message) {
			if m.topic != "shellies/shelly1-aa/command" || string(m.payload) != "announce" {
				t.Errorf("asked %s %q", m.topic, m.payload)
			}
			mu.Lock()
			n++
			mu.Unlock()
		}
		return func() int { mu.Lock(); defer mu.Unlock(); return n }
	}

	x := newDiscovery(slog.New(slog.DiscardHandler), nil, "hub-disc")
	x.gen1Waits = waits
	x.run()
	defer x.close()
	count := asks(x)
	x.shellyGen1Online("shelly1-aa", []byte("true"))
	// Once and twice again; waited for generously (a loaded machine runs
	// timers late), then a while longer for a fourth that must not come.
	for deadline := time.Now().Add(10 * time.Second); count() < 3 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	if n := count(); n != 3 {
		t.Errorf("a device never listed was asked %d times, want 3 (once and twice again)", n)
	}

	y := newDiscovery(slog.New(slog.DiscardHandler), nil, "hub-disc")
	y.gen1Waits = waits
	y.run()
	defer y.close()
	count = asks(y)
	y.shellyGen1Online("shelly1-aa", []byte("true"))
	y.mu.Lock()
	y.devs["shelly1-aa"] = &Device{ID: "shelly1-aa"} // its announcement came
	y.mu.Unlock()
	time.Sleep(300 * time.Millisecond) // past both waits (a later timer asks nothing either)
	if n := count(); n != 1 {
		t.Errorf("a device listed after the first question was asked %d times, want 1", n)
	}
}
