package builtin

import (
	"strings"
	"testing"

	"github.com/switchbridge/switchbridge/drivers"
)

// Every driver the README documents is registered, and each one's factory
// accepts an environment without settings where that is valid, doing no I/O.
func TestRegistry(t *testing.T) {
	reg := Registry()
	if got := strings.Join(reg.Names(), ","); got != "gpio,mqtt,virtual" {
		t.Fatalf("registered drivers = %s", got)
	}
	for _, name := range []string{"gpio", "virtual"} {
		r, _ := reg.Lookup(name)
		if r.Section {
			t.Errorf("%s claims a settings section it does not take", name)
		}
		if _, err := r.New(drivers.Env{}); err != nil {
			t.Errorf("%s without settings: %v", name, err)
		}
	}
	// mqtt needs its broker section: a clear error, not a panic.
	r, _ := reg.Lookup("mqtt")
	if !r.Section {
		t.Error("mqtt does not claim its mqtt: section")
	}
	if _, err := r.New(drivers.Env{}); err == nil || !strings.Contains(err.Error(), "mqtt") {
		t.Errorf("mqtt without settings: %v", err)
	}
}
