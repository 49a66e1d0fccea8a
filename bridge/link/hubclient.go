package link

// The hub's requests to the platform: the HTTP client and its deadlines,
// one request with the hub's credentials, the inventory report, the
// snapshot, and the long poll with its watchdog for dead connections.

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
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/wire"
)

// Limits on what a hub accepts from its platform: a snapshot of a large
// household's installations (a few hundred bytes each, with their tokens)
// is well under a megabyte; 16 MiB leaves room for tens of thousands.
const MaxBatchBytes = 16 << 20

// Dead connections. A long poll that heard no heartbeat (102 Processing,
// sent every HeartbeatInterval) for heartbeatSilence is on a dead
// connection: the hub drops it and connects again. A platform that sends
// no heartbeats (an older version) is given the poll time plus pollGrace.
// TCP keepalives find a dead idle connection in about keepAliveIdle +
// 3 × keepAliveInterval, for whatever the pool holds.
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
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           dialer.DialContext,
		MaxIdleConns:          2,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: DefaultPollTimeout + pollGrace,
	}}
}

func (h *Follower) putInventory(ctx context.Context) error {
	inv := Inventory{Version: Version(), Locations: h.Inventory()}
	if err := h.retain(ctx, inv.Locations); err != nil {
		return err
	}
	body, err := json.Marshal(inv)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	// The replica's cursor lets a platform restored from an older backup
	// tell this hub that it needs new credentials (RekeyHeader).
	var hdr http.Header
	if st, err := h.store.ReplicaState(ctx); err == nil && st.Synced {
		hdr = http.Header{CursorHeader: {strconv.FormatInt(st.Cursor, 10) + " " + st.CursorTag}}
	}
	got, err := h.do(ctx, http.MethodPut, InventoryPath, hdr, body, nil)
	var se *statusError
	if errors.As(err, &se) {
		h.setRefused(se.Message)
	}
	if err == nil {
		h.heartbeats.Store(got.Get(HeartbeatHeader) != "")
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
	got, err := h.do(ctx, http.MethodGet, SnapshotPath, nil, nil, &b)
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
// change cuts it short.
func (h *Follower) poll(ctx context.Context, st bridge.ReplicaState) error {
	cursor := st.Cursor
	ctx, cancel := context.WithTimeout(ctx, DefaultPollTimeout+pollGrace)
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
	var hdr http.Header
	var silent atomic.Bool
	if h.heartbeats.Load() {
		// The platform sends 102 Processing every HeartbeatInterval while
		// the poll waits; silence means a dead connection. The watchdog is
		// armed once heartbeats were heard (on an earlier poll, or on this
		// one): a reverse proxy in front of the platform may swallow them,
		// and then the poll's own deadline is all there is.
		hdr = http.Header{HeartbeatHeader: {"1"}}
		var (
			wmu      sync.Mutex
			watchdog *time.Timer
			answered bool
		)
		arm := func() {
			wmu.Lock()
			defer wmu.Unlock()
			switch {
			case answered:
			case watchdog == nil:
				watchdog = time.AfterFunc(heartbeatSilence, func() { silent.Store(true); cancel() })
			default:
				watchdog.Reset(heartbeatSilence)
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
			arm()
		}
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
			Got1xxResponse: func(code int, _ textproto.MIMEHeader) error {
				if code == http.StatusProcessing {
					h.beatsHeard.Store(true)
					arm()
				}
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
		if silent.Load() {
			// Heard again before the watchdog is armed on the next poll.
			h.beatsHeard.Store(false)
			return fmt.Errorf("no word from the platform for %s on a long poll: the connection is dead", heartbeatSilence)
		}
		if errors.Is(err, context.Canceled) && len(h.reported) > 0 {
			return nil // cut short to report the inventory
		}
		return err
	}
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

// changesQuery is the path of a changes request from the replica's
// cursor: a long poll, or an answer at once.
func changesQuery(st bridge.ReplicaState, wait bool) string {
	q := url.Values{"cursor": {strconv.FormatInt(st.Cursor, 10)}, "tag": {st.CursorTag}}
	if !wait {
		q.Set("wait", "0")
	}
	return ChangesPath + "?" + q.Encode()
}

// answeredKey is the context key of a function do calls once the answer's
// header is in.
type answeredKey struct{}

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
	req.SetBasicAuth(h.credentials())
	req.Header.Set(InstanceHeader, h.instance)
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
			Removed: resp.StatusCode == http.StatusGone && resp.Header.Get(RemovedHeader) != "",
			Rekey:   resp.StatusCode == http.StatusUnauthorized && resp.Header.Get(RekeyHeader) != ""}
		if n, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && n > 0 {
			se.RetryAfter = time.Duration(min(n, 3600)) * time.Second
		}
		return resp.Header, se
	}
	if out != nil {
		// One byte past the limit tells a body that is too large from one
		// that is just at it.
		lr := &io.LimitedReader{R: resp.Body, N: MaxBatchBytes + 1}
		if err := decodeOne(lr, out); err != nil {
			if lr.N <= 0 {
				err = fmt.Errorf("larger than %d bytes", MaxBatchBytes)
			}
			return resp.Header, fmt.Errorf("reading the platform's answer: %w", err)
		}
	}
	return resp.Header, nil
}
