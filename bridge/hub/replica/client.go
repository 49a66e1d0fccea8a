package replica

// The hub's requests to the platform: the HTTP client and its deadlines,
// one request with the hub's credentials and the platform's error
// answers, the inventory report, the snapshot, and the long poll with its
// watchdog for dead connections.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/link"
	"github.com/switchbridge/switchbridge/bridge/wire"
)

// Limits on what a hub accepts from its platform: a snapshot of a large
// household's installations (a few hundred bytes each, with their tokens)
// is well under a megabyte; 16 MiB leaves room for tens of thousands.
const MaxBatchBytes = 16 << 20

// Dead connections. A long poll that heard no heartbeat (102 Processing,
// sent every link.HeartbeatInterval) for heartbeatSilence (plus what the
// round trip's spread adds, rtt.go) is on a dead connection: the hub
// polls once more on a fresh one, and only if that one fails too takes
// the link for down, drops every pooled connection and connects again. A
// platform that sends no heartbeats (an older version) is given the poll
// time plus pollGrace and a round trip. TCP keepalives find a dead idle
// connection in about keepAliveIdle + 3 × keepAliveInterval, for whatever
// the pool holds.
const (
	heartbeatSilence  = 3 * time.Second
	pollGrace         = 5 * time.Second
	requestTimeout    = 15 * time.Second
	keepAliveIdle     = 10 * time.Second
	keepAliveInterval = 5 * time.Second
)

// newClient returns the client of the link's requests. HTTP/1.1 (a
// DialContext of its own turns HTTP/2 off): each request has a connection
// of its own, so a long poll that died takes no other request with it, and
// the pool can be dropped as a whole.
func newClient() *http.Client {
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAliveConfig: net.KeepAliveConfig{
		Enable: true, Idle: keepAliveIdle, Interval: keepAliveInterval, Count: 3}}
	return &http.Client{Transport: &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         dialer.DialContext,
		MaxIdleConns:        2,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
		// Each request has a deadline of its own, which follows the
		// round trip (rtt.go); this one only backs them up.
		ResponseHeaderTimeout: link.DefaultPollTimeout + pollGrace + maxRTT,
	}}
}

func (h *Follower) putInventory(ctx context.Context) error {
	inv := link.Inventory{Version: link.Version(), Locations: h.opts.Inventory()}
	if err := h.retain(ctx, inv.Locations); err != nil {
		return err
	}
	body, err := json.Marshal(inv)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, h.requestDeadline())
	defer cancel()
	// The replica's cursor lets a platform restored from an older backup
	// tell this hub that it needs new credentials (link.RekeyHeader).
	var hdr http.Header
	if st, err := h.store.ReplicaState(ctx); err == nil && st.Synced {
		hdr = http.Header{link.CursorHeader: {strconv.FormatInt(st.Cursor, 10) + " " + st.CursorTag}}
	}
	got, err := h.do(ctx, http.MethodPut, link.InventoryPath, hdr, body, nil)
	var se *statusError
	if errors.As(err, &se) {
		h.setRefused(se.Message)
	}
	if err == nil {
		beats := got.Get(link.HeartbeatHeader)
		h.heartbeats.Store(beats != "")
		h.beatAtOnce.Store(strings.Contains(beats, link.HeartbeatAtOnce))
		h.follow(ctx, got)
	}
	return err
}

// snapshot fetches the platform's snapshot and replaces the replica with
// it, unless the replica moved past it since it stood at from (apply).
func (h *Follower) snapshot(ctx context.Context, from bridge.ReplicaState) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var b bridge.ChangeBatch
	// No round-trip sample: the answer waits on the platform's work.
	got, err := h.do(context.WithValue(ctx, noSampleKey{}, true), http.MethodGet, link.SnapshotPath, nil, nil, &b)
	if err != nil {
		return err
	}
	h.follow(ctx, got)
	b.Snapshot = true
	applied, err := h.apply(ctx, &b, &from)
	if err != nil || !applied {
		return err
	}
	h.logger.Info("replica replaced by the platform's snapshot", "installations", len(b.Installations), "tokens", len(b.Tokens), "cursor", b.Cursor)
	return nil
}

// poll waits for the changes after cursor and applies them. An inventory
// change cuts it short. A poll whose heartbeats stopped returns a
// *silenceError.
func (h *Follower) poll(ctx context.Context, st bridge.ReplicaState) error {
	cursor := st.Cursor
	h.pollHeard.Store(false)
	ctx, cancel := context.WithTimeout(ctx, h.pollDeadline())
	defer cancel()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-h.reported:
			h.InventoryChanged() // for session to report
			cancel()
		case <-stop:
		}
	}()
	// Round trips are measured from the request written, not from the
	// dial (a new connection's handshake is not the platform's answer).
	ctx = context.WithValue(ctx, noSampleKey{}, true)
	var hdr http.Header
	var silent atomic.Int64 // the silence that ended the poll, 0 if none
	if h.heartbeats.Load() {
		// The platform sends 102 Processing as it accepts the poll and
		// every link.HeartbeatInterval while it waits; silence means a dead
		// connection. The watchdog is armed once heartbeats were heard
		// (on an earlier poll, or on this one): a reverse proxy in front
		// of the platform may swallow them, and then the poll's own
		// deadline is all there is.
		hdr = http.Header{link.HeartbeatHeader: {"1"}}
		var (
			wmu      sync.Mutex
			watchdog *time.Timer
			answered bool
			wrote    time.Time
			beats    int
		)
		arm := func(d time.Duration) {
			wmu.Lock()
			defer wmu.Unlock()
			switch {
			case answered:
			case watchdog == nil:
				watchdog = time.AfterFunc(d, func() { silent.Store(int64(d)); cancel() })
			default:
				watchdog.Reset(d)
			}
		}
		disarm := func() {
			wmu.Lock()
			defer wmu.Unlock()
			answered = true
			if watchdog != nil {
				watchdog.Stop()
			}
		}
		defer disarm()
		if h.beatsHeard.Load() {
			arm(h.firstBeatDeadline())
		}
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
			WroteRequest: func(httptrace.WroteRequestInfo) {
				wmu.Lock()
				wrote = time.Now()
				wmu.Unlock()
			},
			Got1xxResponse: func(code int, _ textproto.MIMEHeader) error {
				if code != http.StatusProcessing {
					return nil
				}
				wmu.Lock()
				beats++
				if beats == 1 && !wrote.IsZero() && h.beatAtOnce.Load() {
					h.rtt.sample(time.Since(wrote))
				}
				wmu.Unlock()
				h.beatsHeard.Store(true)
				h.pollHeard.Store(true)
				arm(h.beatSilence())
				return nil
			},
		})
		// Once the answer is there, its body (however large) has the
		// poll's own deadline.
		ctx = context.WithValue(ctx, answeredKey{}, disarm)
	}
	var b bridge.ChangeBatch
	got, err := h.do(ctx, http.MethodGet, changesQuery(st, true), hdr, nil, &b)
	if err != nil {
		if d := silent.Load(); d != 0 {
			return &silenceError{silence: time.Duration(d), heard: h.pollHeard.Load()}
		}
		if errors.Is(err, context.Canceled) && len(h.reported) > 0 {
			return nil // cut short to report the inventory
		}
		return err
	}
	h.pollHeard.Store(true)
	h.polled.Store(true)
	h.follow(ctx, got)
	if b.Snapshot {
		return errors.New("the platform sent a snapshot in answer to a poll")
	}
	if b.Cursor < cursor && b.Empty() {
		return nil
	}
	_, err = h.apply(ctx, &b, nil)
	return err
}

// silenceError is a long poll that heard no heartbeat for silence: its
// connection is dead. heard: it had heard one before.
type silenceError struct {
	silence time.Duration
	heard   bool
}

func (e *silenceError) Error() string {
	return fmt.Sprintf("no word from the platform for %s on a long poll: the connection is dead", e.silence.Round(time.Millisecond))
}

// changesQuery is the path of a changes request from the replica's
// cursor: a long poll, or an answer at once.
func changesQuery(st bridge.ReplicaState, wait bool) string {
	q := url.Values{"cursor": {strconv.FormatInt(st.Cursor, 10)}, "tag": {st.CursorTag}}
	if !wait {
		q.Set("wait", "0")
	}
	return link.ChangesPath + "?" + q.Encode()
}

// answeredKey is the context key of a function do calls once the answer's
// header is in.
type answeredKey struct{}

// noSampleKey marks a request whose answer is no round-trip sample (do):
// a long poll, a snapshot.
type noSampleKey struct{}

// do sends one link request with the hub's credentials and instance, and
// the headers in hdr; out, when set, receives the JSON answer. It returns
// the answer's header. An error answer is a *statusError.
func (h *Follower) do(ctx context.Context, method, path string, hdr http.Header, body []byte, out any) (http.Header, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, h.platform.String()+path, rd)
	if err != nil {
		return nil, err
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	if ctx.Value(noSampleKey{}) == nil {
		var wrote atomic.Int64
		req = req.WithContext(httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
			WroteRequest: func(httptrace.WroteRequestInfo) { wrote.Store(time.Now().UnixNano()) },
			GotFirstResponseByte: func() {
				if w := wrote.Load(); w != 0 {
					h.rtt.sample(time.Since(time.Unix(0, w)))
				}
			},
		}))
	}
	req.SetBasicAuth(h.credentials())
	req.Header.Set(link.InstanceHeader, h.instance)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if f, ok := ctx.Value(answeredKey{}).(func()); ok {
		f()
	}
	if resp.StatusCode >= 300 {
		var e wire.ErrorBody
		json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&e)
		se := &statusError{Status: resp.StatusCode, Message: e.Message, Header: resp.Header,
			Removed: resp.StatusCode == http.StatusGone && resp.Header.Get(link.RemovedHeader) != "",
			Rekey:   resp.StatusCode == http.StatusUnauthorized && resp.Header.Get(link.RekeyHeader) != ""}
		if n, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && n > 0 {
			se.RetryAfter = time.Duration(min(n, 3600)) * time.Second
		}
		return resp.Header, se
	}
	if out != nil {
		// One byte past the limit tells a body that is too large from one
		// that is just at it.
		lr := &io.LimitedReader{R: resp.Body, N: MaxBatchBytes + 1}
		if err := link.DecodeOne(lr, out); err != nil {
			if lr.N <= 0 {
				err = fmt.Errorf("larger than %d bytes", MaxBatchBytes)
			}
			return resp.Header, fmt.Errorf("reading the platform's answer: %w", err)
		}
	}
	return resp.Header, nil
}

// statusError is a link request the platform answered with an error.
type statusError struct {
	Status  int
	Message string
	// Removed: the platform said this hub was removed (link.RemovedHeader).
	Removed bool
	// Rekey: the platform said its history lost this hub's credentials
	// (link.RekeyHeader).
	Rekey bool
	// RetryAfter is the answer's Retry-After, 0 when none.
	RetryAfter time.Duration
	// Header is the answer's header.
	Header http.Header
}

func (e *statusError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("the platform answered %d %s", e.Status, http.StatusText(e.Status))
	}
	return fmt.Sprintf("the platform answered %d: %s", e.Status, e.Message)
}
