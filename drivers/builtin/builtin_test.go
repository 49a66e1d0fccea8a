package builtin

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/switchbridge/switchbridge/drivers"
)

// readmeDrivers reads the driver table of the repository's README (the
// table whose header is "| driver | switches | section |"): each row's
// driver name and whether it names a section.
func readmeDrivers(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile("^\\[?`([a-z][a-z0-9_]*)`")
	out := map[string]bool{}
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "| driver | switches | section |" {
			in = true
			continue
		}
		if !in || strings.HasPrefix(line, "| ---") {
			continue
		}
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 3 {
			t.Fatalf("README driver table: row %q has %d cells, want 3", line, len(cells))
		}
		m := name.FindStringSubmatch(strings.TrimSpace(cells[0]))
		if m == nil {
			t.Fatalf("README driver table: row %q does not start with a driver name in backquotes", line)
		}
		section := strings.TrimSpace(cells[2])
		if section != "" && section != "`"+m[1]+":`" {
			t.Errorf("README driver table: %s's section is %s, want `%s:` or nothing", m[1], section, m[1])
		}
		out[m[1]] = section != ""
	}
	if len(out) == 0 {
		t.Fatal("README.md has no driver table (| driver | switches | section |)")
	}
	return out
}

// The README's driver table and the registry name the same drivers, with
// the same sections; and each driver's factory, given no settings, either
// makes the driver or says which section it needs, doing no I/O.
func TestRegistry(t *testing.T) {
	reg := Registry()
	documented := readmeDrivers(t)
	for _, r := range reg {
		section, ok := documented[r.Name]
		switch {
		case !ok:
			t.Errorf("driver %s is registered but not in the README's driver table (README.md, Configuration)", r.Name)
		case section != r.Section:
			t.Errorf("driver %s: the README's driver table says section %v, its Registration says Section %v", r.Name, section, r.Section)
		}
	}
	for name := range documented {
		if _, ok := reg.Lookup(name); !ok {
			t.Errorf("the README's driver table lists %s, which is not registered in drivers/builtin", name)
		}
	}
	for _, r := range reg {
		_, err := r.New(drivers.Env{})
		switch {
		case !r.Section && err != nil:
			t.Errorf("%s takes no settings, yet fails without them: %v", r.Name, err)
		case r.Section && err != nil && !strings.Contains(err.Error(), r.Name):
			t.Errorf("%s without its section: %q does not name the %s: section", r.Name, err, r.Name)
		}
	}
}
