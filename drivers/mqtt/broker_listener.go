// The embedded broker's listener: the accept loop, a recover around each
// connection, and the bounds on the connections that have not logged in
// yet (handshake slots per broker and per address).

package mqtt

import (
	"container/list"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mochi-mqtt/server/v2/listeners"

	"github.com/switchbridge/switchbridge/bridge"
)

// hubListener is the broker's listener: mochi's listeners.Net, plus a
// recover around each connection and retries of failed accepts. mochi
// decodes a client's packets on that client's goroutine, and a decoder
// panic there (v2.7.9 has some on malformed MQTT 5 packets) would otherwise
// end the whole hub, releasing its relays; here it ends only that
// connection.
type hubListener struct {
	ln        net.Listener
	log       *slog.Logger
	recovered func(net.Conn, any)
	// disconnect closes every client at Close, in place of mochi's CloseFn.
	disconnect func()
	closed     atomic.Bool
	done       chan struct{} // closed by Close: ends a wait between accepts
	acceptLog  logLimiter

	// The connections being served, each by a serveConn goroutine: Close
	// closes them and waits for those goroutines. mochi's Close waits on
	// its count of clients (Listeners.ClientsWg) right after this
	// listener's Close, and each connection adds itself to that count on
	// its own goroutine; a connection still on its way there would race
	// with that wait (the race detector reports it) and outlive it.
	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// Backoff between failed accepts, as net/http's Server does.
const (
	acceptRetryMin = 5 * time.Millisecond
	acceptRetryMax = time.Second
)

func newHubListener(ln net.Listener, log *slog.Logger, recovered func(net.Conn, any), disconnect func()) *hubListener {
	return &hubListener{ln: ln, log: log, recovered: recovered, disconnect: disconnect, done: make(chan struct{}),
		acceptLog: logLimiter{every: refusalLogEvery}, conns: map[net.Conn]struct{}{}}
}

func (l *hubListener) ID() string              { return "switchbridge" }
func (l *hubListener) Address() string         { return l.ln.Addr().String() }
func (l *hubListener) Protocol() string        { return "tcp" }
func (l *hubListener) Init(*slog.Logger) error { return nil }

// Serve accepts until the listener is closed. A failed accept (EMFILE when
// the hub is out of file descriptors, ECONNABORTED) is retried after a
// growing pause, and logged at most once per refusalLogEvery: mochi's own
// loop stopped serving for good at the first, silently.
func (l *hubListener) Serve(establish listeners.EstablishFn) {
	var pause time.Duration
	for {
		c, err := l.ln.Accept()
		if err != nil {
			if l.closed.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			pause = min(max(2*pause, acceptRetryMin), acceptRetryMax)
			if ok, held := l.acceptLog.allow(); ok {
				l.log.Error("accepting an MQTT connection failed; retrying", "error", err, "retry_in", pause,
					"failures_not_logged", held)
			}
			t := time.NewTimer(pause)
			select {
			case <-t.C:
			case <-l.done:
				t.Stop()
				return
			}
			continue
		}
		pause = 0
		l.mu.Lock()
		if l.closed.Load() {
			l.mu.Unlock()
			c.Close()
			return
		}
		l.conns[c] = struct{}{}
		l.wg.Add(1)
		l.mu.Unlock()
		go l.serveConn(establish, c)
	}
}

func (l *hubListener) serveConn(establish listeners.EstablishFn, c net.Conn) {
	defer func() {
		l.mu.Lock()
		delete(l.conns, c)
		l.mu.Unlock()
		l.wg.Done()
	}()
	defer func() {
		if v := recover(); v != nil {
			l.recovered(c, v)
		}
	}()
	err := establish(l.ID(), c)
	switch {
	case err == nil, errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
	default:
		l.log.Debug("MQTT client connection ended", "remote", c.RemoteAddr().String(), "error", err)
	}
}

// Close stops accepting and closes the clients. It does not call mochi's
// CloseFn, which can deadlock (see disconnectAll); the broker has this one
// listener, so its clients are all the broker's clients.
func (l *hubListener) Close(listeners.CloseFn) {
	l.mu.Lock()
	first := l.closed.CompareAndSwap(false, true)
	l.mu.Unlock()
	if first {
		close(l.done)
		l.disconnect()
	}
	l.ln.Close()
	// Connections still in their handshake are not clients yet: closing
	// them ends their goroutines too.
	l.mu.Lock()
	for c := range l.conns {
		c.Close()
	}
	l.mu.Unlock()
	l.wg.Wait()
}

// ---- connections still logging in

const (
	// handshakeTimeout is how long a new connection has to send its
	// CONNECT (plugs send it at once); then the keepalive it asks for
	// applies.
	handshakeTimeout = 5 * time.Second
	// minHandshakeSlots is the fewest connections that may be logging in
	// at once; there are max_clients/2 when that is more.
	minHandshakeSlots = 16
	// handshakeShare: one address may hold at most a quarter of them
	// (and at least minPerAddrHandshakes), as on the HTTP listener.
	handshakeShare       = 4
	minPerAddrHandshakes = 4
)

// handshakeSlots is the number of connections that may be logging in at
// once for a broker of maxClients clients.
func handshakeSlots(maxClients int) int { return max(minHandshakeSlots, maxClients/2) }

// guardedListener bounds the connections that have not logged in yet
// (the handshakes): at most slots at once, at most perAddr of them from
// one address (IPv6 by its /64), each with handshakeTimeout to send its
// CONNECT. When all slots are taken, a new connection takes the place of
// the oldest handshake of the address holding the most, so idle
// connections from a few addresses can never keep a plug from another
// address, or the hub's own client, from logging in. A connection that
// has logged in leaves the handshakes; the logged-in clients are bounded
// by max_clients (authHook.OnConnect).
//
// It also turns Nagle's algorithm off on each connection. Go already does
// that for every TCP connection it makes; doing it here keeps that true
// whatever listener sits below. With Nagle on, a plug's small confirmation
// can wait ~40 ms for the client's delayed ACK.
type guardedListener struct {
	net.Listener
	slots, perAddr int
	refused        func(reason string)
	log            *slog.Logger // nil logs nothing
	logEvery       logLimiter

	mu      sync.Mutex
	pending *list.List // of *slotConn still logging in, oldest first
	byAddr  map[string]int
}

func newGuardedListener(l net.Listener, slots int, refused func(string), log *slog.Logger) *guardedListener {
	return &guardedListener{Listener: l, slots: slots, perAddr: max(minPerAddrHandshakes, slots/handshakeShare),
		refused: refused, log: log, logEvery: logLimiter{every: refusalLogEvery}, pending: list.New(), byAddr: map[string]int{}}
}

// warn logs why a connection was closed before its login, at most once
// per refusalLogEvery.
func (l *guardedListener) warn(why string, c net.Conn) {
	if l.log == nil {
		return
	}
	if ok, held := l.logEvery.allow(); ok {
		l.log.Warn("MQTT connection closed before its login: "+why, "remote", c.RemoteAddr().String(),
			"refusals_not_logged", held)
	}
}

func (l *guardedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		sc := &slotConn{Conn: c, l: l, key: remoteKey(c.RemoteAddr())}
		evict, ok := l.hold(sc)
		if evict != nil {
			l.refused(refusedHandshake)
			l.warn("every place for connections logging in was taken; closed the oldest of the address holding the most", evict)
			evict.Close()
		}
		if !ok {
			l.refused(refusedAddress)
			l.warn("its address holds its share of the places for connections logging in", c)
			c.Close()
			continue
		}
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(true)
		}
		// mochi sets the keepalive deadline once the CONNECT is read.
		_ = c.SetDeadline(time.Now().Add(handshakeTimeout))
		return sc, nil
	}
}

// hold takes a handshake slot for c, and returns the handshake to close to
// make room, if any; ok is false when c's address holds its share already.
func (l *guardedListener) hold(c *slotConn) (evict *slotConn, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byAddr[c.key] >= l.perAddr {
		return nil, false
	}
	if l.pending.Len() >= l.slots {
		evict = l.victimLocked()
		l.releaseLocked(evict)
	}
	c.elem = l.pending.PushBack(c)
	l.byAddr[c.key]++
	return evict, true
}

// victimLocked is the oldest handshake of the address holding the most.
func (l *guardedListener) victimLocked() *slotConn {
	most := 0
	for _, n := range l.byAddr {
		most = max(most, n)
	}
	for e := l.pending.Front(); e != nil; e = e.Next() {
		if c := e.Value.(*slotConn); l.byAddr[c.key] == most {
			return c
		}
	}
	return l.pending.Front().Value.(*slotConn)
}

// release gives c's handshake slot back, once (it logged in, or closed).
func (l *guardedListener) release(c *slotConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.releaseLocked(c)
}

func (l *guardedListener) releaseLocked(c *slotConn) {
	if c.elem == nil {
		return
	}
	l.pending.Remove(c.elem)
	c.elem = nil
	if l.byAddr[c.key]--; l.byAddr[c.key] <= 0 {
		delete(l.byAddr, c.key)
	}
}

// handshakes is the number of connections still logging in (for tests).
func (l *guardedListener) handshakes() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pending.Len()
}

// slotConn is a connection of the guardedListener: it holds a handshake
// slot until it logs in or closes.
type slotConn struct {
	net.Conn
	l    *guardedListener
	key  string        // its address's key
	elem *list.Element // in l.pending while logging in; guarded by l.mu
}

func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.l.release(c)
	return err
}

// loggedIn moves c out of the handshakes.
func (c *slotConn) loggedIn() { c.l.release(c) }

// remoteKey is the per-address key of a remote address: as the HTTP
// listener and the web login count addresses (IPv6 by its /64).
func remoteKey(a net.Addr) string {
	if a == nil {
		return "unknown"
	}
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return "unknown"
	}
	return bridge.AddrKey(ap.Addr().Unmap())
}
