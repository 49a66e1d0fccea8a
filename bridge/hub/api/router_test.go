package api

import (
	"slices"
	"strings"
	"testing"
)

func TestRouterMatch(t *testing.T) {
	r, err := NewRouter([]Route{
		{Method: "GET", Path: "/switches"},
		{Method: "GET", Path: "/switches/:id"},
		{Method: "PUT", Path: "/switches/:command"},
		{Method: "PUT", Path: "/switches/all"},
		{Method: "PUT", Path: "/rooms/:room/switches/:command"},
	})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		method, path string
		want         string // the matched route's path; "" for none
		params       map[string]string
		allowed      string // with no match: the Allow header
	}{
		{"GET", "/switches", "/switches", map[string]string{}, ""},
		{"PUT", "/switches/on", "/switches/:command", map[string]string{"command": "on"}, ""},
		{"PUT", "/switches/toggle", "/switches/:command", map[string]string{"command": "toggle"}, ""},
		{"GET", "/switches/kitchen", "/switches/:id", map[string]string{"id": "kitchen"}, ""}, // told apart by method
		{"GET", "/switches/on", "/switches/:id", map[string]string{"id": "on"}, ""},
		{"PUT", "/switches/all", "/switches/all", map[string]string{}, ""}, // a literal beats a variable
		{"GET", "/switches/all", "/switches/:id", map[string]string{"id": "all"}, ""},
		{"PUT", "/rooms/kitchen/switches/off", "/rooms/:room/switches/:command", map[string]string{"room": "kitchen", "command": "off"}, ""},
		{"POST", "/switches", "", nil, "GET, HEAD"},
		{"DELETE", "/switches/on", "", nil, "GET, HEAD, PUT"},
		{"GET", "/rooms/kitchen/switches/off", "", nil, "PUT"},
		{"GET", "/switches/", "", nil, ""},     // an empty variable does not match
		{"PUT", "/switches/on/x", "", nil, ""}, // too long
		{"GET", "/switch", "", nil, ""},        // no such path
		{"GET", "", "", nil, ""},               // no leading slash
		{"GET", "switches", "", nil, ""},       // no leading slash
		{"GET", "//switches", "", nil, ""},     // empty first segment
		{"PUT", "/rooms//switches/on", "", nil, ""},
	}
	for _, c := range cases {
		rt, params, allowed := r.Match(c.method, c.path)
		if c.want == "" {
			if rt != nil {
				t.Errorf("Match(%s %q) = %s, want no match", c.method, c.path, rt.Path)
			}
			if got := strings.Join(allowed, ", "); got != c.allowed {
				t.Errorf("Match(%s %q) allowed %q, want %q", c.method, c.path, got, c.allowed)
			}
			continue
		}
		if rt == nil || rt.Path != c.want || rt.Method != c.method {
			t.Errorf("Match(%s %q) = %v, want %s", c.method, c.path, rt, c.want)
			continue
		}
		if len(params) != len(c.params) {
			t.Errorf("Match(%s %q) params = %v, want %v", c.method, c.path, params, c.params)
		}
		for k, v := range c.params {
			if params[k] != v {
				t.Errorf("Match(%s %q) param %s = %q, want %q", c.method, c.path, k, params[k], v)
			}
		}
	}
}

func TestNewRouterRejectsBadTables(t *testing.T) {
	bad := map[string][]Route{
		"no slash":         {{Method: "GET", Path: "switches"}},
		"empty segment":    {{Method: "GET", Path: "/a//b"}},
		"nameless var":     {{Method: "GET", Path: "/a/:"}},
		"no method":        {{Path: "/a"}},
		"lower-case":       {{Method: "get", Path: "/a"}},
		"HEAD":             {{Method: "HEAD", Path: "/a"}},
		"same shape":       {{Method: "GET", Path: "/a/:x"}, {Method: "GET", Path: "/a/:y"}},
		"same route twice": {{Method: "PUT", Path: "/a"}, {Method: "PUT", Path: "/a"}},
	}
	for name, rs := range bad {
		if _, err := NewRouter(rs); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// One shape under two methods is two routes.
	if _, err := NewRouter([]Route{{Method: "GET", Path: "/a/:x"}, {Method: "PUT", Path: "/a/:y"}}); err != nil {
		t.Errorf("same shape, other methods: %v", err)
	}
	if _, err := NewRouter(SwitchesApp); err != nil {
		t.Errorf("the switches app's own table: %v", err)
	}
}

// FuzzRouterMatch checks that matching never panics, that a match's
// variables are non-empty path segments, and that substituting them back
// into the mapping's path gives the request path.
func FuzzRouterMatch(f *testing.F) {
	for _, s := range []string{"/switches", "/switches/on", "/switches/", "//", "/switches/on/off", "/%2F", "/switches/:command", "/" + strings.Repeat("a/", 50)} {
		f.Add(s)
	}
	r, err := NewRouter(append(SwitchesApp, Route{Method: "PUT", Path: "/rooms/:room/switches/:command"}))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, path string) {
		if len(path) > 4096 {
			return
		}
		for _, method := range []string{"GET", "PUT", "POST"} {
			m, params, allowed := r.Match(method, path)
			if m == nil {
				if slices.Contains(allowed, method) {
					t.Fatalf("Match(%s %q) found nothing but allows %v", method, path, allowed)
				}
				continue
			}
			if m.Method != method || allowed != nil {
				t.Fatalf("Match(%s %q) = %s %s, allowed %v", method, path, m.Method, m.Path, allowed)
			}
			checkRebuilt(t, path, m, params)
		}
	})
}

// checkRebuilt substitutes a match's variables back into its route's path,
// which must give the request path; every variable is one non-empty segment.
func checkRebuilt(t *testing.T, path string, m *Route, params map[string]string) {
	t.Helper()
	for k, v := range params {
		if v == "" || strings.Contains(v, "/") {
			t.Fatalf("param %s = %q from %q", k, v, path)
		}
	}
	// Segment by segment: a value may itself look like ":name".
	segs := strings.Split(m.Path, "/")
	for i, seg := range segs {
		if name, ok := strings.CutPrefix(seg, ":"); ok {
			segs[i] = params[name]
		}
	}
	if rebuilt := strings.Join(segs, "/"); rebuilt != path {
		t.Fatalf("Match(%q) = %s with %v; rebuilt %q", path, m.Path, params, rebuilt)
	}
}
