// Package virtual is the in-memory switch driver: no hardware, for the demo
// config, for trying clients and for tests. A virtual switch can be told to
// lack a command (to show the API's 501), to take time, or to fail.
package virtual

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/drivers"
)

// Options are a virtual switch's keys in the config.
type Options struct {
	// Initial is the value at start-up; when empty the stored value is
	// restored, and off is used when none is stored. A config reload always
	// keeps the current value.
	Initial string `yaml:"initial"`
	// Commands lists the commands the switch supports: all when the key is
	// absent, none (a read-only switch) for [].
	Commands *[]string `yaml:"commands"`
	// Delay is how long the switch takes to confirm a command.
	Delay config.Duration `yaml:"delay"`
	// Fail makes every command fail, as a broken device would.
	Fail bool `yaml:"fail"`
}

// Registration registers the driver under the name virtual. It takes no
// settings section.
func Registration() drivers.Registration {
	return drivers.Registration{Name: "virtual", New: New}
}

// New is the driver's factory. The virtual driver takes no settings.
func New(env drivers.Env) (drivers.Driver, error) {
	if env.Settings != nil {
		return nil, errors.New("the virtual driver takes no settings section")
	}
	return &driver{env: env.WithDefaults()}, nil
}

type driver struct {
	env   drivers.Env
	specs []spec
}

type spec struct {
	id       string
	initial  bridge.Value
	commands map[bridge.Command]bool
	delay    time.Duration
	fail     bool
}

func (d *driver) Add(s drivers.Spec) error {
	var o Options
	ps := &config.Problems{}
	ps.Merge(config.DecodeStrict(s.Options, &o), s.Line)
	sp := spec{id: s.ID, delay: o.Delay.Std(), fail: o.Fail}
	if o.Initial != "" {
		v, err := bridge.ParseValue(o.Initial)
		if err != nil {
			ps.Add(find(s, "initial"), "switch %q: initial must be on or off, not %q", s.ID, o.Initial)
		}
		sp.initial = v
	}
	if o.Commands != nil {
		sp.commands = map[bridge.Command]bool{}
		for _, c := range *o.Commands {
			cmd, err := bridge.ParseCommand(c)
			if err != nil {
				ps.Add(find(s, "commands"), "switch %q: commands may list on and off, not %q", s.ID, c)
				continue
			}
			sp.commands[cmd] = true
		}
	}
	if o.Delay < 0 {
		ps.Add(find(s, "delay"), "switch %q: delay must not be negative", s.ID)
	}
	if err := ps.Err(); err != nil {
		return err
	}
	d.specs = append(d.specs, sp)
	return nil
}

func (d *driver) Open(context.Context) (map[string]bridge.Device, error) {
	out := make(map[string]bridge.Device, len(d.specs))
	for _, sp := range d.specs {
		v := sp.initial
		if d.env.Reload || v == "" {
			if last, ok := d.env.LastValue(sp.id); ok {
				v = last
			} else {
				v = bridge.Off
			}
		}
		sw := &Switch{id: sp.id, commands: sp.commands, delay: sp.delay, fail: sp.fail, notify: d.env.Notify}
		// A virtual switch is the hub's own: it is seen whenever the hub
		// sets it, at start and at each command (its last_seen).
		now := time.Now()
		sw.state = bridge.State{Value: v, Available: true, Updated: now, LastSeen: now}
		d.env.Notify(sp.id, sw.state)
		out[sp.id] = sw
	}
	return out, nil
}

func (d *driver) Close() error { return nil }

// Switch is one virtual switch.
type Switch struct {
	id       string
	commands map[bridge.Command]bool // nil: all
	delay    time.Duration
	fail     bool
	notify   func(string, bridge.State)

	mu    sync.Mutex
	state bridge.State
}

// State implements bridge.Device.
func (s *Switch) State() bridge.State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

// Supports implements bridge.CommandSupporter.
func (s *Switch) Supports(cmd bridge.Command) bool {
	return s.commands == nil || s.commands[cmd]
}

// Do implements bridge.Commander.
func (s *Switch) Do(ctx context.Context, cmd bridge.Command) error {
	if !s.Supports(cmd) {
		return fmt.Errorf("virtual switch %s: %q: %w", s.id, cmd, errors.ErrUnsupported)
	}
	if s.delay > 0 {
		t := time.NewTimer(s.delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if s.fail {
		return fmt.Errorf("virtual switch %s is configured to fail", s.id)
	}
	s.mu.Lock()
	now := time.Now()
	s.state = bridge.State{Value: cmd.Value(), Available: true, Updated: now, LastSeen: now}
	st := s.state
	s.mu.Unlock()
	s.notify(s.id, st)
	return nil
}

// find returns the node of an option key, for a message's line.
func find(s drivers.Spec, key string) *yaml.Node { return config.Lookup(s.Options, key) }
