package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// markdownLink matches an inline link's target: [text](target).
var markdownLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestDocLinks follows every relative link of every Markdown file in the
// repository: the file it names must exist and, for a link with
// #fragment into a Markdown file, that file must have a heading with that
// anchor (as GitHub makes them). A page moved or a heading renamed breaks
// the links to it, and this names each one.
func TestDocLinks(t *testing.T) {
	root := filepath.Join("..", "..")
	docs := map[string][]string{} // path relative to root → its lines
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "dist" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			docs[rel] = strings.Split(string(b), "\n")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := docs["README.md"]; !ok {
		t.Fatal("found no README.md at the repository's root")
	}
	anchors := map[string]map[string]bool{}
	for path, lines := range docs {
		anchors[path] = headingAnchors(lines)
	}
	checked := 0
	for path, lines := range docs {
		inFence := false
		for i, line := range lines {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				inFence = !inFence
			}
			if inFence {
				continue
			}
			for _, m := range markdownLink.FindAllStringSubmatch(stripCode(line), -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				checked++
				file, frag, _ := strings.Cut(target, "#")
				dest := path
				if file != "" {
					dest = filepath.Clean(filepath.Join(filepath.Dir(path), file))
					if _, err := os.Stat(filepath.Join(root, dest)); err != nil {
						t.Errorf("%s:%d: link %s: no file %s", path, i+1, target, dest)
						continue
					}
				}
				if frag == "" || !strings.HasSuffix(dest, ".md") {
					continue
				}
				if !anchors[dest][frag] {
					t.Errorf("%s:%d: link %s: %s has no heading with the anchor #%s", path, i+1, target, dest, frag)
				}
			}
		}
	}
	if checked < 50 {
		t.Fatalf("followed only %d links in %d files: the walk missed the docs", checked, len(docs))
	}
}

// stripCode removes inline code spans, whose brackets are not links.
func stripCode(line string) string {
	var b strings.Builder
	in := false
	for _, r := range line {
		if r == '`' {
			in = !in
			continue
		}
		if !in {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// headingAnchors returns the anchors GitHub gives a document's headings:
// lower case, spaces as hyphens, everything but letters, digits, hyphens
// and underscores dropped, and -1, -2… after repeats.
func headingAnchors(lines []string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	inFence := false
	for _, line := range lines {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inFence = !inFence
		}
		if inFence || !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// The README is the page of the people who install the hub: it stays
// short enough to read, and its detail lives beside the code it
// describes (CONTRIBUTING.md, SECURITY.md, each folder's README).
func TestREADMEIsShort(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 250 {
		t.Errorf("README.md has %d lines, more than 250: move detail to the page it belongs to", len(lines))
	}
	for i, l := range lines {
		if len(l) > 300 {
			t.Errorf("README.md:%d is %d characters long: a table row for a reference page, not the README", i+1, len(l))
		}
	}
}
