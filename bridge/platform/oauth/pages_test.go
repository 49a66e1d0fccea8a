package oauth

import (
	"io/fs"
	"path"
	"testing"
)

// Every page file parses and is found by the name render uses, though
// parsing waits for the first page served.
func TestPagesParse(t *testing.T) {
	files, err := fs.Glob(pageFiles, "pages/*.html")
	if err != nil || len(files) == 0 {
		t.Fatalf("page files: %v %v", files, err)
	}
	for _, f := range files {
		if pages().Lookup(path.Base(f)) == nil {
			t.Errorf("%s: no template", f)
		}
	}
}
