package main

import (
	"fmt"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/switchbridge/switchbridge/bridge/infra/version"
)

// TestVersionCommand: version and --version print the version, the commit
// and the Go release, as bridge/infra/version has them.
func TestVersionCommand(t *testing.T) {
	want := "switchbridge " + version.Get().String() + "\n"
	for _, arg := range []string{"version", "--version"} {
		r := runCLI(t, "", arg)
		if r.code != 0 || r.stdout != want {
			t.Errorf("%s: exit %d, stdout %q, want %q (stderr %q)", arg, r.code, r.stdout, want, r.stderr)
		}
	}
	if r := runCLI(t, "", "version", "extra"); r.code != 2 {
		t.Errorf("version extra: exit %d, want 2", r.code)
	}
}

// TestPermissionHint: a config or data directory the command may not
// read names the fix. The packaged case (a user without sudo) runs for
// real in systemd's package test; this covers the wording, and, when the
// tests do not run as root, a real unreadable config.
func TestPermissionHint(t *testing.T) {
	cfgErr := fmt.Errorf("reading config: %w", &fs.PathError{Op: "open", Path: "/etc/switchbridge/config.yaml", Err: syscall.EACCES})
	if h := permissionHint(cfgErr); !strings.Contains(h, "sudo") || !strings.Contains(h, "/etc/switchbridge/config.yaml") || !strings.Contains(h, "switchbridge group") {
		t.Errorf("config: %q", h)
	}
	dataErr := fmt.Errorf("data dir /var/lib/switchbridge: making it private (-rwx------): %w", &fs.PathError{Op: "chmod", Path: "/var/lib/switchbridge", Err: syscall.EPERM})
	if h := permissionHint(dataErr); !strings.Contains(h, "sudo") || !strings.Contains(h, "/var/lib/switchbridge") {
		t.Errorf("data dir: %q", h)
	}
	if h := permissionHint(fmt.Errorf("reading config: %w", fs.ErrNotExist)); h != "" {
		t.Errorf("not a permission error, but hint %q", h)
	}

	if os.Geteuid() == 0 {
		t.Log("running as root, which reads any file: the real unreadable config is checked by the package test")
		return
	}
	cfg, _ := writeConfig(t, t.TempDir())
	if err := os.Chmod(cfg, 0); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, "", "user", "list", "--config", cfg)
	if r.code != 1 || !strings.Contains(r.stderr, "permission denied: "+cfg) || !strings.Contains(r.stderr, "sudo") {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
}
