package mqtt

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	paho "github.com/eclipse/paho.mqtt.golang"
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
