package daemon_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"github.com/switchbridge/switchbridge/bridge/platform/accounts"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/daemon/daemontest"
	"github.com/switchbridge/switchbridge/bridge/infra/certs/certstest"
	"github.com/switchbridge/switchbridge/bridge/store"
	"github.com/switchbridge/switchbridge/drivers/mqtt/mqtttest"
)

// sseEvent is one event of a stream as the wire has it.
type sseEvent struct {
	ID, Event, Data string
}

// switchEvent is the data of an "event: switch".
type switchEvent struct {
	ID        string  `json:"id"`
	Name      string  `json:"name"`
	Value     *string `json:"value"`
	Previous  *string `json:"previous"`
	Available bool    `json:"available"`
	At        string  `json:"at"`
	Cause     string  `json:"cause"`
	Own       *bool   `json:"own"`
	LastSeen  *string `json:"last_seen"`
}

// sseStream is an open GET <uri>/events, read line by line as the SSE
// format says (fields, comments, blank lines ending an event).
type sseStream struct {
	t        *testing.T
	resp     *http.Response
	cancel   context.CancelFunc
	events   chan sseEvent
	comments chan string
	retry    chan string
	ended    chan struct{} // closed when the server ends the stream
}

// openStream opens the installation's event stream with a bearer token
// and, when lastID is set, Last-Event-ID. It fails the test unless the
// answer is 200.
func openStream(t *testing.T, h *daemontest.Harness, g daemontest.Grant, lastID string) *sseStream {
	t.Helper()
	s, resp := tryStream(t, h, g.URI+"/events", "Bearer "+g.Token.AccessToken, lastID)
	if s == nil {
		t.Fatalf("GET /events = %d %s", resp.StatusCode, readAll(resp))
	}
	return s
}

func readAll(resp *http.Response) string {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	return string(b)
}

// tryStream opens a stream; it returns nil and the answer when it is not
// 200.
func tryStream(t *testing.T, h *daemontest.Harness, u, authorization, lastID string) (*sseStream, *http.Response) {
	t.Helper()
	// A client of its own: streams must not wait on each other's
	// connections, nor be cut by a client timeout.
	return tryStreamWith(t, &http.Client{Transport: &http.Transport{}}, u, authorization, lastID)
}

// tryStreamWith is tryStream through client c.
func tryStreamWith(t *testing.T, c *http.Client, u, authorization, lastID string) (*sseStream, *http.Response) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := c.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		cancel()
		return nil, resp
	}
	s := &sseStream{t: t, resp: resp, cancel: cancel, events: make(chan sseEvent, 1024), comments: make(chan string, 64),
		retry: make(chan string, 4), ended: make(chan struct{})}
	go s.read()
	t.Cleanup(s.close)
	return s, resp
}

func (s *sseStream) read() {
	defer close(s.ended)
	sc := bufio.NewScanner(s.resp.Body)
	var e sseEvent
	for sc.Scan() {
		line := sc.Text()
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch {
		case line == "":
			if e.Data != "" || e.Event != "" {
				s.events <- e
			}
			e = sseEvent{}
		case field == "":
			select {
			case s.comments <- value:
			default:
			}
		case field == "id":
			e.ID = value
		case field == "event":
			e.Event = value
		case field == "data":
			e.Data += value
		case field == "retry":
			s.retry <- value
		}
	}
}

func (s *sseStream) close() {
	s.cancel()
	s.resp.Body.Close()
}

// next returns the stream's next event, failing the test after 10 s.
func (s *sseStream) next() sseEvent {
	s.t.Helper()
	select {
	case e := <-s.events:
		return e
	case <-s.ended:
		s.t.Fatal("the stream ended while an event was expected")
	case <-time.After(10 * time.Second):
		s.t.Fatal("no event within 10 s")
	}
	return sseEvent{}
}

// nextSwitch returns the next event, which must be a switch event.
func (s *sseStream) nextSwitch() (sseEvent, switchEvent) {
	s.t.Helper()
	e := s.next()
	if e.Event != "switch" {
		s.t.Fatalf("event %q (%s), want switch", e.Event, e.Data)
	}
	var sw switchEvent
	if err := json.Unmarshal([]byte(e.Data), &sw); err != nil {
		s.t.Fatalf("switch event %q: %v", e.Data, err)
	}
	return e, sw
}

// wantChange checks the next switch event.
func (s *sseStream) wantChange(id, value, previous, cause string) sseEvent {
	s.t.Helper()
	e, sw := s.nextSwitch()
	if sw.ID != id || str(sw.Value) != value || str(sw.Previous) != previous || sw.Cause != cause || sw.Name == "" || sw.At == "" {
		s.t.Fatalf("event %s, want %s %s→%s caused by %s", e.Data, id, previous, value, cause)
	}
	return e
}

func str(p *string) string {
	if p == nil {
		return "null"
	}
	return *p
}

// wantEnd waits for the server to end the stream within d.
func (s *sseStream) wantEnd(what string, d time.Duration) {
	s.t.Helper()
	select {
	case <-s.ended:
	case <-time.After(d):
		s.t.Fatalf("%s: the stream was still open %s later", what, d)
	}
}

// TestEventStream: a snapshot of the granted switches, taken after
// subscribing, then each change with its cause, only for granted switches,
// with the headers a proxy and a client need.
func TestEventStream(t *testing.T) {
	f := newFixture(t)
	h := f.hub
	g := h.Authorize(t, f.app, "alice", "alice-pw", 1, "kitchen", "hall")
	garage := h.Authorize(t, f.app, "alice", "alice-pw", 2, "garage-light")

	s := openStream(t, h, g, "")
	for k, want := range map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-store", "X-Accel-Buffering": "no"} {
		if got := s.resp.Header.Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	// A stream's answer is named and counted as every answer is.
	for _, k := range []string{"X-Request-Id", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"} {
		if s.resp.Header.Get(k) == "" {
			t.Errorf("the stream's answer has no %s", k)
		}
	}
	select {
	case r := <-s.retry:
		if r != "2000" {
			t.Errorf("retry: %s", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no retry: field")
	}
	snap := s.next()
	if snap.Event != "snapshot" || snap.ID == "" {
		t.Fatalf("first event %+v, want a snapshot with an id", snap)
	}
	if want := h.Call(t, http.MethodGet, g.URI+"/switches", g.Token.AccessToken).Body; snap.Data+"\n" != want {
		t.Errorf("snapshot %s, want the body of GET /switches %s", snap.Data, want)
	}

	// A group command, then one switch: cause api, in order, each with an
	// id of its own.
	if p := h.Command(t, g, "on"); p.StatusCode != http.StatusNoContent {
		t.Fatalf("PUT on = %d %s", p.StatusCode, p.Body)
	}
	first, _ := s.nextSwitch()
	var sw switchEvent
	json.Unmarshal([]byte(first.Data), &sw)
	if sw.ID != "kitchen" || str(sw.Value) != "on" || str(sw.Previous) != "off" || sw.Cause != "api" || !sw.Available || sw.Name != "Kitchen light" {
		t.Errorf("kitchen's event %s", first.Data)
	}
	// A switch of another installation changes: not in this stream.
	if p := h.Call(t, http.MethodPut, garage.URI+"/switches/garage-light/on", garage.Token.AccessToken); p.StatusCode != http.StatusNoContent {
		t.Fatalf("garage on = %d", p.StatusCode)
	}
	if p := h.Call(t, http.MethodPut, g.URI+"/switches/hall/off", g.Token.AccessToken); p.StatusCode != http.StatusNoContent {
		t.Fatalf("hall off = %d", p.StatusCode)
	}
	last := s.wantChange("hall", "off", "on", "api")
	if first.ID == snap.ID || last.ID == first.ID {
		t.Errorf("ids %s, %s, %s are not distinct", snap.ID, first.ID, last.ID)
	}
	// A command's own change is on its stream before its 204: with the
	// 204 in hand, the event is already readable on a raw stream.
	raw := rawStream(t, h, g)
	for i, cmd := range []string{"on", "off", "on"} { // hall is off
		if p := h.Call(t, http.MethodPut, g.URI+"/switches/hall/"+cmd, g.Token.AccessToken); p.StatusCode != http.StatusNoContent {
			t.Fatalf("PUT hall %s = %d", cmd, p.StatusCode)
		}
		wantOnStreamAlready(t, raw, fmt.Sprintf("command %d", i), "hall", cmd)
	}
	raw.Close()
	s.wantChange("hall", "on", "off", "api")
	s.wantChange("hall", "off", "on", "api")
	s.wantChange("hall", "on", "off", "api")

	// A change the device makes by itself (here reported as its driver
	// would) is the device's.
	notify(t, h, "kitchen", bridge.Off)
	s.wantChange("kitchen", "off", "on", "device")
}

// rawStream opens the installation's event stream on a raw connection and
// reads it up to the end of its snapshot.
func rawStream(t *testing.T, h *daemontest.Harness, g daemontest.Grant) *keptConn {
	t.Helper()
	raw := dial(t, h.Addr().String())
	io.WriteString(raw, "GET "+strings.TrimPrefix(g.URI, h.URL)+"/events HTTP/1.1\r\nHost: hub\r\nAuthorization: Bearer "+g.Token.AccessToken+"\r\n\r\n")
	raw.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		line, err := raw.r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(line, "event: snapshot") {
			raw.r.ReadString('\n')
			raw.r.ReadString('\n')
			return raw
		}
	}
}

// wantOnStreamAlready checks, with a command's 204 in hand, that the
// switch's change to value is on the raw stream already: read by the
// reader before, or waiting in the socket, however late this goroutine
// runs after the 204 (no race with a short deadline on a loaded machine).
// Off Linux, a short deadline stands in. Heartbeats are skipped.
func wantOnStreamAlready(t *testing.T, raw *keptConn, what, id, value string) {
	t.Helper()
	for {
		if n, ok := queued(raw.Conn); ok {
			if n == 0 && raw.r.Buffered() == 0 {
				t.Errorf("%s: with its 204 in hand, nothing of %s's change is on the stream", what, id)
				return
			}
			raw.SetReadDeadline(time.Now().Add(10 * time.Second))
		} else {
			raw.SetReadDeadline(time.Now().Add(time.Millisecond))
		}
		var got strings.Builder
		for {
			line, err := raw.r.ReadString('\n')
			got.WriteString(line)
			if err != nil || line == "\n" {
				break
			}
		}
		if strings.HasPrefix(got.String(), ":") {
			continue // a comment: a heartbeat
		}
		if !strings.Contains(got.String(), `"id":"`+id+`"`) || !strings.Contains(got.String(), `"value":"`+value+`"`) {
			t.Errorf("%s: with its 204 in hand, the stream holds %q, want %s's change", what, got.String(), id)
		}
		return
	}
}

// slowStream opens the installation's event stream on a raw connection
// with a small receive buffer, reads its status line and then nothing.
func slowStream(t *testing.T, h *daemontest.Harness, g daemontest.Grant) {
	t.Helper()
	slow := dial(t, h.Addr().String())
	if tcp, ok := slow.Conn.(interface{ SetReadBuffer(int) error }); ok {
		tcp.SetReadBuffer(4096)
	}
	io.WriteString(slow, "GET "+strings.TrimPrefix(g.URI, h.URL)+"/events HTTP/1.1\r\nHost: hub\r\nAuthorization: Bearer "+g.Token.AccessToken+"\r\n\r\n")
	if line, err := slow.r.ReadString('\n'); err != nil || !strings.Contains(line, "200") {
		t.Fatalf("slow stream: %q %v", line, err)
	}
}

// flapKitchen reports kitchen, which must be off, changed n times as its
// driver would (several megabytes of events for n in the ten thousands),
// in bursts of 32 that reader, a stream of kitchen, reads before the next.
func flapKitchen(h *daemontest.Harness, n int, reader *sseStream) {
	t0 := time.Now()
	for i := range n { // every report is a change
		v := bridge.Off
		if i%2 == 0 {
			v = bridge.On
		}
		h.Feed.Notify("kitchen", bridge.State{Value: v, Available: true, Updated: t0.Add(time.Duration(i))})
		if i%32 == 31 {
			for range 32 {
				reader.nextSwitch()
			}
		}
	}
}

// notify reports a value for a switch as its driver would on a change at
// the device.
func notify(t *testing.T, h *daemontest.Harness, id string, v bridge.Value) {
	t.Helper()
	h.Feed.Notify(id, bridge.State{Value: v, Available: true, Updated: time.Now()})
}

// TestEventStreamResumes: a client that reconnects with Last-Event-ID gets
// exactly the events it missed, without a snapshot; with an id it cannot
// be given them for (unknown, another run of the hub) a new snapshot.
func TestEventStreamResumes(t *testing.T) {
	dir := t.TempDir()
	h := daemontest.StartWith(t, daemontest.Options{DataDir: dir, Config: hubConfig})
	alice := h.AddUser(t, "alice", "alice-pw", 1, 2)
	app := h.AddApp(t, alice, true, redirect)
	g := h.Authorize(t, app, "alice", "alice-pw", 1, "kitchen", "hall")

	s := openStream(t, h, g, "")
	s.next() // snapshot
	h.Command(t, g, "on")
	seen := s.wantChange("kitchen", "on", "off", "api")
	s.close()

	// Missed while away: kitchen off, hall off, kitchen on.
	for _, c := range []string{"/switches/kitchen/off", "/switches/hall/off", "/switches/kitchen/on"} {
		if p := h.Call(t, http.MethodPut, g.URI+c, g.Token.AccessToken); p.StatusCode != http.StatusNoContent {
			t.Fatalf("PUT %s = %d", c, p.StatusCode)
		}
	}
	r := openStream(t, h, g, seen.ID)
	r.wantChange("kitchen", "off", "on", "api")
	r.wantChange("hall", "off", "on", "api")
	lastSeen := r.wantChange("kitchen", "on", "off", "api")
	// Nothing doubled: the next event is the next change.
	h.Call(t, http.MethodPut, g.URI+"/switches/hall/on", g.Token.AccessToken)
	r.wantChange("hall", "on", "off", "api")
	r.close()

	for _, id := range []string{"bogus", "0-1", lastSeen.ID + "9999"} {
		s := openStream(t, h, g, id)
		if e := s.next(); e.Event != "snapshot" {
			t.Errorf("Last-Event-ID %q: first event %q, want a snapshot", id, e.Event)
		}
		s.close()
	}

	// Across a restart: a snapshot, never the events of another run.
	h.Stop()
	before := h.URL
	h = daemontest.StartWith(t, daemontest.Options{DataDir: dir, Config: hubConfig})
	g.URI = strings.Replace(g.URI, before, h.URL, 1) // another port
	s = openStream(t, h, g, lastSeen.ID)
	if e := s.next(); e.Event != "snapshot" || !strings.Contains(e.Data, `"value":"on"`) {
		t.Errorf("after a restart, Last-Event-ID from before: %+v, want a snapshot", e)
	}
}

// eventNumber is the number an event id ends with.
func eventNumber(t *testing.T, id string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(id[strings.LastIndexByte(id, '-')+1:], 10, 64)
	if err != nil {
		t.Fatalf("event id %q: %v", id, err)
	}
	return n
}

// TestEventStreamIDsAreTheInstallations: an installation's event ids count
// its own switches' changes only, so they tell nothing of switches it was
// not granted (50 changes of another's switch between two of its own
// leave the same step as none); a client resuming with one misses and
// repeats nothing; another installation's id, or one from before the
// installation's switches changed, is no place to resume from.
func TestEventStreamIDsAreTheInstallations(t *testing.T) {
	f := newFixture(t)
	h := f.hub
	g := h.Authorize(t, f.app, "alice", "alice-pw", 1, "kitchen")
	garage := h.Authorize(t, f.app, "bob", "bob-pw", 2, "garage-light")
	other := h.Authorize(t, h.AddApp(t, f.alice, true, redirect), "alice", "alice-pw", 1, "kitchen")
	kitchen := []bridge.Value{bridge.On, bridge.Off}
	k := 0 // kitchen starts off
	flipKitchen := func() {
		notify(t, h, "kitchen", kitchen[k%2])
		k++
	}
	flipGarage := func(n int) {
		for i := range n {
			notify(t, h, "garage-light", kitchen[i%2])
		}
	}

	live := openStream(t, h, g, "")
	snap := live.next()
	otherLive := openStream(t, h, other, "")
	otherLive.next()
	garageLive := openStream(t, h, garage, "")
	garageLive.next()

	flipKitchen()
	e1 := live.wantChange("kitchen", "on", "off", "device")
	flipGarage(50)
	flipKitchen()
	e2 := live.wantChange("kitchen", "off", "on", "device")
	flipKitchen() // no change of the garage between
	e3 := live.wantChange("kitchen", "on", "off", "device")
	n := []uint64{eventNumber(t, snap.ID), eventNumber(t, e1.ID), eventNumber(t, e2.ID), eventNumber(t, e3.ID)}
	if n[1] != n[0]+1 || n[2] != n[1]+1 || n[3] != n[2]+1 {
		t.Errorf("ids %s, %s, %s (50 garage changes), %s (none): the steps differ, want 1 each", snap.ID, e1.ID, e2.ID, e3.ID)
	}
	// The garage's own stream saw its 50 changes, numbered one by one.
	var gids []uint64
	for range 50 {
		e, _ := garageLive.nextSwitch()
		gids = append(gids, eventNumber(t, e.ID))
	}
	if gids[49] != gids[0]+49 {
		t.Errorf("the garage's ids run %d to %d over 50 changes", gids[0], gids[49])
	}
	// The other installation saw the same changes under ids of its own.
	for _, mine := range []sseEvent{e1, e2, e3} {
		theirs, sw := otherLive.nextSwitch()
		if sw.ID != "kitchen" || theirs.ID == mine.ID {
			t.Errorf("the other installation's event %s %s: another switch, or the id %s", theirs.ID, theirs.Data, mine.ID)
		}
	}
	otherLive.close()

	// Resume: away after e1; the stream gives e2 and e3, nothing else,
	// under the ids the live stream had, then goes on.
	r := openStream(t, h, g, e1.ID)
	if got := r.wantChange("kitchen", "off", "on", "device"); got.ID != e2.ID {
		t.Errorf("resumed: %s, want id %s", got.ID, e2.ID)
	}
	if got := r.wantChange("kitchen", "on", "off", "device"); got.ID != e3.ID {
		t.Errorf("resumed: %s, want id %s", got.ID, e3.ID)
	}
	flipGarage(3)
	flipKitchen()
	e4 := live.wantChange("kitchen", "off", "on", "device")
	if got := r.wantChange("kitchen", "off", "on", "device"); got.ID != e4.ID || eventNumber(t, e4.ID) != n[3]+1 {
		t.Errorf("after resuming: %s, live %s, want one past %s", got.ID, e4.ID, e3.ID)
	}
	r.close()

	// Another installation's id: a snapshot, not a place in this one.
	o := openStream(t, h, other, e3.ID)
	if e := o.next(); e.Event != "snapshot" {
		t.Errorf("another installation's Last-Event-ID: first event %q %s, want a snapshot", e.Event, e.Data)
	}
	o.close()

	// The installation's switches change: an id from before is no place
	// in what it now sees.
	g = h.Authorize(t, f.app, "alice", "alice-pw", 1, "kitchen", "hall")
	live.wantEnd("switches changed", 5*time.Second)
	s := openStream(t, h, g, e4.ID)
	if e := s.next(); e.Event != "snapshot" || !strings.Contains(e.Data, `"id":"hall"`) {
		t.Errorf("Last-Event-ID from before the grant changed: %q %s, want a snapshot with hall", e.Event, e.Data)
	}
}

// TestEventStreamIDsOverHTTP2: a stream the hub cannot hand to its one
// writer (HTTP/2 connections cannot be taken over) is served by its own
// request with the same ids, and resumes the same.
func TestEventStreamIDsOverHTTP2(t *testing.T) {
	ca := certstest.NewCA(t)
	pair := ca.NewPair(t, 1)
	h := daemontest.StartWith(t, daemontest.Options{Config: hubConfig, TLS: &pair, Roots: ca.Pool})
	alice := h.AddUser(t, "alice", "alice-pw", 1, 2)
	app := h.AddApp(t, alice, true, redirect)
	g := h.Authorize(t, app, "alice", "alice-pw", 1, "kitchen")
	open := func(lastID string) *sseStream {
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool}, ForceAttemptHTTP2: true}}
		s, resp := tryStreamWith(t, c, g.URI+"/events", "Bearer "+g.Token.AccessToken, lastID)
		if s == nil {
			t.Fatalf("GET /events = %d %s", resp.StatusCode, readAll(resp))
		}
		if resp.ProtoMajor != 2 {
			t.Fatalf("served over %s, want HTTP/2", resp.Proto)
		}
		return s
	}
	s := open("")
	snap := s.next()
	notify(t, h, "kitchen", bridge.On)
	e1 := s.wantChange("kitchen", "on", "off", "device")
	for i := range 20 {
		notify(t, h, "garage-light", []bridge.Value{bridge.On, bridge.Off}[i%2])
	}
	notify(t, h, "kitchen", bridge.Off)
	e2 := s.wantChange("kitchen", "off", "on", "device")
	if eventNumber(t, e1.ID) != eventNumber(t, snap.ID)+1 || eventNumber(t, e2.ID) != eventNumber(t, e1.ID)+1 {
		t.Errorf("ids %s, %s, %s (20 garage changes between): want steps of 1", snap.ID, e1.ID, e2.ID)
	}
	s.close()
	notify(t, h, "kitchen", bridge.On)
	r := open(e1.ID)
	if got := r.wantChange("kitchen", "off", "on", "device"); got.ID != e2.ID {
		t.Errorf("resumed from %s: %s, want %s", e1.ID, got.ID, e2.ID)
	}
	if got := r.wantChange("kitchen", "on", "off", "device"); eventNumber(t, got.ID) != eventNumber(t, e2.ID)+1 {
		t.Errorf("resumed: %s after %s", got.ID, e2.ID)
	}
	notify(t, h, "kitchen", bridge.Off)
	r.wantChange("kitchen", "off", "on", "device")
}

// TestEventStreamEndsWithItsAccess: a stream ends within 2 s of its token
// revoked, its installation removed on the connected apps page or by
// another process, and its grant changed.
func TestEventStreamEndsWithItsAccess(t *testing.T) {
	f := newFixture(t)
	h := f.hub
	ctx := context.Background()
	other, err := store.Open(ctx, h.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	const within = 2 * time.Second

	for _, c := range []struct {
		name   string
		remove func(g daemontest.Grant)
	}{
		{"/oauth/revoke", func(g daemontest.Grant) {
			p := postForm(t, h, "/oauth/revoke", url.Values{"token": {g.Token.AccessToken}}, f.app.ClientID, f.app.Secret)
			if p.StatusCode != http.StatusOK {
				t.Fatalf("revoke = %d", p.StatusCode)
			}
		}},
		{"connected apps page", func(g daemontest.Grant) {
			b := h.NewBrowser()
			page := b.ConnectedApps(t, "alice", "alice-pw")
			p := b.Post(t, "/oauth/apps/remove", url.Values{"installation": {g.InstallationID()}, "csrf": {page.CSRF(t)}})
			if p.StatusCode != http.StatusSeeOther {
				t.Fatalf("remove = %d", p.StatusCode)
			}
		}},
		{"uninstalled by another process", func(g daemontest.Grant) {
			if err := accounts.New(other).Uninstall(ctx, g.InstallationID()); err != nil {
				t.Fatal(err)
			}
		}},
		{"switches changed by consenting again", func(g daemontest.Grant) {
			if again := h.Authorize(t, f.app, "alice", "alice-pw", 1, "hall"); again.InstallationID() != g.InstallationID() {
				t.Fatal("consenting again made another installation")
			}
		}},
	} {
		g := h.Authorize(t, f.app, "alice", "alice-pw", 1, "kitchen")
		s := openStream(t, h, g, "")
		s.next()
		c.remove(g)
		s.wantEnd(c.name, within)
	}
	// An untouched stream lives on.
	g := h.Authorize(t, f.app, "alice", "alice-pw", 2, "garage-light")
	s := openStream(t, h, g, "")
	s.next()
	h.Command(t, g, "on")
	s.wantChange("garage-light", "on", "off", "api")
}

// TestEventStreamRefusals: the token rules of the API, and at most four
// streams per installation.
func TestEventStreamRefusals(t *testing.T) {
	f := newFixture(t)
	h := f.hub
	g := h.Authorize(t, f.app, "alice", "alice-pw", 1, "kitchen")
	g2 := h.Authorize(t, f.app, "bob", "bob-pw", 2, "garage-light")
	// A legacy app may send its token in the query string elsewhere, not
	// to a stream.
	legacy := h.AddApp(t, f.alice, true, redirect)
	if err := h.Accounts.SetAppLegacy(context.Background(), legacy.ClientID, true); err != nil {
		t.Fatal(err)
	}
	lg := h.Authorize(t, legacy, "alice", "alice-pw", 1, "kitchen")
	if p := h.Call(t, http.MethodGet, lg.URI+"/switches?access_token="+lg.Token.AccessToken, ""); p.StatusCode != http.StatusOK {
		t.Fatalf("legacy app's list with the token in the query string: %d", p.StatusCode)
	}
	u := g.URI + "/events"
	lu := lg.URI + "/events"
	for _, c := range []struct {
		name, url, auth string
		status          int
	}{
		{"no token", u, "", http.StatusUnauthorized},
		{"bad token", u, "Bearer nope", http.StatusUnauthorized},
		{"token in the query string", u + "?access_token=" + g.Token.AccessToken, "", http.StatusBadRequest},
		{"another installation's token", u, "Bearer " + g2.Token.AccessToken, http.StatusForbidden},
		{"legacy app's token in the query string", lu + "?access_token=" + lg.Token.AccessToken, "", http.StatusBadRequest},
		{"legacy app's token in the query string, legacy path", strings.Replace(lu, "/api/apps/", "/api/smartapps/", 1) + "?access_token=" + lg.Token.AccessToken, "", http.StatusBadRequest},
		{"unknown token in the query string", lu + "?access_token=nope", "", http.StatusBadRequest},
	} {
		s, resp := tryStream(t, h, c.url, c.auth, "")
		if s != nil {
			t.Errorf("%s: a stream opened", c.name)
			continue
		}
		if resp.StatusCode != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, resp.StatusCode, readAll(resp), c.status)
		}
	}
	// The legacy app's token in the header opens its stream.
	openStream(t, h, lg, "").next()
	var open []*sseStream
	for range 4 {
		s := openStream(t, h, g, "")
		s.next()
		open = append(open, s)
	}
	s, resp := tryStream(t, h, u, "Bearer "+g.Token.AccessToken, "")
	if s != nil || resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("a fifth stream: %v", resp.Status)
	}
	assertErrorBody(t, &daemontest.Page{Response: resp, Body: readAll(resp)}, http.StatusTooManyRequests)
	// Another installation is not held up by this one's streams.
	openStream(t, h, g2, "").next()
	// One closes: a place is free again.
	open[0].close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, resp := tryStream(t, h, u, "Bearer "+g.Token.AccessToken, "")
		if s != nil {
			break
		}
		readAll(resp)
		if time.Now().After(deadline) {
			t.Fatalf("still %d 10 s after a stream closed", resp.StatusCode)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestEventStreamOutlivesServerTimeouts: a healthy stream lives past the
// server's read and write timeouts (30 s, and command_timeout + 30 s),
// with a comment heartbeat every 15 s while nothing happens.
func TestEventStreamOutlivesServerTimeouts(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a 35 s stream")
	}
	t.Parallel()
	h := daemontest.StartWith(t, daemontest.Options{Server: "  command_timeout: 1s\n", Config: hubConfig})
	alice := h.AddUser(t, "alice", "alice-pw", 1)
	app := h.AddApp(t, alice, true, redirect)
	g := h.Authorize(t, app, "alice", "alice-pw", 1, "kitchen")
	s := openStream(t, h, g, "")
	opened := time.Now()
	s.next()
	prev := opened
	for i := 1; i <= 2; i++ {
		select {
		case c := <-s.comments:
			if c != "heartbeat" {
				t.Errorf("comment %q", c)
			}
			// One every 15 s; the first within 15 s of opening. The bounds
			// leave 5 s either side for a loaded machine, and stay under
			// the 30 s timeouts the heartbeat keeps the stream past.
			if d := time.Since(prev); d > 20*time.Second || (i > 1 && d < 10*time.Second) {
				t.Errorf("heartbeat %d %s after the one before, want one every 15 s", i, d)
			}
			prev = time.Now()
		case <-s.ended:
			t.Fatalf("the stream ended after %s", time.Since(opened))
		case <-time.After(30 * time.Second):
			t.Fatalf("no heartbeat %d after %s", i, time.Since(opened))
		}
	}
	// Past both timeouts (31 s for writes here, 30 s for reads).
	time.Sleep(time.Until(opened.Add(33 * time.Second)))
	if p := h.Command(t, g, "on"); p.StatusCode != http.StatusNoContent {
		t.Fatalf("PUT on = %d", p.StatusCode)
	}
	s.wantChange("kitchen", "on", "off", "api")
}

// TestEventStreamDropsSlowReaders: a client that stops reading while its
// switches keep changing is dropped (its stream ends) instead of buffered
// for, and a client that reads is not held up by it. Shutting the hub down
// ends the streams still open.
func TestEventStreamDropsSlowReaders(t *testing.T) {
	h := daemontest.StartWith(t, daemontest.Options{Metrics: true, Config: hubConfig})
	alice := h.AddUser(t, "alice", "alice-pw", 1)
	app := h.AddApp(t, alice, true, redirect)
	g := h.Authorize(t, app, "alice", "alice-pw", 1, "kitchen")

	// The slow client: a raw connection with a small receive buffer that
	// reads the headers and then nothing.
	open := func() float64 { return sample(scrape(t, h), "switchbridge_api_event_streams_open") }
	slowStream(t, h, g)
	fast := openStream(t, h, g, "")
	fast.next()
	for deadline := time.Now().Add(10 * time.Second); open() < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the slow stream did not subscribe")
		}
	}

	// A plug flapping (as its driver reports it) 40,000 times, several
	// megabytes of events, in bursts the reading client keeps up with.
	flapKitchen(h, 40000, fast)
	for deadline := time.Now().Add(15 * time.Second); open() > 1; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%v streams open 15 s after a reader stopped reading, want the slow one dropped", open())
		}
	}
	// The fast one got every event, and still streams.
	notify(t, h, "kitchen", bridge.On)
	fast.wantChange("kitchen", "on", "off", "device")
	// The hub shuts down with a stream open: it ends, and Stop returns.
	stopped := make(chan struct{})
	go func() { h.Stop(); close(stopped) }()
	fast.wantEnd("shutdown", 10*time.Second)
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("the hub did not stop within 10 s with a stream open")
	}
}

// TestEventStreamOfAnotherDelaysNoCommand: streams that stop reading hold
// up only themselves. Three streams of one installation stop reading while
// their switch flaps (megabytes of events, in bursts another
// installation's stream reads); meanwhile a third installation's commands
// each have their change on its own stream when the 204 comes (a command
// waits for its own installation's streams only, and no stream's write
// waits for another's), and the three are dropped. Before, one goroutine
// wrote every stream and a command waited for all of them: each stream
// that did not read held every write, and every command, for a second.
func TestEventStreamOfAnotherDelaysNoCommand(t *testing.T) {
	// Commands as fast as the hub answers them: the rate limit is off.
	h := daemontest.StartWith(t, daemontest.Options{Metrics: true, Config: hubConfig, Server: "  rate_limit: off\n"})
	alice := h.AddUser(t, "alice", "alice-pw", 1)
	slowGrant := h.Authorize(t, h.AddApp(t, alice, true, redirect), "alice", "alice-pw", 1, "kitchen")
	readerGrant := h.Authorize(t, h.AddApp(t, alice, true, redirect), "alice", "alice-pw", 1, "kitchen")
	commander := h.Authorize(t, h.AddApp(t, alice, true, redirect), "alice", "alice-pw", 1, "hall")
	open := func() float64 { return sample(scrape(t, h), "switchbridge_api_event_streams_open") }

	for range 3 {
		slowStream(t, h, slowGrant)
	}
	reader := openStream(t, h, readerGrant, "")
	reader.next()
	raw := rawStream(t, h, commander)
	for deadline := time.Now().Add(10 * time.Second); open() < 5; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%v streams open, want 5", open())
		}
	}

	// Commands, one after another, all through the flood.
	flooded := make(chan struct{})
	commanded := make(chan int)
	go func() {
		n := 0
		defer func() { commanded <- n }()
		for cmd := "off"; ; n++ { // hall starts on
			select {
			case <-flooded:
				return
			default:
			}
			if p := h.Call(t, http.MethodPut, commander.URI+"/switches/hall/"+cmd, commander.Token.AccessToken); p.StatusCode != http.StatusNoContent {
				t.Errorf("PUT hall %s = %d", cmd, p.StatusCode)
				return
			}
			wantOnStreamAlready(t, raw, fmt.Sprintf("command %d", n), "hall", cmd)
			if cmd == "off" {
				cmd = "on"
			} else {
				cmd = "off"
			}
		}
	}()
	flapKitchen(h, 40000, reader)
	close(flooded)
	if n := <-commanded; n == 0 {
		t.Error("no command was answered during the flood")
	}
	for deadline := time.Now().Add(15 * time.Second); open() > 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%v streams open 15 s after three stopped reading, want only the two that read", open())
		}
	}
}

// TestEventStreamFromAPlug: a Tasmota plug on a real Mosquitto pressed at
// its button reaches the stream as a device change; its last will makes
// it unavailable (cause availability, and available false in the list),
// and it is back when it reconnects. The metrics count the stream.
func TestEventStreamFromAPlug(t *testing.T) {
	broker := mqtttest.StartMosquitto(t)
	plug := mqtttest.NewTasmota(t, broker.URL, mqtttest.TasmotaOptions{Topic: "plug1"})
	h := daemontest.StartWith(t, daemontest.Options{Metrics: true, Config: fmt.Sprintf(`mqtt:
  broker: %s
locations:
  - id: 1
    name: Home
    switches:
      - {id: plug, name: Desk plug, driver: mqtt, profile: tasmota, topic: plug1}
      - {id: lamp, name: Lamp, driver: virtual}
`, broker.URL)})
	alice := h.AddUser(t, "alice", "alice-pw", 1)
	app := h.AddApp(t, alice, true, redirect)
	g := h.Authorize(t, app, "alice", "alice-pw", 1, "plug", "lamp")
	waitFor(t, 10*time.Second, "the plug's state", func() bool {
		l := h.List(t, g)
		return l[0].Value != nil && l[0].Available
	})

	s := openStream(t, h, g, "")
	s.next()
	plug.Set(true)
	s.wantChange("plug", "on", "off", "device")
	plug.Set(false)
	s.wantChange("plug", "off", "on", "device")
	if p := h.Call(t, http.MethodPut, g.URI+"/switches/plug/on", g.Token.AccessToken); p.StatusCode != http.StatusNoContent {
		t.Fatalf("PUT plug on = %d %s", p.StatusCode, p.Body)
	}
	s.wantChange("plug", "on", "off", "api")

	plug.Crash()
	_, sw := s.nextSwitch()
	if sw.ID != "plug" || sw.Cause != "availability" || sw.Available || str(sw.Value) != "on" {
		t.Errorf("after the plug's last will: %+v", sw)
	}
	if l := h.List(t, g); l[0].Available || !l[1].Available {
		t.Errorf("list after the last will: %+v", l)
	}
	plug.Start()
	_, sw = s.nextSwitch()
	if sw.ID != "plug" || sw.Cause != "availability" || !sw.Available {
		t.Errorf("after the plug is back: %+v", sw)
	}

	m := scrape(t, h)
	if v := sample(m, "switchbridge_api_event_streams_open"); v != 1 {
		t.Errorf("event_streams_open = %v, want 1", v)
	}
	if v := sample(m, `switchbridge_api_events_sent_total{kind="switch"}`); v < 5 {
		t.Errorf(`events_sent_total{kind="switch"} = %v, want at least 5`, v)
	}
	if v := sample(m, `switchbridge_api_events_sent_total{kind="snapshot"}`); v != 1 {
		t.Errorf(`events_sent_total{kind="snapshot"} = %v, want 1`, v)
	}
}

// waitFor polls cond until it holds, failing the test after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, d)
		}
	}
}

// TestEventStreamNPMClient: the npm eventsource package, a client written
// to the WHATWG spec, parses the stream: the snapshot, then each change
// with its event type and id.
func TestEventStreamNPMClient(t *testing.T) {
	dir := npmInstall(t, []string{"eventsource@3"}, "eventsource-3.mjs")
	f := newFixture(t)
	h := f.hub
	g := h.Authorize(t, f.app, "alice", "alice-pw", 1, "kitchen", "hall")

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "eventsource-3.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "STREAM="+g.URI+"/events", "TOKEN="+g.Token.AccessToken, "WANT=3")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var result []struct {
		Type        string          `json:"type"`
		LastEventID string          `json:"lastEventId"`
		Data        json.RawMessage `json:"data"`
	}
	lines := bufio.NewScanner(io.LimitReader(stdout, 1<<20))
	for lines.Scan() {
		line := lines.Text()
		switch {
		case line == "READY":
			h.Call(t, http.MethodPut, g.URI+"/switches/kitchen/on", g.Token.AccessToken)
			h.Call(t, http.MethodPut, g.URI+"/switches/hall/off", g.Token.AccessToken)
		case strings.HasPrefix(line, "RESULT "):
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "RESULT ")), &result); err != nil {
				t.Fatalf("%v in %s", err, line)
			}
		default:
			t.Logf("client: %s", line)
		}
	}
	if err := cmd.Wait(); err != nil || len(result) != 3 {
		t.Fatalf("client: %v %+v\n%s", err, result, stderr.String())
	}
	if result[0].Type != "snapshot" || !strings.Contains(string(result[0].Data), `"id":"kitchen"`) {
		t.Errorf("first event %+v", result[0])
	}
	var kitchen switchEvent
	json.Unmarshal(result[1].Data, &kitchen)
	if result[1].Type != "switch" || kitchen.ID != "kitchen" || str(kitchen.Value) != "on" || kitchen.Cause != "api" {
		t.Errorf("second event %s %s", result[1].Type, result[1].Data)
	}
	var hall switchEvent
	json.Unmarshal(result[2].Data, &hall)
	if result[2].Type != "switch" || hall.ID != "hall" || str(hall.Value) != "off" || str(hall.Previous) != "on" {
		t.Errorf("third event %s %s", result[2].Type, result[2].Data)
	}
	ids := map[string]bool{}
	for _, r := range result {
		if r.LastEventID == "" || ids[r.LastEventID] {
			t.Errorf("event ids %+v: empty or repeated", result)
		}
		ids[r.LastEventID] = true
	}
}

// TestEventStreamsCountAsConnections: streams hold connections counted in
// server.max_connections, so one address opening stream after stream
// meets its share of the cap (a quarter, at least 8) and is refused at
// once, and HEAD does not open a stream.
func TestEventStreamsCountAsConnections(t *testing.T) {
	h := daemontest.StartWith(t, daemontest.Options{Server: "  max_connections: 32\n", Config: hubConfig})
	alice := h.AddUser(t, "alice", "alice-pw", 1, 2)
	app := h.AddApp(t, alice, true, redirect)
	g := h.Authorize(t, app, "alice", "alice-pw", 1, "kitchen")
	g2 := h.Authorize(t, app, "alice", "alice-pw", 2, "garage-light")
	if p := h.Call(t, http.MethodHead, g.URI+"/events", g.Token.AccessToken); p.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("HEAD /events = %d, want 405", p.StatusCode)
	}
	// Eight streams (four per installation) from one address, a quarter
	// of the cap, over raw connections from an address nothing else uses.
	const from = "127.0.0.7"
	for i := range 8 {
		gi := []daemontest.Grant{g, g2}[i%2]
		c := dialFrom(t, from, h.Addr().String())
		c.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(c, "GET "+strings.TrimPrefix(gi.URI, h.URL)+"/events HTTP/1.1\r\nHost: hub\r\nAuthorization: Bearer "+gi.Token.AccessToken+"\r\n\r\n")
		if line, err := c.r.ReadString('\n'); err != nil || !strings.Contains(line, " 200 ") {
			t.Fatalf("stream %d: %q %v", i, line, err)
		}
	}
	// 1,000 more from the same address: each refused with the cap's 503.
	for i := range 1000 {
		c := dialFrom(t, from, h.Addr().String())
		resp, _ := c.get(t)
		c.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("connection %d past the address's share: %d, want 503", i, resp.StatusCode)
		}
	}
}

// TestEventStreamEndsWhenItsTokenExpires: a stream does not outlive its
// token.
func TestEventStreamEndsWhenItsTokenExpires(t *testing.T) {
	h := daemontest.Start(t, strings.Replace(hubConfig, "oauth:\n", "oauth:\n  token_lifetime: 3s\n", 1))
	alice := h.AddUser(t, "alice", "alice-pw", 1)
	app := h.AddApp(t, alice, true, redirect)
	g := h.Authorize(t, app, "alice", "alice-pw", 1, "kitchen")
	s := openStream(t, h, g, "")
	s.next()
	// The hub ends it within 2 s of the expiry; the 5 s beyond that are
	// for a loaded machine, where the stream's goroutine and this test's
	// wait for their turn (the bound measured from now failed under load).
	s.wantEnd("token expired", time.Until(g.Token.Expiry)+2*time.Second+5*time.Second)
	if !time.Now().After(g.Token.Expiry.Add(-time.Second)) {
		t.Errorf("the stream ended before its token expired (%s)", g.Token.Expiry)
	}
}
