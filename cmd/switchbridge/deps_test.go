package main

import (
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The shipped binary carries none of the test harnesses (daemontest,
// mqtttest, configtest…), nor the testing package: a harness imported by
// a file without _test in its name would put test code, and its fakes,
// on every hub.
func TestBinaryHasNoTestPackages(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("go is not on PATH")
		}
		t.Skip("go is not on PATH")
	}
	out, err := exec.Command(gobin, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{else}}std:{{.ImportPath}}{{end}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	n := 0
	for _, p := range strings.Fields(string(out)) {
		n++
		if std, ok := strings.CutPrefix(p, "std:"); ok {
			if std == "testing" || strings.HasPrefix(std, "testing/") || std == "net/http/httptest" {
				t.Errorf("the binary imports %s", std)
			}
			continue
		}
		if strings.HasSuffix(path.Base(p), "test") {
			t.Errorf("the binary imports the test package %s", p)
		}
	}
	if n < 50 {
		t.Fatalf("go list listed %d packages; the check saw nothing:\n%s", n, out)
	}
}

// The commands reach storage through the services and the interfaces the
// server uses; the engine is chosen in one place (invocation.open). Only
// that file, the SQLite backup and migrate-storage (which takes one engine
// of each) name the store package, or the packages of the roles' records
// over it.
func TestCommandsReachStorageThroughServices(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("listing the package: %v %v", files, err)
	}
	allowed := map[string]bool{"run.go": true, "backup.go": true, "migratestorage.go": true}
	storage := map[string]bool{
		"github.com/switchbridge/switchbridge/bridge/store":             true,
		"github.com/switchbridge/switchbridge/bridge/hub/hubstore":      true,
		"github.com/switchbridge/switchbridge/bridge/platform/accounts": true,
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); storage[p] && !allowed[name] {
				t.Errorf("%s imports %s: go through invocation.store (the server's interfaces) or c.admin", name, p)
			}
		}
	}
}
