// Package drivers is the contract between the hub and the code that reaches
// real hardware, and the registry that maps a config's `driver:` name to that
// code. Each driver lives in its own subpackage, registers its name, its
// settings section and its metrics (Registration, Env.Metrics), and is
// listed once in drivers/builtin; the hub never imports a driver directly.
package drivers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
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
	// MaxChanges is the switch's max_changes, for the hub; nil when the
	// config leaves it to the device's default.
	MaxChanges *bridge.ChangeLimit
}

// Env is what the daemon gives a driver.
type Env struct {
	Logger *slog.Logger
	// Settings is the driver's section of the config: the top-level key
	// named after the driver (mqtt: for the mqtt driver), as written, or nil
	// when there is none. Only a driver registered with Section has one.
	// Decode it with config.DecodeSection so unknown keys are reported with
	// their line and the section's name. Build hands a driver its section
	// even when no switch uses the driver, to check it, and drops that
	// driver unopened.
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
	// Metrics is where the driver registers its Prometheus collectors. Build
	// gives each driver its own, which puts "switchbridge_<driver>_" before
	// every metric name, so drivers cannot collide with each other (nor
	// with the hub's metrics: no driver may be named after one of their
	// groups, metricGroups). A reload builds the driver again on the same
	// registerer: register with RegisterCollector, not MustRegister, so
	// that counters run on across reloads.
	Metrics prometheus.Registerer
}

// WithDefaults returns env with every nil field set to one that does
// nothing: no log, no stored values, notifications and metrics dropped.
// Build calls it, so a driver may use every field; a driver's New calls it
// too for the tests that call New directly.
func (env Env) WithDefaults() Env {
	if env.Logger == nil {
		env.Logger = slog.New(slog.DiscardHandler)
	}
	if env.LastValue == nil {
		env.LastValue = func(string) (bridge.Value, bool) { return "", false }
	}
	if env.Notify == nil {
		env.Notify = func(string, bridge.State) {}
	}
	if env.Metrics == nil {
		// A registry of its own, never gathered: check-config builds the
		// drivers without serving metrics.
		env.Metrics = prometheus.NewRegistry()
	}
	return env
}

// RegisterCollector registers c on reg (a driver's Env.Metrics) and
// returns it, or returns the collector of the same description already
// there: the one the same driver registered for the config before a
// reload, so its counters run on.
func RegisterCollector[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if prev, ok := are.ExistingCollector.(C); ok {
			return prev, nil
		}
	}
	return c, err
}

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

// Checker is a driver with checks that need all its switches, such as
// settings that name switches. Build calls Check once every switch is
// added. Its error (a *config.Problems, with lines) fails the config; its
// warnings are things that work but could be safer, which check-config
// prints and the driver logs when it opens.
type Checker interface {
	Check() (warnings []config.Problem, err error)
}

// SecretFiler is implemented by a driver whose settings name files that
// hold secrets (an MQTT client key), so that check-config and serve warn
// when other users can read them, as they do for the config's own.
type SecretFiler interface {
	SecretFiles() []config.SecretFile
}

// Listener is implemented by a driver that opens a listener of its own (the
// embedded MQTT broker), so that check-config and serve check its address
// against this machine as they check server.listen, before anything binds.
// A reload does not: a name server that is down must not refuse it.
type Listener interface {
	Listens() []Listen
}

// Listen is one address a driver will listen on, with the config key and
// line that set it.
type Listen struct {
	Key  string // e.g. mqtt.listen
	Addr string
	Line int
}

// Factory makes a driver from the daemon's environment. It checks
// env.Settings and does no I/O.
type Factory func(env Env) (Driver, error)

// Registration is what a driver tells the hub about itself. Each driver
// package has one, and drivers/builtin lists them: that list is the only
// place outside its own folder that names a driver.
type Registration struct {
	// Name is what a switch's driver: key says, and the name of the
	// driver's settings section and of its metrics. It must be lower-case
	// letters, digits and '_', starting with a letter.
	Name string
	// New makes the driver for one config. Build calls it once per config
	// that has switches of the driver, at start-up and at every reload.
	New Factory
	// Section is true when the driver takes settings: the config's
	// top-level key called Name, handed to New as Env.Settings. Without
	// it, such a key is an unknown key.
	Section bool
}

// Registry is the drivers a hub knows.
type Registry []Registration

// Names lists the registered driver names, sorted.
func (r Registry) Names() []string {
	out := make([]string, 0, len(r))
	for _, d := range r {
		out = append(out, d.Name)
	}
	sort.Strings(out)
	return out
}

// Lookup returns the driver registered as name.
func (r Registry) Lookup(name string) (Registration, bool) {
	for _, d := range r {
		if d.Name == name {
			return d, true
		}
	}
	return Registration{}, false
}

var driverName = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// metricGroups are the hub's own metric groups (switchbridge_<group>_…,
// bridge/metrics and bridge/link): a driver of one of these names would
// put its metrics among them.
var metricGroups = []string{"api", "http", "location", "oauth", "platform", "switch"}

// check panics on a registry no config could be right for: a name twice,
// a name that cannot be a metric name or is one of the hub's metric
// groups, a driver without a factory. These
// are mistakes in the list of drivers, found by the first test that
// builds a config.
func (r Registry) check() {
	seen := map[string]bool{}
	for _, d := range r {
		switch {
		case !driverName.MatchString(d.Name):
			panic(fmt.Sprintf("drivers: driver name %q must be lower-case letters, digits and '_'", d.Name))
		case slices.Contains(metricGroups, d.Name):
			panic(fmt.Sprintf("drivers: driver name %q is a group of the hub's own metrics (%s)", d.Name, strings.Join(metricGroups, ", ")))
		case seen[d.Name]:
			panic(fmt.Sprintf("drivers: driver %q registered twice", d.Name))
		case d.New == nil:
			panic(fmt.Sprintf("drivers: driver %q has no factory", d.Name))
		}
		seen[d.Name] = true
	}
}

// CheckSections reports every section of cfg that no driver in r claims
// as an unknown key at its line, as bridge/config reports its own unknown
// keys: a misspelt mqtt: or server: is an error, not ignored. Build does
// it too; a command that reads the config without building the drivers
// calls it alone.
func (r Registry) CheckSections(cfg *config.Config) error {
	ps := &config.Problems{File: cfg.File}
	known := config.Keys()
	for _, d := range r {
		if d.Section {
			known = append(known, d.Name)
		}
	}
	sort.Strings(known)
	for name, sec := range cfg.Sections {
		if d, ok := r.Lookup(name); !ok || !d.Section {
			ps.Add(sec.Key, "unknown key %q (known: %s)", name, strings.Join(known, ", "))
		}
	}
	return ps.Err()
}

// Set is the drivers built for one config, with their switches added.
type Set struct {
	// cfg is the config the set was built from: a failed reload builds the
	// running one again from it.
	cfg     *config.Config
	drivers map[string]Driver
	order   []string
	specs   map[string][]Spec
	opened  []string
	// devices holds what each opened driver returned.
	devices map[string]map[string]bridge.Device
	// prints identifies each driver's settings and switches, so a reload
	// can tell which drivers did not change.
	prints map[string]string
	// warnings are the Checkers' warnings.
	warnings []config.Problem
}

// Build makes one driver for each driver name the config uses and adds its
// switches. It does no I/O. Every problem is reported, with its line; the
// returned error is a *config.Problems.
func Build(cfg *config.Config, reg Registry, env Env) (*Set, error) {
	reg.check()
	ps := &config.Problems{File: cfg.File}
	ps.Merge(reg.CheckSections(cfg), 0)
	// A copy: the caller may go on to change its config (a reload does).
	kept := *cfg
	set := &Set{cfg: &kept, drivers: map[string]Driver{}, specs: map[string][]Spec{},
		devices: map[string]map[string]bridge.Device{}, prints: map[string]string{}}
	env = env.WithDefaults()
	// settings is each driver's section, nil when it has none.
	settings := func(name string) *yaml.Node {
		if r, ok := reg.Lookup(name); ok && r.Section {
			return cfg.Sections[name].Value
		}
		return nil
	}
	for _, l := range cfg.Locations {
		for _, s := range l.Switches {
			r, ok := reg.Lookup(s.Driver)
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
				denv.Settings = settings(s.Driver)
				denv.Metrics = prometheus.WrapRegistererWithPrefix("switchbridge_"+s.Driver+"_", env.Metrics)
				var err error
				d, err = r.New(denv)
				if err != nil {
					ps.Merge(err, sectionLine(settings(s.Driver)))
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
			spec := Spec{ID: s.ID, Name: s.Name, LocationID: l.ID, Options: s.Options, Line: s.Line, MaxChanges: maxChanges(s.MaxChanges)}
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
	for _, name := range set.order {
		if c, ok := set.drivers[name].(Checker); ok {
			w, err := c.Check()
			ps.Merge(err, sectionLine(settings(name)))
			set.warnings = append(set.warnings, w...)
		}
	}
	checkUnused(cfg, reg, env, set.drivers, ps)
	if err := ps.Err(); err != nil {
		return nil, err
	}
	for _, name := range set.order {
		set.prints[name] = fingerprint(settings(name), set.specs[name])
	}
	return set, nil
}

// checkUnused checks the section of every driver no switch uses, as
// Build checks the others, so that a misspelt key there is an error now
// rather than when a switch first uses the driver. The driver made for the
// check is dropped unopened, its metrics on a registry of its own: a driver
// runs, and exports, only once a switch uses it.
func checkUnused(cfg *config.Config, reg Registry, env Env, built map[string]Driver, ps *config.Problems) {
	for _, name := range slices.Sorted(maps.Keys(cfg.Sections)) {
		r, ok := reg.Lookup(name)
		if _, used := built[name]; !ok || !r.Section || used {
			continue
		}
		sec := cfg.Sections[name].Value
		denv := env
		denv.Logger = slog.New(slog.DiscardHandler)
		denv.Settings = sec
		denv.Metrics = prometheus.NewRegistry()
		d, err := r.New(denv)
		if err != nil {
			ps.Merge(err, sectionLine(sec))
			continue
		}
		if c, ok := d.(Checker); ok {
			_, err := c.Check()
			ps.Merge(err, sectionLine(sec))
		}
	}
}

// Config is the config s was built from. A reload that fails rolls back
// to it: its sections are the drivers' settings now running, whatever
// else has changed since.
func (s *Set) Config() *config.Config { return s.cfg }

// SecretFiles returns the secret files the drivers' settings name.
func (s *Set) SecretFiles() []config.SecretFile {
	var out []config.SecretFile
	for _, name := range s.order {
		if f, ok := s.drivers[name].(SecretFiler); ok {
			out = append(out, f.SecretFiles()...)
		}
	}
	return out
}

// Warnings returns the drivers' warnings about the config, in line order.
func (s *Set) Warnings() []config.Problem {
	return slices.SortedStableFunc(slices.Values(s.warnings), func(a, b config.Problem) int { return a.Line - b.Line })
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

// maxChanges is a switch's max_changes as the hub takes it: off is a zero
// cap, which overrides the device's default.
func maxChanges(c *config.ChangeLimit) *bridge.ChangeLimit {
	switch {
	case c == nil:
		return nil
	case c.Off:
		return &bridge.ChangeLimit{}
	}
	return &bridge.ChangeLimit{Burst: c.Burst, Per: c.Per.Std()}
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
			out = append(out, &bridge.Switch{ID: spec.ID, Name: spec.Name, Driver: name, LocationID: spec.LocationID, Device: dev, MaxChanges: spec.MaxChanges})
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

// CheckListens checks the address of every listener the set's drivers will
// open against this machine (config.CheckListenHost) and returns the
// problems, each at its line; nil when there are none.
func (s *Set) CheckListens(file string) error {
	ps := &config.Problems{File: file}
	for _, name := range s.order {
		l, ok := s.drivers[name].(Listener)
		if !ok {
			continue
		}
		for _, a := range l.Listens() {
			if config.CheckListenSyntax(a.Addr) != nil {
				continue // reported by the driver already
			}
			if err := config.CheckListenHost(a.Addr); err != nil {
				ps.Add(&yaml.Node{Line: a.Line}, "%s %q: %v", a.Key, a.Addr, err)
			}
		}
	}
	return ps.Err()
}
