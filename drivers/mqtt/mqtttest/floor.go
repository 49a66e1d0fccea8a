package mqtttest

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/switchbridge/switchbridge/bridge"
)

// Floor is the least any hub can do to switch N Tasmota plugs, written
// as fast as a Go programmer who knows their plugs would write it: one
// bare paho client, one wildcard subscription (stat/+/RESULT, the first
// report a Tasmota plug sends after a command), replies recognised by
// their bytes instead of decoded, the N commands published at once at
// FloorQoS, and the client set up as the hub's driver sets up its own
// (replies handled in paho's router goroutine, read through a buffer).
// Benchmarks compare the hub with it.
type Floor struct {
	c      paho.Client
	topics []string

	mu      sync.Mutex
	want    []byte          // the reply that confirms: {"POWER":"ON"}
	waiting map[string]bool // plugs (by reply topic) yet to confirm
	all     chan struct{}
}

// FloorQoS is the QoS of the floor's commands and subscription: the
// hub's (a command is confirmed by its plug's report, so QoS 1 would buy
// only a PUBACK per plug).
const FloorQoS = 0

// NewFloor connects the bare client and subscribes to the plugs' replies.
func NewFloor(tb testing.TB, broker string, topics []string) *Floor {
	tb.Helper()
	f, err := DialFloor(broker, topics)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { f.c.Disconnect(0) })
	return f
}

// DialFloor is NewFloor for a process of its own (a benchmark's bare
// handler measured apart): the caller disconnects it, or exits.
func DialFloor(broker string, topics []string) (*Floor, error) {
	f := &Floor{topics: topics}
	o := paho.NewClientOptions().AddBroker(broker).SetClientID(fmt.Sprintf("floor-%s-%d", topics[0], len(topics)))
	// As the hub's driver: replies handled in paho's router goroutine
	// (no goroutine each), through a read buffer.
	o.SetOrderMatters(true)
	// paho reads a packet in several small reads (the header byte, each
	// byte of the length, the body): on a bare socket each is a system
	// call. A read buffer, as the hub's driver has, takes a burst of
	// replies in a few.
	o.SetCustomOpenConnectionFn(func(u *url.URL, _ paho.ClientOptions) (net.Conn, error) {
		c, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
		if err != nil {
			return nil, err
		}
		return &bufferedConn{Conn: c, r: bufio.NewReaderSize(c, 8<<10)}, nil
	})
	f.c = paho.NewClient(o)
	if tok := f.c.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		return nil, fmt.Errorf("floor client: %v", tok.Error())
	}
	if tok := f.c.Subscribe("stat/+/RESULT", FloorQoS, f.onReply); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		f.c.Disconnect(0)
		return nil, fmt.Errorf("floor subscribe: %v", tok.Error())
	}
	return f, nil
}

// onReply counts a plug's reply once, when it is exactly the reply the
// command asked for: Tasmota answers POWER with {"POWER":"ON"}.
func (f *Floor) onReply(_ paho.Client, m paho.Message) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.all == nil || !bytes.Equal(m.Payload(), f.want) || !f.waiting[m.Topic()] {
		return
	}
	delete(f.waiting, m.Topic())
	if len(f.waiting) == 0 {
		close(f.all)
		f.all = nil
	}
}

// Switch sends POWER <value> (ON or OFF) to every plug at once and returns
// when each has confirmed it, or fails after timeout.
func (f *Floor) Switch(tb testing.TB, value string, timeout time.Duration) {
	if err := f.SwitchAll(value, timeout); err != nil {
		tb.Fatal(err)
	}
}

// SwitchAll is Switch returning its failure, for callers outside the test
// goroutine (BareHTTP's handler). One switching at a time.
func (f *Floor) SwitchAll(value string, timeout time.Duration) error {
	all := make(chan struct{})
	waiting := make(map[string]bool, len(f.topics))
	for _, t := range f.topics {
		waiting["stat/"+t+"/RESULT"] = true
	}
	f.mu.Lock()
	f.want, f.waiting, f.all = []byte(`{"POWER":"`+value+`"}`), waiting, all
	f.mu.Unlock()
	for _, t := range f.topics {
		f.c.Publish("cmnd/"+t+"/POWER", FloorQoS, false, value)
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-all:
		return nil
	case <-t.C:
		f.mu.Lock()
		missing := len(f.waiting)
		f.all = nil
		f.mu.Unlock()
		return fmt.Errorf("floor: %d of %d plugs confirmed %s within %s", len(f.topics)-missing, len(f.topics), value, timeout)
	}
}

// BenchBlock is how many commands each side of a benchmark sends in a row
// before the other takes its turn: long enough that the reports trailing a
// side's commands fall mostly into its own turn (those of its last command
// fall into the other's), short enough that both sides see the same
// machine. It is even, so that a block leaves its plugs off, as they start.
const BenchBlock = 8

// BenchCommand is the i-th command of a block: on, off, on… so that every
// command is a real change.
func BenchCommand(i int) bridge.Command {
	if i%2 == 0 {
		return bridge.CommandOn
	}
	return bridge.CommandOff
}

// TimeBlock runs command for each of a block's BenchBlock commands (on,
// off, on…) and returns the time they took.
func TimeBlock(command func(bridge.Command)) time.Duration {
	var s Samples
	return s.Block(command)
}

// Samples are the durations of single timed commands, for percentiles.
type Samples []time.Duration

// Block is TimeBlock keeping each command's duration in s.
func (s *Samples) Block(command func(bridge.Command)) time.Duration {
	var total time.Duration
	for i := range BenchBlock {
		start := time.Now()
		command(BenchCommand(i))
		d := time.Since(start)
		*s = append(*s, d)
		total += d
	}
	return total
}

// Percentile is the p-th percentile (0 < p ≤ 100) of s, nearest rank; 0
// for no samples.
func (s Samples) Percentile(p float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	sorted := slices.Clone(s)
	slices.Sort(sorted)
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// Block is the floor's turn: BenchBlock switchings, timed.
func (f *Floor) Block(tb testing.TB) time.Duration {
	return TimeBlock(func(c bridge.Command) {
		f.Switch(tb, strings.ToUpper(string(c)), 5*time.Second)
	})
}

// bufferedConn reads through r; everything else goes to the connection.
// Only paho's reader goroutine reads it.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
