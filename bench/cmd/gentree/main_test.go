package main

import (
	"bufio"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// treeDigest hashes names, modes, sizes, mtimes and contents of a tree.
func treeDigest(t *testing.T, root string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fmt.Fprintf(h, "%s %v %d %d\n", rel, info.Mode(), info.Size(), info.ModTime().UnixNano())
		if info.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h.Write(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

func TestDeterministic(t *testing.T) {
	dir := t.TempDir()
	a, b, c := filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "c")
	p := profiles["tiny"]
	fa, ba, err := run(p, 42, a, 4, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(p, 42, b, 1, false); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(p, 43, c, 2, false); err != nil {
		t.Fatal(err)
	}
	if fa != int64(p.SSTables*len(components)) {
		t.Errorf("files = %d, want %d", fa, p.SSTables*len(components))
	}
	if ba < p.TargetBytes*95/100 || ba > p.TargetBytes*105/100 {
		t.Errorf("bytes = %d, want about %d", ba, p.TargetBytes)
	}
	da, db, dc := treeDigest(t, a), treeDigest(t, b), treeDigest(t, c)
	if da != db {
		t.Errorf("same seed, different trees: %s vs %s", da, db)
	}
	if da == dc {
		t.Errorf("different seeds gave the same tree")
	}
	if _, _, err := run(p, 42, a, 1, false); err == nil {
		t.Errorf("writing into a non-empty directory should fail without -force")
	}
}

func TestLogUniformBounds(t *testing.T) {
	for _, p := range profiles {
		pl := makePlan(p, 1)
		if len(pl.sstables) != p.SSTables {
			t.Fatalf("%s: %d sstables, want %d", p.Name, len(pl.sstables), p.SSTables)
		}
	}
}

func TestMutateDeterministic(t *testing.T) {
	dir := t.TempDir()
	p := profiles["tiny"]
	mu := Mutation{DeletePct: 1, DeleteDirs: 2, ModifyPct: 1, AddPct: 1, AddDirs: 1}
	var digests []string
	var first MutateResult
	for i, name := range []string{"a", "b"} {
		out := filepath.Join(dir, name)
		if _, _, err := run(p, 7, out, 2, false); err != nil {
			t.Fatal(err)
		}
		var sb strings.Builder
		w := bufio.NewWriter(&sb)
		res, err := mutate(out, 3, mu, w)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = res
		} else if res != first {
			t.Errorf("results differ: %+v vs %+v", res, first)
		}
		digests = append(digests, treeDigest(t, out)+sb.String())
	}
	if digests[0] != digests[1] {
		t.Errorf("same seed, different mutated trees")
	}
	n := p.SSTables * len(components)
	if first.DeletedDirs != 2 || first.DeletedDirFiles == 0 || first.DeletedFiles != (n+50)/100 ||
		first.Modified != (n+50)/100 || first.Added < (n+50)/100 || first.Added%len(components) != 0 || first.AddedDirs != 1 {
		t.Errorf("mutation = %+v (tree of %d files)", first, n)
	}
}
