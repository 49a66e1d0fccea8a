//go:build unix

package store

import (
	"errors"
	"io/fs"
	"os"

	xunix "golang.org/x/sys/unix"
)

// sqliteShmDMS is the byte of a WAL database's -shm file on which every
// connection holds a shared lock while it is open ("DMS", UNIX_SHM_DMS in
// SQLite's unix VFS: 120 + 8 lock bytes). The first connection takes it
// exclusively to tell whether it is alone.
const sqliteShmDMS = 128

// InUse reports whether another process has the SQLite database at path
// open, and which: a running daemon, or an administration command of the
// moment. It asks the kernel who holds SQLite's lock on the -shm file
// (F_GETLK, which takes no lock itself); this process's own connections
// are not seen. A database without a -shm file is open nowhere, in WAL
// mode.
func InUse(path string) (pid int, inUse bool, err error) {
	f, err := os.Open(path + "-shm")
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	defer f.Close()
	lk := xunix.Flock_t{Type: xunix.F_WRLCK, Whence: 0, Start: sqliteShmDMS, Len: 1}
	if err := xunix.FcntlFlock(f.Fd(), xunix.F_GETLK, &lk); err != nil {
		return 0, false, err
	}
	if lk.Type == xunix.F_UNLCK {
		return 0, false, nil
	}
	return int(lk.Pid), true, nil
}
