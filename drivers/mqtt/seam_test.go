package mqtt

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/drivers"
)

// stuckClient is a paho client whose publish tokens never complete (paho
// issues #613, #598): a broker cannot be made to provoke that, so this is
// the one place a stand-in for paho is used.
type stuckClient struct {
	opts *paho.ClientOptions
	mu   sync.Mutex
	pubs []string
	cmds []string // the publishes with a payload: commands, not queries
	ret  bool
	// block, when set, makes Publish itself wait until it is closed, as
	// paho's does while a dying connection drains its queue.
	block chan struct{}
}

type token struct{ done chan struct{} }

func (t token) Wait() bool                       { <-t.done; return true }
func (t token) WaitTimeout(d time.Duration) bool { return waitChan(t.done, d) }
func (t token) Done() <-chan struct{}            { return t.done }
func (t token) Error() error                     { return nil }

func waitChan(c chan struct{}, d time.Duration) bool {
	select {
	case <-c:
		return true
	case <-time.After(d):
		return false
	}
}

func doneToken() token {
	c := make(chan struct{})
	close(c)
	return token{c}
}

func (c *stuckClient) Connect() paho.Token {
	go c.opts.OnConnect(nil)
	return doneToken()
}
func (c *stuckClient) Disconnect(uint)        {}
func (c *stuckClient) IsConnectionOpen() bool { return true }
func (c *stuckClient) Publish(topic string, _ byte, retained bool, payload any) paho.Token {
	c.mu.Lock()
	c.pubs = append(c.pubs, topic)
	if fmt.Sprint(payload) != "" && fmt.Sprint(payload) != "[]" {
		c.cmds = append(c.cmds, topic) // a command, not a state query
	}
	c.ret = c.ret || retained
	block := c.block
	c.mu.Unlock()
	if block != nil {
		<-block
	}
	return token{make(chan struct{})} // never completes
}
func (c *stuckClient) SubscribeMultiple(map[string]byte, paho.MessageHandler) paho.Token {
	return doneToken()
}

// heardFrom delivers the broker's retained copy of the plug's state, as
// a broker does after the driver subscribes: the driver holds a command
// for a plug it has not heard from. A broker sends retained copies only
// after its SUBACK, so this waits for the driver's start-up query, which
// it publishes once it has come through its connect handling: delivered
// before that, the copy would be followed by the connect's own update,
// which a real broker never lets happen, and which counts as the plug's
// next message for a command's resend.
func heardFrom(t *testing.T, fake *stuckClient) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second) // a bound, not a measure: the query comes at once
	for {
		fake.mu.Lock()
		n := len(fake.pubs)
		fake.mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the driver never sent its start-up query")
		}
		time.Sleep(time.Millisecond)
	}
	fake.opts.DefaultPublishHandler(nil, fakeMessage{topic: "stat/p/POWER", payload: []byte("OFF"), retained: true})
}

// openOnStuckClient opens the driver with one Tasmota switch on fake. A
// notify, if given, is the hub's Notify.
func openOnStuckClient(t *testing.T, fake *stuckClient, notify ...func(string, bridge.State)) (drivers.Driver, bridge.Commander) {
	t.Helper()
	old := newClient
	newClient = func(o *paho.ClientOptions) client { fake.opts = o; return fake }
	t.Cleanup(func() { newClient = old })
	env := drivers.Env{Settings: mustNode(t, "{broker: tcp://127.0.0.1:9, confirm_timeout: 10s}")}
	if len(notify) > 0 {
		env.Notify = notify[0]
	}
	d, err := New(env)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Add(drivers.Spec{ID: "p", Options: mustNode(t, "{profile: tasmota, topic: p}")}); err != nil {
		t.Fatal(err)
	}
	devs, err := d.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return d, devs["p"].(bridge.Commander)
}

func TestTokenThatNeverCompletes(t *testing.T) {
	fake := &stuckClient{}
	d, dev := openOnStuckClient(t, fake)
	heardFrom(t, fake)
	defer d.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := dev.Do(ctx, bridge.CommandOn)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
	// The confirm_timeout here is 10 s: half of it tells the context's
	// deadline from it, however loaded the machine.
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Do took %s past a 200ms deadline", d)
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	// The start-up query (an empty POWER; asked again while unanswered,
	// which a slow machine may reach before the command) and the command,
	// once: the stuck token is not a reason to send it again.
	for _, p := range fake.pubs {
		if p != "cmnd/p/POWER" {
			t.Errorf("published to %s", p)
		}
	}
	if len(fake.cmds) != 1 || len(fake.pubs)-len(fake.cmds) < 1 || fake.ret {
		t.Errorf("published %v, of which commands %v (retained: %v); want the query and one command", fake.pubs, fake.cmds, fake.ret)
	}
}

// TestPublishThatBlocks: paho's Publish can block for its write timeout
// while a connection dies; a command must still end at its deadline.
func TestPublishThatBlocks(t *testing.T) {
	fake := &stuckClient{}
	d, dev := openOnStuckClient(t, fake)
	heardFrom(t, fake)
	release := make(chan struct{})
	fake.mu.Lock()
	fake.block = release
	fake.mu.Unlock()
	defer func() { close(release); d.Close() }()

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- dev.Do(ctx, bridge.CommandOn) }()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err = %v, want DeadlineExceeded", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Do is stuck inside a blocked Publish past its 200ms deadline")
	}
}

// TestCommandGivenUpIsNeverSentLate: a command that ended at its deadline
// while an earlier one was stuck in a blocked Publish is not published
// once the connection moves again: the plug would switch long after its
// caller was told the command failed.
func TestCommandGivenUpIsNeverSentLate(t *testing.T) {
	fake := &stuckClient{}
	d, dev := openOnStuckClient(t, fake)
	heardFrom(t, fake)
	release := make(chan struct{})
	fake.mu.Lock()
	fake.block = release
	fake.mu.Unlock()
	defer d.Close()
	published := func() int {
		fake.mu.Lock()
		defer fake.mu.Unlock()
		return len(fake.cmds)
	}

	// The first command's publish blocks; the second, queued behind it,
	// reaches its deadline too.
	for _, c := range []bridge.Command{bridge.CommandOn, bridge.CommandOff} {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		err := dev.Do(ctx, c)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s: err = %v, want DeadlineExceeded", c, err)
		}
	}
	fake.mu.Lock()
	fake.block = nil
	fake.mu.Unlock()
	close(release)

	// A third command is published after whatever was still queued.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go dev.Do(ctx, bridge.CommandOn)
	deadline := time.Now().Add(5 * time.Second)
	for published() < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	cancel()
	fake.mu.Lock()
	defer fake.mu.Unlock()
	if len(fake.cmds) != 2 {
		t.Errorf("published %d commands (%v), want 2: the blocked one and the third; the one given up must not be sent", len(fake.cmds), fake.cmds)
	}
}

// fakeMessage is a PUBLISH as paho's router hands it to a handler.
type fakeMessage struct {
	topic    string
	payload  []byte
	retained bool
}

func (m fakeMessage) Duplicate() bool   { return false }
func (m fakeMessage) Qos() byte         { return 0 }
func (m fakeMessage) Retained() bool    { return m.retained }
func (m fakeMessage) Topic() string     { return m.topic }
func (m fakeMessage) MessageID() uint16 { return 0 }
func (m fakeMessage) Payload() []byte   { return m.payload }
func (m fakeMessage) Ack()              {}

// TestNoNotifyAfterClose: paho's router can deliver a message for a moment
// after Disconnect; once Close has returned, such a report must not reach
// the hub (which may have moved on to the driver's replacement).
func TestNoNotifyAfterClose(t *testing.T) {
	var mu sync.Mutex
	var got []bridge.State
	notify := func(id string, st bridge.State) {
		mu.Lock()
		got = append(got, st)
		mu.Unlock()
	}
	fake := &stuckClient{}
	d, _ := openOnStuckClient(t, fake, notify)
	deliver := func(payload string) {
		fake.opts.DefaultPublishHandler(nil, fakeMessage{topic: "stat/p/RESULT", payload: []byte(payload)})
	}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(got)
	}
	deliver(`{"POWER":"ON"}`)
	before := count()
	if before == 0 {
		t.Fatal("a report before Close did not reach Notify")
	}
	d.Close()
	closing := count() // Close tells the hub the plug is unavailable
	deliver(`{"POWER":"OFF"}`)
	if n := count(); n != closing {
		mu.Lock()
		t.Errorf("a report after Close reached Notify: %+v", got[closing:])
		mu.Unlock()
	}
}

// TestRequeryUntilLiveReport: after connecting, and when a plug comes
// online, the driver asks it for its state and asks again at each of
// requeryAfter until the plug reports, then stops. The broker's retained
// copy of a report is not the plug's answer.
func TestRequeryUntilLiveReport(t *testing.T) {
	old := requeryAfter
	requeryAfter = []time.Duration{100 * time.Millisecond, 300 * time.Millisecond}
	t.Cleanup(func() { requeryAfter = old })
	fake := &stuckClient{}
	d, _ := openOnStuckClient(t, fake)
	defer d.Close()
	questions := func() int {
		fake.mu.Lock()
		defer fake.mu.Unlock()
		for _, p := range fake.pubs {
			if p != "cmnd/p/POWER" {
				t.Fatalf("published to %s", p)
			}
		}
		return len(fake.pubs)
	}
	deliver := func(topic, payload string, retained bool) {
		fake.opts.DefaultPublishHandler(nil, fakeMessage{topic: topic, payload: []byte(payload), retained: retained})
	}
	// past the last re-ask
	settle := func() { time.Sleep(2 * requeryAfter[len(requeryAfter)-1]) }

	// A plug that never answers: asked on connecting and twice more.
	eventually(t, 3*time.Second, "three questions after connecting", func() bool { return questions() == 3 })
	settle()
	if n := questions(); n != 3 {
		t.Fatalf("%d questions to a plug that never answers, want 3", n)
	}

	// It comes online and answers the first question: asked once.
	deliver("tele/p/LWT", "Offline", true)
	deliver("tele/p/LWT", "Online", false)
	eventually(t, 3*time.Second, "a question when the plug came online", func() bool { return questions() == 4 })
	deliver("stat/p/RESULT", `{"POWER":"ON"}`, false)
	settle()
	if n := questions(); n != 4 {
		t.Errorf("%d questions after the plug answered, want none after its answer", n-4)
	}

	// Only the broker's stored copy arrives: asked again, twice.
	deliver("tele/p/LWT", "Offline", false)
	deliver("tele/p/LWT", "Online", false)
	eventually(t, 3*time.Second, "a question when the plug came online again", func() bool { return questions() == 5 })
	deliver("stat/p/POWER", "OFF", true)
	eventually(t, 3*time.Second, "the re-asks despite a retained report", func() bool { return questions() == 7 })
	settle()
	if n := questions(); n != 7 {
		t.Errorf("%d questions, want 7", n)
	}
	if v := d.(*driver).byID["p"].State().Value; v != bridge.Off {
		t.Errorf("value %q, want the retained off shown meanwhile", v)
	}
}
