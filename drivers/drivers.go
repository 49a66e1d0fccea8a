// Package drivers is the contract between the hub and the code that reaches
// real hardware, and the registry that maps a config's `driver:` name to that
// code. Each driver lives in its own subpackage and is listed once in
// drivers/builtin; the hub never imports a driver directly.
package drivers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/config"
)

// Spec is one switch handed to its driver.
type Spec struct {
	ID         string
	Name       string
	LocationID int64
	// Options is the switch's mapping less id, name and driver: the driver's
	// own keys. Decode it with config.DecodeStrict so unknown keys are
	// reported with their line.
	Options *yaml.Node
	Line    int
}

// Env is what the daemon gives a driver.
type Env struct {
	Logger *slog.Logger
	// Settings is the config's top-level section named after the driver
	// (mqtt: for the mqtt driver), or nil when there is none.
	Settings *yaml.Node
	// LastValue returns the value the hub stored for a switch before it last
	// stopped, for drivers that restore state at start-up.
	LastValue func(switchID string) (bridge.Value, bool)
	// Notify tells the hub of a state the driver learnt (a device report, a
	// confirmed command), so it can be stored and exported. It must not block.
	// st.Updated is when the value was learnt; a state with a zero Updated
	// passes on availability only, and its value is not stored.
	Notify func(switchID string, st bridge.State)
	// Reload is true when the drivers are opened by a config reload rather
	// than at start-up: a switch then keeps the value it has (LastValue),
	// whatever its start-up policy says, so a reload switches nothing.
	Reload bool
	// MQTT is told of the MQTT connection, for metrics. Build sets a no-op
	// when the daemon gives none, so a driver may always call it.
	MQTT MQTTObserver
}

// MQTTObserver is how the mqtt driver reports its broker connection and
// traffic without depending on the metrics library.
type MQTTObserver interface {
	MQTTConnected(broker string, up bool) // on connect (true) and on loss (false)
	MQTTReconnect()                       // each reconnection attempt
	MQTTMessage(direction string)         // "in" per message received, "out" per publish
}

// DiscardMQTT is an MQTTObserver that does nothing.
var DiscardMQTT MQTTObserver = noMQTT{}

type noMQTT struct{}

func (noMQTT) MQTTConnected(string, bool) {}
func (noMQTT) MQTTReconnect()             {}
func (noMQTT) MQTTMessage(string)         {}

// Driver builds devices for the switches configured with its name.
type Driver interface {
	// Add checks one switch's options. It does no I/O, so check-config can
	// call it without the hardware being there.
	Add(spec Spec) error
	// Open reaches the hardware and returns a device for every added switch,
	// keyed by switch id. On error nothing stays open.
	Open(ctx context.Context) (map[string]bridge.Device, error)
	// Close releases everything Open took.
	Close() error
}

// Factory makes a driver from the daemon's environment. It checks
// env.Settings and does no I/O.
type Factory func(env Env) (Driver, error)

// Registry maps driver names to factories.
type Registry map[string]Factory

// Names lists the registered driver names, sorted.
func (r Registry) Names() []string {
	out := make([]string, 0, len(r))
	for n := range r {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Set is the drivers built for one config, with their switches added.
type Set struct {
	drivers map[string]Driver
	order   []string
	specs   map[string][]Spec
	opened  []string
	// devices holds what each opened driver returned.
	devices map[string]map[string]bridge.Device
	// prints identifies each driver's settings and switches, so a reload
	// can tell which drivers did not change.
	prints map[string]string
}

// Build makes one driver for each driver name the config uses and adds its
// switches. It does no I/O. Every problem is reported, with its line; the
// returned error is a *config.Problems.
func Build(cfg *config.Config, reg Registry, env Env) (*Set, error) {
	ps := &config.Problems{File: cfg.File}
	set := &Set{drivers: map[string]Driver{}, specs: map[string][]Spec{},
		devices: map[string]map[string]bridge.Device{}, prints: map[string]string{}}
	sections := map[string]*yaml.Node{"mqtt": &cfg.MQTT}
	if env.Logger == nil {
		env.Logger = slog.New(slog.DiscardHandler)
	}
	if env.LastValue == nil {
		env.LastValue = func(string) (bridge.Value, bool) { return "", false }
	}
	if env.Notify == nil {
		env.Notify = func(string, bridge.State) {}
	}
	if env.MQTT == nil {
		env.MQTT = DiscardMQTT
	}
	for _, l := range cfg.Locations {
		for _, s := range l.Switches {
			f, ok := reg[s.Driver]
			if !ok {
				if s.Driver != "" {
					ps.Add(&yaml.Node{Line: s.Line}, "switch %q: unknown driver %q (known: %s)", s.ID, s.Driver, strings.Join(reg.Names(), ", "))
				}
				continue
			}
			d, ok := set.drivers[s.Driver]
			if !ok {
				denv := env
				denv.Logger = env.Logger.With("driver", s.Driver)
				if sec := sections[s.Driver]; sec != nil && sec.Kind != 0 {
					denv.Settings = sec
				}
				var err error
				d, err = f(denv)
				if err != nil {
					ps.Merge(err, sectionLine(sections[s.Driver]))
					// Mark the driver as failed so its other switches are not
					// reported again for the same cause.
					set.drivers[s.Driver] = nil
					continue
				}
				set.drivers[s.Driver] = d
				set.order = append(set.order, s.Driver)
			}
			if d == nil {
				continue
			}
			spec := Spec{ID: s.ID, Name: s.Name, LocationID: l.ID, Options: s.Options, Line: s.Line}
			if err := d.Add(spec); err != nil {
				var sub *config.Problems
				if errors.As(err, &sub) {
					ps.Merge(err, s.Line)
				} else {
					ps.Add(&yaml.Node{Line: s.Line}, "switch %q: %v", s.ID, err)
				}
				continue
			}
			set.specs[s.Driver] = append(set.specs[s.Driver], spec)
		}
	}
	if err := ps.Err(); err != nil {
		return nil, err
	}
	for _, name := range set.order {
		set.prints[name] = fingerprint(sections[name], set.specs[name])
	}
	return set, nil
}

// fingerprint is a driver's settings and switches as text.
func fingerprint(settings *yaml.Node, specs []Spec) string {
	var b strings.Builder
	if settings != nil && settings.Kind != 0 {
		out, _ := yaml.Marshal(settings)
		b.Write(out)
	}
	for _, s := range specs {
		opts, _ := yaml.Marshal(s.Options)
		fmt.Fprintf(&b, "\x00%s\x00%s\x00%d\x00%s", s.ID, s.Name, s.LocationID, opts)
	}
	return b.String()
}

// KeepUnchanged moves every driver of old whose settings and switches are
// the same in s, open and with its devices, into s, so a reload leaves it
// running: its relays are not released, its broker connection not dropped.
// It returns the names of the drivers kept. Closing old afterwards closes
// only what changed.
func (s *Set) KeepUnchanged(old *Set) []string {
	var kept []string
	for _, name := range s.order {
		if !slices.Contains(old.opened, name) || old.prints[name] != s.prints[name] {
			continue
		}
		s.drivers[name] = old.drivers[name]
		s.devices[name] = old.devices[name]
		s.opened = append(s.opened, name)
		old.opened = slices.DeleteFunc(old.opened, func(n string) bool { return n == name })
		kept = append(kept, name)
	}
	return kept
}

func sectionLine(n *yaml.Node) int {
	if n == nil {
		return 0
	}
	return n.Line
}

// Open opens every driver and returns the hub's switches. If any driver
// fails, the ones already opened are closed again and nothing stays open.
func (s *Set) Open(ctx context.Context) ([]*bridge.Switch, error) {
	return s.OpenReplacing(ctx, nil)
}

// OpenReplacing is Open for a reload: each driver of old with the same
// name as one being opened is closed just before its replacement opens, so
// a changed driver's hardware (GPIO lines) is released only while its own
// replacement opens, not while others do (an MQTT driver can take seconds
// when its broker is down). Drivers of old that s does not have are closed
// first. On error, s is closed and old may be partly closed: close it too.
func (s *Set) OpenReplacing(ctx context.Context, old *Set) ([]*bridge.Switch, error) {
	if old != nil {
		for _, name := range slices.Clone(old.opened) {
			if _, ok := s.drivers[name]; !ok {
				old.closeOne(name)
			}
		}
	}
	var out []*bridge.Switch
	for _, name := range s.order {
		devs, ok := s.devices[name] // kept open from the previous config
		if !ok {
			if old != nil {
				old.closeOne(name)
			}
			var err error
			devs, err = s.drivers[name].Open(ctx)
			if err != nil {
				s.Close()
				return nil, fmt.Errorf("driver %s: %w", name, err)
			}
			s.opened = append(s.opened, name)
			s.devices[name] = devs
		}
		for _, spec := range s.specs[name] {
			dev, ok := devs[spec.ID]
			if !ok {
				s.Close()
				return nil, fmt.Errorf("driver %s returned no device for switch %q", name, spec.ID)
			}
			out = append(out, &bridge.Switch{ID: spec.ID, Name: spec.Name, Driver: name, LocationID: spec.LocationID, Device: dev})
		}
	}
	return out, nil
}

// closeOne closes one opened driver, if it is open.
func (s *Set) closeOne(name string) error {
	if !slices.Contains(s.opened, name) {
		return nil
	}
	s.opened = slices.DeleteFunc(s.opened, func(n string) bool { return n == name })
	return s.drivers[name].Close()
}

// Close closes the opened drivers in reverse order and returns their errors
// joined.
func (s *Set) Close() error {
	var errs []error
	for i := len(s.opened) - 1; i >= 0; i-- {
		name := s.opened[i]
		if err := s.drivers[name].Close(); err != nil {
			errs = append(errs, fmt.Errorf("driver %s: %w", name, err))
		}
	}
	s.opened = nil
	return errors.Join(errs...)
}
