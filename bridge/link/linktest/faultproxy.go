// Package linktest helps test the hub link under network faults: a TCP
// proxy on loopback between a hub and its platform that can silently kill
// the connections it carries while new ones flow, or refuse every
// connection, as a network event would; that can delay every chunk it
// carries (a slow uplink: LTE, satellite); and that can cut a connection
// now and then (packet loss that the uplink's TCP did not recover).
package linktest

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// FaultProxy forwards connections from Addr to a target address.
type FaultProxy struct {
	// Addr is where the proxy listens (127.0.0.1:port).
	Addr string

	target string
	ln     net.Listener
	down   atomic.Bool
	delay  atomic.Int64 // per chunk, each way
	// dropEvery: every dropEvery-th chunk cuts its connection; 0 never.
	dropEvery atomic.Int64
	chunks    atomic.Int64
	dropped   atomic.Int64
	closing   chan struct{}
	mu        sync.Mutex
	conns     map[*pair]struct{}
	wg        sync.WaitGroup
}

// pair is one forwarded connection; once dead it carries no byte either
// way and stays open, as a connection whose path died silently.
type pair struct {
	client, server net.Conn
	dead           atomic.Bool
}

// StartFaultProxy starts a proxy to target until the end of the test.
func StartFaultProxy(t testing.TB, target string) *FaultProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &FaultProxy{Addr: ln.Addr().String(), target: target, ln: ln, conns: map[*pair]struct{}{}, closing: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// URL is the proxy's http URL.
func (p *FaultProxy) URL() string { return "http://" + p.Addr }

func (p *FaultProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.down.Load() {
			c.Close()
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		pr := &pair{client: c, server: s}
		p.mu.Lock()
		p.conns[pr] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pump(pr, c, s)
		go p.pump(pr, s, c)
	}
}

// SetDelay delays every chunk the proxy carries by d, each way, in order:
// a round trip through the proxy takes about 2d more.
func (p *FaultProxy) SetDelay(d time.Duration) { p.delay.Store(int64(d)) }

// DropEvery cuts the connection of every n-th chunk the proxy carries
// (both ends closed, the chunk lost), the first one a tenth of that from
// now, so that even a short test sees a cut; 0 stops it. Both ends must
// connect anew: the loss of a link whose TCP gave up.
func (p *FaultProxy) DropEvery(n int) {
	p.chunks.Store(int64(n - max(n/10, 1)))
	p.dropEvery.Store(int64(n))
}

// Dropped is how many connections DropEvery cut.
func (p *FaultProxy) Dropped() int64 { return p.dropped.Load() }

// chunk is what one read brought, and when it is due at the other end.
type chunk struct {
	b   []byte
	due time.Time
}

// pump copies from src to dst while the pair lives, each chunk after the
// proxy's delay, and swallows what arrives once it is dead.
func (p *FaultProxy) pump(pr *pair, src, dst net.Conn) {
	defer p.wg.Done()
	q := make(chan chunk, 1024)
	written := make(chan struct{})
	go func() {
		defer close(written)
		for c := range q {
			if d := time.Until(c.due); d > 0 {
				t := time.NewTimer(d)
				select {
				case <-t.C:
				case <-p.closing:
					t.Stop()
				}
			}
			if pr.dead.Load() {
				continue
			}
			if _, err := dst.Write(c.b); err != nil {
				pr.client.Close()
				pr.server.Close()
			}
		}
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !pr.dead.Load() {
			if every := p.dropEvery.Load(); every > 0 && p.chunks.Add(1)%every == 0 {
				p.dropped.Add(1)
				err = io.ErrClosedPipe
			} else {
				q <- chunk{append([]byte(nil), buf[:n]...), time.Now().Add(time.Duration(p.delay.Load()))}
			}
		}
		if err != nil {
			if pr.dead.Load() && err == io.EOF {
				// One end gave up on a dead connection: the other never
				// hears of it (closed when the proxy closes).
				close(q)
				<-written
				return
			}
			if err != io.ErrClosedPipe {
				// What was read before the end is delivered first.
				close(q)
				<-written
			}
			pr.client.Close()
			pr.server.Close()
			if err == io.ErrClosedPipe {
				close(q)
				<-written
			}
			p.mu.Lock()
			delete(p.conns, pr)
			p.mu.Unlock()
			return
		}
	}
}

// Blackhole kills every connection open now silently: they stay open and
// carry nothing more, neither way, and neither end hears of it. New
// connections flow.
func (p *FaultProxy) Blackhole() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for pr := range p.conns {
		pr.dead.Store(true)
	}
	return len(p.conns)
}

// Conns is how many connections the proxy carries (dead ones included).
func (p *FaultProxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// SetDown refuses (closes at once) every new connection while down is
// true, and closes the live ones when it becomes true: an outage.
func (p *FaultProxy) SetDown(down bool) {
	p.down.Store(down)
	if down {
		p.mu.Lock()
		for pr := range p.conns {
			if !pr.dead.Load() {
				pr.client.Close()
				pr.server.Close()
			}
		}
		p.mu.Unlock()
	}
}

func (p *FaultProxy) close() {
	close(p.closing)
	p.ln.Close()
	p.mu.Lock()
	for pr := range p.conns {
		pr.client.Close()
		pr.server.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
