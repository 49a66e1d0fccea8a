//go:build !linux

package daemon_test

import "net"

// queued is not known off Linux: the caller reads with a deadline instead.
func queued(net.Conn) (int, bool) { return 0, false }
