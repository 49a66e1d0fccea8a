// The set: the drivers built for one config with their switches added
// (Build), opened, kept across a reload when unchanged, and closed; with
// their warnings, the secret files they read and the addresses they listen
// on.

package drivers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"gopkg.in/yaml.v3"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/config"
)

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
			spec := Spec{ID: s.ID, Name: s.Name, LocationID: l.ID, Options: s.Options, Line: s.Line, MaxChanges: maxChanges(s.MaxChanges), Confirm: s.Confirm}
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

// OpenReplacing is Open for a reload: a running driver of old that can take
// its new settings and switches in place (Reloader) does, and keeps its
// connections; each other driver of old with the same
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
		if !ok && old != nil {
			devs, ok = s.reloadInPlace(ctx, old, name)
		}
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
			out = append(out, &bridge.Switch{ID: spec.ID, Name: spec.Name, Driver: name, LocationID: spec.LocationID, Device: dev, MaxChanges: spec.MaxChanges, Confirm: spec.Confirm})
		}
	}
	return out, nil
}

// reloadInPlace hands the driver name of s to old's running one, when that
// is a Reloader that takes it: the running driver moves into s, serving
// s's switches, and s's own is dropped unopened.
func (s *Set) reloadInPlace(ctx context.Context, old *Set, name string) (map[string]bridge.Device, bool) {
	if !slices.Contains(old.opened, name) {
		return nil, false
	}
	r, ok := old.drivers[name].(Reloader)
	if !ok {
		return nil, false
	}
	devs, ok := r.Reload(ctx, s.drivers[name])
	if !ok {
		return nil, false
	}
	s.drivers[name] = old.drivers[name]
	s.devices[name] = devs
	s.opened = append(s.opened, name)
	old.opened = slices.DeleteFunc(old.opened, func(n string) bool { return n == name })
	return devs, true
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

// Listens returns the addresses the set's drivers listen on (the embedded
// broker's), as their config gives them.
func (s *Set) Listens() []Listen {
	var out []Listen
	for _, name := range s.order {
		if l, ok := s.drivers[name].(Listener); ok {
			out = append(out, l.Listens()...)
		}
	}
	return out
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
