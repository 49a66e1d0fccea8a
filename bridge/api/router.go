package api

import (
	"fmt"
	"sort"
	"strings"
)

// AppHandler handles one method of an app path. What it returns is serialized
// to JSON; a nil list means the call succeeded with nothing to say (204).
type AppHandler func(c *Call) ([]map[string]any, error)

// Mapping is one declared app path: a path below the installation URI whose
// segments starting with ':' are variables, and a handler per HTTP method.
type Mapping struct {
	Path    string
	Methods map[string]AppHandler
}

// Router matches request paths against a table of mappings.
type Router struct {
	routes []route
}

type route struct {
	m        Mapping
	segments []string
}

// NewRouter checks a mapping table: paths start with '/', variables have
// names, and no two paths have the same shape.
func NewRouter(ms []Mapping) (*Router, error) {
	r := &Router{}
	shapes := map[string]string{}
	for _, m := range ms {
		if !strings.HasPrefix(m.Path, "/") {
			return nil, fmt.Errorf("app path %q must start with /", m.Path)
		}
		if len(m.Methods) == 0 {
			return nil, fmt.Errorf("app path %q maps no method", m.Path)
		}
		segs := strings.Split(strings.TrimPrefix(m.Path, "/"), "/")
		shape := make([]string, len(segs))
		for i, s := range segs {
			switch {
			case s == "":
				return nil, fmt.Errorf("app path %q has an empty segment", m.Path)
			case s == ":":
				return nil, fmt.Errorf("app path %q has a variable without a name", m.Path)
			case strings.HasPrefix(s, ":"):
				shape[i] = ":"
			default:
				shape[i] = s
			}
		}
		key := strings.Join(shape, "/")
		if prev, dup := shapes[key]; dup {
			return nil, fmt.Errorf("app paths %q and %q are the same shape", prev, m.Path)
		}
		shapes[key] = m.Path
		r.routes = append(r.routes, route{m: m, segments: segs})
	}
	return r, nil
}

// Match finds the mapping for path (the part after the installation URI).
// A literal segment beats a variable, so /switches/all would win over
// /switches/:command if both were declared. Variables are never empty.
func (r *Router) Match(path string) (*Mapping, map[string]string, bool) {
	if !strings.HasPrefix(path, "/") {
		return nil, nil, false
	}
	segs := strings.Split(strings.TrimPrefix(path, "/"), "/")
	var best *route
	var bestParams map[string]string
	bestLiterals := -1
	for i := range r.routes {
		rt := &r.routes[i]
		if len(rt.segments) != len(segs) {
			continue
		}
		params := map[string]string{}
		literals := 0
		ok := true
		for j, s := range rt.segments {
			if strings.HasPrefix(s, ":") {
				if segs[j] == "" {
					ok = false
					break
				}
				params[s[1:]] = segs[j]
				continue
			}
			if s != segs[j] {
				ok = false
				break
			}
			literals++
		}
		if ok && literals > bestLiterals {
			best, bestParams, bestLiterals = rt, params, literals
		}
	}
	if best == nil {
		return nil, nil, false
	}
	return &best.m, bestParams, true
}

// Allowed lists a mapping's methods, sorted, for an Allow header: HEAD
// too where GET is mapped, since HEAD is answered like GET.
func (m *Mapping) Allowed() string {
	ms := make([]string, 0, len(m.Methods)+1)
	for k := range m.Methods {
		ms = append(ms, k)
	}
	if _, ok := m.Methods["GET"]; ok {
		if _, ok := m.Methods["HEAD"]; !ok {
			ms = append(ms, "HEAD")
		}
	}
	sort.Strings(ms)
	return strings.Join(ms, ", ")
}
