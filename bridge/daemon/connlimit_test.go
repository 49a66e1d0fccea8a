package daemon_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge/daemon/daemontest"
	"github.com/switchbridge/switchbridge/bridge/infra/certs/certstest"
)

// cappedHub is the config of the connection-cap tests: one switch.
const cappedHub = "locations:\n  - {id: 1, name: Home, switches: [{id: lamp, name: Lamp, driver: virtual}]}\n"

// startCapped runs a hub that serves at most max connections at once,
// with its metrics listener.
func startCapped(t *testing.T, max int) *daemontest.Harness {
	t.Helper()
	return daemontest.StartWith(t, daemontest.Options{Config: cappedHub, Metrics: true, Server: fmt.Sprintf("  max_connections: %d", max)})
}

// keptConn is a client connection that has been served once and stays
// open (keep-alive), so it holds its place under the cap.
type keptConn struct {
	net.Conn
	r *bufio.Reader
}

// get sends GET / on c and returns the response, its body read.
func (c *keptConn) get(t *testing.T) (*http.Response, string) {
	t.Helper()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: hub\r\n\r\n"); err != nil {
		t.Fatalf("writing a request: %v", err)
	}
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		t.Fatalf("reading the response: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("reading the body: %v", err)
	}
	return resp, string(body)
}

func dial(t *testing.T, addr string) *keptConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &keptConn{Conn: c, r: bufio.NewReader(c)}
}

// TestConnectionCap fills server.max_connections with keep-alive
// connections and checks that the next ones get a complete 503 that says
// why and closes, that a client past the cap which never reads holds up
// nobody, that the metrics count it all, and that the hub serves again as
// soon as a place is free.
func TestConnectionCap(t *testing.T) {
	const max = 3
	h := startCapped(t, max)
	addr := h.Addr().String()

	var kept []*keptConn
	for i := 0; i < max; i++ {
		c := dial(t, addr)
		if resp, _ := c.get(t); resp.StatusCode != http.StatusOK {
			t.Fatalf("connection %d within the cap: %d", i, resp.StatusCode)
		}
		kept = append(kept, c)
	}

	// Past the cap: a silent client that never reads nor writes...
	silent := dial(t, addr)
	_ = silent
	// ...and clients that ask: each gets the whole 503, then EOF.
	for i := 0; i < 5; i++ {
		c := dial(t, addr)
		resp, body := c.get(t)
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "too many connections") ||
			resp.Header.Get("Retry-After") == "" || !resp.Close {
			t.Fatalf("past the cap: %d %q %v, want 503 saying too many connections, with Retry-After and Connection: close",
				resp.StatusCode, body, resp.Header)
		}
		if n, err := c.r.Read(make([]byte, 1)); n != 0 || err == nil {
			t.Errorf("the rejected connection stayed open: %d %v", n, err)
		}
	}
	// The ordinary client library sees the same 503.
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get(h.URL + "/")
	if err != nil {
		t.Fatalf("http.Client past the cap: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("http.Client past the cap: %d, want 503", resp.StatusCode)
	}

	m := scrapeAddr(t, h.MetricsAddr().String())
	if v := sample(m, "switchbridge_http_connections_open"); v != max {
		t.Errorf("connections_open = %v, want %d", v, max)
	}
	if v := sample(m, "switchbridge_http_connections_rejected_total"); v < 7 {
		t.Errorf("connections_rejected_total = %v, want at least 7", v)
	}

	// A place frees up: the next connection is served, although the
	// silent client is still being rejected.
	kept[0].Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c := dial(t, addr)
		resp, _ := c.get(t)
		c.Close()
		if resp.StatusCode == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still %d 10 s after a connection closed", resp.StatusCode)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The others were served throughout.
	for _, c := range kept[1:] {
		if resp, _ := c.get(t); resp.StatusCode != http.StatusOK {
			t.Errorf("a connection within the cap got %d", resp.StatusCode)
		}
	}
}

func scrapeAddr(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestConnectionCapOverTLS: with server.tls, a client past the cap gets its
// 503 over TLS, as an answer it can read, rather than plain text that its
// TLS stack would take for a broken handshake.
func TestConnectionCapOverTLS(t *testing.T) {
	ca := certstest.NewCA(t)
	pair := ca.NewPair(t, 1)
	h := daemontest.StartWith(t, daemontest.Options{Config: cappedHub, Server: "  max_connections: 1", TLS: &pair, Roots: ca.Pool})

	// One client holds the only place with a kept-alive connection.
	holder := daemontest.TLSClient(ca.Pool)
	resp, err := holder.Get(h.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	defer holder.CloseIdleConnections()

	other := daemontest.TLSClient(ca.Pool)
	defer other.CloseIdleConnections()
	resp, err = other.Get(h.URL + "/")
	if err != nil {
		t.Fatalf("TLS client past the cap: %v, want a 503 it can read", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "too many connections") {
		t.Errorf("TLS client past the cap: %d %q, want 503 saying too many connections", resp.StatusCode, body)
	}
}

// dialFrom connects to addr from the loopback address from (any of
// 127.0.0.0/8 is this machine).
func dialFrom(t *testing.T, from, addr string) *keptConn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &keptConn{Conn: c, r: bufio.NewReader(c)}
}

// TestConnectionShareOfOneAddress: one client address holds at most a
// quarter of server.max_connections (here 32 of 128) with keep-alive
// connections; past it that address gets 503, while another address is
// still served, and a place given back is free again.
func TestConnectionShareOfOneAddress(t *testing.T) {
	const max, share = 128, 32
	h := startCapped(t, max)
	addr := h.Addr().String()
	var kept []*keptConn
	for i := 0; i < share; i++ {
		c := dialFrom(t, "127.0.0.2", addr)
		if resp, _ := c.get(t); resp.StatusCode != http.StatusOK {
			t.Fatalf("connection %d within the address's share: %d", i, resp.StatusCode)
		}
		kept = append(kept, c)
	}
	if resp, body := dialFrom(t, "127.0.0.2", addr).get(t); resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "too many connections") {
		t.Errorf("one past the address's share: %d %q, want 503", resp.StatusCode, body)
	}
	if resp, _ := dialFrom(t, "127.0.0.3", addr).get(t); resp.StatusCode != http.StatusOK {
		t.Errorf("another address while the first holds its share: %d, want 200", resp.StatusCode)
	}
	kept[0].Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, _ := dialFrom(t, "127.0.0.2", addr).get(t)
		if resp.StatusCode == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the address's place given back is not free again: %d", resp.StatusCode)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestTrustedProxyHasNoShare: a reverse proxy in server.trusted_proxies
// speaks for many clients and may hold more than one address's share.
func TestTrustedProxyHasNoShare(t *testing.T) {
	h := daemontest.StartWith(t, daemontest.Options{Config: cappedHub, Server: "  max_connections: 32\n  trusted_proxies: [127.0.0.4/32]"})
	addr := h.Addr().String()
	for i := 0; i < 12; i++ { // past the share of 8
		if resp, _ := dialFrom(t, "127.0.0.4", addr).get(t); resp.StatusCode != http.StatusOK {
			t.Fatalf("connection %d from the trusted proxy: %d", i, resp.StatusCode)
		}
	}
}
