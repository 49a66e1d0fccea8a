package config

// Strict decoding: Problems, the list of what is wrong with a config at
// which line, and DecodeStrict, which finds unknown keys at any depth; also
// Lookup, to give a problem the line of a key.

import (
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// Problem is one thing wrong in a config file, at a line.
type Problem struct {
	Line int
	Msg  string
}

func (p Problem) String() string {
	if p.Line > 0 {
		return fmt.Sprintf("line %d: %s", p.Line, p.Msg)
	}
	return p.Msg
}

// Problems is every problem found in one config file. Its Error lists them
// one a line, each prefixed with File and the line number.
type Problems struct {
	File string
	List []Problem
}

func (ps *Problems) Error() string {
	var b strings.Builder
	for i, p := range ps.List {
		if i > 0 {
			b.WriteByte('\n')
		}
		switch {
		case ps.File != "" && p.Line > 0:
			fmt.Fprintf(&b, "%s:%d: %s", ps.File, p.Line, p.Msg)
		case ps.File != "":
			fmt.Fprintf(&b, "%s: %s", ps.File, p.Msg)
		default:
			b.WriteString(p.String())
		}
	}
	return b.String()
}

// Add records a problem at node's line (0 when node is nil).
func (ps *Problems) Add(node *yaml.Node, format string, args ...any) {
	line := 0
	if node != nil {
		line = node.Line
	}
	ps.List = append(ps.List, Problem{Line: line, Msg: fmt.Sprintf(format, args...)})
}

// Merge appends the problems of err: its Problem list when it is a *Problems,
// else err's text at line.
func (ps *Problems) Merge(err error, line int) {
	if err == nil {
		return
	}
	var other *Problems
	if errors.As(err, &other) {
		ps.List = append(ps.List, other.List...)
		return
	}
	ps.List = append(ps.List, Problem{Line: line, Msg: err.Error()})
}

// Err returns ps when it holds a problem, else nil, sorted by line.
func (ps *Problems) Err() error {
	if len(ps.List) == 0 {
		return nil
	}
	sort.SliceStable(ps.List, func(i, j int) bool { return ps.List[i].Line < ps.List[j].Line })
	return ps
}

// DecodeStrict decodes a YAML node into v, a pointer to a struct, and reports
// every key that has no field in v (at any depth) and every value of the
// wrong type, each with its line. yaml.v3 has KnownFields only on a Decoder,
// not on Node.Decode, which drivers need for their own blocks; this fills the
// gap. Fields of type yaml.Node or *yaml.Node, and types that unmarshal
// themselves, are left to their own checks.
func DecodeStrict(node *yaml.Node, v any) error {
	return decodeStrict(node, v, "")
}

// DecodeSection is DecodeStrict for the top-level section called name (a
// driver's settings, mqtt:): an unknown key is reported as in that
// section, as the config's own sections' are ("unknown key "brokr" in
// mqtt").
func DecodeSection(node *yaml.Node, name string, v any) error {
	return decodeStrict(node, v, name)
}

func decodeStrict(node *yaml.Node, v any, path string) error {
	var ps Problems
	if node == nil || node.Kind == 0 {
		return nil
	}
	if node.Kind == yaml.DocumentNode && len(node.Content) == 1 {
		node = node.Content[0]
	}
	checkKeys(&ps, node, reflect.TypeOf(v), path)
	if err := node.Decode(v); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			for _, msg := range te.Errors {
				ps.List = append(ps.List, parseYAMLMessage(msg))
			}
		} else {
			ps.List = append(ps.List, parseYAMLMessage(err.Error()))
		}
	}
	return ps.Err()
}

var (
	nodeType        = reflect.TypeOf(yaml.Node{})
	unmarshalerType = reflect.TypeOf((*yaml.Unmarshaler)(nil)).Elem()
)

func checkKeys(ps *Problems, node *yaml.Node, t reflect.Type, path string) {
	for t.Kind() == reflect.Pointer {
		if reflect.PointerTo(t.Elem()).Implements(unmarshalerType) {
			return
		}
		t = t.Elem()
	}
	if t == nodeType || reflect.PointerTo(t).Implements(unmarshalerType) {
		return
	}
	if node.Kind == yaml.AliasNode {
		node = node.Alias
	}
	switch t.Kind() {
	case reflect.Struct:
		if node.Kind != yaml.MappingNode {
			return // node.Decode reports the type mismatch
		}
		fields := yamlFields(t)
		for i := 0; i+1 < len(node.Content); i += 2 {
			k, val := node.Content[i], node.Content[i+1]
			f, ok := fields[k.Value]
			if !ok {
				ps.Add(k, "unknown key %q%s (known: %s)", k.Value, in(path), strings.Join(sortedKeys(fields), ", "))
				continue
			}
			checkKeys(ps, val, f.Type, join(path, k.Value))
		}
	case reflect.Slice, reflect.Array:
		if node.Kind != yaml.SequenceNode {
			return
		}
		for i, el := range node.Content {
			checkKeys(ps, el, t.Elem(), fmt.Sprintf("%s[%d]", path, i))
		}
	case reflect.Map:
		if node.Kind != yaml.MappingNode {
			return
		}
		for i := 0; i+1 < len(node.Content); i += 2 {
			checkKeys(ps, node.Content[i+1], t.Elem(), join(path, node.Content[i].Value))
		}
	}
}

func yamlFields(t reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if strings.Contains(opts, "inline") {
			for k, v := range yamlFields(f.Type) {
				out[k] = v
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = f
	}
	return out
}

func sortedKeys(m map[string]reflect.StructField) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func in(path string) string {
	if path == "" {
		return ""
	}
	return " in " + path
}

// parseYAMLMessage turns yaml.v3's "line N: msg" (or "yaml: line N: msg")
// into a Problem.
func parseYAMLMessage(msg string) Problem {
	msg = strings.TrimPrefix(msg, "yaml: ")
	var line int
	if n, err := fmt.Sscanf(msg, "line %d:", &line); n == 1 && err == nil {
		_, rest, _ := strings.Cut(msg, ":")
		return Problem{Line: line, Msg: strings.TrimSpace(rest)}
	}
	return Problem{Msg: msg}
}

// typeError reports a bad value the way yaml.v3 reports its own type errors,
// which lets decoding go on with the rest of the file (a plain error would
// stop it, hiding every later problem).
func typeError(n *yaml.Node, msg string) error {
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %s", n.Line, msg)}}
}

// Lookup returns the value node at path below n (a document or mapping
// node), or nil. Drivers use it to give a problem the line of the key.
func Lookup(n *yaml.Node, path ...string) *yaml.Node {
	if n == nil {
		return nil
	}
	return find(n, path...)
}

// find returns the value node at path in a document, or nil.
func find(doc *yaml.Node, path ...string) *yaml.Node {
	n := doc
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	for _, key := range path {
		if n.Kind != yaml.MappingNode {
			return nil
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				next = n.Content[i+1]
				break
			}
		}
		if next == nil {
			return nil
		}
		n = next
	}
	return n
}

// IsProblems reports whether err lists config problems (as opposed to, say,
// a file that could not be read).
func IsProblems(err error) bool {
	var ps *Problems
	return errors.As(err, &ps)
}
