package daemon_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// The daemon only reads the config and builds and runs the roles: what a
// role does lives in the role (bridge/hub, bridge/platform,
// bridge/hub/replica). A function of more than 80 lines here is a role's
// work that stayed behind.
func TestDaemonFunctionsStayShort(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	funcs := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			funcs++
			if n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1; n > 80 {
				t.Errorf("%s: %s is %d lines long, more than 80", name, fd.Name.Name, n)
			}
		}
	}
	if funcs < 10 {
		t.Fatalf("found %d functions: the test read the wrong folder", funcs)
	}
}
