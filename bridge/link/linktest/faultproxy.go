// Package linktest helps test the hub link under network faults: a TCP
// proxy on loopback between a hub and its platform that can silently kill
// the connections it carries while new ones flow, or refuse every
// connection, as a network event would.
package linktest

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// FaultProxy forwards connections from Addr to a target address.
type FaultProxy struct {
	// Addr is where the proxy listens (127.0.0.1:port).
	Addr string

	target string
	ln     net.Listener
	down   atomic.Bool
	mu     sync.Mutex
	conns  map[*pair]struct{}
	wg     sync.WaitGroup
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
	p := &FaultProxy{Addr: ln.Addr().String(), target: target, ln: ln, conns: map[*pair]struct{}{}}
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

// pump copies from src to dst while the pair lives, and swallows what
// arrives once it is dead.
func (p *FaultProxy) pump(pr *pair, src, dst net.Conn) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !pr.dead.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				err = werr
			}
		}
		if err != nil {
			if pr.dead.Load() && err == io.EOF {
				// One end gave up on a dead connection: the other never
				// hears of it (closed when the proxy closes).
				return
			}
			pr.client.Close()
			pr.server.Close()
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
	p.ln.Close()
	p.mu.Lock()
	for pr := range p.conns {
		pr.client.Close()
		pr.server.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
