package codecheck

import (
	"go/ast"
	"go/token"
	"go/types"
	"testing"
)

// statusTypes are the types whose values are named constants, defined once beside the
// type: what became of a path, how a chunk's rsync ended, how the deletion pass ended.
var statusTypes = []struct{ pkg, name string }{
	{module + "/rsync", "Status"},
	{module + "/exec", "ChunkStatus"},
	{module + "/cli", "passState"},
}

// TestStatusesAreNamed: outside the constant declarations of its type, a status is never
// written as a string ("partial", case "retrying", == "ok") nor converted from one
// (rsync.Status(s)): every status in the code is one of the named constants.
func TestStatusesAreNamed(t *testing.T) {
	fset, pkgs := load(t)
	isStatus := func(typ types.Type) bool {
		n, ok := types.Unalias(typ).(*types.Named)
		if !ok || n.Obj().Pkg() == nil {
			return false
		}
		for _, s := range statusTypes {
			if n.Obj().Pkg().Path() == s.pkg && n.Obj().Name() == s.name {
				return true
			}
		}
		return false
	}
	// each type is there, with its constants
	for _, s := range statusTypes {
		consts := 0
		for _, p := range pkgs {
			if p.path != s.pkg {
				continue
			}
			for _, name := range p.types.Scope().Names() {
				if c, ok := p.types.Scope().Lookup(name).(*types.Const); ok && isStatus(c.Type()) {
					consts++
				}
			}
		}
		if consts < 2 {
			t.Errorf("%s.%s: %d constants found; is the list above out of date?", s.pkg, s.name, consts)
		}
	}
	for _, p := range pkgs {
		named := func(e ast.Expr) bool { // a use of a constant of a status type
			var id *ast.Ident
			switch e := e.(type) {
			case *ast.Ident:
				id = e
			case *ast.SelectorExpr:
				id = e.Sel
			default:
				return false
			}
			c, ok := p.info.Uses[id].(*types.Const)
			return ok && isStatus(c.Type())
		}
		bad := func(n ast.Node, what string) {
			t.Errorf("%s: %s", fset.Position(n.Pos()), what)
		}
		for _, f := range p.files {
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.GenDecl:
					// the constants' own declarations
					if n.Tok == token.CONST {
						for _, spec := range n.Specs {
							for _, name := range spec.(*ast.ValueSpec).Names {
								if c, ok := p.info.Defs[name].(*types.Const); ok && isStatus(c.Type()) {
									return false
								}
							}
						}
					}
				case *ast.CallExpr:
					if tv, ok := p.info.Types[n.Fun]; ok && tv.IsType() && isStatus(tv.Type) && len(n.Args) == 1 && !isStatus(p.info.Types[n.Args[0]].Type) {
						bad(n, "a status converted from a string: use the named constant")
						return false
					}
				case ast.Expr:
					if tv, ok := p.info.Types[n]; ok && tv.Value != nil && isStatus(tv.Type) && !named(n) {
						if _, paren := n.(*ast.ParenExpr); !paren {
							bad(n, "a status written as a string: use the named constant")
							return false
						}
					}
				}
				return true
			})
		}
	}
}
