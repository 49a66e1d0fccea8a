package pgtest

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// debianBinaries is where Debian's postgresql-<major> packages put the
// server programs; they are not on PATH there.
const debianBinaries = "/usr/lib/postgresql/*/bin"

// minMajor is the oldest PostgreSQL the package works with: DROP DATABASE
// ... WITH (FORCE) came in 13.
const minMajor = 13

type binaries struct {
	dir     string // holds initdb and postgres
	version string // as postgres --version prints it, e.g. "15.20"
}

// findBinaries looks for initdb on PATH first, so that a developer can
// choose an installation, then in Debian's directories, the highest major
// version first. postgres must be beside initdb: that is where initdb
// itself looks for it.
func findBinaries() (binaries, error) {
	var dirs []string
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			dirs = append(dirs, filepath.Dir(real))
		}
	}
	found, _ := filepath.Glob(debianBinaries)
	newestFirst(found)
	dirs = append(dirs, found...)
	if len(dirs) == 0 {
		return binaries{}, fmt.Errorf("initdb is neither on PATH nor in %s", debianBinaries)
	}
	var errs []error
	for _, dir := range dirs {
		b, err := checkBinaries(dir)
		if err == nil {
			return b, nil
		}
		errs = append(errs, err)
	}
	return binaries{}, errors.Join(errs...)
}

func checkBinaries(dir string) (binaries, error) {
	for _, name := range []string{"initdb", "postgres"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return binaries{}, err
		}
	}
	// postgres answers --version before its refusal to run as root.
	out, err := exec.Command(filepath.Join(dir, "postgres"), "--version").Output()
	if err != nil {
		return binaries{}, fmt.Errorf("%s --version: %v", filepath.Join(dir, "postgres"), err)
	}
	// "postgres (PostgreSQL) 15.20 (Debian 15.20-0+deb12u1)"
	f := strings.Fields(string(out))
	if len(f) < 3 {
		return binaries{}, fmt.Errorf("%s --version printed %q", filepath.Join(dir, "postgres"), out)
	}
	version := f[2]
	major, err := strconv.Atoi(strings.SplitN(version, ".", 2)[0])
	if err != nil || major < minMajor {
		return binaries{}, fmt.Errorf("%s is PostgreSQL %s; %d or later is needed", dir, version, minMajor)
	}
	return binaries{dir: dir, version: version}, nil
}

// newestFirst sorts /usr/lib/postgresql/<version>/bin paths by version,
// the highest first.
func newestFirst(dirs []string) {
	slices.SortFunc(dirs, func(a, b string) int { return versionCmp(b, a) })
}

// versionCmp orders /usr/lib/postgresql/<version>/bin paths by version:
// "9.6" before "13" before "15".
func versionCmp(a, b string) int {
	va := strings.Split(filepath.Base(filepath.Dir(a)), ".")
	vb := strings.Split(filepath.Base(filepath.Dir(b)), ".")
	for i := 0; i < len(va) && i < len(vb); i++ {
		x, _ := strconv.Atoi(va[i])
		y, _ := strconv.Atoi(vb[i])
		if x != y {
			return cmp.Compare(x, y)
		}
	}
	return cmp.Compare(len(va), len(vb))
}

// unprivileged is whom initdb and postgres run as: ourselves, unless we
// are root, which PostgreSQL refuses; then the postgres system user, or
// nobody where there is none. Supplementary groups are dropped with root.
func unprivileged() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 != nil || err2 != nil || uid == 0 {
			continue
		}
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
	}
	return nil, errors.New("running as root, and there is neither a postgres nor a nobody user to run PostgreSQL as")
}

// searchable checks that the server's user can reach dir: a temporary
// directory under a root-only parent (TMPDIR=/root/tmp) would make initdb
// fail with a less helpful message. Only the permission bits are read;
// ACLs and supplementary groups are not considered.
func searchable(dir string, cred *syscall.Credential) error {
	if cred == nil {
		return nil
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	for p := dir; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if ok {
			perm := fi.Mode().Perm()
			var can bool
			switch {
			case st.Uid == cred.Uid:
				can = perm&0o100 != 0
			case st.Gid == cred.Gid:
				can = perm&0o010 != 0
			default:
				can = perm&0o001 != 0
			}
			if !can {
				return fmt.Errorf("PostgreSQL runs as uid %d, which cannot reach %s (%v); set TMPDIR to a directory it can", cred.Uid, p, perm)
			}
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}
