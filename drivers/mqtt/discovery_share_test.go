package mqtt

import (
	"fmt"
	"log/slog"
	"testing"
	"time"
)

// A plug login that fills the discovered list with fake devices holds at
// most its share: another login's device still gets listed, in place of
// the flooding login's oldest, while a device of the flooding login
// itself is refused. On another broker (no login known) a full list stays
// full.
func TestDiscoveredListShared(t *testing.T) {
	x := newDiscovery(slog.New(slog.DiscardHandler), nil, "hub-discovery")
	// The rate limit is not what is tested: a full bucket before each.
	put := func(d Device) {
		x.buckets[sourceTasmota] = &bucket{tokens: newPerSourceBurst, last: time.Now()}
		x.put(sourceTasmota, []Device{d})
	}
	for i := range maxDiscovered {
		put(Device{ID: fmt.Sprint("fake-", i), Login: "evil"})
	}
	if len(x.Devices()) != maxDiscovered {
		t.Fatalf("%d listed, want the list full (%d)", len(x.Devices()), maxDiscovered)
	}
	put(Device{ID: "fake-more", Login: "evil"})
	put(Device{ID: "anonymous"})
	put(Device{ID: "kitchen", Login: "kitchen"})
	got := map[string]bool{}
	for _, d := range x.Devices() {
		got[d.ID] = true
	}
	switch {
	case !got["kitchen"]:
		t.Error("another login's device was not listed while one login filled the list")
	case got["fake-more"] || got["anonymous"]:
		t.Errorf("a full list took the flooding login's or an unknown publisher's device: %v %v", got["fake-more"], got["anonymous"])
	case len(got) != maxDiscovered:
		t.Errorf("%d listed, want %d", len(got), maxDiscovered)
	}
}
