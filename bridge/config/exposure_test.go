package config_test

import (
	"strings"
	"testing"

	"github.com/switchbridge/switchbridge/bridge/config"
)

// TestPlainHTTPOnNetwork: a listener other machines can reach, without
// server.tls, is warned of at server.listen's line; loopback, or TLS, is
// not. The shipped hub config listens on loopback, so a fresh install
// says nothing and serves nobody but the Pi itself.
func TestPlainHTTPOnNetwork(t *testing.T) {
	base := "locations:\n  - {id: 1, name: Home, switches: [{id: a, name: A, driver: virtual}]}\n"
	for listen, warn := range map[string]bool{
		"127.0.0.1:8080":        false,
		"127.0.0.2:8080":        false,
		"[::1]:8080":            false,
		"localhost:8080":        false,
		"[::ffff:127.0.0.1]:80": false,
		"0.0.0.0:8080":          true,
		":8080":                 true,
		"[::]:8080":             true,
		"192.168.1.5:8080":      true,
		"hub.lan:8080":          true,
	} {
		cfg, err := config.Load("x.yaml", config.Text("# comment\nserver:\n  listen: \""+listen+"\"\n"+base))
		if err != nil {
			t.Fatalf("%s: %v", listen, err)
		}
		ws := cfg.PlainHTTPOnNetwork()
		if warn != (len(ws) == 1) {
			t.Errorf("listen %s: warnings %v, want a warning: %v", listen, ws, warn)
			continue
		}
		if warn && (ws[0].Line != 3 || !strings.Contains(ws[0].Msg, "server.listen "+listen+" reaches the network over plain HTTP") || !strings.Contains(ws[0].Msg, "server.tls")) {
			t.Errorf("listen %s: warning %+v, want line 3 naming the listener and server.tls", listen, ws[0])
		}
	}
	cfg, err := config.Load("x.yaml", config.Text("server:\n  listen: 0.0.0.0:8443\n  tls: {cert_file: c, key_file: k}\n"+base))
	if err != nil {
		t.Fatal(err)
	}
	if ws := cfg.PlainHTTPOnNetwork(); len(ws) != 0 {
		t.Errorf("a TLS listener is warned of: %v", ws)
	}
	for _, f := range []string{"../../configs/hub.yaml", "../../configs/demo.yaml"} {
		cfg, err := config.Load(f)
		if err != nil {
			t.Fatal(err)
		}
		if ws := cfg.PlainHTTPOnNetwork(); len(ws) != 0 || !strings.HasPrefix(cfg.Server.Listen, "127.0.0.1:") {
			t.Errorf("%s listens on %s (warnings %v): a fresh install must serve loopback only", f, cfg.Server.Listen, ws)
		}
	}
}
