// Package porttest picks loopback ports for the servers tests start as
// processes of their own (switchbridge serve, Mosquitto, PostgreSQL), and
// tells when such a server could not listen because its port was taken.
//
// A port is free when it is picked, but the server binds it later: in
// between, another process may take it (another package's tests picking
// ports the same way, a daemon they started, an outgoing connection's
// local port). The helpers that start servers therefore start one again on
// a fresh port, up to Attempts times, when its output says InUse.
package porttest

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// Attempts is how many starts on fresh ports a helper makes before it
// gives up on a server whose ports keep being taken.
const Attempts = 5

var given struct {
	mu    sync.Mutex
	ports map[int]bool
}

// Free returns a loopback TCP port that nothing listens on now, that this
// process has not handed out before, and that is none of avoid (the
// standard port of a service the machine may run, say). Two picks in one
// test process never name the same port, even once the first is closed
// again; a port picked in another process may still be.
func Free(avoid ...int) (int, error) {
	given.mu.Lock()
	defer given.mu.Unlock()
	if given.ports == nil {
		given.ports = map[int]bool{}
	}
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if given.ports[port] || avoided(port, avoid) {
			continue
		}
		given.ports[port] = true
		return port, nil
	}
	return 0, errors.New("porttest: no free loopback port that was not handed out already")
}

func avoided(port int, avoid []int) bool {
	for _, a := range avoid {
		if a == port {
			return true
		}
	}
	return false
}

// inUse matches what a server writes when the address it was to listen
// on is taken: Go's and PostgreSQL's strerror (EADDRINUSE, "bind:
// address already in use", "could not bind IPv4 address ...: Address
// already in use"), Mosquitto's "Error: Address already in use" and
// Node-RED's "port in use".
var inUse = regexp.MustCompile(`(?i)address already in use|\bEADDRINUSE\b|\bport in use\b`)

// InUse reports whether a server's output (its stderr or log) says that
// it could not listen because its address was taken.
func InUse(output string) bool { return inUse.MatchString(output) }

// Squat takes addr ("127.0.0.1:0" for any port), as another process may
// between the pick of a port and a server's bind, with a listener that
// accepts connections and drops them (so a start that only waited for a
// connection to succeed would take it for its server), until the test
// ends. It returns the address taken.
func Squat(tb testing.TB, addr string) *net.TCPAddr {
	tb.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr)
}

// LogRecorder is a testing.TB that keeps what is logged to it, for a test
// of what a helper says while it starts a server.
type LogRecorder struct {
	testing.TB
	mu   sync.Mutex
	logs []string
}

// Logf logs to the test and keeps the line.
func (r *LogRecorder) Logf(format string, args ...any) {
	r.mu.Lock()
	r.logs = append(r.logs, fmt.Sprintf(format, args...))
	r.mu.Unlock()
	r.TB.Logf(format, args...)
}

// Text is every line kept so far.
func (r *LogRecorder) Text() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.logs, "\n")
}
