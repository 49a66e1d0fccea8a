package mqtt

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/url"
	"os"

	paho "github.com/eclipse/paho.mqtt.golang"
	"golang.org/x/net/proxy"
)

// client is the part of paho's client the driver uses. paho.Client has all
// of it; tests put a stand-in here to reproduce the client's failure modes
// (a token that never completes) that a healthy broker cannot provoke.
type client interface {
	Connect() paho.Token
	Disconnect(quiesce uint)
	IsConnectionOpen() bool
	Publish(topic string, qos byte, retained bool, payload any) paho.Token
	SubscribeMultiple(filters map[string]byte, callback paho.MessageHandler) paho.Token
}

// newClient makes the driver's client from its options.
var newClient = func(o *paho.ClientOptions) client { return paho.NewClient(o) }

// loadTLS reads the PEM files of the tls: block. With no CA file the
// system's roots are used.
func loadTLS(f *TLSFiles) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if f == nil {
		return cfg, nil
	}
	if f.CA != "" {
		pem, err := os.ReadFile(f.CA)
		if err != nil {
			return nil, fmt.Errorf("mqtt.tls.ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("mqtt.tls.ca: %s holds no PEM certificate", f.CA)
		}
		cfg.RootCAs = pool
	}
	if f.Cert != "" {
		cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			return nil, fmt.Errorf("mqtt.tls.cert/key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// dialBuffered opens a tcp:// broker connection as paho does (through a
// proxy named by ALL_PROXY, if any) and gives it a read buffer. paho reads a
// packet in several small reads (the header byte, each byte of the length,
// then the body), each a system call on a bare socket; with the buffer, a
// burst of plug reports is read in a few. TLS and websocket connections
// buffer their own reads, so paho opens those itself.
func dialBuffered(uri *url.URL, o paho.ClientOptions) (net.Conn, error) {
	dialer := o.Dialer
	if dialer == nil {
		dialer = &net.Dialer{Timeout: connectTimeout}
	}
	c, err := proxy.FromEnvironmentUsing(dialer).Dial("tcp", uri.Host)
	if err != nil {
		return nil, err
	}
	return &bufferedConn{Conn: c, r: bufio.NewReaderSize(c, readBuffer)}, nil
}

// readBuffer holds a few dozen plug reports.
const readBuffer = 8 << 10

// bufferedConn reads through r; everything else goes to the connection.
// Only paho's reader goroutine reads it.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
