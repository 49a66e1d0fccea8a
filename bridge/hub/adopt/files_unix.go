//go:build unix

package adopt

import (
	"os"
	"syscall"
)

// chownLike gives f the owner and group of fi's file, when they differ
// from f's: root running adopt must leave the config the service's group
// can read.
func chownLike(f *os.File, fi os.FileInfo) error {
	want, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	have, err := f.Stat()
	if err != nil {
		return err
	}
	if h, ok := have.Sys().(*syscall.Stat_t); ok && h.Uid == want.Uid && h.Gid == want.Gid {
		return nil
	}
	return f.Chown(int(want.Uid), int(want.Gid))
}
