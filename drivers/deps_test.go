package drivers_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// No driver's tests import the daemon (bridge/daemon, daemontest), even
// through a helper: a driver is tested through its contract, and the
// tests that run a driver through the whole daemon live beside the daemon
// (bridge/daemon/mqtt_e2e_test.go, gpio_e2e_test.go). Else a driver's
// tests would build, and break with, every package of the hub.
func TestDriverTestsDoNotImportTheDaemon(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("go is not on PATH")
		}
		t.Skip("go is not on PATH")
	}
	// -test lists each package's test variants too (the package as its
	// tests build it, its _test package, the test binary), with everything
	// they import, directly or not.
	out, err := exec.Command(gobin, "list", "-test", "-f", "{{.ImportPath}}\t{{join .Deps \" \"}}", "./...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	const daemon = "github.com/switchbridge/switchbridge/bridge/daemon"
	tests := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, deps, _ := strings.Cut(line, "\t")
		if strings.HasSuffix(pkg, ".test") {
			// A test binary has its packages' imports, reported below by package.
			tests++
			continue
		}
		for _, d := range strings.Fields(deps) {
			if d == daemon || strings.HasPrefix(d, daemon+"/") {
				t.Errorf("%s imports %s: move the test that needs the daemon to bridge/daemon", pkg, d)
			}
		}
	}
	if tests < 4 {
		t.Fatalf("go list listed %d test binaries under drivers/; the check saw nothing:\n%s", tests, out)
	}
}
