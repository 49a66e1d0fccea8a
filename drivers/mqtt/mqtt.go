// Package mqtt is the smart-plug driver: it reaches Tasmota, Shelly (Gen1
// and RPC), Zigbee2MQTT, ESPHome and generic MQTT switches through a broker,
// an external one or one it runs in-process, keeps their last reported state
// and confirms every command on the plug's own state topic.
package mqtt

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/drivers"
)

// Registration registers the driver under the name mqtt, with its
// settings in the config's mqtt: section.
func Registration() drivers.Registration {
	return drivers.Registration{Name: "mqtt", New: New, Section: true}
}

// New is the driver's factory: it checks the mqtt: section and registers
// the driver's metrics.
func New(env drivers.Env) (drivers.Driver, error) {
	if err := checkProfiles(profiles); err != nil {
		return nil, err
	}
	s, err := checkSettings(env.Settings)
	if err != nil {
		return nil, err
	}
	env = env.WithDefaults()
	m, err := newMetrics(env.Metrics)
	if err != nil {
		return nil, fmt.Errorf("mqtt metrics: %w", err)
	}
	if s.ClientID == "" {
		host, _ := os.Hostname()
		s.ClientID = "switchbridge"
		if h := sanitizeLevel(host); h != "" {
			s.ClientID += "-" + h
		}
	}
	return &driver{env: env, log: env.Logger, obs: m, set: s, byID: map[string]*device{}, requery: requeryAfter, energy: newEnergyKeeper(env.Logger)}, nil
}

type driver struct {
	env drivers.Env
	log *slog.Logger
	obs observer // the metrics
	set Settings
	// requery is when a resync asks a plug again (requeryAfter, copied at
	// New so a test can shorten it for its own driver alone).
	requery []time.Duration
	devs    []*device
	byID    map[string]*device

	// Set by Open.
	c      client
	broker *embeddedBroker
	url    string
	fleet  atomic.Pointer[fleet] // replaced by a reload
	ready  atomic.Bool           // connected and subscribed
	closed atomic.Bool
	stop   chan struct{} // closed by Close: ends a wait before a connection attempt
	retry  backoff
	first  chan struct{} // closed at the first ready
	once   sync.Once
	outbox chan publishJob // Do's commands for the publisher

	// energy keeps the plugs' running energy totals.
	energy *energyKeeper

	// disc listens for the devices that announce themselves.
	disc *discovery

	mu      sync.Mutex // guards pending: the requests awaiting an answer
	pending map[uint64]call

	// notifyMu orders notifications against Close: once silenced is set,
	// which Close does before it returns, no late message (paho's router
	// runs on for a moment after Disconnect) reaches the hub.
	notifyMu sync.RWMutex
	silenced bool
}

func (d *driver) Add(s drivers.Spec) error {
	p, err := buildPlug(s)
	if err != nil {
		return err
	}
	if _, dup := d.byID[s.ID]; dup {
		return fmt.Errorf("switch %q is added twice", s.ID)
	}
	opts, _ := yaml.Marshal(s.Options)
	dev := &device{d: d, id: s.ID, line: s.Line, plug: p, options: string(opts), cmd: make(chan struct{}, 1)}
	d.devs = append(d.devs, dev)
	d.byID[s.ID] = dev
	return nil
}

func (d *driver) Open(ctx context.Context) (map[string]bridge.Device, error) {
	if d.c != nil {
		return nil, errors.New("mqtt driver opened twice")
	}
	d.energy.open(d.env.Store)
	d.openDiscovery() // before the fleet, whose filters take its topics
	d.fleet.Store(d.newFleet(d.devs))
	for _, dev := range d.devs {
		if v, ok := d.env.LastValue(dev.id); ok {
			dev.value = v // shown until the plug reports; Updated stays zero
		}
	}
	d.pending = map[uint64]call{}
	// Room for every plug's command: a plug has one in flight at a time.
	d.outbox = make(chan publishJob, len(d.devs))
	if err := d.connect(ctx); err != nil {
		d.energy.close()
		return nil, err
	}
	go d.publisher()
	out := make(map[string]bridge.Device, len(d.devs))
	for _, dev := range d.devs {
		out[dev.id] = dev
	}
	return out, nil
}

func (d *driver) Close() error {
	if !d.closed.CompareAndSwap(false, true) {
		return nil
	}
	if d.stop != nil {
		close(d.stop)
	}
	d.onDown()
	d.notifyMu.Lock()
	d.silenced = true
	d.notifyMu.Unlock()
	if d.c != nil {
		d.c.Disconnect(disconnectQuiesce)
		d.obs.gone()
	}
	if d.broker != nil {
		d.obs.brokerRunning(d.broker, false)
		d.broker.close()
	}
	if d.disc != nil {
		d.disc.close()
	}
	// After the connection: no reading comes in behind the last write.
	d.energy.close()
	return nil
}

// notify passes a plug's state to the hub until the driver is closed.
func (d *driver) notify(id string, st bridge.State) {
	d.notifyMu.RLock()
	defer d.notifyMu.RUnlock()
	if !d.silenced {
		d.env.Notify(id, st)
	}
}

// sanitizeLevel keeps the characters a client id may hold.
func sanitizeLevel(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r < 128 && topicLevel.MatchString(string(r)) {
			b.WriteRune(r)
		}
	}
	out := b.String()
	if len(out) > 40 {
		out = out[:40]
	}
	return out
}
