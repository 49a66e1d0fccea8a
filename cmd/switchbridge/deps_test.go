package main

import (
	"os"
	"os/exec"
	"path"
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
