package bridge_test

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestLayout holds the folders of bridge/ to what they say: the domain
// (bridge) uses the standard library alone; a hub's packages
// (bridge/hub/…) and a platform's (bridge/platform/…) never import the
// other role's, directly or not; what both roles share (the link's
// protocol, bridge/link/…; the token check, bridge/access; the
// infrastructure, bridge/infra/… and bridge/wire/…; the storage engine,
// bridge/store/…) imports neither role;
// and nothing but the daemon and the command line imports the daemon. A
// package that needs both roles is the daemon's business.
func TestLayout(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("go is not on PATH")
		}
		t.Skip("go is not on PATH")
	}
	out, err := exec.Command(gobin, "list", "-f", "{{.ImportPath}}\t{{join .Deps \" \"}}", "../...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	const mod = "github.com/switchbridge/switchbridge/"
	under := func(pkg, dir string) bool { return pkg == dir || strings.HasPrefix(pkg, dir+"/") }
	rules := []struct {
		from, not, why string
	}{
		{"bridge/hub", "bridge/platform", "a hub's package uses a platform's: what both need belongs in bridge, bridge/link, bridge/access or bridge/wire"},
		{"bridge/platform", "bridge/hub", "a platform's package uses a hub's: what both need belongs in bridge, bridge/link, bridge/access or bridge/wire"},
		{"bridge/link", "bridge/hub", "the link's protocol knows neither side: a hub's side is bridge/hub/replica"},
		{"bridge/link", "bridge/platform", "the link's protocol knows neither side: a platform's side is bridge/platform/linkserver"},
		{"bridge/access", "bridge/hub", "the token check both roles run knows neither role"},
		{"bridge/access", "bridge/platform", "the token check both roles run knows neither role"},
		{"bridge/infra", "bridge/hub", "infrastructure knows no role"},
		{"bridge/infra", "bridge/platform", "infrastructure knows no role"},
		{"bridge/wire", "bridge/hub", "the API's contract knows no role"},
		{"bridge/wire", "bridge/platform", "the API's contract knows no role"},
		{"bridge/store", "bridge/hub", "the storage engine knows no role: a hub's records are bridge/hub/hubstore"},
		{"bridge/store", "bridge/platform", "the storage engine knows no role: a platform's records are bridge/platform/accounts"},
		{"bridge/console", "bridge/hub", "the console serves both roles: a role's pages are bridge/platform/adminpages, or the hub's own in bridge/console over the domain"},
		{"bridge/console", "bridge/platform", "the console serves both roles: a role's pages are bridge/platform/adminpages, or the hub's own in bridge/console over the domain"},
		{"drivers", "bridge/hub", "a driver knows the domain and the config, not a role"},
		{"drivers", "bridge/platform", "a driver knows the domain and the config, not a role"},
	}
	seen := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, deps, _ := strings.Cut(line, "\t")
		pkg = strings.TrimPrefix(pkg, mod)
		seen++
		for _, d := range strings.Fields(deps) {
			if pkg == "bridge" && strings.Contains(strings.SplitN(d, "/", 2)[0], ".") {
				t.Errorf("the domain (bridge) imports %s: it uses the standard library alone", d)
			}
			if !strings.HasPrefix(d, mod) {
				continue
			}
			d = strings.TrimPrefix(d, mod)
			for _, r := range rules {
				if under(pkg, r.from) && under(d, r.not) {
					t.Errorf("%s imports %s: %s", pkg, d, r.why)
				}
			}
			if under(d, "bridge/daemon") && !under(pkg, "bridge/daemon") && !under(pkg, "cmd") {
				t.Errorf("%s imports %s: only the command line builds on the daemon", pkg, d)
			}
		}
	}
	if seen < 20 {
		t.Fatalf("go list listed %d packages: the check saw nothing:\n%s", seen, out)
	}
}

// whetherLinked matches code that reads whether the config makes this
// process a hub of a platform (its platform: section).
var whetherLinked = regexp.MustCompile(`\b(cfg|Config|config|conf|c\.cfg)\.Platform\b`)

// TestOnlyTheDaemonReadsTheRole: whether this process is a hub of a
// platform is read by bridge/config (which parses it) and bridge/daemon
// (which builds the roles it asks for), nowhere else: every other package
// is handed what its role needs, and a rule that depends on the role is a
// method of the config (such as Config.RefusePlatformCommand).
func TestOnlyTheDaemonReadsTheRole(t *testing.T) {
	root := ".."
	seen := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if (path != root && strings.HasPrefix(d.Name(), ".")) || d.Name() == "testdata" || d.Name() == "node_modules" || rel == filepath.Join("bridge", "config") || rel == filepath.Join("bridge", "daemon") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		seen++
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if whetherLinked.MatchString(line) && !strings.HasPrefix(strings.TrimSpace(line), "//") {
				t.Errorf("%s:%d reads whether this process is a hub of a platform: %s", rel, i+1, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen < 50 {
		t.Fatalf("read %d Go files: the walk missed the code", seen)
	}
}
