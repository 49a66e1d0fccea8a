package systemd

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/switchbridge/switchbridge/bridge/config"
)

const (
	unitFile     = "switchbridge.service"
	sysusersFile = "switchbridge.sysusers"
	installedBin = "/usr/bin/switchbridge" // where the package installs it
	// maxExposure is the highest "Overall exposure level" that
	// systemd-analyze security may give the unit (0 is best, 10 worst).
	maxExposure = 2.0
)

// tool finds a systemd tool. Without it the test skips, except under CI,
// where a skipped check would let a regression through.
func tool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s not found (CI=true): install systemd", name)
		}
		t.Skipf("%s not found: install systemd to run this check", name)
	}
	return p
}

// run runs a tool with colours and pagers off, so its output parses.
func run(t *testing.T, name string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "SYSTEMD_COLORS=0", "SYSTEMD_PAGER=cat", "LC_ALL=C")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// directives reads a unit or sysusers file into key → values, in order.
func directives(t *testing.T, path string) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' || line[0] == '[' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: not a directive: %q", path, line)
		}
		out[k] = append(out[k], v)
	}
	return out
}

var exposureRE = regexp.MustCompile(`Overall exposure level for \S+: ([0-9]+(?:\.[0-9]+)?)`)

func TestSecurityExposure(t *testing.T) {
	analyze := tool(t, "systemd-analyze")
	out, err := run(t, analyze, "security", "--offline=true", "--no-pager", unitFile)
	if err != nil {
		t.Fatalf("systemd-analyze security: %v\n%s", err, out)
	}
	m := exposureRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no overall exposure level in:\n%s", out)
	}
	score, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("exposure level %.1f", score)
	if score > maxExposure {
		t.Errorf("exposure level %.1f, want %.1f or lower:\n%s", score, maxExposure, out)
	}
}

// TestVerify runs systemd-analyze verify. Verify insists that ExecStart
// names an existing executable, and switchbridge is not installed where
// tests run, so it checks a copy whose ExecStart points at this test binary
// with the same arguments; every other line is the shipped unit's.
func TestVerify(t *testing.T) {
	analyze := tool(t, "systemd-analyze")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	const execLine = "ExecStart=" + installedBin + " "
	if n := bytes.Count(b, []byte("\n"+execLine)); n != 1 {
		t.Fatalf("want one line starting %q, found %d", execLine, n)
	}
	copied := bytes.Replace(b, []byte("\n"+execLine), []byte("\nExecStart="+self+" "), 1)
	path := filepath.Join(t.TempDir(), unitFile)
	if err := os.WriteFile(path, copied, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, analyze, "verify", path)
	// verify exits 0 on unknown keys and the like but prints them.
	if err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// TestUnitShape pins the settings the hub relies on, so a tidy-up that
// keeps the score but breaks start-up or GPIO access fails here.
func TestUnitShape(t *testing.T) {
	d := directives(t, unitFile)
	for key, want := range map[string]string{
		"Type":                   "notify",
		"Restart":                "on-failure",
		"User":                   "switchbridge",
		"Group":                  "switchbridge",
		"StateDirectory":         "switchbridge",
		"ConfigurationDirectory": "switchbridge",
		// The package's mode for /etc/switchbridge (systemd/deb/nfpm.yaml).
		"ConfigurationDirectoryMode": "0770",
		"SupplementaryGroups":        "gpio",
		"DevicePolicy":               "closed",
		"DeviceAllow":                "char-gpiochip rw",
		// checked separately below: DeviceAllow is set twice
		"NoNewPrivileges":       "yes",
		"CapabilityBoundingSet": "",
		"ProtectSystem":         "strict",
		"ReadWritePaths":        "/etc/switchbridge",
		"UMask":                 "0077",
		"ExecStart":             installedBin + " serve --config /etc/switchbridge/config.yaml",
	} {
		if !slices.Contains(d[key], want) {
			t.Errorf("%s=%q not set (have %q)", key, want, d[key])
		}
	}
	if !slices.Contains(d["DeviceAllow"], "/dev/gpiomem rw") {
		t.Errorf("DeviceAllow=/dev/gpiomem rw not set (have %q)", d["DeviceAllow"])
	}
	// A death by SIGHUP is a clean exit to systemd: without this a SIGHUP
	// in the first moments after exec would leave the hub down.
	if !slices.ContainsFunc(d["RestartForceExitStatus"], func(v string) bool {
		return slices.Contains(strings.Fields(v), "SIGHUP") || slices.Contains(strings.Fields(v), "HUP")
	}) {
		t.Errorf("RestartForceExitStatus must list SIGHUP, have %q", d["RestartForceExitStatus"])
	}
	if len(d["WatchdogSec"]) != 1 || d["WatchdogSec"][0] == "" || d["WatchdogSec"][0] == "0" {
		t.Errorf("WatchdogSec must be set once to a non-zero interval, have %q", d["WatchdogSec"])
	}
	// The cgroup's memory limits must leave room above the daemon's own
	// soft limit, or the kernel throttles before Go's collector acts.
	high, max := unitBytes(t, d, "MemoryHigh"), unitBytes(t, d, "MemoryMax")
	if high < config.DefaultMemoryLimit*3/2 || max <= high || max > 512<<20 {
		t.Errorf("MemoryHigh=%d MemoryMax=%d: want 1.5 × server.memory_limit's default (%d) <= MemoryHigh < MemoryMax <= 512M",
			high, max, config.DefaultMemoryLimit)
	}
	// The user exists (the package creates it); DynamicUser= would move
	// the data under /var/lib/private.
	if slices.Contains(d["DynamicUser"], "yes") {
		t.Error("DynamicUser=yes: the packaged unit runs as the static user switchbridge.sysusers creates")
	}
	// PrivateDevices=yes would hide /dev/gpiochip*.
	if slices.Contains(d["PrivateDevices"], "yes") || slices.Contains(d["PrivateDevices"], "true") {
		t.Error("PrivateDevices=yes hides /dev/gpiochip*")
	}
	if slices.ContainsFunc(d["RestrictAddressFamilies"], func(v string) bool { return !strings.Contains(v, "AF_UNIX") }) {
		t.Error("RestrictAddressFamilies must keep AF_UNIX for sd_notify and the journal")
	}
}

// TestSysusers checks that systemd-sysusers accepts the snippet and that it
// creates the user the unit runs as and the group it joins.
func TestSysusers(t *testing.T) {
	d := directives(t, unitFile)
	abs, err := filepath.Abs(sysusersFile)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(abs)
	if err != nil {
		t.Fatal(err)
	}
	entries := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && !strings.HasPrefix(f[0], "#") {
			entries[f[0]+" "+f[1]] = true
		}
	}
	if len(d["User"]) != 1 {
		t.Fatalf("User= must be set once, have %q", d["User"])
	}
	user := d["User"][0]
	if !entries["u "+user] {
		t.Errorf("%s creates no user %q", sysusersFile, user)
	}
	for _, g := range strings.Fields(strings.Join(d["SupplementaryGroups"], " ")) {
		if !entries["g "+g] {
			t.Errorf("%s creates no group %q, which SupplementaryGroups= needs", sysusersFile, g)
		}
	}

	sysusers := tool(t, "systemd-sysusers")
	out, err := run(t, sysusers, "--root="+t.TempDir(), "--dry-run", abs)
	if err != nil {
		t.Fatalf("systemd-sysusers: %v\n%s", err, out)
	}
	if !strings.Contains(out, "Creating user '"+user+"'") {
		t.Errorf("systemd-sysusers would not create user %q:\n%s", user, out)
	}
}

// unitBytes reads a size directive set once, such as MemoryHigh=192M
// (suffixes K, M, G: powers of 1024, as systemd reads them).
func unitBytes(t *testing.T, d map[string][]string, key string) int64 {
	t.Helper()
	if len(d[key]) != 1 {
		t.Fatalf("%s must be set once, have %q", key, d[key])
	}
	v := d[key][0]
	shift := map[byte]uint{'K': 10, 'M': 20, 'G': 30}[v[len(v)-1]]
	if shift > 0 {
		v = v[:len(v)-1]
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatalf("%s=%s: %v", key, d[key][0], err)
	}
	return n << shift
}
