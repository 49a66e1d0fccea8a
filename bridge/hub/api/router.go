package api

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// AppHandler handles one route of an app. What it returns is serialized to
// JSON; a nil result means the call succeeded with nothing to say (204).
type AppHandler func(c *Call) (any, error)

// Route is one row of an app's path table: an HTTP method, a path below the
// installation URI whose segments starting with ':' are variables, and the
// handler for that pair: one that answers, or one that streams.
type Route struct {
	Method string
	Path   string
	Handle AppHandler
	// Stream, in place of Handle, serves a route that streams
	// (text/event-stream) rather than answering once.
	Stream StreamHandler
	// Body is the most a request's body may hold, read into Call.Body
	// before Handle runs; 0: the route takes no body.
	Body int64
}

// Router matches requests against a table of routes. Two routes are told
// apart by their method and their literal segments, so GET /switches/:id and
// PUT /switches/:command can stand side by side.
type Router struct {
	routes []route
}

type route struct {
	Route
	segments []string
}

// NewRouter checks a route table: methods are given, paths start with '/',
// variables have names, and no two routes of one method have the same shape
// (the same literals in the same places), which would make one of them
// unreachable.
func NewRouter(table []Route) (*Router, error) {
	r := &Router{}
	shapes := map[string]string{}
	for _, rt := range table {
		if rt.Method == "" || strings.ToUpper(rt.Method) != rt.Method {
			return nil, fmt.Errorf("app path %q: method %q must be an upper-case HTTP method", rt.Path, rt.Method)
		}
		if rt.Method == http.MethodHead {
			return nil, fmt.Errorf("app path %q: HEAD is answered like GET; map GET", rt.Path)
		}
		if !strings.HasPrefix(rt.Path, "/") {
			return nil, fmt.Errorf("app path %q must start with /", rt.Path)
		}
		segs := strings.Split(strings.TrimPrefix(rt.Path, "/"), "/")
		shape := make([]string, len(segs))
		for i, s := range segs {
			switch {
			case s == "":
				return nil, fmt.Errorf("app path %q has an empty segment", rt.Path)
			case s == ":":
				return nil, fmt.Errorf("app path %q has a variable without a name", rt.Path)
			case strings.HasPrefix(s, ":"):
				shape[i] = ":"
			default:
				shape[i] = s
			}
		}
		key := rt.Method + " " + strings.Join(shape, "/")
		if prev, dup := shapes[key]; dup {
			return nil, fmt.Errorf("app paths %s %q and %q are the same shape", rt.Method, prev, rt.Path)
		}
		shapes[key] = rt.Path
		r.routes = append(r.routes, route{Route: rt, segments: segs})
	}
	return r, nil
}

// Match finds the route for method and path (the part after the
// installation URI). Among the routes of that method whose shape fits, the
// one with the most literal segments wins, so /switches/all would beat
// /switches/:command if both were declared. Variables are never empty.
//
// When no route of that method fits, allowed lists the methods of the
// routes that do fit the path (for a 405 and its Allow header); it is empty
// when no route fits the path at all (a 404).
func (r *Router) Match(method, path string) (rt *Route, params map[string]string, allowed []string) {
	if !strings.HasPrefix(path, "/") {
		return nil, nil, nil
	}
	segs := strings.Split(strings.TrimPrefix(path, "/"), "/")
	var best *route
	bestLiterals := -1
	for i := range r.routes {
		cand := &r.routes[i]
		literals, ok := cand.fits(segs)
		if !ok {
			continue
		}
		if cand.Method != method {
			if !slices.Contains(allowed, cand.Method) {
				allowed = append(allowed, cand.Method)
			}
			continue
		}
		if literals > bestLiterals {
			best, bestLiterals = cand, literals
		}
	}
	if best == nil {
		if slices.Contains(allowed, http.MethodGet) {
			allowed = append(allowed, http.MethodHead)
		}
		slices.Sort(allowed)
		return nil, nil, allowed
	}
	params = make(map[string]string, len(segs)-bestLiterals)
	for j, s := range best.segments {
		if strings.HasPrefix(s, ":") {
			params[s[1:]] = segs[j]
		}
	}
	return &best.Route, params, nil
}

// fits reports whether the request's segments fit the route's shape, and
// how many of them matched a literal.
func (rt *route) fits(segs []string) (literals int, ok bool) {
	if len(rt.segments) != len(segs) {
		return 0, false
	}
	for j, s := range rt.segments {
		if strings.HasPrefix(s, ":") {
			if segs[j] == "" {
				return 0, false
			}
			continue
		}
		if s != segs[j] {
			return 0, false
		}
		literals++
	}
	return literals, true
}
