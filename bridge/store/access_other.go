//go:build !unix

package store

import "os"

// replaced reports whether the -shm file open in w is no longer the one
// at its path.
func (w *accessCache) replaced() bool {
	st, err := os.Stat(w.path)
	return err != nil || !os.SameFile(st, w.id)
}
