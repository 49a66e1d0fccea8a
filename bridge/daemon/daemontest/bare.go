package daemontest

// BareClient: the least HTTP client there is, for benchmarks.

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"
)

// BareClient sends PUT commands to one installation over a single kept-alive
// HTTP/1.1 connection, with the requests written out beforehand: the least
// any client can do. Benchmarks use it so that what they time is the hub,
// not the client's connection pool and goroutines (net/http's client adds
// two goroutine hand-offs per request).
type BareClient struct {
	conn net.Conn
	r    *bufio.Reader
	reqs map[string][]byte
}

// NewBareClient connects to the hub of g and prepares PUT <uri>/switches/on
// and /off with g's token. It is closed at the end of the test.
func NewBareClient(tb testing.TB, g Grant) *BareClient {
	tb.Helper()
	return DialBare(tb, g.URI, g.Token.AccessToken)
}

// DialBare is NewBareClient for any server that takes PUT <uri>/switches/on
// and /off (benchmarks compare the hub with other such servers), with
// token as the bearer token, or no Authorization header if it is "".
func DialBare(tb testing.TB, uri, token string) *BareClient {
	tb.Helper()
	u, err := url.Parse(uri)
	if err != nil {
		tb.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	auth := ""
	if token != "" {
		auth = "Authorization: Bearer " + token + "\r\n"
	}
	c := &BareClient{conn: conn, r: bufio.NewReader(conn), reqs: map[string][]byte{}}
	for _, cmd := range []string{"on", "off"} {
		c.reqs[cmd] = fmt.Appendf(nil, "PUT %s/switches/%s HTTP/1.1\r\nHost: %s\r\n%sContent-Length: 0\r\n\r\n",
			u.EscapedPath(), cmd, u.Host, auth)
	}
	return c
}

// Command sends PUT /switches/<cmd> (on or off) and returns the status code
// and body of the answer.
func (c *BareClient) Command(tb testing.TB, cmd string) (int, string) {
	tb.Helper()
	req, ok := c.reqs[cmd]
	if !ok {
		tb.Fatalf("BareClient: no request for %q", cmd)
	}
	// A hub that stops answering fails the benchmark instead of hanging it.
	c.conn.SetDeadline(time.Now().Add(bareTimeout))
	if _, err := c.conn.Write(req); err != nil {
		tb.Fatal(err)
	}
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		tb.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		tb.Fatal(err)
	}
	if resp.Close {
		tb.Fatalf("the hub closed the connection after %d %s", resp.StatusCode, body)
	}
	return resp.StatusCode, string(body)
}

// bareTimeout bounds one command of a BareClient.
const bareTimeout = 30 * time.Second
