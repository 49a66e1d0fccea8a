package deb

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// The packages the tests build: version1 for every architecture, and
// version2 (amd64 only) to upgrade to.
const (
	version1, deb1 = "v0.0.1", "0.0.1"
	version2, deb2 = "v0.0.2", "0.0.2"
)

// arches maps a Debian architecture to what `go version -m` must show
// for its binary.
var arches = map[string][]string{
	"armhf": {"GOARCH=arm", "GOARM=6"},
	"arm64": {"GOARCH=arm64"},
	"amd64": {"GOARCH=amd64"},
}

var repo, _ = filepath.Abs("../..")

// tmp holds the packages, built once for all tests and removed by TestMain.
var tmp string

func TestMain(m *testing.M) {
	code := m.Run()
	if tmp != "" {
		os.RemoveAll(tmp)
	}
	os.Exit(code)
}

// need finds a tool. Without it the test skips, except under CI, where a
// skipped check would let a regression through.
func need(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s not found (CI=true): apt-get install %s", name, pkg)
		}
		t.Skipf("%s not found: apt-get install %s to run this check", name, pkg)
	}
	return p
}

// notEmulated skips under make qemu: the test binary is then foreign to
// the kernel, and building packages there proves nothing more.
func notEmulated(t *testing.T) {
	t.Helper()
	if e := os.Getenv("SWITCHBRIDGE_TEST_EMULATED"); e != "" {
		t.Skipf("builds and installs the packages, which is done natively, not under %s", e)
	}
}

var build struct {
	once      sync.Once
	dir, dir2 string
	err       error
}

// packages builds the packages with .ci/package, as make package does:
// version1 for every architecture in dir (with the plain binaries), and
// version2 for amd64 in dir2.
func packages(t *testing.T) (dir, dir2 string) {
	t.Helper()
	notEmulated(t)
	if testing.Short() {
		t.Skip("-short: builds three packages (make test runs it)")
	}
	need(t, "bash", "bash")
	build.once.Do(func() {
		tmp, build.err = os.MkdirTemp("", "switchbridge-deb-")
		if build.err != nil {
			return
		}
		build.dir, build.dir2 = filepath.Join(tmp, "v1"), filepath.Join(tmp, "v2")
		for _, b := range []struct{ dir, version, archs string }{
			{build.dir, version1, ""},
			{build.dir2, version2, "amd64"},
		} {
			cmd := exec.Command(filepath.Join(repo, ".ci/package"), b.dir)
			cmd.Env = append(os.Environ(), "VERSION="+b.version, "ARCHS="+b.archs)
			if out, err := cmd.CombinedOutput(); err != nil {
				build.err = fmt.Errorf(".ci/package %s: %v\n%s", b.version, err, out)
				return
			}
		}
	})
	if build.err != nil {
		t.Fatal(build.err)
	}
	return build.dir, build.dir2
}

func debFile(dir, version, arch string) string {
	return filepath.Join(dir, "switchbridge_"+version+"_"+arch+".deb")
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// file is one line of dpkg-deb --contents.
type file struct{ mode, owner string }

// wantFiles are the package's files, with their modes and owners; it holds
// nothing else.
var wantFiles = map[string]file{
	"./usr/bin/switchbridge":                                          {"-rwxr-xr-x", "root/root"},
	"./usr/lib/systemd/system/switchbridge.service":                   {"-rw-r--r--", "root/root"},
	"./usr/lib/sysusers.d/switchbridge.conf":                          {"-rw-r--r--", "root/root"},
	"./etc/switchbridge/config.yaml":                                  {"-rw-r-----", "root/switchbridge"},
	"./usr/share/doc/switchbridge/copyright":                          {"-rw-r--r--", "root/root"},
	"./usr/share/doc/switchbridge/changelog.gz":                       {"-rw-r--r--", "root/root"},
	"./usr/share/doc/switchbridge/README.md.gz":                       {"-rw-r--r--", "root/root"},
	"./usr/share/doc/switchbridge/config.md.gz":                       {"-rw-r--r--", "root/root"},
	"./usr/share/doc/switchbridge/mqtt.md.gz":                         {"-rw-r--r--", "root/root"},
	"./usr/share/doc/switchbridge/gpio.md.gz":                         {"-rw-r--r--", "root/root"},
	"./usr/share/doc/switchbridge/systemd.md.gz":                      {"-rw-r--r--", "root/root"},
	"./usr/share/doc/switchbridge/monitoring.md.gz":                   {"-rw-r--r--", "root/root"},
	"./usr/share/doc/switchbridge/commands.md.gz":                     {"-rw-r--r--", "root/root"},
	"./usr/share/doc/switchbridge/security.md.gz":                     {"-rw-r--r--", "root/root"},
	"./usr/share/switchbridge/monitoring/prometheus.yml":              {"-rw-r--r--", "root/root"},
	"./usr/share/switchbridge/monitoring/switchbridge.rules.yml":      {"-rw-r--r--", "root/root"},
	"./usr/share/switchbridge/monitoring/switchbridge.dashboard.json": {"-rw-r--r--", "root/root"},
	"./usr/share/lintian/overrides/switchbridge":                      {"-rw-r--r--", "root/root"},
}

// TestPackageContents reads each package with dpkg-deb: its control
// fields, its conffile, its files with their modes and owners, the
// maintainer scripts, and the binary's build settings.
func TestPackageContents(t *testing.T) {
	dpkgDeb := need(t, "dpkg-deb", "dpkg")
	dir, _ := packages(t)
	for arch, settings := range arches {
		t.Run(arch, func(t *testing.T) {
			deb := debFile(dir, deb1, arch)
			fields := run(t, dpkgDeb, "--field", deb, "Package", "Version", "Architecture", "Pre-Depends", "Depends")
			for _, want := range []string{
				"Package: switchbridge", "Version: " + deb1, "Architecture: " + arch,
				// preinst runs systemd-sysusers before the unpack.
				"Pre-Depends: systemd | systemd-standalone-sysusers",
				"Depends: init-system-helpers",
			} {
				if !strings.Contains(fields, want+"\n") && !strings.Contains(fields, want+" ") {
					t.Errorf("no %q in the control fields:\n%s", want, fields)
				}
			}
			if c := run(t, dpkgDeb, "--info", deb, "conffiles"); strings.TrimSpace(c) != "/etc/switchbridge/config.yaml" {
				t.Errorf("conffiles %q, want only /etc/switchbridge/config.yaml", c)
			}

			sc := bufio.NewScanner(strings.NewReader(run(t, dpkgDeb, "--contents", deb)))
			seen := map[string]bool{}
			for sc.Scan() {
				f := strings.Fields(sc.Text())
				if len(f) < 6 || f[0][0] == 'd' {
					continue
				}
				path := f[5]
				want, ok := wantFiles[path]
				if !ok {
					t.Errorf("unexpected file %s", sc.Text())
					continue
				}
				seen[path] = true
				if f[0] != want.mode || f[1] != want.owner {
					t.Errorf("%s is %s %s, want %s %s", path, f[0], f[1], want.mode, want.owner)
				}
			}
			for path := range wantFiles {
				if !seen[path] {
					t.Errorf("%s is missing", path)
				}
			}

			root := t.TempDir()
			run(t, dpkgDeb, "--extract", deb, root)
			// The unit, the sysusers file, the config and the monitoring
			// files are the repository's, unchanged: the unit's tests
			// (systemd/unit_test.go) check the installed ExecStart path,
			// the monitoring's (systemd/monitoring) the rules path that
			// prometheus.yml names.
			for src, dst := range map[string]string{
				"systemd/switchbridge.service":                   "usr/lib/systemd/system/switchbridge.service",
				"systemd/switchbridge.sysusers":                  "usr/lib/sysusers.d/switchbridge.conf",
				"configs/hub.yaml":                               "etc/switchbridge/config.yaml",
				"systemd/monitoring/prometheus.yml":              "usr/share/switchbridge/monitoring/prometheus.yml",
				"systemd/monitoring/switchbridge.rules.yml":      "usr/share/switchbridge/monitoring/switchbridge.rules.yml",
				"systemd/monitoring/switchbridge.dashboard.json": "usr/share/switchbridge/monitoring/switchbridge.dashboard.json",
			} {
				if !bytes.Equal(readFile(t, filepath.Join(repo, src)), readFile(t, filepath.Join(root, dst))) {
					t.Errorf("/%s is not %s", dst, src)
				}
			}
			// The guides in /usr/share/doc are the repository's, compressed.
			for src, dst := range map[string]string{
				"README.md":                    "README.md.gz",
				"bridge/config/README.md":      "config.md.gz",
				"drivers/mqtt/README.md":       "mqtt.md.gz",
				"drivers/gpio/README.md":       "gpio.md.gz",
				"systemd/README.md":            "systemd.md.gz",
				"systemd/monitoring/README.md": "monitoring.md.gz",
				"cmd/switchbridge/README.md":   "commands.md.gz",
				"SECURITY.md":                  "security.md.gz",
			} {
				zr, err := gzip.NewReader(bytes.NewReader(readFile(t, filepath.Join(root, "usr/share/doc/switchbridge", dst))))
				if err != nil {
					t.Errorf("%s: %v", dst, err)
					continue
				}
				doc, err := io.ReadAll(zr)
				if err != nil || !bytes.Equal(doc, readFile(t, filepath.Join(repo, src))) {
					t.Errorf("/usr/share/doc/switchbridge/%s is not %s (%v)", dst, src, err)
				}
			}
			if !regexp.MustCompile(`(?m)^ExecStart=/usr/bin/switchbridge serve `).Match(readFile(t, filepath.Join(root, "usr/lib/systemd/system/switchbridge.service"))) {
				t.Error("the unit does not start /usr/bin/switchbridge")
			}
			info := run(t, "go", "version", "-m", filepath.Join(root, "usr/bin/switchbridge"))
			for _, s := range append([]string{"CGO_ENABLED=0", "GOOS=linux"}, settings...) {
				if !regexp.MustCompile(`(?m)^\s+build\s+` + regexp.QuoteMeta(s) + `$`).MatchString(info) {
					t.Errorf("the binary's build settings lack %s:\n%s", s, info)
				}
			}

			ctrl := t.TempDir()
			run(t, dpkgDeb, "--control", deb, ctrl)
			for _, s := range []string{"preinst", "postinst", "prerm", "postrm"} {
				st, err := os.Stat(filepath.Join(ctrl, s))
				if err != nil {
					t.Error(err)
					continue
				}
				if st.Mode().Perm() != 0o755 {
					t.Errorf("%s has mode %v", s, st.Mode())
				}
				if !bytes.Equal(readFile(t, filepath.Join(ctrl, s)), readFile(t, s)) {
					t.Errorf("the package's %s is not systemd/deb/%s", s, s)
				}
			}
		})
	}
}

// TestPreinstCreatesTheSysusersEntries: preinst creates, before the
// unpack, exactly the user and groups switchbridge.sysusers declares.
func TestPreinstCreatesTheSysusersEntries(t *testing.T) {
	m := regexp.MustCompile(`(?s)<<'SYSUSERS'\n(.*?)\nSYSUSERS\n`).FindSubmatch(readFile(t, "preinst"))
	if m == nil {
		t.Fatal("no SYSUSERS here-document in preinst")
	}
	var entries []string
	for _, l := range strings.Split(string(readFile(t, "../switchbridge.sysusers")), "\n") {
		if l = strings.TrimSpace(l); l != "" && l[0] != '#' {
			entries = append(entries, l)
		}
	}
	if got, want := string(m[1]), strings.Join(entries, "\n"); got != want {
		t.Errorf("preinst creates\n%s\nswitchbridge.sysusers declares\n%s", got, want)
	}
}

// TestLintian runs lintian on the amd64 package: no error and no warning
// may remain, every override has a reason on the line above it, and none
// is unused.
func TestLintian(t *testing.T) {
	lintian := need(t, "lintian", "lintian")
	dir, _ := packages(t)
	cmd := exec.Command(lintian, "--no-cfg", "--display-info", debFile(dir, deb1, "amd64"))
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	// lintian exits non-zero when a tag at its --fail-on level (error)
	// is left, or when it cannot check the package.
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("lintian: %v", err)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "E: ") || strings.HasPrefix(l, "W: ") ||
			strings.Contains(l, "unused-override") || strings.Contains(l, "mismatched-override") {
			t.Errorf("lintian: %s", l)
		}
	}
	t.Logf("lintian:\n%s", out)

	lines := strings.Split(strings.TrimSpace(string(readFile(t, "lintian-overrides"))), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "#") || l == "" {
			continue
		}
		if i == 0 || !strings.HasPrefix(lines[i-1], "# ") || len(lines[i-1]) < 20 {
			t.Errorf("lintian override %q has no reason on the line above it", l)
		}
	}
}

// TestQemuArmv6: the armhf package's binary runs on the Pi Zero's core
// (qemu-arm -cpu arm1176, an ARMv6 with VFPv2), and the arm64 one under
// qemu-aarch64. The GOARM=7 build make dist also writes must not run on
// that core, or the check would prove nothing; under qemu's default CPU
// (ARMv7) it does run, so the CPU is what tells them apart.
// make test's cross target serves the demo the same way.
func TestQemuArmv6(t *testing.T) {
	qemuArm := need(t, "qemu-arm", "qemu-user")
	qemuAarch64 := need(t, "qemu-aarch64", "qemu-user")
	dpkgDeb := need(t, "dpkg-deb", "dpkg")
	dir, _ := packages(t)

	bin := map[string]string{}
	for _, arch := range []string{"armhf", "arm64"} {
		root := t.TempDir()
		run(t, dpkgDeb, "--extract", debFile(dir, deb1, arch), root)
		bin[arch] = filepath.Join(root, "usr/bin/switchbridge")
	}
	for _, c := range [][]string{
		{qemuArm, "-cpu", "arm1176", bin["armhf"], "version"},
		{qemuAarch64, bin["arm64"], "version"},
		{qemuArm, filepath.Join(dir, "switchbridge-linux-armv7"), "version"},
	} {
		if out := run(t, c[0], c[1:]...); !strings.HasPrefix(out, "switchbridge "+version1+" (commit ") {
			t.Errorf("%s: %q", strings.Join(c, " "), out)
		}
	}
	cmd := exec.Command(qemuArm, "-cpu", "arm1176", filepath.Join(dir, "switchbridge-linux-armv7"), "version")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("a GOARM=7 binary ran on an ARMv6 CPU under qemu-arm -cpu arm1176:\n%s", out)
	}
	// Go's runtime refuses a GOARM=7 binary on a CPU without VFPv3, or
	// the CPU traps its first ARMv7 instruction.
	if !strings.Contains(string(out), "cannot run this GOARM=7 binary") && !strings.Contains(string(out), "Illegal instruction") {
		t.Errorf("the GOARM=7 binary failed on ARMv6, but not for its instruction set: %v\n%s", err, out)
	}
}

// baseTarball returns a Debian bookworm minbase root file system with
// systemd, as a tarball made by mmdebstrap and kept in the Go build cache
// (make clean does not touch it; go clean -cache does), so a warm run
// only unpacks it. The mirror is the one apt on this machine uses.
func baseTarball(t *testing.T) string {
	t.Helper()
	cache := strings.TrimSpace(run(t, "go", "env", "GOCACHE"))
	// The name changes with what goes into the tarball.
	const include = "systemd,init-system-helpers"
	tarball := filepath.Join(cache, "switchbridge-deb-test", "bookworm-minbase-"+strings.ReplaceAll(include, ",", "-")+".tar")
	if _, err := os.Stat(tarball); err == nil {
		return tarball
	}
	mmdebstrap := need(t, "mmdebstrap", "mmdebstrap")
	if err := os.MkdirAll(filepath.Dir(tarball), 0o755); err != nil {
		t.Fatal(err)
	}
	partial := fmt.Sprintf("%s.%d.partial.tar", tarball, os.Getpid())
	defer os.Remove(partial)
	run(t, mmdebstrap, "--quiet", "--mode=root", "--variant=minbase", "--include="+include,
		"bookworm", partial, debianMirror())
	if err := os.Rename(partial, tarball); err != nil {
		t.Fatal(err)
	}
	return tarball
}

// debianMirror is the Debian archive apt uses here
// (/etc/apt/sources.list and sources.list.d, one-line or deb822), else
// deb.debian.org.
func debianMirror() string {
	files, _ := filepath.Glob("/etc/apt/sources.list.d/*")
	files = append([]string{"/etc/apt/sources.list"}, files...)
	uri := regexp.MustCompile(`(?m)^(?:deb\s+(?:\[[^\]]*\]\s+)?|URIs:\s*)(\S+/debian/?)\s`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if m := uri.FindSubmatch(b); m != nil {
			return string(m[1])
		}
	}
	return "http://deb.debian.org/debian"
}

// chroot runs a command in the Debian tree at root, in mount and network
// namespaces of its own (with /proc mounted; loopback only, so a port
// the host uses does not matter), as root unless the command says
// otherwise (runuser). It returns the output and the error.
func chroot(root, stdin string, args ...string) (string, error) {
	cmd := exec.Command("unshare", append([]string{"--mount", "--net", "--propagation", "private",
		"sh", "-c", `mount -t proc proc "$0/proc" && exec chroot "$0" "$@"`, root}, args...)...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", "DEBIAN_FRONTEND=noninteractive", "HOME=/root"}
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestInstallUpgradeRemovePurge installs the amd64 package with apt in a
// Debian bookworm chroot, as an owner would, then upgrades it to a newer
// version, removes it and purges it, checking what each step leaves.
// There is no running systemd in a chroot. The maintainer scripts look
// for one at /run/systemd/system, which the test creates while apt runs,
// with a deb-systemd-invoke of its own (in /usr/sbin, before the real one
// in /usr/bin on the PATH apt gives dpkg) that writes down what it is
// asked: so the test sees the hub started once at the install, restarted
// once (and never stopped) by the upgrade, and stopped by the removal.
// Outside apt, /run/systemd/system is gone again, so systemctl works
// offline on the files.
func TestInstallUpgradeRemovePurge(t *testing.T) {
	notEmulated(t)
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true: the install test needs root (chroot)")
		}
		t.Skip("needs root, for chroot")
	}
	need(t, "unshare", "util-linux")
	need(t, "tar", "tar")
	dir, dir2 := packages(t)
	tarball := baseTarball(t)

	root := t.TempDir()
	run(t, "tar", "--extract", "--numeric-owner", "--file", tarball, "--directory", root)
	for _, deb := range []string{debFile(dir, deb1, "amd64"), debFile(dir2, deb2, "amd64")} {
		if err := os.WriteFile(filepath.Join(root, "tmp", filepath.Base(deb)), readFile(t, deb), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const invokeLog = "/var/log/deb-systemd-invoke.log"
	if err := os.WriteFile(filepath.Join(root, "usr/sbin/deb-systemd-invoke"),
		[]byte("#!/bin/sh\necho \"$*\" >>"+invokeLog+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	invoked := func(want ...string) {
		t.Helper()
		b, _ := os.ReadFile(filepath.Join(root, invokeLog))
		if got := strings.Fields(strings.ReplaceAll(string(b), " switchbridge.service", "")); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("the maintainer scripts asked deb-systemd-invoke for %q, want %q", got, want)
		}
	}
	// apt runs apt-get as if systemd were running.
	apt := func(args ...string) string {
		t.Helper()
		booted := filepath.Join(root, "run/systemd/system")
		if err := os.MkdirAll(booted, 0o755); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(booted)
		out, err := chroot(root, "", append([]string{"apt-get", "--yes", "--quiet"}, args...)...)
		if err != nil {
			t.Fatalf("apt-get %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	// in runs a command that must succeed; fails runs one that must fail.
	in := func(stdin string, args ...string) string {
		t.Helper()
		out, err := chroot(root, stdin, args...)
		if err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	fails := func(args ...string) string {
		t.Helper()
		out, err := chroot(root, "", args...)
		if err == nil {
			t.Fatalf("%s succeeded, want a failure:\n%s", strings.Join(args, " "), out)
		}
		return out
	}
	exists := func(path string) bool {
		_, err := os.Lstat(filepath.Join(root, path))
		return err == nil
	}
	const (
		config = "/etc/switchbridge/config.yaml"
		db     = "/var/lib/switchbridge/switchbridge.db"
		wants  = "/etc/systemd/system/multi-user.target.wants/switchbridge.service"
	)

	// Install.
	out := apt("install", "/tmp/switchbridge_"+deb1+"_amd64.deb")
	// The first install says where the hub listens (loopback only, as
	// installed) and how to open it, TLS first.
	for _, want := range []string{"listens on 127.0.0.1:8080", "server.tls (HTTPS, recommended)", "sudo switchbridge user add NAME --location 1 --owner"} {
		if !strings.Contains(out, want) {
			t.Errorf("the first install's output lacks %q:\n%s", want, out)
		}
	}
	if out := in("", "switchbridge", "check-config"); strings.Contains(out, "warning") {
		t.Errorf("the installed config is warned of: %s", out)
	}
	if out := in("", "getent", "passwd", "switchbridge"); !strings.Contains(out, ":/var/lib/switchbridge:/usr/sbin/nologin") {
		t.Errorf("the service's user: %q", out)
	}
	invoked("start")
	in("", "getent", "group", "gpio")
	if out := in("", "stat", "-c", "%a %U:%G", config); strings.TrimSpace(out) != "640 root:switchbridge" {
		t.Errorf("%s is %s, want 640 root:switchbridge", config, out)
	}
	// The service may replace its config (the console's Adopt: a new
	// file renamed over it); no one else but root may.
	if out := in("", "stat", "-c", "%a %U:%G", "/etc/switchbridge"); strings.TrimSpace(out) != "770 root:switchbridge" {
		t.Errorf("/etc/switchbridge is %s, want 770 root:switchbridge", out)
	}
	if out := in("", "systemctl", "is-enabled", "switchbridge"); strings.TrimSpace(out) != "enabled" {
		t.Errorf("systemctl is-enabled: %q", out)
	}
	if out := in("", "switchbridge", "version"); !strings.HasPrefix(out, "switchbridge "+version1+" (commit ") {
		t.Errorf("switchbridge version: %q", out)
	}
	// The service's user reads the config (through its group), as the
	// unit runs check-config's checks at start.
	if out := in("", "runuser", "-u", "switchbridge", "--", "switchbridge", "check-config", "--config", config); !strings.Contains(out, "ok") {
		t.Errorf("check-config as the service's user: %q", out)
	}
	in("", "switchbridge", "check-config")

	// Data, as the hub makes it: the state directory belongs to the
	// service's user (systemd's StateDirectory= sees to that at start).
	// The first user, an owner, as the first install's message says.
	in("secret-password\n", "switchbridge", "user", "add", "alice", "--location", "1", "--owner")
	in("", "chown", "-R", "switchbridge:switchbridge", "/var/lib/switchbridge")
	if out := in("", "runuser", "-u", "switchbridge", "--", "switchbridge", "user", "list"); !strings.Contains(out, "alice") || !strings.Contains(out, "true") {
		t.Errorf("user list as the service's user (alice, an owner): %q", out)
	}

	// An admin command without sudo says what to do.
	in("", "useradd", "--create-home", "owner")
	out = fails("runuser", "-u", "owner", "--", "switchbridge", "user", "list")
	if !strings.Contains(out, "permission denied: "+config) || !strings.Contains(out, "sudo") {
		t.Errorf("user list as a user outside the group: %q", out)
	}
	in("", "usermod", "--append", "--groups", "switchbridge", "owner")
	in("", "runuser", "-u", "owner", "--", "switchbridge", "check-config")
	out = fails("runuser", "-u", "owner", "--", "switchbridge", "user", "list")
	if !strings.Contains(out, "/var/lib/switchbridge") || !strings.Contains(out, "Run the command with sudo") {
		t.Errorf("user list as a member of the group: %q", out)
	}

	// Upgrade, with an edited config.
	const edit = "\n# edited by the owner\n"
	in("", "sh", "-c", "sed -i 's/^  level: info/  level: debug/' "+config+" && printf '"+strings.ReplaceAll(edit, "\n", `\n`)+"' >>"+config)
	edited := readFile(t, filepath.Join(root, config))
	if out := apt("install", "/tmp/switchbridge_"+deb2+"_amd64.deb"); strings.Contains(out, "listens on 127.0.0.1") {
		t.Errorf("an upgrade repeats the first install's message:\n%s", out)
	}
	if out := in("", "dpkg-query", "--show", "--showformat", "${Version} ${db:Status-Status}", "switchbridge"); out != deb2+" installed" {
		t.Errorf("after the upgrade: %q", out)
	}
	invoked("start", "restart")
	if out := in("", "switchbridge", "version"); !strings.HasPrefix(out, "switchbridge "+version2+" ") {
		t.Errorf("switchbridge version after the upgrade: %q", out)
	}
	if got := readFile(t, filepath.Join(root, config)); !bytes.Equal(got, edited) {
		t.Errorf("the upgrade changed the edited config:\n%s", got)
	}
	if out := in("", "stat", "-c", "%a %U:%G", config); strings.TrimSpace(out) != "640 root:switchbridge" {
		t.Errorf("%s is %s after the upgrade", config, out)
	}
	if out := in("", "switchbridge", "user", "list"); !strings.Contains(out, "alice") {
		t.Errorf("user list after the upgrade: %q", out)
	}
	if out := in("", "systemctl", "is-enabled", "switchbridge"); strings.TrimSpace(out) != "enabled" {
		t.Errorf("systemctl is-enabled after the upgrade: %q", out)
	}

	// Remove: the program goes, the data and the config stay.
	apt("remove", "switchbridge")
	invoked("start", "restart", "stop")
	if exists("/usr/bin/switchbridge") || exists("/usr/lib/systemd/system/switchbridge.service") {
		t.Error("apt remove left the program or the unit")
	}
	if !exists(db) || !bytes.Equal(readFile(t, filepath.Join(root, config)), edited) {
		t.Error("apt remove deleted the data or the config")
	}

	// Purge: everything goes but the user.
	apt("purge", "switchbridge")
	for _, p := range []string{"/var/lib/switchbridge", "/etc/switchbridge", wants} {
		if exists(p) {
			t.Errorf("apt purge left %s", p)
		}
	}
	invoked("start", "restart", "stop")
	if out, _ := chroot(root, "", "dpkg-query", "--show", "--showformat", "${db:Status-Status}", "switchbridge"); strings.Contains(out, "installed") || strings.Contains(out, "config-files") {
		t.Errorf("after apt purge dpkg says %q", out)
	}
}

// TestNfpmStaysOutOfGoMod: nfpm runs with go run …@version, so neither it
// nor its dependencies are in the daemon's go.mod or go.sum.
func TestNfpmStaysOutOfGoMod(t *testing.T) {
	for _, f := range []string{"go.mod", "go.sum"} {
		b := readFile(t, filepath.Join(repo, f))
		for _, m := range []string{"goreleaser", "nfpm", "go-git"} {
			if bytes.Contains(b, []byte(m)) {
				t.Errorf("%s names %s: nfpm must run outside the module (go run …@version)", f, m)
			}
		}
	}
	if !bytes.Contains(readFile(t, filepath.Join(repo, ".ci/package")), []byte("github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.45.2")) {
		t.Error(".ci/package does not pin nfpm v2.45.2")
	}
}
