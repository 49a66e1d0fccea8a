// Package certs serves the hub's TLS certificate from a certificate and key
// file pair, and picks up a renewed pair (certbot, acme.sh) without a
// restart: on demand (SIGHUP) and when a handshake finds the files changed.
package certs

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"
)

// CheckInterval is how often at most a handshake looks at the files (two
// stats) to see whether they were renewed.
const CheckInterval = 2 * time.Second

// Loader holds the certificate being served and re-reads its files when
// they change. A pair that fails to load (a renewal half written, a key that
// does not match) is logged and the previous certificate stays in service.
type Loader struct {
	certFile, keyFile string
	logger            *slog.Logger
	interval          time.Duration

	mu      sync.Mutex
	cert    *tls.Certificate
	loaded  [2]stamp  // the files' identity when cert was read from them
	failed  [2]stamp  // the files' identity when they last failed to load
	checked time.Time // last look at the files
}

// New loads the pair and returns a Loader serving it; an unreadable or
// mismatched pair is an error naming the file at fault.
func New(certFile, keyFile string, logger *slog.Logger) (*Loader, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	l := &Loader{certFile: certFile, keyFile: keyFile, logger: logger, interval: CheckInterval}
	st := l.stamps()
	cert, err := Load(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	l.cert, l.loaded, l.checked = cert, st, time.Now()
	l.logLoaded("serving TLS certificate", cert)
	return l, nil
}

// Load reads and checks a certificate and key pair: the certificate file
// holds the leaf first, then any intermediates (certbot's fullchain.pem),
// and the key must be the leaf's.
func Load(certFile, keyFile string) (*tls.Certificate, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("reading the certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("reading the key: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		// X509KeyPair's messages say what is wrong but not with which file.
		return nil, fmt.Errorf("certificate %s and key %s: %s", certFile, keyFile, strings.TrimPrefix(err.Error(), "tls: "))
	}
	if cert.Leaf == nil {
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("certificate %s: %w", certFile, err)
		}
	}
	return &cert, nil
}

// TLSConfig is the server side: TLS 1.2 or later and Go's defaults for the
// rest (cipher suites, curves, HTTP/2), with the certificate from l.
func (l *Loader) TLSConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: l.GetCertificate}
}

// GetCertificate is tls.Config.GetCertificate: the current certificate,
// re-read first when the files changed since it was read (looked at no
// more often than every CheckInterval).
func (l *Loader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if now.Sub(l.checked) < l.interval {
		return l.cert, nil
	}
	l.checked = now
	st := l.stamps()
	if st == l.loaded || st == l.failed {
		return l.cert, nil // unchanged, or the same broken pair as last time
	}
	if err := l.reloadLocked(st); err != nil {
		l.logger.Error("the TLS certificate files changed but do not load; still serving the previous certificate", "err", err)
	}
	return l.cert, nil
}

// Reload re-reads the files whether or not they look changed (SIGHUP). On
// error the previous certificate stays in service.
func (l *Loader) Reload() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.checked = time.Now()
	return l.reloadLocked(l.stamps())
}

func (l *Loader) reloadLocked(st [2]stamp) error {
	cert, err := Load(l.certFile, l.keyFile)
	if err != nil {
		l.failed = st
		return err
	}
	// st was taken before reading: should a renewal have gone on while the
	// files were read, the next look sees them changed and reads again.
	l.cert, l.loaded, l.failed = cert, st, [2]stamp{}
	l.logLoaded("reloaded the TLS certificate", cert)
	return nil
}

// Current is the certificate being served.
func (l *Loader) Current() *tls.Certificate {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cert
}

func (l *Loader) logLoaded(msg string, c *tls.Certificate) {
	leaf := c.Leaf
	l.logger.Info(msg, "subject", leaf.Subject.String(), "names", strings.Join(leaf.DNSNames, ","),
		"serial", leaf.SerialNumber.String(), "not_after", leaf.NotAfter.UTC().Format(time.RFC3339))
	if time.Now().After(leaf.NotAfter) {
		l.logger.Warn("the TLS certificate has expired: clients will refuse it", "not_after", leaf.NotAfter.UTC().Format(time.RFC3339))
	}
}

// stamp identifies a version of a file cheaply: a renewal that rewrites it
// in place changes its size or modification time; one that renames a new
// file over it, or moves a symlink (certbot's live/ directory), changes its
// inode.
type stamp struct {
	dev, ino uint64
	size     int64
	mtime    int64
	missing  bool
}

func (l *Loader) stamps() [2]stamp {
	return [2]stamp{statFile(l.certFile), statFile(l.keyFile)}
}

func statFile(path string) stamp {
	fi, err := os.Stat(path) // follows symlinks
	if err != nil {
		return stamp{missing: errors.Is(err, os.ErrNotExist), mtime: -1}
	}
	dev, ino := fileID(fi)
	return stamp{dev: dev, ino: ino, size: fi.Size(), mtime: fi.ModTime().UnixNano()}
}
