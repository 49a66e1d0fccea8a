//go:build unix

package adopt

import (
	"os"
	"syscall"
)

// chownLike gives f the owner and group of fi's file, where they differ
// from f's and this process may: root running adopt leaves the config
// root:switchbridge, as the package installs it. Only root may give a
// file away, so the service (the console's Adopt, in a directory its
// group may write) keeps the new file as its own, with the config's
// group, which it belongs to.
func chownLike(f *os.File, fi os.FileInfo) error {
	want, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	have, err := f.Stat()
	if err != nil {
		return err
	}
	h, ok := have.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	uid := int(want.Uid)
	if os.Geteuid() != 0 {
		uid = -1
	}
	if h.Gid == want.Gid && (uid == -1 || h.Uid == want.Uid) {
		return nil
	}
	return f.Chown(uid, int(want.Gid))
}
