package daemon

import (
	"bytes"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
)

// limitListener caps the connections open at once. A burst of clients
// costs a goroutine, buffers and TLS-free but not free kernel and heap
// memory per connection, and the Go heap grown for a burst is returned to
// the system only slowly: on a 512 MB Pi a thousand connections would
// keep tens of megabytes for minutes. Past the cap a connection gets a
// short 503 and is closed, by a goroutine of its own so accepting never
// waits on a slow client.
//
// One client address (IPv6 by its /64) may hold at most maxPerAddr of the
// places, so that one device on the LAN (a misbehaving client, a
// neighbour) cannot take them all and lock every other client out; a
// reverse proxy in server.trusted_proxies speaks for many clients and is
// exempt.
type limitListener struct {
	net.Listener
	max        int64
	maxPerAddr int
	trusted    []netip.Prefix
	logger     *slog.Logger
	// tls, when the hub serves HTTPS, is what a rejected connection is
	// answered over: a 503 in plain text would reach a TLS client as a
	// failed handshake, not as "try again".
	tls *tls.Config
	// Observers for the metrics; each may be nil.
	onOpen, onClose, onReject func()

	open      atomic.Int64
	mu        sync.Mutex
	byAddr    map[string]int // places held per client address key
	rejecting atomic.Int64   // goroutines answering 503 right now
	rejected  atomic.Int64   // since the last warning
	lastWarn  atomic.Int64   // unix nanoseconds
}

// tooManyBody is the 503's body: plain text, since the request was not
// read and may not even be HTTP.
const tooManyBody = "switchbridge: too many connections; try again shortly\n"

// tooMany is the whole answer past the cap: no keep-alive, and a hint when
// to come back.
var tooMany = []byte("HTTP/1.1 503 Service Unavailable\r\n" +
	"Content-Type: text/plain; charset=utf-8\r\n" +
	"Content-Length: " + strconv.Itoa(len(tooManyBody)) + "\r\n" +
	"Retry-After: 1\r\n" +
	"Connection: close\r\n" +
	"\r\n" + tooManyBody)

const (
	// maxRejecting bounds the goroutines answering 503 at once: past it a
	// flood's connections are closed without an answer, so rejecting
	// cannot cost more memory than serving.
	maxRejecting = 256
	// rejectTimeout bounds how long one rejected connection is held: time
	// to write the answer and let the client read it.
	rejectTimeout = 2 * time.Second
	// rejectDrain bounds what is read from a rejected client. Closing a
	// socket with unread data makes the kernel send a reset, which can
	// destroy the 503 before the client reads it.
	rejectDrain = 16 << 10
	// warnEvery spaces out the log lines about rejected connections.
	warnEvery = time.Minute
)

// perAddrShare is the share of the places one client address may hold:
// a quarter, and at least minPerAddr (a browser opens six connections to
// a host).
const (
	perAddrShare = 4
	minPerAddr   = 8
)

func newLimitListener(ln net.Listener, limit int, logger *slog.Logger) *limitListener {
	return &limitListener{Listener: ln, max: int64(limit), maxPerAddr: max(limit/perAddrShare, minPerAddr),
		logger: logger, byAddr: map[string]int{}}
}

// Accept returns the next connection within the caps, answering those
// past them on the way.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) > l.max {
			l.open.Add(-1)
			l.reject(c, "too many connections: answering 503 past server.max_connections")
			continue
		}
		key, ok := l.hold(c)
		if !ok {
			l.open.Add(-1)
			l.reject(c, "too many connections from one address: answering 503 past its share of server.max_connections")
			continue
		}
		if l.onOpen != nil {
			l.onOpen()
		}
		return &limitedConn{Conn: c, l: l, key: key}, nil
	}
}

// hold takes a place for c's address within maxPerAddr and returns its key
// ("" for an address not counted: a trusted proxy, or none).
func (l *limitListener) hold(c net.Conn) (string, bool) {
	ap, err := netip.ParseAddrPort(c.RemoteAddr().String())
	if err != nil {
		return "", true
	}
	a := ap.Addr().Unmap()
	for _, p := range l.trusted {
		if p.Contains(a) {
			return "", true
		}
	}
	key := bridge.AddrKey(a)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byAddr[key] >= l.maxPerAddr {
		return "", false
	}
	l.byAddr[key]++
	return key, true
}

// release gives back a place held for key.
func (l *limitListener) release(key string) {
	if key == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byAddr[key]--; l.byAddr[key] <= 0 {
		delete(l.byAddr, key)
	}
}

// reject answers c with 503 and closes it, in the background.
func (l *limitListener) reject(c net.Conn, why string) {
	if l.onReject != nil {
		l.onReject()
	}
	l.warn(why, c.RemoteAddr().String())
	if l.rejecting.Add(1) > maxRejecting {
		l.rejecting.Add(-1)
		c.Close()
		return
	}
	go func() {
		defer l.rejecting.Add(-1)
		defer c.Close()
		c.SetDeadline(time.Now().Add(rejectTimeout))
		if l.tls != nil {
			tc := tls.Server(c, l.tls)
			if tc.Handshake() != nil {
				return
			}
			c = tc
		}
		// Answer once the request's head is in: a client that gets an
		// answer before it has asked (Go's among them) takes it for a
		// broken connection, not for a 503.
		if !readHead(c) {
			return
		}
		if _, err := c.Write(tooMany); err != nil {
			return
		}
		// Half-close, then read what the client sent until it closes too
		// (or the deadline), so the close is a FIN, not a reset.
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
		io.Copy(io.Discard, io.LimitReader(c, rejectDrain))
	}()
}

// readHead reads from c until the blank line that ends an HTTP request's
// head, and reports whether it came within rejectDrain bytes and c's
// deadline.
func readHead(c net.Conn) bool {
	buf := make([]byte, 0, 1024)
	chunk := make([]byte, 512)
	for len(buf) < rejectDrain {
		n, err := c.Read(chunk)
		buf = append(buf, chunk[:n]...)
		if bytes.Contains(buf, []byte("\r\n\r\n")) || bytes.Contains(buf, []byte("\n\n")) {
			return true
		}
		if err != nil {
			return false
		}
	}
	return false
}

// warn logs the connections rejected, at most once per warnEvery, with
// the reason and the address of the last.
func (l *limitListener) warn(why, remote string) {
	l.rejected.Add(1)
	now := time.Now().UnixNano()
	last := l.lastWarn.Load()
	if now-last < int64(warnEvery) || !l.lastWarn.CompareAndSwap(last, now) {
		return
	}
	l.logger.Warn(why, "max_connections", l.max, "max_per_address", l.maxPerAddr, "remote", remote,
		"rejected", l.rejected.Swap(0))
}

// limitedConn gives its place back when closed, once however often Close
// is called.
type limitedConn struct {
	net.Conn
	l      *limitListener
	key    string // the client address's key, "" when not counted
	closed atomic.Bool
}

func (c *limitedConn) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		c.l.open.Add(-1)
		c.l.release(c.key)
		if c.l.onClose != nil {
			c.l.onClose()
		}
	}
	return c.Conn.Close()
}

// CloseWrite lets http.Server half-close before closing, as it does on a
// bare TCP connection so its last answer is not lost to a reset.
func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
