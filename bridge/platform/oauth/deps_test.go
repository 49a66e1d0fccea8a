package oauth

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestStorageBehindInterfaces: the platform role reaches its storage
// through the interfaces it declares (storage.go), never the SQLite
// adapter, so another store (a hub's replica) can stand in.
func TestStorageBehindInterfaces(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("listing the package: %v %v", files, err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if path == "github.com/switchbridge/switchbridge/bridge/store" {
				t.Errorf("%s imports %s: declare what it needs in storage.go instead", name, path)
			}
		}
	}
}
