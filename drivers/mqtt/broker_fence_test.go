package mqtt

import (
	"fmt"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	mochi "github.com/mochi-mqtt/server/v2"

	"github.com/switchbridge/switchbridge/drivers/mqtt/mqtttest"
)

// TestEmbeddedBrokerRetainedFence: plugs that subscribe with wildcards
// while others store and clear retained messages on the topics they
// match, as a fleet does when it comes back at once. Under the race
// detector (make test) this failed before the fence: mochi's scan for a
// new wildcard subscription read the retained path its store was
// writing. Without it, it checks that the fence is given back every time
// (a will's included) and that the retained store still ends right.
func TestEmbeddedBrokerRetainedFence(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", mqtttest.FreePort(t))
	d := openDriver(t, "broker: embedded\nlisten: "+addr+"\nusers: {plug: s3cret, w: pw, r0: pw, r1: pw, r2: pw}",
		`id: esp, name: ESP, profile: esphome, prefix: node, object_id: relay`)
	fence := d.broker.fence

	pub, err := pahoConnect(addr, "fence-writer", "w", "pw")
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Disconnect(0)
	const topics, rounds, subscribers, subscriptions = 4, 150, 3, 60
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range rounds {
			payload := ""
			if i%2 == 0 {
				payload = "on" // a message stored, then cleared: both write the path
			}
			tok := pub.Publish(fmt.Sprintf("fence/%d/state", i%topics), 1, true, payload)
			if !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
				t.Errorf("retained publish %d: %v", i, tok.Error())
				return
			}
		}
	}()
	for s := range subscribers {
		c, err := pahoConnect(addr, fmt.Sprintf("fence-reader-%d", s), fmt.Sprintf("r%d", s), "pw")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Disconnect(0)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range subscriptions {
				if tok := c.Subscribe("fence/+/state", 0, func(paho.Client, paho.Message) {}); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
					t.Errorf("subscribe: %v", tok.Error())
					return
				}
				if tok := c.Unsubscribe("fence/+/state"); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
					t.Errorf("unsubscribe: %v", tok.Error())
					return
				}
			}
		}()
	}
	wg.Wait()
	// A will stored as its client dies (sent once the broker sees the
	// connection gone: watched from before).
	will := watch(t, addr, "fence/will")
	dieWithWill(t, addr, "fence/will", []byte("offline"))
	receive(t, will, "fence/will")

	// The last round stored "on" on the topics of rounds 146 and 148 and
	// cleared those of 147 and 149: the others were never kept. What a new
	// subscription is sent as retained is exactly that. (A message it is
	// sent live is one whose delivery was still under way.)
	got := watchWhere(t, addr, "fence/+/state", paho.Message.Retained)
	var want []string
	for i := rounds - topics; i < rounds; i++ {
		if i%2 == 0 {
			want = append(want, fmt.Sprintf("fence/%d/state", i%topics))
		}
	}
	receiveAll(t, got, want...)
	for {
		select {
		case extra := <-got:
			t.Errorf("a cleared retained message was sent: %s", extra)
			continue
		case <-time.After(100 * time.Millisecond):
		}
		break
	}

	deadline := time.Now().Add(5 * time.Second)
	for {
		fence.mu.Lock()
		held, scans, writes := len(fence.held), fence.scans, fence.writes
		fence.mu.Unlock()
		if held == 0 && scans == 0 && writes == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the fence is still held: %d clients, %d scans, %d writes", held, scans, writes)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRetainFenceWaits: each side waits for the other to leave, and no
// longer than the bound: a subscriber that stops reading while mochi
// writes its SUBACK must not hold retained messages back for good.
func TestRetainFenceWaits(t *testing.T) {
	f := newRetainFence(time.Hour)
	reader, writer := &mochi.Client{}, &mochi.Client{}
	f.enter(reader, false)
	entered := make(chan struct{})
	go func() { f.enter(writer, true); close(entered) }()
	select {
	case <-entered:
		t.Fatal("a write went ahead during a scan")
	case <-time.After(50 * time.Millisecond):
	}
	f.leave(reader)
	select {
	case <-entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the write still waits after the scan left")
	}
	// A scan waits for the write in turn.
	entered = make(chan struct{})
	go func() { f.enter(reader, false); close(entered) }()
	select {
	case <-entered:
		t.Fatal("a scan went ahead during a write")
	case <-time.After(50 * time.Millisecond):
	}
	f.leave(writer)
	<-entered
	f.leave(reader)
	if n := f.forced.Load(); n != 0 {
		t.Errorf("%d entries forced, want none", n)
	}

	// A scan that never ends: the write goes ahead at the bound.
	f = newRetainFence(20 * time.Millisecond)
	f.enter(reader, false)
	done := make(chan struct{})
	go func() { f.enter(writer, true); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("a write waits past the bound for a scan that never ends")
	}
	if n := f.forced.Load(); n != 1 {
		t.Errorf("%d entries forced, want 1", n)
	}
	f.leave(writer)
	f.leave(reader)
	if len(f.held) != 0 || f.scans != 0 || f.writes != 0 {
		t.Errorf("left: %d held, %d scans, %d writes", len(f.held), f.scans, f.writes)
	}

	// One client holding a scan and, past the bound, a write: its leave
	// gives back both.
	f.enter(reader, false)
	f.enter(reader, true)
	f.leave(reader)
	if len(f.held) != 0 || f.scans != 0 || f.writes != 0 {
		t.Errorf("after one client's scan and write: %d held, %d scans, %d writes", len(f.held), f.scans, f.writes)
	}
}
