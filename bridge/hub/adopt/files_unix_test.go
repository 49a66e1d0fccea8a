//go:build unix

package adopt

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// The service's user and group in TestWriteAsTheService: ids no account
// on the machine needs to have.
const serviceUID, serviceGID = 4242, 4243

// TestWriteAsTheService replaces a packaged config as the service does
// when an owner adopts a plug from the console: not root, in a
// directory its group may write (root:switchbridge 0770, as the package
// makes /etc/switchbridge), the config root:switchbridge 0640. The new
// file and the backup keep the config's mode and group, so the service
// reads them; their owner is the service (only root gives a file away).
// In a directory its group may only read, the write fails as permission
// denied, which the console turns into the command to run instead.
func TestWriteAsTheService(t *testing.T) {
	if path := os.Getenv("SWITCHBRIDGE_TEST_WRITE_AS_SERVICE"); path != "" {
		if err := writeFileAtomic(path+".bak", []byte("old\n"), path); err != nil {
			t.Fatalf("backup: %v (permission: %v)", err, errors.Is(err, fs.ErrPermission))
		}
		if err := writeFileAtomic(path, []byte("new\n"), path); err != nil {
			t.Fatalf("config: %v (permission: %v)", err, errors.Is(err, fs.ErrPermission))
		}
		return
	}
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true: this test needs root, to run a process as another user")
		}
		t.Skip("needs root, to run a process as another user")
	}
	if os.Getenv("SWITCHBRIDGE_TEST_EMULATED") != "" {
		t.Skip("runs the test binary as a process")
	}
	// The test binary, where the service's user may run it.
	base := t.TempDir()
	for _, d := range []string{filepath.Dir(base), base} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(base, "adopt.test")
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	asService := func(path string) (string, error) {
		cmd := exec.Command(bin, "-test.run=^TestWriteAsTheService$", "-test.count=1")
		cmd.Env = []string{"SWITCHBRIDGE_TEST_WRITE_AS_SERVICE=" + path}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: serviceUID, Gid: serviceGID}}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	packaged := func(dirMode os.FileMode) string {
		t.Helper()
		dir, err := os.MkdirTemp(base, "etc")
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "config.yaml")
		if err := os.WriteFile(path, []byte("old\n"), 0o640); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{dir, path} {
			if err := os.Chown(p, 0, serviceGID); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chmod(dir, dirMode); err != nil {
			t.Fatal(err)
		}
		return path
	}

	path := packaged(0o770)
	if out, err := asService(path); err != nil {
		t.Fatalf("the service could not replace its config: %v\n%s", err, out)
	}
	for file, want := range map[string]string{path: "new\n", path + ".bak": "old\n"} {
		b, err := os.ReadFile(file)
		if err != nil || string(b) != want {
			t.Errorf("%s holds %q (%v), want %q", file, b, err, want)
		}
		fi, err := os.Stat(file)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if fi.Mode().Perm() != 0o640 || st.Uid != serviceUID || st.Gid != serviceGID {
			t.Errorf("%s is %o %d:%d, want 640 %d:%d", file, fi.Mode().Perm(), st.Uid, st.Gid, serviceUID, serviceGID)
		}
	}

	path = packaged(0o750)
	out, err := asService(path)
	if err == nil || !strings.Contains(out, "permission: true") {
		t.Errorf("in a directory the service may not write: %v\n%s", err, out)
	}
	if b, _ := os.ReadFile(path); string(b) != "old\n" {
		t.Errorf("the refused write changed the config: %q", b)
	}
}
