package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge/config"
)

func TestRateLimit(t *testing.T) {
	base := "locations:\n  - {id: 1, name: Home, switches: [{id: a, name: A, driver: virtual}]}\n"
	for _, c := range []struct {
		server string
		want   config.RateLimit
	}{
		{"", config.RateLimit{Requests: 250, Per: config.Duration(time.Minute)}},
		{"server:\n  rate_limit: {requests: 30, per: 10s}\n", config.RateLimit{Requests: 30, Per: config.Duration(10 * time.Second)}},
		{"server:\n  rate_limit: off\n", config.RateLimit{Off: true}},
	} {
		cfg, err := config.Load("x.yaml", config.Text(c.server+base))
		if err != nil {
			t.Fatalf("%q: %v", c.server, err)
		}
		if cfg.Server.RateLimit != c.want {
			t.Errorf("%q: rate_limit = %+v, want %+v", c.server, cfg.Server.RateLimit, c.want)
		}
	}

	src := `server:
  listen: nowhere
  rate_limit:
    requests: many
    per: 0s
    burst: 4
oauth:
  code_lifetime: 48h
` + base
	_, err := config.Load("x.yaml", config.Text(src))
	if err == nil {
		t.Fatal("accepted")
	}
	for _, w := range []string{
		`x.yaml:2: server.listen "nowhere" is not host:port`, // the rest of the file is still checked
		`x.yaml:4: server.rate_limit.requests must be a whole number from 1 to 1000000, not "many"`,
		`x.yaml:5: server.rate_limit.per must be a duration from 1s to 24h0m0s`,
		`x.yaml:6: unknown key "burst" in server.rate_limit (known: requests, per)`,
		`x.yaml:8: oauth.code_lifetime must be between 1s and 24h`,
	} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("missing %q in:\n%s", w, err)
		}
	}
	for src, w := range map[string]string{
		"server:\n  rate_limit: {requests: 10}\n": `x.yaml:2: server.rate_limit needs both requests and per`,
		"server:\n  rate_limit: on\n":             `x.yaml:2: server.rate_limit must be a mapping such as {requests: 4, per: 1s}, or off`,
		"server:\n  rate_limit: [1, 2]\n":         `x.yaml:2: server.rate_limit must be a mapping`,
	} {
		if _, err := config.Load("x.yaml", config.Text(src+base)); err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("%q: err = %v, want %q", src, err, w)
		}
	}
}

func TestMaxChanges(t *testing.T) {
	cfg, err := config.Load("x.yaml", config.Text(`locations:
  - id: 1
    name: Home
    switches:
      - {id: a, name: A, driver: virtual}
      - {id: b, name: B, driver: virtual, max_changes: off}
      - {id: c, name: C, driver: virtual, max_changes: {burst: 2, per: 500ms}, initial: on}
`))
	if err != nil {
		t.Fatal(err)
	}
	sws := cfg.Locations[0].Switches
	if sws[0].MaxChanges != nil {
		t.Errorf("a: max_changes = %+v, want nil (the driver's default)", *sws[0].MaxChanges)
	}
	if sws[1].MaxChanges == nil || !sws[1].MaxChanges.Off {
		t.Errorf("b: max_changes = %+v, want off", sws[1].MaxChanges)
	}
	if c := sws[2].MaxChanges; c == nil || *c != (config.ChangeLimit{Burst: 2, Per: config.Duration(500 * time.Millisecond)}) {
		t.Errorf("c: max_changes = %+v, want burst 2 per 500ms", c)
	}
	// max_changes is the hub's, not the driver's: it is not in Options.
	if n := config.Lookup(sws[2].Options, "max_changes"); n != nil {
		t.Error("max_changes was left in the driver's options")
	}
	if n := config.Lookup(sws[2].Options, "initial"); n == nil || n.Value != "on" {
		t.Error("the driver's own key was lost")
	}

	_, err = config.Load("x.yaml", config.Text(`locations:
  - id: 1
    name: Home
    switches:
      - id: a
        name: A
        driver: gpio
        max_changes:
          burst: 0
          per: 1ms
          every: 2s
      - {id: b, name: B, driver: gpio, max_changes: 4}
      - {id: c, name: C, driver: gpio, max_changes: {per: 1s}}
      - {id: d, name: D, driver: gpio, max_changes: {burst: 1001, per: 1s}}
      - {id: e, driver: gpio}
`))
	if err == nil {
		t.Fatal("accepted")
	}
	for _, w := range []string{
		`x.yaml:9: max_changes.burst must be a whole number from 1 to 1000, not "0"`,
		`x.yaml:10: max_changes.per must be a duration from 10ms to 24h0m0s (examples: 1s, 60s, 1h), not "1ms"`,
		`x.yaml:11: unknown key "every" in max_changes (known: burst, per)`,
		`x.yaml:12: max_changes must be a mapping such as {burst: 4, per: 1s}, or off`,
		`x.yaml:13: max_changes needs both burst and per`,
		`x.yaml:14: max_changes.burst must be a whole number from 1 to 1000, not "1001"`,
		`x.yaml:15: locations[0].switches[`, // a later switch's own problem is still found
	} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("missing %q in:\n%s", w, err)
		}
	}
}
