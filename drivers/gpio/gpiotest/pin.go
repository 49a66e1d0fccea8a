// Package gpiotest is the gpio driver's fake lines, for its own tests and
// for the daemon's that run it whole: periph's gpiotest pins registered in
// gpioreg, guarded against the calls that would switch a real relay, and
// recording what the driver did to them. Use it with gpio.NewHostless,
// which reaches the registered lines without periph's host drivers.
package gpiotest

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"periph.io/x/conn/v3/gpio"
	"periph.io/x/conn/v3/gpio/gpioreg"
	periphtest "periph.io/x/conn/v3/gpio/gpiotest"
	"periph.io/x/conn/v3/pin"
)

// Pin is a gpiotest pin that fails the test if the driver reads an
// output line, asks its function or turns it back into an input: with
// periph's gpioioctl lines each of these can switch a relay on. It also
// records every level written and every In call, and counts Close calls the
// way a gpioioctl line offers them.
type Pin struct {
	*periphtest.Pin
	// Report is called with each misuse; NewPin sets it to the test's
	// Errorf.
	Report func(format string, args ...any)

	mu     sync.Mutex
	output bool
	outs   []gpio.Level
	ins    []InCall
	closes int
	outErr error // returned by the next Out
}

// InCall is one call of In: the pull and edge it asked for.
type InCall struct {
	Pull gpio.Pull
	Edge gpio.Edge
}

func (g *Pin) isOutput(op string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.output {
		g.Report("%s() called on output line %s: periph's gpioioctl would turn it into a pulled-up input", op, g.N)
	}
	return g.output
}

func (g *Pin) Out(l gpio.Level) error {
	g.mu.Lock()
	if err := g.outErr; err != nil {
		g.outErr = nil
		g.mu.Unlock()
		return err
	}
	g.output = true
	g.outs = append(g.outs, l)
	g.mu.Unlock()
	return g.Pin.Out(l)
}

func (g *Pin) Read() gpio.Level {
	g.isOutput("Read")
	return g.Pin.Read()
}

func (g *Pin) Func() pin.Func {
	g.isOutput("Func")
	return g.Pin.Func()
}

func (g *Pin) Function() string {
	g.isOutput("Function")
	return g.Pin.Function()
}

func (g *Pin) In(pull gpio.Pull, edge gpio.Edge) error {
	if g.isOutput("In") {
		return fmt.Errorf("In on an output line")
	}
	g.mu.Lock()
	g.ins = append(g.ins, InCall{pull, edge})
	g.mu.Unlock()
	return g.Pin.In(pull, edge)
}

// Close releases the line, as gpioioctl's GPIOLine.Close does.
func (g *Pin) Close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closes++
	g.output = false
}

// FailNextOut makes the next Out return err, as a line another process
// holds does.
func (g *Pin) FailNextOut(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.outErr = err
}

// Writes lists every level the driver wrote, in order.
func (g *Pin) Writes() []gpio.Level {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]gpio.Level(nil), g.outs...)
}

// InCalls lists every In call, in order.
func (g *Pin) InCalls() []InCall {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]InCall(nil), g.ins...)
}

// Closes counts how often the line was released.
func (g *Pin) Closes() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.closes
}

// Level is the level the line is at.
func (g *Pin) Level() gpio.Level {
	g.Pin.Lock()
	defer g.Pin.Unlock()
	return g.Pin.L
}

// Set changes the level the fake hardware presents.
func (g *Pin) Set(l gpio.Level) {
	g.Pin.Lock()
	g.Pin.L = l
	g.Pin.Unlock()
}

var pinSeq atomic.Int64

// NewPin registers a guarded gpiotest pin in gpioreg under a name no other
// test uses (the registry is global) and removes it when the test ends.
// With edges, the pin reports edges sent on its EdgesChan.
func NewPin(t *testing.T, edges bool) *Pin {
	t.Helper()
	n := pinSeq.Add(1)
	p := &Pin{Pin: &periphtest.Pin{N: fmt.Sprintf("TGPIO%d", n), Num: int(n)}, Report: t.Errorf}
	if edges {
		p.EdgesChan = make(chan gpio.Level)
	}
	if err := gpioreg.Register(p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := gpioreg.Unregister(p.N); err != nil {
			t.Error(err)
		}
	})
	return p
}
