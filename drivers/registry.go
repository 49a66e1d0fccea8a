// The registry: the drivers a hub knows (Registration, Registry), the
// checks that their names can be config keys and metric names, and the
// check that every section of a config belongs to one of them.

package drivers

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/switchbridge/switchbridge/bridge/config"
)

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
// bridge/metrics and bridge/hub/replica): a driver of one of these names
// would put its metrics among them.
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
