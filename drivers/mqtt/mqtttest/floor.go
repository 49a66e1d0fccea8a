package mqtttest

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/switchbridge/switchbridge/bridge"
)

// Floor is the least any hub can do to switch N Tasmota plugs: one bare
// paho client that publishes the N commands at once, at the QoS the hub
// uses (1), and waits for the N confirmations (stat/<topic>/RESULT).
// Benchmarks compare the hub with it.
type Floor struct {
	c      paho.Client
	topics []string

	mu   sync.Mutex
	want string
	got  int
	all  chan struct{}
}

// NewFloor connects the bare client and subscribes to the plugs' replies.
func NewFloor(tb testing.TB, broker string, topics []string) *Floor {
	tb.Helper()
	f := &Floor{topics: topics}
	o := paho.NewClientOptions().AddBroker(broker).SetClientID(fmt.Sprintf("floor-%s-%d", topics[0], len(topics)))
	o.SetOrderMatters(false)
	f.c = paho.NewClient(o)
	if tok := f.c.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		tb.Fatalf("floor client: %v", tok.Error())
	}
	tb.Cleanup(func() { f.c.Disconnect(0) })
	filters := map[string]byte{}
	for _, t := range topics {
		filters["stat/"+t+"/RESULT"] = 0
	}
	if tok := f.c.SubscribeMultiple(filters, f.onReply); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		tb.Fatalf("floor subscribe: %v", tok.Error())
	}
	return f
}

func (f *Floor) onReply(_ paho.Client, m paho.Message) {
	var r struct{ POWER string }
	if json.Unmarshal(m.Payload(), &r) != nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.all != nil && r.POWER == f.want {
		f.got++
		if f.got == len(f.topics) {
			close(f.all)
			f.all = nil
		}
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
	f.mu.Lock()
	f.want, f.got, f.all = value, 0, all
	f.mu.Unlock()
	var wg sync.WaitGroup
	for _, t := range f.topics {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.c.Publish("cmnd/"+t+"/POWER", 1, false, value)
		}()
	}
	wg.Wait()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-all:
		return nil
	case <-t.C:
		f.mu.Lock()
		got := f.got
		f.all = nil
		f.mu.Unlock()
		return fmt.Errorf("floor: %d of %d plugs confirmed %s within %s", got, len(f.topics), value, timeout)
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
