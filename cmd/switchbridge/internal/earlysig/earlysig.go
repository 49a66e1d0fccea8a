// Package earlysig catches SIGHUP from the first moments of the process,
// before the rest of the program has initialised, and hands what it caught
// to main. Until a program asks for SIGHUP, the Go runtime's answer to it
// is to exit, and systemd counts a death by SIGHUP as a clean exit; the
// packages main imports take milliseconds to initialise (many more on a
// loaded or slow board), and a reload asked for in that window used to end
// the hub.
//
// It imports nothing but os/signal and the packages os/signal itself
// imports, so that its init runs as soon as os/signal's has: Go
// initialises packages in import path order, each once everything it
// imports has been, so a package whose imports are done that early, and
// whose path sorts before those that become ready at the same time, is
// initialised before any of the heavy ones (the database, TLS, metrics,
// MQTT). TestEarlySignalInit (cmd/switchbridge) checks that order.
package earlysig

import (
	"os"
	"os/signal"
	"syscall"
)

// caught receives the SIGHUPs that arrive before Handover. Its room is
// only what a burst needs: signal.Notify drops a signal the channel has
// no room for, and the daemon coalesces reloads anyway.
var caught = make(chan os.Signal, 16)

func init() {
	signal.Notify(caught, syscall.SIGHUP)
}

// Handover stops catching SIGHUP here and returns how many arrived since
// the process started (at most 16 are counted). Call it after the
// program's own signal.Notify for SIGHUP: a SIGHUP that arrives between
// the two is then seen by both, never by neither. A later call returns 0.
func Handover() int {
	signal.Stop(caught)
	n := 0
	for {
		select {
		case <-caught:
			n++
		default:
			return n
		}
	}
}
