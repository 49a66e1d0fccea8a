package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// commentedOut is a line of configs/hub.yaml that is an example to
// uncomment: "#" directly before the YAML ("#mqtt:", "#webhooks:",
// "#      - {…}"). Commentary has "# " and words.
var commentedOut = regexp.MustCompile(`(?m)^#(mqtt:|webhooks:| {2,}(?:[a-z_]+:|- ))`)

// TestHubConfigExamplesCheck: configs/hub.yaml ships its device examples
// commented out (the package starts the hub with it, and it must not
// drive GPIO pins or look for a broker nobody configured). Uncommented,
// as the owner does, they must still pass check-config, driver keys
// included, and add the switches they show.
func TestHubConfigExamplesCheck(t *testing.T) {
	b, err := os.ReadFile("../../configs/hub.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(commentedOut.FindAll(b, -1)); n < 10 {
		t.Fatalf("only %d commented-out example lines in configs/hub.yaml", n)
	}
	shipped := runCLI(t, "", "check-config", "--config", "../../configs/hub.yaml")
	if shipped.code != 0 || !strings.Contains(shipped.stdout, "(1 locations, 1 switches)") {
		t.Errorf("shipped hub.yaml: %+v", shipped)
	}
	path := filepath.Join(t.TempDir(), "hub.yaml")
	if err := os.WriteFile(path, commentedOut.ReplaceAll(b, []byte("$1")), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, "", "check-config", "--config", path)
	if r.code != 0 || !strings.Contains(r.stdout, "(2 locations, 11 switches)") {
		t.Errorf("hub.yaml with its examples uncommented: %+v", r)
	}
}
