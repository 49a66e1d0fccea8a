package config_test

import (
	"strings"
	"testing"

	"github.com/switchbridge/switchbridge/bridge/config"
)

// TestNetworkWarnings: a listener other machines can reach is warned of at
// server.listen's line: without server.tls (plain HTTP, or a proxy's https
// that clients can go around), and without a public_url clients elsewhere
// can use. Loopback, with or without TLS, is not. The shipped configs
// listen on loopback, so a fresh install says nothing and serves nobody
// but the Pi itself.
func TestNetworkWarnings(t *testing.T) {
	base := "locations:\n  - {id: 1, name: Home, switches: [{id: a, name: A, driver: virtual}]}\n"
	const (
		plain    = "reaches the network over plain HTTP"
		bypass   = "clients on the network can bypass the proxy"
		noPublic = "set public_url to the address clients use"
	)
	for _, c := range []struct {
		listen, publicURL, tls string
		want                   []string
	}{
		{"127.0.0.1:8080", "", "", nil},
		{"127.0.0.2:8080", "", "", nil},
		{"[::1]:8080", "", "", nil},
		{"localhost:8080", "", "", nil},
		{"[::ffff:127.0.0.1]:80", "", "", nil},
		{"127.0.0.1:8080", "https://hub.example", "", nil},
		{"0.0.0.0:8080", "http://hub.lan:8080", "", []string{plain}},
		{":8080", "http://hub.lan:8080", "", []string{plain}},
		{"[::]:8080", "http://hub.lan:8080", "", []string{plain}},
		{"192.168.1.5:8080", "http://192.168.1.5:8080", "", []string{plain}},
		{"hub.lan:8080", "http://hub.lan:8080", "", []string{plain}},
		{"0.0.0.0:8080", "", "", []string{noPublic, plain}},
		{"0.0.0.0:8080", "http://localhost:8080", "", []string{noPublic, plain}},
		{"0.0.0.0:8080", "https://hub.example", "", []string{bypass}},
		{"0.0.0.0:8443", "https://hub.lan:8443", "  tls: {cert_file: c, key_file: k}\n", nil},
		{"0.0.0.0:8443", "", "  tls: {cert_file: c, key_file: k}\n", []string{noPublic}},
	} {
		text := "# comment\nserver:\n  listen: \"" + c.listen + "\"\n"
		if c.publicURL != "" {
			text += "  public_url: " + c.publicURL + "\n"
		}
		cfg, err := config.Load("x.yaml", config.Text(text+c.tls+base))
		if err != nil {
			t.Fatalf("%s: %v", c.listen, err)
		}
		ws := cfg.NetworkWarnings()
		if len(ws) != len(c.want) {
			t.Errorf("listen %s, public_url %q: warnings %v, want %d", c.listen, c.publicURL, ws, len(c.want))
			continue
		}
		for i, w := range ws {
			if w.Line != 3 || !strings.Contains(w.Msg, c.want[i]) || !strings.Contains(w.Msg, c.listen) {
				t.Errorf("listen %s, public_url %q: warning %+v, want line 3 naming the listener and %q", c.listen, c.publicURL, w, c.want[i])
			}
		}
	}
	for _, f := range []string{"../../configs/hub.yaml", "../../configs/demo.yaml"} {
		cfg, err := config.Load(f)
		if err != nil {
			t.Fatal(err)
		}
		if ws := cfg.NetworkWarnings(); len(ws) != 0 || !strings.HasPrefix(cfg.Server.Listen, "127.0.0.1:") {
			t.Errorf("%s listens on %s (warnings %v): a fresh install must serve loopback only", f, cfg.Server.Listen, ws)
		}
	}
}
