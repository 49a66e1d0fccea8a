// The driver contract: what a driver is given (Spec, Env) and what it
// implements (Driver, and where it needs them Checker, SecretFiler,
// Listener and Reloader).

// Package drivers is the contract between the hub and the code that reaches
// real hardware, and the registry that maps a config's `driver:` name to that
// code. Each driver lives in its own subpackage, registers its name, its
// settings section and its metrics (Registration, Env.Metrics), and is
// listed once in drivers/builtin; the hub never imports a driver directly.
package drivers

import (
	"context"
	"errors"
	"log/slog"

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
	// Confirm is the switch's confirm, for the hub's console.
	Confirm bool
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
	// Store is the hub's database, for a driver that keeps records of its
	// own across restarts (the embedded MQTT broker's client ids): the
	// driver declares the methods it needs as an interface of its own and
	// asserts Store to it, as database/sql's optional interfaces are; nil
	// where there is no database (check-config, a driver's own tests).
	Store any
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

// Reloader is implemented by a driver that can take a new config while it
// runs, keeping what did not change open (the embedded MQTT broker's
// connections, a plug's state). A reload whose settings or switches of
// that driver changed calls Reload on the running driver with next, the
// same driver built for the new config (Add done, Check passed, never
// opened). With ok, the running driver now serves next's switches and
// settings, with the returned devices, and next is dropped unopened;
// without ok, it changed nothing (the change needs a restart, which it has
// logged) and is closed and next opened, as for a driver without Reload.
type Reloader interface {
	Reload(ctx context.Context, next Driver) (devices map[string]bridge.Device, ok bool)
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
