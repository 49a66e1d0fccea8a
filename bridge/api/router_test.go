package api

import (
	"net/http"
	"strings"
	"testing"
)

func TestRouterMatch(t *testing.T) {
	r, err := NewRouter([]Mapping{
		{Path: "/switches", Methods: map[string]AppHandler{"GET": nil}},
		{Path: "/switches/:command", Methods: map[string]AppHandler{"PUT": nil}},
		{Path: "/switches/all", Methods: map[string]AppHandler{"GET": nil}},
		{Path: "/rooms/:room/switches/:command", Methods: map[string]AppHandler{"PUT": nil}},
	})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		path   string
		want   string
		params map[string]string
	}{
		{"/switches", "/switches", map[string]string{}},
		{"/switches/on", "/switches/:command", map[string]string{"command": "on"}},
		{"/switches/toggle", "/switches/:command", map[string]string{"command": "toggle"}},
		{"/switches/all", "/switches/all", map[string]string{}}, // a literal beats a variable
		{"/rooms/kitchen/switches/off", "/rooms/:room/switches/:command", map[string]string{"room": "kitchen", "command": "off"}},
		{"/switches/", "", nil},     // an empty variable does not match
		{"/switches/on/x", "", nil}, // too long
		{"/switch", "", nil},        // no such path
		{"", "", nil},               // no leading slash
		{"switches", "", nil},       // no leading slash
		{"//switches", "", nil},     // empty first segment
		{"/rooms//switches/on", "", nil},
	}
	for _, c := range cases {
		m, params, ok := r.Match(c.path)
		if c.want == "" {
			if ok {
				t.Errorf("Match(%q) = %s, want no match", c.path, m.Path)
			}
			continue
		}
		if !ok || m.Path != c.want {
			t.Errorf("Match(%q) = %v %v, want %s", c.path, m, ok, c.want)
			continue
		}
		if len(params) != len(c.params) {
			t.Errorf("Match(%q) params = %v, want %v", c.path, params, c.params)
		}
		for k, v := range c.params {
			if params[k] != v {
				t.Errorf("Match(%q) param %s = %q, want %q", c.path, k, params[k], v)
			}
		}
	}
}

func TestNewRouterRejectsBadTables(t *testing.T) {
	bad := map[string][]Mapping{
		"no slash":      {{Path: "switches", Methods: map[string]AppHandler{"GET": nil}}},
		"empty segment": {{Path: "/a//b", Methods: map[string]AppHandler{"GET": nil}}},
		"nameless var":  {{Path: "/a/:", Methods: map[string]AppHandler{"GET": nil}}},
		"no methods":    {{Path: "/a"}},
		"same shape":    {{Path: "/a/:x", Methods: map[string]AppHandler{"GET": nil}}, {Path: "/a/:y", Methods: map[string]AppHandler{"PUT": nil}}},
	}
	for name, ms := range bad {
		if _, err := NewRouter(ms); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := NewRouter(SwitchesApp); err != nil {
		t.Errorf("the switches app's own table: %v", err)
	}
}

func TestStatusTable(t *testing.T) {
	if got := (&Mapping{Methods: map[string]AppHandler{"PUT": nil, "GET": nil}}).Allowed(); got != "GET, HEAD, PUT" {
		t.Errorf("Allowed = %q", got)
	}
	if StatusOf(errString("x")) != http.StatusInternalServerError {
		t.Error("unknown errors must map to 500")
	}
}

type errString string

func (e errString) Error() string { return string(e) }

// FuzzRouterMatch checks that matching never panics, that a match's
// variables are non-empty path segments, and that substituting them back
// into the mapping's path gives the request path.
func FuzzRouterMatch(f *testing.F) {
	for _, s := range []string{"/switches", "/switches/on", "/switches/", "//", "/switches/on/off", "/%2F", "/switches/:command", "/" + strings.Repeat("a/", 50)} {
		f.Add(s)
	}
	r, err := NewRouter(append(SwitchesApp, Mapping{Path: "/rooms/:room/switches/:command", Methods: map[string]AppHandler{"PUT": nil}}))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, path string) {
		if len(path) > 4096 {
			return
		}
		m, params, ok := r.Match(path)
		if !ok {
			return
		}
		rebuilt := m.Path
		for k, v := range params {
			if v == "" || strings.Contains(v, "/") {
				t.Fatalf("param %s = %q from %q", k, v, path)
			}
			rebuilt = strings.Replace(rebuilt, ":"+k, v, 1)
		}
		if rebuilt != path {
			t.Fatalf("Match(%q) = %s with %v; rebuilt %q", path, m.Path, params, rebuilt)
		}
	})
}
