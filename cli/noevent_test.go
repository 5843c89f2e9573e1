package cli

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestCLIWritesNoEvent: the books write every event (books.JSON) and cli none, so that
// each event has one writer. No file of cli (whatever its build tags) imports the event
// package or encoding/json, calls a method named Emit, or spells an event's type field in
// a string: an event written by hand in cli fails here.
func TestCLIWritesNoEvent(t *testing.T) {
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	files := 0
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, e.Name(), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files++
		for _, imp := range f.Imports {
			switch path, _ := strconv.Unquote(imp.Path.Value); path {
			case "github.com/prsync/prsync/event", "encoding/json":
				t.Errorf("%s: imports %s: the books write the events (books.JSON)", fset.Position(imp.Pos()), path)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Emit" {
					t.Errorf("%s: calls Emit: the books write the events (books.JSON)", fset.Position(n.Pos()))
				}
			case *ast.BasicLit:
				if n.Kind == token.STRING && strings.Contains(n.Value, `"type":`) {
					t.Errorf("%s: an event's type field: the books write the events (books.JSON)", fset.Position(n.Pos()))
				}
			}
			return true
		})
	}
	if files < 10 {
		t.Fatalf("read %d files of cli: is the test running in its package's directory?", files)
	}
}
