// Package builtin lists the drivers compiled into switchbridge. Adding a
// driver is one folder under drivers/ and one line here.
package builtin

import (
	"github.com/switchbridge/switchbridge/drivers"
	"github.com/switchbridge/switchbridge/drivers/gpio"
	"github.com/switchbridge/switchbridge/drivers/mqtt"
	"github.com/switchbridge/switchbridge/drivers/virtual"
)

// Registry returns the built-in drivers by the name a config uses.
func Registry() drivers.Registry {
	return drivers.Registry{
		"gpio":    gpio.New,
		"mqtt":    mqtt.New,
		"virtual": virtual.New,
	}
}
