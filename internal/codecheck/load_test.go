package codecheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// module is the path of prsync's module.
const module = "github.com/prsync/prsync"

// pkg is one package of the module, type-checked from its source.
type pkg struct {
	path  string
	files []*ast.File
	types *types.Package
	info  *types.Info
}

// load type-checks every package of the module from its source, test files left out, with
// its imports read from the compiler's export data (go list -export), as go vet does.
func load(t *testing.T) (*token.FileSet, []*pkg) {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	cmd := exec.Command("go", "list", "-export", "-deps", "-json=ImportPath,Dir,Export,GoFiles,Module", "./...")
	cmd.Dir = root(t)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	type listed struct {
		ImportPath, Dir, Export string
		GoFiles                 []string
		Module                  *struct{ Path string }
	}
	exports := map[string]string{}
	var ours []listed
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var l listed
		if err := dec.Decode(&l); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list: %v", err)
		}
		exports[l.ImportPath] = l.Export
		if l.Module != nil && l.Module.Path == module && len(l.GoFiles) > 0 {
			ours = append(ours, l)
		}
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		if exports[path] == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(exports[path])
	})
	var pkgs []*pkg
	for _, l := range ours {
		p := &pkg{path: l.ImportPath, info: &types.Info{
			Types: map[ast.Expr]types.TypeAndValue{}, Defs: map[*ast.Ident]types.Object{}, Uses: map[*ast.Ident]types.Object{},
		}}
		for _, name := range l.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(l.Dir, name), nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			p.files = append(p.files, f)
		}
		conf := types.Config{Importer: imp}
		if p.types, err = conf.Check(l.ImportPath, fset, p.files, p.info); err != nil {
			t.Fatalf("type-check %s: %v", l.ImportPath, err)
		}
		pkgs = append(pkgs, p)
	}
	return fset, pkgs
}

// root returns the module's directory.
func root(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil || !strings.HasSuffix(strings.TrimSpace(string(out)), "go.mod") {
		t.Fatalf("go env GOMOD: %q, %v", out, err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}
