//go:build unix

package store

import "syscall"

// replaced reports whether the -shm file open in w is no longer the one
// at its path: deleted or renamed over, it has no links left. An fstat of
// the open file rather than a stat of its path: this runs on every API
// request, and the path lookup was half its cost.
func (w *accessCache) replaced() bool {
	st, err := w.shm.Stat()
	if err != nil {
		return true
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	return !ok || sys.Nlink == 0
}
