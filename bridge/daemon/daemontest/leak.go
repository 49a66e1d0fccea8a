package daemontest

// The leak test's script: every path a client with a grant for some of a
// hub's switches can take, run alike against two deployments that differ
// only in switches the grant does not cover. Each answer is written down
// with only what must differ between two processes normalised, so the two
// transcripts compare byte for byte: anything the other switches changed
// in an answer shows as a difference. What is normalised, and why:
//
//   - the hub's, the platform's and the receiver's URLs: each process
//     listens on a port it could get (learn);
//   - installation ids, apps' client ids, tokens, webhook ids and secrets:
//     each process makes them at random (learn);
//   - times in bodies (RFC 3339), Webhook-Timestamp and Date: when things
//     happened (norm, leakDeliveryHeaders, headers); Content-Length goes
//     with them, a time's fraction of a second having no trailing zeros;
//   - X-Request-Id, a delivery's Webhook-Id and its signature (of the id
//     and time under the webhook's secret): random per request;
//   - an event id's tag (a MAC under a key of the hub's run) and the
//     offset of its number: random per run; which view an id is of, and
//     how far apart two ids are, stay (eventID);
//   - X-RateLimit-Reset, a Retry-After equal to it and the seconds a 429's
//     message says to wait: they count down a window that began at each
//     side's first request (headers, norm);
//   - the order of a group command's changes, which switch concurrently
//     (take, sorted), and how many deliveries a webhook got, which its
//     outbox coalesces as timing has it (webhookDeliveries).

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge/wire"
)

// The switches of the leak test.
var (
	// LeakGranted are the switches of location 1 (or of the hub's
	// location) both sides hold, in config order, with the same ids,
	// names and drivers: kitchen (virtual, initially off), hall (virtual,
	// initially on) and lamp (a metering MQTT plug, off).
	LeakGranted = []string{"kitchen", "hall", "lamp"}
	// LeakExtra are the switches only the side with extras holds, which no
	// grant of the script covers: attic (a metering plug, on), porch (a
	// plug), cellar (virtual, on), shed (a plug that went away:
	// unavailable), bell (virtual, on only: a group off that took it in
	// would be 501) and broken (virtual, failing every command: 502) in
	// the same location, and garage in another.
	LeakExtra = []string{"attic", "porch", "cellar", "shed", "bell", "broken", "garage"}
	// LeakNever is a switch id neither side ever had, as long as attic,
	// so that the two ids cost a hub the same to read and to write.
	LeakNever = "ghost"
)

// LeakFlood is how many changes of an extra switch Disturb("flood") makes
// while the stream under test is away: more than the 1024 events the
// whole hub once kept for streams that resume, so that a resumption that
// depends on other switches' changes shows.
const LeakFlood = 1100

// LeakSide is one of the two deployments a leak test compares. Both hold
// LeakGranted and the same grants of them; one (Extras) also holds
// LeakExtra, real and reporting, and changes them while the script runs.
type LeakSide struct {
	// Name says which side a transcript is of.
	Name string
	// Extras is whether the side holds LeakExtra.
	Extras bool
	// API is the hub that serves the grants' installations; Discovery is
	// where discovery is asked (the hub itself on a single box, its
	// platform otherwise). Their clients check every answer against the
	// OpenAPI document.
	API, Discovery *Harness
	// G is the grant under test: LeakGranted, each switchable. S is
	// another app's grant of kitchen, and of hall to see only. W is a
	// third app's grant of LeakGranted, which the script polls with, so
	// that G's rate-limit window counts the script's own requests alone.
	G, S, W Grant
	// Other is the id of an installation of the hub that is not G's: one
	// over the extra switches on the side that has them, a made-up one on
	// the other.
	Other string
	// Press sets the lamp plug's relay as its button does; Meter makes the
	// plug report a reading (power in W, its energy counter in kWh).
	Press func(tb testing.TB, on bool)
	Meter func(tb testing.TB, watts, kWh float64)
	// Disturb changes the extra switches and returns once the hub has
	// taken each change in: "changes" (a plug's button and readings, a
	// plug coming back and going away again, commands of other
	// installations), "flood" (LeakFlood changes of one plug). A side
	// without extras does nothing.
	Disturb func(tb testing.TB, step string)
	// Delivered reports whether the hub has nothing left to send to the
	// webhook at url, and has recorded the last delivery's success.
	Delivered func(tb testing.TB, url string) bool
}

// LeakTranscript is what a side answered to the script, normalised.
type LeakTranscript struct {
	Side string
	// Entries are the answers, events and deliveries in the order the
	// script took them.
	Entries []string
	// Short notes where fewer events came than the script expects.
	Short []string
}

// leakRun is one run of the script against one side.
type leakRun struct {
	tb   testing.TB
	side LeakSide
	out  *LeakTranscript
	// subst are the values that must differ between two processes, each
	// with the label that stands for it: learnt as the run goes.
	subst [][2]string
	// views labels the tags of event ids; base is the number of the
	// first id the run saw, which others are counted from.
	views   map[string]string
	base    int64
	baseSet bool
	rcv     *leakReceiver
	// streamed holds the data of every change the streams got, and
	// lastStreamed the last per switch, normalised.
	streamed     map[string]bool
	lastStreamed map[string]string
}

// RunLeakScript runs the script against side and returns its transcript.
func RunLeakScript(tb testing.TB, side LeakSide) *LeakTranscript {
	tb.Helper()
	r := &leakRun{tb: tb, side: side, out: &LeakTranscript{Side: side.Name}, views: map[string]string{},
		streamed: map[string]bool{}, lastStreamed: map[string]string{}}
	r.rcv = startLeakReceiver(tb)
	// What must differ between two processes, and nothing else: where
	// they listen (ports), the ids and secrets each makes at random
	// (installations, apps, tokens) and the test's receiver's port.
	r.learn(side.API.URL, "<hub>")
	r.learn(side.Discovery.URL, "<discovery>")
	for _, g := range []struct {
		g    Grant
		name string
	}{{side.G, "G"}, {side.S, "S"}, {side.W, "W"}} {
		r.learn(g.g.InstallationID(), "<installation "+g.name+">")
		r.learn(g.g.Token.AccessToken, "<token "+g.name+">")
		r.learn(g.g.Config.ClientID, "<app "+g.name+">")
	}
	r.learn(side.Other, "<another installation>")
	r.learn(r.rcv.URL, "<receiver>")
	r.script()
	return r.out
}

// script is the requests, in order. The comments say what each step
// changes of the granted switches: the events the stream gets.
func (r *leakRun) script() {
	tb, side := r.tb, r.side
	g := side.G
	tok := "Bearer " + g.Token.AccessToken
	u := func(p string) string { return g.URI + p }
	all := append(append(slices.Clone(LeakGranted), LeakExtra...), LeakNever)

	r.do("discovery", http.MethodGet, side.Discovery.URL+"/api/apps/endpoints", tok, "")
	// The webhook before the stream, so that both get the same changes.
	r.do("register a webhook", http.MethodPost, u("/webhooks"), tok, `{"url":"`+r.rcv.URL+`"}`)
	r.do("the webhooks", http.MethodGet, u("/webhooks"), tok, "")
	s1 := r.open("the stream", tok, "")
	r.take("the stream's snapshot", s1, 1, false)

	// Reads: kitchen off, hall on, lamp off.
	r.do("the list", http.MethodGet, u("/switches"), tok, "")
	for _, id := range all {
		r.do("read "+id, http.MethodGet, u("/switches/"+id), tok, "")
	}
	r.do("read kitchen, escaped", http.MethodGet, u("/switches/%6Bitchen"), tok, "")
	r.do("read attic, escaped", http.MethodGet, u("/switches/%61ttic"), tok, "")
	for _, id := range []string{"attic", LeakNever} {
		r.do("HEAD "+id, http.MethodHead, u("/switches/"+id), tok, "")
		r.do("DELETE "+id, http.MethodDelete, u("/switches/"+id), tok, "")
		r.do("GET "+id+"/on", http.MethodGet, u("/switches/"+id+"/on"), tok, "")
		r.do("a path below "+id, http.MethodGet, u("/switches/"+id+"/on/now"), tok, "")
		r.do("read "+id+" at the legacy path", http.MethodGet,
			strings.Replace(u("/switches/"+id), wire.InstallationsPrefix, wire.LegacyInstallationsPrefix, 1), tok, "")
		r.do("read "+id+" with the token in the query", http.MethodGet, u("/switches/"+id+"?access_token="+g.Token.AccessToken), "", "")
	}
	side.Disturb(tb, "changes")

	// Group commands: kitchen and lamp go on (hall is on); then all off.
	r.command("group on", u("/switches/on"), tok, s1, 2)
	r.command("group off", u("/switches/off"), tok, s1, 3)
	// One switch at a time: all on again (the second kitchen/on changes
	// nothing).
	r.command("kitchen on", u("/switches/kitchen/on"), tok, s1, 1)
	r.command("kitchen on again", u("/switches/kitchen/on"), tok, s1, 0)
	r.command("lamp on", u("/switches/lamp/on"), tok, s1, 1)
	r.command("hall on", u("/switches/hall/on"), tok, s1, 1)
	// Commands to switches the grant does not cover, and invalid ones:
	// nothing changes.
	for _, id := range append(append([]string{}, LeakExtra...), LeakNever) {
		r.do("command "+id+" on", http.MethodPut, u("/switches/"+id+"/on"), tok, "")
		r.do("command "+id+" off", http.MethodPut, u("/switches/"+id+"/off"), tok, "")
		r.do("command "+id+" toggle", http.MethodPut, u("/switches/"+id+"/toggle"), tok, "")
		r.do("command "+id+" as a group command", http.MethodPut, u("/switches/"+id), tok, "")
	}
	r.do("command attic, escaped", http.MethodPut, u("/switches/%61ttic/on"), tok, "")
	r.do("command kitchen toggle", http.MethodPut, u("/switches/kitchen/toggle"), tok, "")
	r.do("group toggle", http.MethodPut, u("/switches/toggle"), tok, "")

	// The lamp by itself: its button (off), then its first reading.
	side.Press(tb, false)
	r.take("the lamp's button", s1, 1, false)
	side.Meter(tb, 12.5, 1.234)
	r.take("the lamp's first reading", s1, 1, false)
	side.Disturb(tb, "changes")

	// Another app's grant, with hall to see only: its refusals name
	// nothing but its own switches; its command to kitchen (off) is on
	// G's stream, not as G's own.
	stok := "Bearer " + side.S.Token.AccessToken
	su := func(p string) string { return side.S.URI + p }
	r.do("see-only: the list", http.MethodGet, su("/switches"), stok, "")
	for _, id := range []string{"hall", "attic", LeakNever} {
		r.do("see-only: read "+id, http.MethodGet, su("/switches/"+id), stok, "")
		r.do("see-only: command "+id, http.MethodPut, su("/switches/"+id+"/on"), stok, "")
	}
	r.do("see-only: group on", http.MethodPut, su("/switches/on"), stok, "")
	r.command("see-only: kitchen off", su("/switches/kitchen/off"), stok, s1, 1)

	// Streams: four may be open, the fifth is refused.
	var more []*leakStream
	for i := 2; i <= 4; i++ {
		s := r.open(fmt.Sprintf("stream %d", i), tok, "")
		r.take(fmt.Sprintf("stream %d's snapshot", i), s, 1, false)
		more = append(more, s)
	}
	r.open("stream 5", tok, "")
	for _, s := range more {
		s.close()
	}

	// Tokens that are not good here.
	other := strings.Replace(g.URI, g.InstallationID(), side.Other, 1)
	r.do("G's token at another installation", http.MethodGet, other+"/switches", tok, "")
	r.do("G's token at another installation: attic", http.MethodGet, other+"/switches/attic", tok, "")
	r.do("a bad token", http.MethodGet, u("/switches/attic"), "Bearer not-a-token", "")
	r.do("no token", http.MethodGet, u("/switches/attic"), "", "")

	// Resuming: the stream goes away after hall's change (off); while it
	// is away kitchen goes on, the extra switches change more often than
	// the hub once kept, and hall goes on. The stream comes back with its
	// last id and gets exactly those two changes, no snapshot.
	last := r.command("hall off", u("/switches/hall/off"), tok, s1, 1)
	s1.close()
	r.command("kitchen on, the stream away", u("/switches/kitchen/on"), tok, nil, 1)
	side.Disturb(tb, "flood")
	r.command("hall on, the stream away", u("/switches/hall/on"), tok, nil, 1)
	s6 := r.open("the stream again, from its last id", tok, last)
	r.take("the stream again: what it missed", s6, 2, false)
	s7 := r.open("a stream from an id of no stream", tok, "bogus-7")
	r.take("a stream from an id of no stream: its snapshot", s7, 1, false)
	s7.close()

	// The lamp's next reading makes no event (power_events_every is an
	// hour); reads show it.
	side.Meter(tb, 20, 1.240)
	r.poll("the lamp's second reading", func() bool {
		var sw struct{ Power *float64 }
		return r.pollJSON(side.W, "/switches/lamp", &sw) && sw.Power != nil && *sw.Power == 20
	})
	r.do("read lamp after its second reading", http.MethodGet, u("/switches/lamp"), tok, "")
	r.do("the list after the lamp's second reading", http.MethodGet, u("/switches"), tok, "")
	side.Disturb(tb, "changes")

	// The last changes: kitchen and hall off.
	r.command("group off at the end", u("/switches/off"), tok, s6, 2)

	r.webhookDeliveries()
	r.do("the webhooks at the end", http.MethodGet, u("/webhooks"), tok, "")
	r.do("rotate a webhook that is not there", http.MethodPost, u("/webhooks/7c5e0b1a9d3f4e2a/rotate"), tok, "")
	r.do("delete a webhook that is not there", http.MethodDelete, u("/webhooks/7c5e0b1a9d3f4e2a"), tok, "")
	r.do("register a webhook without a URL", http.MethodPost, u("/webhooks"), tok, `{}`)

	// The rate limit: the requests left are the same on both sides, and
	// so is the refusal, whichever switch is asked for.
	n := 0
	for ; n < 1000; n++ {
		if r.status(http.MethodGet, u("/switches/attic"), tok) == http.StatusTooManyRequests {
			break
		}
	}
	r.note("requests until the rate limit: %d", n)
	for _, id := range []string{"attic", LeakNever, "kitchen"} {
		r.do("rate limited: read "+id, http.MethodGet, u("/switches/"+id), tok, "")
		r.do("rate limited: command "+id, http.MethodPut, u("/switches/"+id+"/on"), tok, "")
	}
	r.open("rate limited: the stream", tok, "")
	s6.close()
}

// webhookDeliveries waits until the webhook has got the last change of
// each granted switch, and writes down what it got. The outbox coalesces
// a switch's changes that wait (a receiver gets the latest, not every
// one), so how many deliveries came depends on timing, not on what was
// granted; what does not: each delivery is of a change the stream got
// (nothing else), the last delivery of each switch is its last change,
// and the headers.
func (r *leakRun) webhookDeliveries() {
	r.tb.Helper()
	var last map[string]string
	done := r.wait(func() bool {
		last = map[string]string{}
		for _, d := range r.rcv.all() {
			id, data := leakDeliveryData(d.body)
			last[id] = r.norm(data)
		}
		for _, id := range LeakGranted {
			if last[id] != r.lastStreamed[id] {
				return false
			}
		}
		return r.side.Delivered(r.tb, r.rcv.URL)
	})
	if !done {
		short := "the webhook did not get the last change of each granted switch within 20 s"
		r.note("%s", short)
		r.out.Short = append(r.out.Short, short)
	}
	var unknown, headers []string
	for _, d := range r.rcv.all() {
		if _, data := leakDeliveryData(d.body); !r.streamed[r.norm(data)] {
			unknown = append(unknown, r.norm(string(d.body)))
		}
		if h := leakDeliveryHeaders(d.header); !slices.Contains(headers, h) {
			headers = append(headers, h)
		}
	}
	slices.Sort(headers)
	r.note("webhook deliveries of no change the stream got:\n%s", strings.Join(unknown, "\n"))
	var lines []string
	for id, data := range last {
		lines = append(lines, id+": "+data)
	}
	slices.Sort(lines)
	r.note("webhook: the last delivery of each switch:\n%s", strings.Join(lines, "\n"))
	r.note("webhook: the deliveries' headers:\n%s", strings.Join(headers, "\n--\n"))
}

// leakDeliveryData is the switch id and the data of a delivery's body.
func leakDeliveryData(body []byte) (id, data string) {
	var m struct {
		Data json.RawMessage `json:"data"`
	}
	var sw struct {
		ID string `json:"id"`
	}
	json.Unmarshal(body, &m)
	json.Unmarshal(m.Data, &sw)
	return sw.ID, string(m.Data)
}

// learn makes value, wherever it appears, stand as label in the
// transcript.
func (r *leakRun) learn(value, label string) {
	if value == "" {
		return
	}
	r.subst = append(r.subst, [2]string{value, label})
	// Longest first: a hub's URL is a prefix of a receiver's on a port
	// that begins with the hub's.
	slices.SortStableFunc(r.subst, func(a, b [2]string) int { return len(b[0]) - len(a[0]) })
}

// leakTime is a time as the API writes it (RFC 3339, UTC, fractions of a
// second without trailing zeros). Times are when things happened, which
// two processes cannot share; that a field holds a time, and which, stays
// in the transcript.
var leakTime = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)`)

// leakWait is the seconds a 429 message says to wait: the rate limit's
// window starts at each side's first request, a moment apart.
var leakWait = regexp.MustCompile(`try again in \d+ s`)

// norm is s with what must differ between the two processes replaced:
// the values learnt, times, and the wait of a rate-limited request.
func (r *leakRun) norm(s string) string {
	for _, p := range r.subst {
		s = strings.ReplaceAll(s, p[0], p[1])
	}
	s = leakTime.ReplaceAllString(s, "<time>")
	return leakWait.ReplaceAllString(s, "try again in <reset> s")
}

// note adds an entry to the transcript.
func (r *leakRun) note(format string, args ...any) {
	r.out.Entries = append(r.out.Entries, fmt.Sprintf(format, args...))
}

// leakRequestID is an X-Request-Id: random per request.
var leakRequestID = regexp.MustCompile(`^[0-9a-f]{32}$`)

// headers is an answer's headers, one a line, sorted, normalised: Date
// and Content-Length are left out (the time; a body's length with its
// times, which are normalised in the body), X-Request-Id is random, and
// X-RateLimit-Reset (and a Retry-After equal to it) counts the seconds to
// the end of a window that began at each side's first request.
func (r *leakRun) headers(h http.Header) string {
	reset := h.Get("X-Ratelimit-Reset")
	var lines []string
	for k, vs := range h {
		switch k {
		case "Date", "Content-Length":
			continue
		}
		for _, v := range vs {
			switch {
			case k == "X-Request-Id" && leakRequestID.MatchString(v):
				v = "<request id>"
			case k == "X-Ratelimit-Reset" && leakSeconds(v):
				v = "<reset>"
			case k == "Retry-After" && v == reset && leakSeconds(v):
				v = "<reset>"
			}
			lines = append(lines, k+": "+r.norm(v))
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// leakSeconds reports whether v is a whole number of seconds within an
// hour, the window of the script's rate limit.
func leakSeconds(v string) bool {
	n, err := strconv.Atoi(v)
	return err == nil && n >= 1 && n <= 3600
}

// send makes one request with an Authorization header (none when
// authorization is "") and a JSON body (none when body is "").
func (r *leakRun) send(method, url, authorization, body string) (*http.Response, string) {
	r.tb.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		r.tb.Fatal(err)
	}
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	c := r.side.API.Client
	if d := r.side.Discovery; d != r.side.API && strings.HasPrefix(url, d.URL+"/") {
		c = d.Client // its own contract, with its base URL
	}
	resp, err := c.Do(req)
	if err != nil {
		r.tb.Fatalf("%s %s: %v", method, r.norm(url), err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		r.tb.Fatalf("%s %s: %v", method, r.norm(url), err)
	}
	return resp, string(b)
}

// do makes one request and writes its answer down. A new webhook's id
// and secret are learnt from its answer first.
func (r *leakRun) do(what, method, url, authorization, body string) (int, string) {
	r.tb.Helper()
	resp, b := r.send(method, url, authorization, body)
	if method == http.MethodPost && resp.StatusCode == http.StatusCreated {
		var w struct{ ID, Secret string }
		if json.Unmarshal([]byte(b), &w) == nil {
			r.learn(w.ID, "<webhook>")
			r.learn(w.Secret, "<webhook secret>")
		}
	}
	r.note("%s\n%s %s\n%d\n%s\n%s", what, method, r.norm(url), resp.StatusCode, r.headers(resp.Header), r.norm(b))
	return resp.StatusCode, b
}

// status makes one request and returns its status alone.
func (r *leakRun) status(method, url, authorization string) int {
	r.tb.Helper()
	resp, _ := r.send(method, url, authorization, "")
	return resp.StatusCode
}

// command sends a command (PUT, no body), writes its answer down, and
// takes the changes it makes from s (n of them; none when s is nil, the
// stream being away). It returns the id of the last event taken.
func (r *leakRun) command(what, url, authorization string, s *leakStream, n int) string {
	r.tb.Helper()
	r.do(what, http.MethodPut, url, authorization, "")
	if s == nil || n == 0 {
		return ""
	}
	// A group command switches concurrently: its changes come in any
	// order.
	return r.take(what+": its changes", s, n, n > 1)
}

// poll waits, at most 20 s, until cond holds.
func (r *leakRun) poll(what string, cond func() bool) {
	r.tb.Helper()
	if !r.wait(cond) {
		r.tb.Fatalf("%s: %s: not within 20 s", r.side.Name, what)
	}
}

// wait waits, at most 20 s, until cond holds, and reports whether it did.
func (r *leakRun) wait(cond func() bool) bool {
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// pollJSON reads path of grant g into v, without writing it down.
func (r *leakRun) pollJSON(g Grant, path string, v any) bool {
	r.tb.Helper()
	resp, b := r.send(http.MethodGet, g.URI+path, "Bearer "+g.Token.AccessToken, "")
	return resp.StatusCode == http.StatusOK && json.Unmarshal([]byte(b), v) == nil
}

// leakStream is an open event stream, read as events come.
type leakStream struct {
	events chan leakEvent
	ended  chan struct{}
	cancel context.CancelFunc
	body   io.Closer
}

type leakEvent struct{ id, kind, data string }

// open opens the event stream with lastID as Last-Event-ID (none when
// ""), writes its answer's status and headers down (the body too when it
// is refused) and returns it; nil when refused.
func (r *leakRun) open(what, authorization, lastID string) *leakStream {
	r.tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.side.G.URI+"/events", nil)
	if err != nil {
		r.tb.Fatal(err)
	}
	req.Header.Set("Authorization", authorization)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	// A client of its own: a stream must not wait on another's
	// connection, nor be cut by a timeout.
	var rt http.RoundTripper = &http.Transport{}
	if c := r.side.API.Contract; c != nil {
		rt = c.Transport(rt)
	}
	resp, err := (&http.Client{Transport: rt}).Do(req)
	if err != nil {
		cancel()
		r.tb.Fatalf("%s: %v", what, err)
	}
	sent := ""
	if lastID != "" {
		sent = " from " + r.sentID(lastID)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		resp.Body.Close()
		cancel()
		r.note("%s\nGET /events%s\n%d\n%s\n%s", what, sent, resp.StatusCode, r.headers(resp.Header), r.norm(string(b)))
		return nil
	}
	r.note("%s\nGET /events%s\n%d\n%s", what, sent, resp.StatusCode, r.headers(resp.Header))
	s := &leakStream{events: make(chan leakEvent, 1024), ended: make(chan struct{}), cancel: cancel, body: resp.Body}
	go s.read(resp.Body)
	r.tb.Cleanup(s.close)
	return s
}

func (s *leakStream) read(body io.Reader) {
	defer close(s.ended)
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var e leakEvent
	for sc.Scan() {
		line := sc.Text()
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch {
		case line == "":
			if e.kind != "" || e.data != "" {
				s.events <- e
			}
			e = leakEvent{}
		case field == "id":
			e.id = value
		case field == "event":
			e.kind = value
		case field == "data":
			e.data += value
		}
	}
}

func (s *leakStream) close() {
	s.cancel()
	s.body.Close()
}

// take waits, at most 10 s, for the next n events of s and writes them
// down; sorted, for changes that may come in any order (a group
// command's), their ids apart and their data sorted. It returns the raw
// id of the last event.
func (r *leakRun) take(what string, s *leakStream, n int, sorted bool) string {
	r.tb.Helper()
	var got []leakEvent
	deadline := time.After(10 * time.Second)
	ended := false
wait:
	for len(got) < n {
		select {
		case e := <-s.events:
			got = append(got, e)
		case <-s.ended:
			ended = true
			// What was read before the end is in the channel.
			for len(got) < n {
				select {
				case e := <-s.events:
					got = append(got, e)
				default:
					break wait
				}
			}
		case <-deadline:
			break wait
		}
	}
	var ids, lines []string
	for _, e := range got {
		if e.kind == "switch" {
			var sw struct {
				ID string `json:"id"`
			}
			json.Unmarshal([]byte(e.data), &sw)
			r.streamed[r.norm(e.data)] = true
			r.lastStreamed[sw.ID] = r.norm(e.data)
		}
		id := r.eventID(e.id)
		ids = append(ids, id)
		line := e.kind + " " + r.norm(e.data)
		if !sorted {
			line = id + " " + line
		}
		lines = append(lines, line)
	}
	entry := what
	if sorted {
		slices.Sort(ids)
		slices.Sort(lines)
		entry += "\nids " + strings.Join(ids, " ")
	}
	entry += "\n" + strings.Join(lines, "\n")
	if len(got) < n {
		why := "within 10 s"
		if ended {
			why = "before the stream ended"
		}
		short := fmt.Sprintf("%s: %d of %d events %s", what, len(got), n, why)
		entry += "\n" + short
		r.out.Short = append(r.out.Short, short)
	}
	r.note("%s", entry)
	if len(got) == 0 {
		return ""
	}
	return got[len(got)-1].id
}

// eventID is an event id for the transcript. An id is a tag of the
// installation's view under a key of the hub's run, and a number from an
// offset of the view's own: both random per process. The tag is named by
// the order in which the run first saw it, the number counted from the
// first id the run saw, so that what ids tell (which view, how many
// changes between two) stays in the transcript.
func (r *leakRun) eventID(id string) string {
	i := strings.LastIndexByte(id, '-')
	n, err := strconv.ParseInt(id[i+1:], 10, 64)
	if i < 0 || err != nil {
		return "<not an event id: " + r.norm(id) + ">"
	}
	tag := id[:i]
	label, ok := r.views[tag]
	if !ok {
		label = fmt.Sprintf("view %d", len(r.views)+1)
		r.views[tag] = label
	}
	if !r.baseSet {
		r.base, r.baseSet = n, true
	}
	return fmt.Sprintf("<%s>+%d", label, n-r.base)
}

// sentID is an id the script sends as Last-Event-ID: one the run got
// from the hub as eventID writes it, any other as it is.
func (r *leakRun) sentID(id string) string {
	if i := strings.LastIndexByte(id, '-'); i >= 0 {
		if _, ok := r.views[id[:i]]; ok {
			return r.eventID(id)
		}
	}
	return r.norm(id)
}

// leakReceiver is a webhook receiver on loopback: it confirms, and keeps
// every delivery.
type leakReceiver struct {
	URL string
	mu  sync.Mutex
	got []leakHook
}

// leakHook is one delivery.
type leakHook struct {
	header http.Header
	body   []byte
}

func startLeakReceiver(tb testing.TB) *leakReceiver {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	r := &leakReceiver{URL: "http://" + ln.Addr().String() + "/hook"}
	srv := &http.Server{Handler: http.HandlerFunc(r.serve), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	tb.Cleanup(func() { srv.Close() })
	return r
}

func (r *leakReceiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	var m struct {
		Type string
		Data struct{ Challenge string }
	}
	json.Unmarshal(body, &m)
	if m.Type == "webhook.confirm" {
		json.NewEncoder(w).Encode(map[string]string{"challenge": m.Data.Challenge})
		return
	}
	r.mu.Lock()
	r.got = append(r.got, leakHook{req.Header.Clone(), body})
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// leakDeliveryHeaders is a delivery's headers, sorted and normalised: the
// message id and the time are made per delivery, the signature follows
// them and the secret. Content-Length goes with the body's times.
func leakDeliveryHeaders(h http.Header) string {
	var lines []string
	for k, vs := range h {
		if k == "Content-Length" {
			continue
		}
		for _, v := range vs {
			switch {
			case k == "Webhook-Id" && strings.HasPrefix(v, "msg_"):
				v = "<message id>"
			case k == "Webhook-Timestamp" && leakUnixTime(v):
				v = "<time>"
			case k == "Webhook-Signature" && strings.HasPrefix(v, "v1,"):
				v = "<signature>"
			}
			lines = append(lines, k+": "+v)
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// leakUnixTime reports whether v is a time in seconds since 1970 of this
// century.
func leakUnixTime(v string) bool {
	n, err := strconv.ParseInt(v, 10, 64)
	return err == nil && n > 946684800 && n < 4102444800
}

func (r *leakReceiver) all() []leakHook {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// CompareLeakTranscripts fails tb unless the side without extras (bare)
// got every event the script expects, and the other side answered the
// same, byte for byte, to the end.
func CompareLeakTranscripts(tb testing.TB, bare, extras *LeakTranscript) {
	tb.Helper()
	for _, s := range bare.Short {
		tb.Errorf("%s: %s (the script expects other events than the hub sends)", bare.Side, s)
	}
	compareLeakLists(tb, "answer", bare, extras, bare.Entries, extras.Entries)
}

func compareLeakLists(tb testing.TB, what string, bare, extras *LeakTranscript, a, b []string) {
	tb.Helper()
	differ := 0
	for i := range max(len(a), len(b)) {
		x, y := "(none)", "(none)"
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x == y {
			continue
		}
		if differ++; differ <= 5 {
			tb.Errorf("%s %d differs:\n--- %s:\n%s\n--- %s:\n%s", what, i+1, bare.Side, x, extras.Side, y)
		}
	}
	if differ > 5 {
		tb.Errorf("%d more %ss differ", differ-5, what)
	}
	if differ == 0 && len(a) == 0 {
		tb.Errorf("no %s to compare: the script ran nothing", what)
	}
}
