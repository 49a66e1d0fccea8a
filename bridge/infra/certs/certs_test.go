package certs

import (
	"bytes"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge/infra/certs/certstest"
)

func serial(t *testing.T, l *Loader) int64 {
	t.Helper()
	c, err := l.GetCertificate(nil)
	if err != nil || c == nil {
		t.Fatalf("GetCertificate = %v, %v", c, err)
	}
	return c.Leaf.SerialNumber.Int64()
}

func TestNewRefusesBadPairs(t *testing.T) {
	ca := certstest.NewCA(t)
	a, b := ca.NewPair(t, 1), ca.NewPair(t, 2)
	garbage := a.CertFile + ".garbage"
	os.WriteFile(garbage, []byte("not a certificate\n"), 0o600)
	for _, c := range []struct {
		name, cert, key string
		want            []string
	}{
		{"missing certificate", a.CertFile + ".gone", a.KeyFile, []string{"reading the certificate", a.CertFile + ".gone", "no such file"}},
		{"missing key", a.CertFile, a.KeyFile + ".gone", []string{"reading the key", a.KeyFile + ".gone"}},
		{"key of another certificate", a.CertFile, b.KeyFile, []string{a.CertFile, b.KeyFile, "private key does not match public key"}},
		{"not PEM", garbage, a.KeyFile, []string{garbage, "PEM"}},
		{"key given as certificate", a.KeyFile, a.KeyFile, []string{a.KeyFile}},
	} {
		t.Run(c.name, func(t *testing.T) {
			l, err := New(c.cert, c.key, nil)
			if err == nil {
				t.Fatalf("loaded: serial %d", l.Current().Leaf.SerialNumber)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
	if l, err := New(a.CertFile, a.KeyFile, nil); err != nil || serial(t, l) != 1 {
		t.Fatalf("good pair: %v", err)
	}
}

// TestRenewalPickedUp renews the files in place and by rename, as certbot
// and acme.sh do, and checks that the next handshake gets the new
// certificate.
func TestRenewalPickedUp(t *testing.T) {
	ca := certstest.NewCA(t)
	p := ca.NewPair(t, 1)
	l, err := New(p.CertFile, p.KeyFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	l.interval = 0 // look at the files at every handshake
	if got := serial(t, l); got != 1 {
		t.Fatalf("serial %d, want 1", got)
	}
	ca.Renew(t, p, 2, true)
	if got := serial(t, l); got != 2 {
		t.Errorf("after an in-place renewal: serial %d, want 2", got)
	}
	ca.Renew(t, p, 3, false)
	if got := serial(t, l); got != 3 {
		t.Errorf("after a renewal by rename: serial %d, want 3", got)
	}
}

// TestFilesLookedAtOnlyEveryInterval checks that handshakes within the
// interval do not touch the files, and that Reload (SIGHUP) reads them
// whatever the interval.
func TestFilesLookedAtOnlyEveryInterval(t *testing.T) {
	ca := certstest.NewCA(t)
	p := ca.NewPair(t, 1)
	l, err := New(p.CertFile, p.KeyFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	l.interval = time.Hour
	ca.Renew(t, p, 2, false)
	if got := serial(t, l); got != 1 {
		t.Errorf("within the interval: serial %d, want 1 (files not looked at)", got)
	}
	if err := l.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := serial(t, l); got != 2 {
		t.Errorf("after Reload: serial %d, want 2", got)
	}
}

// TestBrokenRenewalKeepsServing replaces the key with one that does not
// match, then half writes the certificate: each time the previous
// certificate stays in service and the failure is logged once, not at
// every handshake. A good pair is then picked up again.
func TestBrokenRenewalKeepsServing(t *testing.T) {
	ca := certstest.NewCA(t)
	p := ca.NewPair(t, 1)
	var log bytes.Buffer
	l, err := New(p.CertFile, p.KeyFile, slog.New(slog.NewTextHandler(&log, nil)))
	if err != nil {
		t.Fatal(err)
	}
	l.interval = 0
	_, otherKey := ca.Issue(t, 99)
	certstest.Write(t, p.KeyFile, otherKey, true)
	for range 3 {
		if got := serial(t, l); got != 1 {
			t.Fatalf("with a mismatched key: serial %d, want 1", got)
		}
	}
	if n := strings.Count(log.String(), "level=ERROR"); n != 1 {
		t.Errorf("%d errors logged for one broken pair, want 1:\n%s", n, log.String())
	}
	if !strings.Contains(log.String(), "still serving the previous certificate") || !strings.Contains(log.String(), "does not match") {
		t.Errorf("log does not say why:\n%s", log.String())
	}
	if err := l.Reload(); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Errorf("Reload with a mismatched key = %v", err)
	}
	if got := serial(t, l); got != 1 {
		t.Fatalf("after a failed Reload: serial %d, want 1", got)
	}

	c, k := ca.Issue(t, 2)
	certstest.Write(t, p.KeyFile, k, true)
	certstest.Write(t, p.CertFile, c[:len(c)/2], true) // a renewal caught half way
	if got := serial(t, l); got != 1 {
		t.Fatalf("with a torn certificate: serial %d, want 1", got)
	}
	certstest.Write(t, p.CertFile, c, true)
	if got := serial(t, l); got != 2 {
		t.Fatalf("once the renewal is complete: serial %d, want 2", got)
	}
}
