package adopt

import (
	"os"
	"path/filepath"
)

// writeFileAtomic replaces path with data: a temporary file in the same
// directory, synced, then renamed over it, so a crash leaves the old file
// or the new one, never a part. It takes the mode, owner and group of
// like (the config, root:switchbridge 0640 when packaged), so the service
// can still read it.
func writeFileAtomic(path string, data []byte, like string) error {
	fi, err := os.Stat(like)
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // after the rename, a no-op
	if err := f.Chmod(fi.Mode().Perm()); err != nil {
		f.Close()
		return err
	}
	if err := chownLike(f, fi); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return err
	}
	// The rename itself is durable once the directory is.
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}
