package console

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
)

// ownerGate lets one owner in while owner holds.
type ownerGate struct{ owner atomic.Bool }

func (g *ownerGate) Visitor(*http.Request) (*Visitor, error) {
	if !g.owner.Load() {
		return nil, nil
	}
	return &Visitor{User: &bridge.User{ID: 1, Name: "olivia", Owner: true}, CSRF: "token", PasswordAt: time.Now()}, nil
}

func (g *ownerGate) Login(w http.ResponseWriter, _ *http.Request, _ string, _ *Visitor, _ string) {
	http.Error(w, "log in", http.StatusUnauthorized)
}
func (g *ownerGate) SetNotice(http.ResponseWriter, *http.Request, string, bool)   {}
func (g *ownerGate) Logout(http.ResponseWriter, *http.Request, *Visitor) error    { return nil }
func (g *ownerGate) TakeNotice(http.ResponseWriter, *http.Request) (string, bool) { return "", false }

// plugState is a device whose state the test sets.
type plugState struct{ st atomic.Pointer[bridge.State] }

func (p *plugState) State() bridge.State { return *p.st.Load() }

// liveHub serves a console over a hub of one switch, kitchen, whose
// state and feed the test moves.
type liveHub struct {
	c    *Console
	gate *ownerGate
	feed *bridge.Feed
	plug *plugState
	url  string
}

func startLiveHub(t *testing.T) *liveHub {
	t.Helper()
	plug := &plugState{}
	plug.st.Store(&bridge.State{Value: bridge.Off, Available: true})
	feed := bridge.NewFeed(bridge.FeedOptions{})
	feed.Started()
	sb, err := bridge.NewSwitchboard([]bridge.Location{{ID: 1, Name: "Home", Switches: []string{"kitchen"}}},
		[]*bridge.Switch{{ID: "kitchen", Name: "Kitchen", LocationID: 1, Device: plug}}, bridge.SwitchboardOptions{Feed: feed})
	if err != nil {
		t.Fatal(err)
	}
	gate := &ownerGate{}
	gate.owner.Store(true)
	c := New(Options{Gate: gate, PublicURL: "http://hub.test", Hub: &Hub{Switchboard: sb, Feed: feed}})
	mux := http.NewServeMux()
	c.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &liveHub{c: c, gate: gate, feed: feed, plug: plug, url: srv.URL}
}

// stream is an open /console/events.
type stream struct {
	resp   *http.Response
	r      *bufio.Reader
	cancel context.CancelFunc
}

func (h *liveHub) open(t *testing.T) (*stream, int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, h.url+"/console/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		cancel()
		return nil, resp.StatusCode
	}
	s := &stream{resp: resp, r: bufio.NewReader(resp.Body), cancel: cancel}
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	return s, resp.StatusCode
}

// next reads the stream's next block (an event, a comment, the retry),
// io.EOF once it ended.
func (s *stream) next(t *testing.T) (string, error) {
	t.Helper()
	type read struct {
		block string
		err   error
	}
	done := make(chan read, 1)
	go func() {
		var b strings.Builder
		for {
			line, err := s.r.ReadString('\n')
			if err != nil {
				done <- read{b.String(), err}
				return
			}
			if line == "\n" {
				done <- read{b.String(), nil}
				return
			}
			b.WriteString(line)
		}
	}()
	select {
	case r := <-done:
		return r.block, r.err
	case <-time.After(5 * time.Second):
		t.Fatal("the stream said nothing for 5 s")
		return "", nil
	}
}

// event reads the next block, which must be a switch event.
func (s *stream) event(t *testing.T) liveSwitch {
	t.Helper()
	block, err := s.next(t)
	if err != nil {
		t.Fatalf("reading an event: %v (%q)", err, block)
	}
	data, ok := strings.CutPrefix(block, "event: switch\ndata: ")
	if !ok {
		t.Fatalf("the stream sent %q, want a switch event", block)
	}
	var ev liveSwitch
	if err := json.Unmarshal([]byte(data), &ev); err != nil {
		t.Fatalf("event %q: %v", data, err)
	}
	return ev
}

// waitSubscribers waits until the feed has n subscribers.
func (h *liveHub) waitSubscribers(t *testing.T, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); h.feed.Subscribers() != n; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the feed has %d subscribers, want %d", h.feed.Subscribers(), n)
		}
	}
}

// TestLiveEvents: a stream sends the reconnection delay, every switch as
// it is, then each change from the feed as the page shows it.
func TestLiveEvents(t *testing.T) {
	h := startLiveHub(t)
	s, status := h.open(t)
	if status != http.StatusOK {
		t.Fatalf("GET /console/events = %d", status)
	}
	if ct := s.resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q", ct)
	}
	if csp := s.resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("the stream's answer has no Content-Security-Policy: %q", csp)
	}
	if b, _ := s.next(t); b != "retry: 2000\n" {
		t.Errorf("the stream starts with %q, want the reconnection delay", b)
	}
	if ev := s.event(t); ev != (liveSwitch{ID: "kitchen", Value: "off", Available: true, LastSeen: "never", Power: "not known"}) {
		t.Errorf("the snapshot sent %+v", ev)
	}
	seen := time.Date(2026, 5, 1, 12, 0, 0, 0, time.Local)
	h.feed.Notify("kitchen", bridge.State{Value: bridge.On, Available: true, Updated: seen, LastSeen: seen,
		Reading: &bridge.Reading{Power: 42.25, Has: bridge.HasPower, At: time.Now()}})
	if ev := s.event(t); ev != (liveSwitch{ID: "kitchen", Value: "on", Available: true, LastSeen: When(seen), Power: "42.2 W"}) {
		t.Errorf("the change sent %+v", ev)
	}
}

// TestLiveEventsEnd: a stream ends when the page goes, when the owner's
// login ends (noticed at the next heartbeat, a comment), and when the
// hub shuts down; at most maxLiveStreams are open at once.
func TestLiveEventsEnd(t *testing.T) {
	h := startLiveHub(t)
	defer func(d time.Duration) { liveHeartbeat = d }(liveHeartbeat)
	liveHeartbeat = 50 * time.Millisecond

	// The page goes: its subscription ends with it.
	s, _ := h.open(t)
	h.waitSubscribers(t, 1)
	s.cancel()
	h.waitSubscribers(t, 0)

	// Heartbeats while the owner is logged in; the end once not.
	s, _ = h.open(t)
	s.next(t) // retry
	s.event(t)
	if b, err := s.next(t); err != nil || b != ": heartbeat\n" {
		t.Fatalf("a quiet stream sent %q (%v), want a heartbeat", b, err)
	}
	h.gate.owner.Store(false)
	for {
		b, err := s.next(t)
		if err == io.EOF {
			break
		}
		if err != nil || b != ": heartbeat\n" {
			t.Fatalf("after the login ended the stream sent %q (%v)", b, err)
		}
	}
	h.gate.owner.Store(true)
	h.waitSubscribers(t, 0)

	// Bounded.
	var open []*stream
	for range maxLiveStreams {
		s, status := h.open(t)
		if status != http.StatusOK {
			t.Fatalf("stream %d of %d refused: %d", len(open)+1, maxLiveStreams, status)
		}
		open = append(open, s)
	}
	if _, status := h.open(t); status != http.StatusServiceUnavailable {
		t.Errorf("a stream beyond %d: %d, want 503", maxLiveStreams, status)
	}

	// Shutdown ends them all, and refuses new ones.
	h.c.CloseStreams()
	for _, s := range open {
		for {
			if _, err := s.next(t); err == io.EOF {
				break
			} else if err != nil {
				t.Fatal(err)
			}
		}
	}
	h.waitSubscribers(t, 0)
	if _, status := h.open(t); status != http.StatusServiceUnavailable {
		t.Errorf("a stream after CloseStreams: %d, want 503", status)
	}
}
