package config

// Editing a config file in place, for the commands that add to it
// (switchbridge devices adopt): yaml.v3 finds where a key or an item is,
// and the new text is inserted there, so every other byte of the file
// (comments, blank lines, quoting, indentation) stays as the owner wrote
// it. Encoding the node tree again would keep comments but not the rest.

import (
	"bytes"
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// Edit is a config's text and its parsed document, parsed again after
// every change: a node found before a change is stale after it.
type Edit struct {
	lines []string // each with its line break
	doc   yaml.Node
}

// NewEdit parses a config's text for editing.
func NewEdit(data []byte) (*Edit, error) {
	e := &Edit{}
	return e, e.set(data)
}

func (e *Edit) set(data []byte) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return err
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return fmt.Errorf("the config is not a YAML mapping")
	}
	e.doc = doc
	e.lines = strings.SplitAfter(string(data), "\n")
	if e.lines[len(e.lines)-1] == "" {
		e.lines = e.lines[:len(e.lines)-1]
	}
	return nil
}

// Bytes is the text as it is now.
func (e *Edit) Bytes() []byte { return []byte(strings.Join(e.lines, "")) }

// Root is the document's top-level mapping.
func (e *Edit) Root() *yaml.Node { return e.doc.Content[0] }

// Pair returns the key and value nodes of key in mapping m, nil when m
// has no such key.
func Pair(m *yaml.Node, key string) (k, v *yaml.Node) {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil, nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i], m.Content[i+1]
		}
	}
	return nil, nil
}

// AppendItem adds item (one line of YAML, a flow mapping or a scalar) as
// the last item of seq, the value of key in mapping parent: a block
// sequence gets a line "- item" indented as its items are; an empty flow
// sequence ([]) or a missing key becomes a block sequence of that item.
func (e *Edit) AppendItem(parent *yaml.Node, key string, item string) error {
	if strings.ContainsAny(item, "\r\n") {
		return fmt.Errorf("an item must be one line")
	}
	k, seq := Pair(parent, key)
	switch {
	case seq == nil:
		// No such key: "key:" and the item after the mapping's last line,
		// indented as its keys are.
		indent := e.indentOf(parent.Content[0])
		return e.insertAfter(lastLine(parent), indent+key+":", indent+"  - "+item)
	case seq.Kind == yaml.SequenceNode && seq.Style&yaml.FlowStyle == 0 && len(seq.Content) > 0:
		first := seq.Content[0]
		line := e.lines[first.Line-1]
		prefix := line[:min(first.Column-1, len(line))]
		if strings.TrimSpace(prefix) != "-" {
			return fmt.Errorf("line %d: the items of %s are not written one per line as \"- item\"; add it by hand", first.Line, key)
		}
		return e.insertAfter(lastLine(seq), prefix+item)
	case seq.Kind == yaml.SequenceNode && seq.Style&yaml.FlowStyle != 0 && len(seq.Content) == 0:
		// key: [] → key: and the item on the next line.
		line := e.lines[seq.Line-1]
		at := seq.Column - 1
		if at+2 > len(line) || line[at:at+2] != "[]" {
			return fmt.Errorf("line %d: %s is not written as []; add it by hand", seq.Line, key)
		}
		e.lines[seq.Line-1] = strings.TrimRight(line[:at], " ") + " " + strings.TrimLeft(line[at+2:], " ")
		if strings.TrimSpace(line[at+2:]) == "" {
			e.lines[seq.Line-1] = strings.TrimRight(line[:at], " ") + lineBreak(line)
		}
		return e.insertAfter(seq.Line, e.indentOf(k)+"  - "+item)
	case seq.Kind == yaml.SequenceNode && seq.Style&yaml.FlowStyle != 0 && seq.Line == lastLine(seq):
		return e.appendFlowItem(seq, item)
	default:
		return fmt.Errorf("line %d: %s is not a list written one item per line, [] or [a, b]; add it by hand", seq.Line, key)
	}
}

// appendFlowItem adds item before the closing ] of a flow sequence written
// on one line.
func (e *Edit) appendFlowItem(seq *yaml.Node, item string) error {
	line := e.lines[seq.Line-1]
	open := seq.Column - 1
	if open >= len(line) || line[open] != '[' {
		return fmt.Errorf("line %d: unexpected text where a list starts", seq.Line)
	}
	var quote byte
	for i := open + 1; i < len(line); i++ {
		c := line[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == ']':
			sep := ", "
			if len(seq.Content) == 0 {
				sep = ""
			}
			e.lines[seq.Line-1] = strings.TrimRight(line[:i], " ") + sep + item + line[i:]
			return e.set(e.Bytes())
		}
	}
	return fmt.Errorf("line %d: the list does not end on its line; add it by hand", seq.Line)
}

// AppendPair adds "key: value" (value one line of YAML) as the last pair
// of the block mapping m, indented as its keys are.
func (e *Edit) AppendPair(m *yaml.Node, key, value string) error {
	if strings.ContainsAny(key+value, "\r\n") {
		return fmt.Errorf("a pair must be one line")
	}
	if m.Kind != yaml.MappingNode || m.Style&yaml.FlowStyle != 0 || len(m.Content) == 0 {
		return fmt.Errorf("line %d: not a mapping written one key per line; add %s by hand", m.Line, key)
	}
	return e.insertAfter(lastLine(m), e.indentOf(m.Content[0])+key+": "+value)
}

// indentOf is spaces up to n's column: where a key of n's mapping starts,
// whether the mapping is a sequence's item ("- id: 1") or not.
func (e *Edit) indentOf(n *yaml.Node) string { return strings.Repeat(" ", max(n.Column-1, 0)) }

// insertAfter inserts text lines after line n (1-based) and parses again.
func (e *Edit) insertAfter(n int, text ...string) error {
	if n > len(e.lines) {
		n = len(e.lines)
	}
	if n > 0 && !strings.HasSuffix(e.lines[n-1], "\n") {
		e.lines[n-1] += "\n"
	}
	brk := "\n"
	if n > 0 {
		brk = lineBreak(e.lines[n-1])
	}
	add := make([]string, len(text))
	for i, t := range text {
		add[i] = t + brk
	}
	e.lines = append(e.lines[:n], append(add, e.lines[n:]...)...)
	return e.set(e.Bytes())
}

func lineBreak(line string) string {
	if strings.HasSuffix(line, "\r\n") {
		return "\r\n"
	}
	return "\n"
}

// lastLine is the last line n's text takes: the greatest line of n and
// everything in it, a block scalar's own lines included.
func lastLine(n *yaml.Node) int {
	last := n.Line
	if n.Kind == yaml.ScalarNode && n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0 {
		last += bytes.Count([]byte(strings.TrimRight(n.Value, "\n")), []byte("\n")) + 1
	} else if n.Kind == yaml.ScalarNode && n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) == 0 {
		// A plain scalar may be folded over several lines.
		last += strings.Count(n.Value, "\n")
	}
	for _, c := range n.Content {
		last = max(last, lastLine(c))
	}
	return last
}
