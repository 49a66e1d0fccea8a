// Package builtin lists the drivers compiled into switchbridge. Adding a
// driver is one folder under drivers/, its import and one line here, and
// its row in the README's driver table (TestRegistry checks the two agree).
package builtin

import (
	"github.com/switchbridge/switchbridge/drivers"
	"github.com/switchbridge/switchbridge/drivers/gpio"
	"github.com/switchbridge/switchbridge/drivers/mqtt"
	"github.com/switchbridge/switchbridge/drivers/virtual"
)

// Registry returns the built-in drivers, one line each.
func Registry() drivers.Registry {
	return drivers.Registry{
		gpio.Registration(),
		mqtt.Registration(),
		virtual.Registration(),
	}
}
