package daemon_test

import (
	"net"

	"golang.org/x/sys/unix"
)

// queued is how many bytes wait unread in c's socket (SIOCINQ): what
// the peer wrote before now, whenever this goroutine gets to run.
func queued(c net.Conn) (int, bool) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return 0, false
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return 0, false
	}
	n, ierr := 0, error(nil)
	if err := raw.Control(func(fd uintptr) { n, ierr = unix.IoctlGetInt(int(fd), unix.SIOCINQ) }); err != nil || ierr != nil {
		return 0, false
	}
	return n, true
}
