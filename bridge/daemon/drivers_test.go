package daemon_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/bridge/daemon/daemontest"
	"github.com/switchbridge/switchbridge/drivers"
	"github.com/switchbridge/switchbridge/drivers/builtin"
	"github.com/switchbridge/switchbridge/drivers/virtual"
)

// dimmers is a driver added the way a new one would be: its own settings
// section (dimmer:), its own metric, and nothing in bridge/config or
// bridge/daemon naming it. Its switches are virtual ones; it logs every
// open with the label its settings gave it.
type dimmers struct {
	mu  sync.Mutex
	log []string
}

type dimmerSettings struct {
	Label    string `yaml:"label"`
	FailOpen bool   `yaml:"fail_open"`
}

func (ds *dimmers) record(s string) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	ds.log = append(ds.log, s)
}

func (ds *dimmers) opens() string {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	return strings.Join(ds.log, ",")
}

func (ds *dimmers) registration() drivers.Registration {
	return drivers.Registration{Name: "dimmer", Section: true, New: func(env drivers.Env) (drivers.Driver, error) {
		var s dimmerSettings
		if err := config.DecodeStrict(env.Settings, &s); err != nil {
			return nil, err
		}
		opens, err := drivers.RegisterCollector(env.Metrics, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "opens_total", Help: "Times the dimmer driver opened.",
		}))
		if err != nil {
			return nil, err
		}
		venv := env
		venv.Settings = nil
		v, err := virtual.New(venv)
		return &dimmer{Driver: v, set: s, opens: opens, all: ds}, err
	}}
}

type dimmer struct {
	drivers.Driver
	set   dimmerSettings
	opens prometheus.Counter
	all   *dimmers
}

func (d *dimmer) Open(ctx context.Context) (map[string]bridge.Device, error) {
	if d.set.FailOpen {
		d.all.record(d.set.Label + " failed")
		return nil, errors.New("dimmer bus not found")
	}
	d.all.record(d.set.Label)
	d.opens.Inc()
	return d.Driver.Open(ctx)
}

func dimmerConfig(settings string) string {
	return "dimmer: " + settings + `
locations:
  - id: 1
    name: Home
    switches:
      - {id: kitchen, name: Kitchen light, driver: virtual}
      - {id: lamp, name: Lamp, driver: dimmer}
`
}

// TestDriverSettingsReload: a registered driver with a settings section
// gets it; a reload that changes only those settings reopens the driver
// with them; a reload that fails afterwards rolls back to the settings of
// the last good reload, not to those the hub started with. Its metric,
// registered through its Env, is on the hub's /metrics under its name and
// runs on across the reloads.
func TestDriverSettingsReload(t *testing.T) {
	ds := &dimmers{}
	reg := append(builtin.Registry(), ds.registration())
	h := daemontest.StartWith(t, daemontest.Options{Config: dimmerConfig("{label: A}"), Metrics: true, Registry: reg})
	if got := ds.opens(); got != "A" {
		t.Fatalf("opens at start-up = %s, want A", got)
	}
	if got := sample(scrape(t, h), "switchbridge_dimmer_opens_total"); got != 1 {
		t.Errorf("switchbridge_dimmer_opens_total = %v at start-up, want 1", got)
	}
	reload := func(settings string) error {
		cfg, err := config.Load("next.yaml", config.Text(fmt.Sprintf("server: {listen: 127.0.0.1:0, metrics_listen: \"off\"}\ndata_dir: %q\n%s", h.DataDir, dimmerConfig(settings))))
		if err != nil {
			t.Fatal(err)
		}
		return h.Reload(context.Background(), cfg)
	}

	// Only the settings change: the dimmer driver is reopened with them.
	if err := reload("{label: B}"); err != nil {
		t.Fatalf("reload: %v", err)
	}
	if got := ds.opens(); got != "A,B" {
		t.Errorf("opens after a settings change = %s, want A,B", got)
	}
	if got := sample(scrape(t, h), "switchbridge_dimmer_opens_total"); got != 2 {
		t.Errorf("switchbridge_dimmer_opens_total = %v after the reload, want 2", got)
	}

	// A reload whose dimmer fails to open: back to B, twice over.
	for i := range 2 {
		err := reload("{label: C, fail_open: true}")
		if err == nil || !strings.Contains(err.Error(), "kept the previous switches") || !strings.Contains(err.Error(), "dimmer bus not found") {
			t.Fatalf("failing reload %d: %v", i, err)
		}
	}
	if got := ds.opens(); got != "A,B,C failed,B,C failed,B" {
		t.Errorf("opens = %s, want each failed reload rolled back to B (the running settings), never to A", got)
	}
	if _, ok := h.Switchboard.Switch("lamp"); !ok {
		t.Error("lamp not served after the rollback")
	}

	// A typo in the section's name is refused at its line, running config kept.
	cfg, err := config.Load("typo.yaml", config.Text(fmt.Sprintf("data_dir: %q\ndimer: {label: D}\n", h.DataDir)+strings.TrimPrefix(dimmerConfig("{label: B}"), "dimmer: {label: B}\n")))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Reload(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), `typo.yaml:2: unknown key "dimer"`) {
		t.Errorf("reload with a misspelt section: %v", err)
	}
	if got := ds.opens(); got != "A,B,C failed,B,C failed,B" {
		t.Errorf("a refused reload opened drivers: %s", got)
	}
}
