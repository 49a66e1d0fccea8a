package gpio

import (
	"testing"

	"periph.io/x/conn/v3/gpio"

	"github.com/switchbridge/switchbridge/drivers"
)

// NewOnFakeHost is New on gpioreg's registered pins with no periph host
// driver loaded, for the tests that run the whole daemon.
func NewOnFakeHost(env drivers.Env) (drivers.Driver, error) {
	return newDriver(env, (&fakeHost{}).platform())
}

// TestPin is a guarded gpiotest pin registered in gpioreg.
type TestPin = guardPin

// NewTestPin registers a guarded pin for the test.
func NewTestPin(t *testing.T, edges bool) *TestPin { return newPin(t, edges) }

// Level is the level the line is at.
func (g *guardPin) Level() gpio.Level { return g.level() }

// Set changes the level the fake hardware presents.
func (g *guardPin) Set(l gpio.Level) { g.set(l) }

// Writes lists every level the driver wrote, in order.
func (g *guardPin) Writes() []gpio.Level { return g.writes() }

// Closes counts how often the line was released.
func (g *guardPin) Closes() int { return g.closeCount() }
