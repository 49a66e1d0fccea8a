package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge/daemon/daemontest"
	"github.com/switchbridge/switchbridge/bridge/infra/certs/certstest"
)

// writeTLSConfig is writeConfig with server.tls on line 4.
func writeTLSConfig(t *testing.T, dir, certFile, keyFile string) (path, addr string) {
	t.Helper()
	path, addr = writeConfig(t, dir)
	body, _ := os.ReadFile(path)
	tlsKeys := fmt.Sprintf("  tls: {cert_file: %q, key_file: %q}\n", certFile, keyFile)
	text := strings.Replace(string(body), "  metrics_listen: \"off\"\n", "  metrics_listen: \"off\"\n"+tlsKeys, 1)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, addr
}

// TestTLSPairChecked checks that check-config reports a certificate and
// key that do not go together, or a missing file, at the line of
// server.tls, and that serve refuses to start with them.
func TestTLSPairChecked(t *testing.T) {
	ca := certstest.NewCA(t)
	a, b := ca.NewPair(t, 1), ca.NewPair(t, 2)
	good, _ := writeTLSConfig(t, t.TempDir(), a.CertFile, a.KeyFile)
	if r := runCLI(t, "", "check-config", "--config", good); r.code != 0 {
		t.Errorf("good pair: %+v", r)
	}
	for _, c := range []struct{ name, cert, key, want string }{
		{"mismatched", a.CertFile, b.KeyFile, "private key does not match public key"},
		{"missing key", a.CertFile, a.KeyFile + ".gone", "reading the key"},
	} {
		cfg, _ := writeTLSConfig(t, t.TempDir(), c.cert, c.key)
		r := runCLI(t, "", "check-config", "--config", cfg)
		if r.code != 1 || !strings.Contains(r.stderr, cfg+":4: server.tls: ") || !strings.Contains(r.stderr, c.want) {
			t.Errorf("check-config, %s pair: %+v, want exit 1 and %q at line 4", c.name, r, c.want)
		}
		r = runCLI(t, "", "serve", "--config", cfg)
		if r.code != 1 || !strings.Contains(r.stderr, "server.tls: ") || !strings.Contains(r.stderr, c.want) {
			t.Errorf("serve, %s pair: %+v, want exit 1 and %q", c.name, r, c.want)
		}
	}
}

// TestTLSSIGHUPReloadsCertificate runs the daemon over TLS, renews its
// certificate and sends SIGHUP: the daemon reloads it at once (before any
// handshake could have noticed the change) and serves it. A mismatched key
// at the next SIGHUP is logged and the renewed certificate stays.
func TestTLSSIGHUPReloadsCertificate(t *testing.T) {
	ca := certstest.NewCA(t)
	pair := ca.NewPair(t, 1)
	dir := t.TempDir()
	cfg, _ := writeTLSConfig(t, dir, pair.CertFile, pair.KeyFile)
	app := addDeveloperApp(t, cfg, "1")
	// Installed once the daemon runs: the endpoint names the port it
	// listens on.
	p := startDaemon(t, cfg)
	r := runCLI(t, "", "install", "--client-id", app.ID, "--user", "alice", "--location", "1", "--switch", "lamp", "--json", "--config", cfg)
	var inst struct{ Token, Endpoint string }
	if err := json.Unmarshal([]byte(r.stdout), &inst); err != nil || !strings.HasPrefix(inst.Endpoint, "https://"+p.addr+"/") {
		t.Fatalf("install: %+v, want an https endpoint on %s", r, p.addr)
	}
	serial := func() int64 {
		t.Helper()
		c := daemontest.TLSClient(ca.Pool)
		defer c.CloseIdleConnections()
		req, _ := http.NewRequest(http.MethodGet, inst.Endpoint+"/switches", nil)
		req.Header.Set("Authorization", "Bearer "+inst.Token)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%v\n%s", err, p.stderr)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /switches = %d", resp.StatusCode)
		}
		return certstest.Serial(resp.TLS.PeerCertificates)
	}
	waitLog := func(want string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(p.stderr.String(), want) {
			if time.Now().After(deadline) {
				t.Fatalf("no %q in the log 10 s after SIGHUP:\n%s", want, p.stderr)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if s := serial(); s != 1 {
		t.Fatalf("serial %d, want 1", s)
	}

	ca.Renew(t, pair, 2, false)
	p.cmd.Process.Signal(syscall.SIGHUP)
	// No handshake happens until the log says so: the reload is SIGHUP's.
	waitLog("reloaded the TLS certificate")
	if s := serial(); s != 2 {
		t.Errorf("after renewal and SIGHUP: serial %d, want 2", s)
	}

	_, otherKey := ca.Issue(t, 99)
	certstest.Write(t, pair.KeyFile, otherKey, false)
	p.cmd.Process.Signal(syscall.SIGHUP)
	waitLog("TLS certificate reload failed; still serving the previous certificate")
	if s := serial(); s != 2 {
		t.Errorf("after a bad key and SIGHUP: serial %d, want 2", s)
	}
	select {
	case <-p.done:
		t.Fatalf("the daemon exited: %v\n%s", p.err, p.stderr)
	default:
	}
}
