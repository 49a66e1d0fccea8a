package mqtt

import "github.com/switchbridge/switchbridge/bridge/config"

// SecretFiles implements drivers.SecretFiler: the private key of the hub's
// client certificate for an ssl:// or wss:// broker.
func (d *driver) SecretFiles() []config.SecretFile {
	if d.set.TLS == nil || d.set.TLS.Key == "" {
		return nil
	}
	return []config.SecretFile{{Key: "mqtt.tls.key", Path: d.set.TLS.Key}}
}
