package pgtest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// templateDir is where a cluster fresh from initdb is kept for later test
// processes, which copy it instead of running initdb again: about 0.6 s
// of CPU on a small machine against well under 0.1 s for the copy, paid
// by every test binary that uses PostgreSQL. The name holds the version
// and a digest of the installation and initdb's arguments, so a cluster
// made differently is never picked up. Empty when there is no cache
// directory.
func templateDir(b binaries) string {
	cache, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	h := sha256.Sum256([]byte(b.dir + "\x00" + strings.Join(initdbArgs, "\x00")))
	return filepath.Join(cache, "switchbridge-pgtest", b.version+"-"+hex.EncodeToString(h[:6]))
}

// saveTemplate copies a new cluster into the cache. The copy is made
// beside its final name and renamed into place, so a concurrent test
// process sees a whole template or none; when two make one at once, the
// second rename fails and its copy is dropped. Failure only costs the
// next process an initdb, so it is not reported.
func saveTemplate(data, tmpl string) {
	parent := filepath.Dir(tmpl)
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return
	}
	staging, err := os.MkdirTemp(parent, ".staging-")
	if err != nil {
		return
	}
	defer os.RemoveAll(staging)
	if err := copyTree(data, filepath.Join(staging, "data"), nil); err != nil {
		return
	}
	_ = os.Rename(filepath.Join(staging, "data"), tmpl)
}

// Templates another installation of PostgreSQL made (an older version
// after an upgrade, say) are removed once unused for templateUnused, and
// copies a test process left behind when killed mid-save after
// stagingLeft; each template's mtime is set at every use. A process that
// was copying a template removed under it makes its cluster with initdb.
const (
	templateUnused = 7 * 24 * time.Hour
	stagingLeft    = time.Hour
)

// pruneTemplates removes from tmpl's parent the templates other than tmpl
// unused for templateUnused and the staging copies older than
// stagingLeft, and notes that tmpl is in use. Nothing it fails at is
// reported: the cache only saves time.
func pruneTemplates(tmpl string, now time.Time) {
	os.Chtimes(tmpl, now, now)
	parent := filepath.Dir(tmpl)
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range entries {
		path := filepath.Join(parent, e.Name())
		info, err := e.Info()
		if err != nil || path == tmpl || !e.IsDir() {
			continue
		}
		age := now.Sub(info.ModTime())
		if strings.HasPrefix(e.Name(), ".staging-") && age > stagingLeft || !strings.HasPrefix(e.Name(), ".") && age > templateUnused {
			os.RemoveAll(path)
		}
	}
}

// copyTree copies the directory src to dst, which must not exist, keeping
// permission bits (PostgreSQL refuses a data directory others can read),
// and gives everything to cred's user when cred is set.
func copyTree(src, dst string, cred *syscall.Credential) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			if err := os.Mkdir(target, 0o700); err != nil {
				return err
			}
			// Mkdir's mode passes through the umask; Chmod does not.
			if err := os.Chmod(target, info.Mode().Perm()); err != nil {
				return err
			}
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			if err := os.Symlink(link, target); err != nil {
				return err
			}
		case d.Type().IsRegular():
			if err := copyFile(path, target, info.Mode().Perm()); err != nil {
				return err
			}
		default:
			return &fs.PathError{Op: "copy", Path: path, Err: errors.New("not a file, directory or link")}
		}
		if cred != nil {
			return os.Lchown(target, int(cred.Uid), int(cred.Gid))
		}
		return nil
	})
}

func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Chmod(dst, perm)
}

// shmDir is the usual tmpfs mount on Linux.
const shmDir = "/dev/shm"

// shmMinFree is the free space that makes shmDir worth using; a container's
// default of 64 MB holds one cluster and little more.
const shmMinFree = 2 << 30

// parentDir is where servers' directories go: in memory when a large
// enough tmpfs is there, else the temporary directory. On ext4, copying
// a cluster took about a second and CREATE DATABASE 0.3 s, most of it
// allocating inodes among those that earlier tests deleted; on tmpfs the
// same took 0.07 s and 0.035 s. The data is thrown away after the test,
// so memory loses nothing.
func parentDir() string {
	var st syscall.Statfs_t
	const tmpfsMagic = 0x01021994
	if err := syscall.Statfs(shmDir, &st); err == nil && st.Type == tmpfsMagic && st.Bavail*uint64(st.Bsize) >= shmMinFree {
		if fi, err := os.Stat(shmDir); err == nil && fi.Mode().Perm()&0o003 == 0o003 {
			return shmDir
		}
	}
	return os.TempDir()
}

var sweepOnce sync.Once

// sweepStale removes the directories of servers whose test binary is gone
// (killed, or ended without StopShared) and whose postmaster has exited,
// as it does when its parent dies. A directory whose owner or postmaster
// still runs, or that has no owner file yet, is left alone.
func sweepStale(parent string) {
	dirs, _ := filepath.Glob(filepath.Join(parent, dirPrefix+"*"))
	for _, dir := range dirs {
		owner, ok := pidIn(filepath.Join(dir, "owner"))
		if !ok || alive(owner) {
			continue
		}
		if pm, ok := pidIn(filepath.Join(dir, "data", "postmaster.pid")); ok && alive(pm) {
			continue
		}
		os.RemoveAll(dir)
	}
}

// pidIn reads the process id on the first line of a file.
func pidIn(path string) (int, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	return pid, err == nil && pid > 0
}

// alive reports whether a process runs. A zombie does not: an orphaned
// postmaster that has exited stays one where PID 1 does not reap (a
// container's shell, say).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// "pid (comm) S ...": the state follows the last parenthesis, as comm
	// may hold one.
	if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2] != 'Z'
	}
	return true
}
