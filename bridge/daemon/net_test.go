package daemon_test

import (
	"net"
	"testing"
)

type net0 struct{}

func (net0) listen() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }

// occupiedAddr returns a loopback address something is listening on for
// the rest of the test.
func occupiedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String()
}
