// Package certstest makes certificates for tests: a private CA, and leaf
// certificates for loopback signed by it, written where a hub's
// server.tls points.
package certstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority that exists only in a test.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// Pool holds the CA's certificate: what a client of the test hub trusts.
	Pool *x509.CertPool
}

// NewCA makes a CA.
func NewCA(tb testing.TB) *CA {
	tb.Helper()
	key := newKey(tb)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "switchbridge test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &CA{cert: cert, key: key, Pool: pool}
}

func newKey(tb testing.TB) *ecdsa.PrivateKey {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	return key
}

// Issue returns a PEM certificate with the given serial number for
// 127.0.0.1, ::1 and localhost, and its PEM key.
func (ca *CA) Issue(tb testing.TB, serial int64) (certPEM, keyPEM []byte) {
	tb.Helper()
	key := newKey(tb)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: "localhost"},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		tb.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// Pair is where a test keeps a certificate and its key.
type Pair struct{ CertFile, KeyFile string }

// NewPair issues a certificate with serial and writes it and its key into
// a fresh directory.
func (ca *CA) NewPair(tb testing.TB, serial int64) Pair {
	tb.Helper()
	dir := tb.TempDir()
	p := Pair{CertFile: filepath.Join(dir, "fullchain.pem"), KeyFile: filepath.Join(dir, "privkey.pem")}
	ca.Renew(tb, p, serial, true)
	return p
}

// Renew issues a new certificate and key and writes them over p's files
// the way renewal tools do: by renaming new files over the old ones
// (certbot, acme.sh with --*-file), or, with inPlace, by rewriting the
// files themselves.
func (ca *CA) Renew(tb testing.TB, p Pair, serial int64, inPlace bool) {
	tb.Helper()
	c, k := ca.Issue(tb, serial)
	Write(tb, p.CertFile, c, inPlace)
	Write(tb, p.KeyFile, k, inPlace)
}

// Write replaces a file's content, in place or by renaming a new file
// over it.
func Write(tb testing.TB, path string, data []byte, inPlace bool) {
	tb.Helper()
	if inPlace {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			tb.Fatal(err)
		}
		return
	}
	tmp := path + ".new"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		tb.Fatal(err)
	}
}

// Serial is the serial number of the certificate a connection was served.
func Serial(certs []*x509.Certificate) int64 {
	if len(certs) == 0 {
		return 0
	}
	return certs[0].SerialNumber.Int64()
}
