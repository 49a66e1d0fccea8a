package daemon_test

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge/daemon/daemontest"
	"github.com/switchbridge/switchbridge/bridge/infra/certs/certstest"
	"github.com/switchbridge/switchbridge/bridge/infra/logtest"
)

// newTLSFixture runs the flow tests' hub over TLS with a certificate of
// serial 1 from a test CA, and authorizes an app for alice on kitchen.
func newTLSFixture(t *testing.T) (*daemontest.Harness, *certstest.CA, certstest.Pair, daemontest.Grant) {
	t.Helper()
	ca := certstest.NewCA(t)
	pair := ca.NewPair(t, 1)
	h := daemontest.StartWith(t, daemontest.Options{Config: hubConfig, TLS: &pair, Roots: ca.Pool})
	alice := h.AddUser(t, "alice", "alice-pw", 1, 2)
	app := h.AddApp(t, alice, true, redirect)
	g := h.Authorize(t, app, "alice", "alice-pw", 1, "kitchen")
	return h, ca, pair, g
}

// list calls GET /switches on its own client and returns the serial of the
// certificate the connection was served and whether the connection was a
// kept-alive one.
func list(t *testing.T, c *http.Client, g daemontest.Grant) (serial int64, reused bool) {
	t.Helper()
	trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), http.MethodGet, g.URI+"/switches", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+g.Token.AccessToken)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "Kitchen light") {
		t.Fatalf("GET /switches = %d %s", resp.StatusCode, body)
	}
	if resp.TLS == nil {
		t.Fatal("answered without TLS")
	}
	return certstest.Serial(resp.TLS.PeerCertificates), reused
}

// newConnSerial is the serial a new connection is served.
func newConnSerial(t *testing.T, h *daemontest.Harness, ca *certstest.CA, g daemontest.Grant) int64 {
	t.Helper()
	c := daemontest.TLSClient(ca.Pool)
	defer c.CloseIdleConnections()
	s, reused := list(t, c, g)
	if reused {
		t.Fatal("a fresh client reused a connection")
	}
	return s
}

// TestTLSWholeFlow runs the OAuth flow (golang.org/x/oauth2 trusting the
// test CA) and the API over the hub's own TLS, and checks what it refuses:
// plain HTTP, TLS below 1.2, and clients that do not trust the certificate.
func TestTLSWholeFlow(t *testing.T) {
	h, ca, _, g := newTLSFixture(t)
	if !strings.HasPrefix(h.URL, "https://127.0.0.1:") {
		t.Fatalf("public URL %s, want https://127.0.0.1:<port> (derived from listen)", h.URL)
	}
	if !strings.HasPrefix(g.URI, h.URL+"/api/apps/installations/") {
		t.Errorf("installation URI %s is not below %s", g.URI, h.URL)
	}
	if p := h.Command(t, g, "on"); p.StatusCode != http.StatusNoContent {
		t.Fatalf("PUT on = %d %s", p.StatusCode, p.Body)
	}
	if l := h.List(t, g); len(l) != 1 || value(l[0]) != "on" {
		t.Errorf("after on: %+v", l)
	}
	if s := newConnSerial(t, h, ca, g); s != 1 {
		t.Errorf("served serial %d, want 1", s)
	}

	// Plain HTTP on the TLS port gets Go's 400, never the API.
	resp, err := http.Get("http://" + h.Addr().String() + "/api/apps/endpoints")
	if err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("plain HTTP answered %d %s, want 400", resp.StatusCode, body)
		}
	}
	// A client that does not trust the test CA is refused the handshake.
	if resp, err := http.Get(h.URL + "/"); err == nil {
		resp.Body.Close()
		t.Error("a client without the test CA connected")
	}
	// TLS 1.0 and 1.1 are refused.
	for _, v := range []uint16{tls.VersionTLS10, tls.VersionTLS11} {
		c, err := tls.Dial("tcp", h.Addr().String(), &tls.Config{RootCAs: ca.Pool, MinVersion: v, MaxVersion: v})
		if err == nil {
			c.Close()
			t.Errorf("TLS version %x accepted", v)
		}
	}
	c, err := tls.Dial("tcp", h.Addr().String(), &tls.Config{RootCAs: ca.Pool, MaxVersion: tls.VersionTLS12})
	if err != nil {
		t.Errorf("TLS 1.2 refused: %v", err)
	} else {
		c.Close()
	}
}

// TestTLSRenewalWhileConnected renews the certificate while a client holds
// a keep-alive connection: by rename (certbot) and in place (acme.sh
// --cert-file). New connections get the new certificate without a
// restart or a signal; the kept-alive connection goes on working.
func TestTLSRenewalWhileConnected(t *testing.T) {
	h, ca, pair, g := newTLSFixture(t)
	keep := daemontest.TLSClient(ca.Pool)
	defer keep.CloseIdleConnections()
	if s, _ := list(t, keep, g); s != 1 {
		t.Fatalf("first connection served serial %d, want 1", s)
	}
	for i, inPlace := range []bool{false, true} {
		want := int64(i + 2)
		ca.Renew(t, pair, want, inPlace)
		// The files are looked at every few seconds (certs.CheckInterval).
		deadline := time.Now().Add(15 * time.Second)
		for newConnSerial(t, h, ca, g) != want {
			if time.Now().After(deadline) {
				t.Fatalf("renewal %d (in place %v): new connections still get the old certificate after 15 s", want, inPlace)
			}
			time.Sleep(100 * time.Millisecond)
		}
		s, reused := list(t, keep, g)
		if !reused || s != 1 {
			t.Errorf("after renewal %d the kept-alive client got serial %d on a reused connection %v, want serial 1 on the same connection", want, s, reused)
		}
	}
	if p := h.Command(t, g, "on"); p.StatusCode != http.StatusNoContent {
		t.Errorf("PUT on after renewals = %d %s", p.StatusCode, p.Body)
	}
}

// TestTLSBadKeyAtReload replaces the key with one of another certificate
// and reloads (what SIGHUP does): the reload fails saying why and the hub
// goes on serving the previous certificate. A good pair then loads.
func TestTLSBadKeyAtReload(t *testing.T) {
	h, ca, pair, g := newTLSFixture(t)
	_, otherKey := ca.Issue(t, 99)
	certstest.Write(t, pair.KeyFile, otherKey, false)
	err := h.ReloadCertificates()
	if err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Fatalf("reload with a mismatched key = %v, want an error saying it does not match", err)
	}
	if s := newConnSerial(t, h, ca, g); s != 1 {
		t.Errorf("after a failed reload: serial %d, want 1 (the previous certificate)", s)
	}
	ca.Renew(t, pair, 2, false)
	if err := h.ReloadCertificates(); err != nil {
		t.Fatalf("reload with a good pair: %v", err)
	}
	if s := newConnSerial(t, h, ca, g); s != 2 {
		t.Errorf("after a good reload: serial %d, want 2", s)
	}
}

// TestTLSHandshakeFailuresDoNotFloodTheLog: connections that fail their
// TLS handshake (a port scanner, plain HTTP) are logged once a minute at
// most, however many come; the hub goes on serving.
func TestTLSHandshakeFailuresDoNotFloodTheLog(t *testing.T) {
	ca := certstest.NewCA(t)
	pair := ca.NewPair(t, 1)
	logs := &logtest.Buffer{}
	h := daemontest.StartWith(t, daemontest.Options{Config: hubConfig, TLS: &pair, Roots: ca.Pool,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	const scans = 40
	for i := range scans {
		c, err := net.DialTimeout("tcp", h.Addr().String(), 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			io.WriteString(c, "GET / HTTP/1.0\r\n\r\n")
		} else {
			c.Write([]byte{0x16, 0x03, 0x01, 0x00, 0x05, 1, 2, 3, 4, 5}) // a broken ClientHello
		}
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		io.Copy(io.Discard, c)
		c.Close()
	}
	// The hub still serves over TLS.
	c := daemontest.TLSClient(ca.Pool)
	defer c.CloseIdleConnections()
	resp, err := c.Get(h.URL + "/api/apps/endpoints")
	if err != nil {
		t.Fatalf("after the scans: %v", err)
	}
	resp.Body.Close()
	if n := strings.Count(logs.String(), "TLS handshake failed"); n != 1 {
		t.Errorf("%d log lines for %d failed handshakes, want 1:\n%s", n, scans, logs.String())
	}
	if strings.Contains(logs.String(), "http: TLS handshake error") {
		t.Errorf("a handshake failure logged as it came:\n%s", logs.String())
	}
}

// TestHSTS: a hub serving HTTPS itself tells browsers to stay on HTTPS
// (Strict-Transport-Security, a week unless server.tls.hsts_max_age says
// otherwise; 0s sends none), on its pages and its API alike; a plain-HTTP
// hub sends no such header (RFC 6797 §7.2: it would be ignored).
func TestHSTS(t *testing.T) {
	ca := certstest.NewCA(t)
	pair := ca.NewPair(t, 1)
	header := func(h *daemontest.Harness, path string) string {
		t.Helper()
		resp, err := h.Client.Get(h.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.Header.Get("Strict-Transport-Security")
	}
	for _, c := range []struct{ keys, want string }{
		{"", "max-age=604800"},
		{"hsts_max_age: 1h", "max-age=3600"},
		{"hsts_max_age: 0s", ""},
	} {
		h := daemontest.StartWith(t, daemontest.Options{Config: hubConfig, TLS: &pair, Roots: ca.Pool, TLSKeys: c.keys})
		for _, path := range []string{"/oauth/apps", "/api/apps/endpoints", "/no-such-page"} {
			if got := header(h, path); got != c.want {
				t.Errorf("tls {%s}: %s sends Strict-Transport-Security %q, want %q", c.keys, path, got, c.want)
			}
		}
		h.Stop()
	}
	if got := header(daemontest.Start(t, hubConfig), "/oauth/apps"); got != "" {
		t.Errorf("a plain-HTTP hub sends Strict-Transport-Security %q", got)
	}
}
