package config_test

import (
	"strings"
	"testing"

	"github.com/switchbridge/switchbridge/bridge/config"
)

func TestPlatformSection(t *testing.T) {
	const locs = "locations: [{id: 1, name: H}]\n"
	cfg, err := config.Load("x.yaml", config.Text(locs+"platform: {url: 'https://platform.example/', hub_id: h1, secret_file: /etc/s}\n"))
	if err != nil || cfg.Platform == nil || cfg.Platform.URL != "https://platform.example" || cfg.Platform.HubID != "h1" {
		t.Fatalf("valid platform: %+v %v", cfg, err)
	}
	if cfg, err := config.Load("x.yaml", config.Text(locs)); err != nil || cfg.Platform != nil {
		t.Errorf("without platform: %+v %v", cfg, err)
	}
	for _, c := range []struct{ yaml, want string }{
		{"platform: {url: ftp://x, hub_id: h, secret_file: f}\n", "x.yaml:2: platform.url"},
		{"platform: {url: 'http://x/path', hub_id: h, secret_file: f}\n", "without path"},
		{"platform: {url: 'http://x'}\n", "platform.hub_id is required"},
		{"platform: {url: 'http://x', hub_id: h}\n", "platform.secret_file is required"},
		{"platform:\n", "platform needs url"},
		{"platform: {url: 'http://x', hub_id: h, secret_file: f, port: 1}\n", `unknown key "port"`},
		{"platform: {url: 'http://x', hub_id: h, secret_file: f}\ndemo: {user: d, password: d}\n", "a hub with platform: cannot have it"},
	} {
		_, err := config.Load("x.yaml", config.Text(locs+c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.yaml, err, c.want)
		}
	}
}
