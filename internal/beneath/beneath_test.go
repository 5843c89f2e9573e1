package beneath

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// tree makes w/root with real directories, a file, and symlinks of every kind where a
// path needs a directory; w/out is outside the root. It returns w/root and a symlink to
// it.
func tree(t *testing.T) (root, rootLink string) {
	t.Helper()
	w := t.TempDir()
	root = filepath.Join(w, "root")
	for _, d := range []string{"root/d/e", "out"} {
		if err := os.MkdirAll(filepath.Join(w, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"root/d/f", "root/d/e/g", "out/f"} {
		if err := os.WriteFile(filepath.Join(w, f), []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, target := range map[string]string{
		"root/in":    "d",                      // relative, in the tree
		"root/chain": "in",                     // a link to a link in the tree
		"root/abs":   filepath.Join(root, "d"), // absolute, though into the tree
		"root/out":   filepath.Join(w, "out"),  // absolute, out of the tree
		"root/esc":   "../out",                 // relative, out of the tree
		"root/d/l":   "f",                      // a link as the last name
		"root/d/up":  "..",                     // back up, still in the tree
		"rootlink":   "root",                   // the root's own path holds a link
	} {
		if err := os.Symlink(target, filepath.Join(w, name)); err != nil {
			t.Fatal(err)
		}
	}
	return root, filepath.Join(w, "rootlink")
}

// TestLstat: a look below the root goes through a symlink only as its Follow allows, on
// both ways of opening a directory (openat2, and one name at a time); the last name is
// never followed; the root's own path may hold a symlink.
func TestLstat(t *testing.T) {
	root, rootLink := tree(t)
	const (
		ok     = ""
		link   = "link"    // a *NotDirError naming a symlink
		file   = "file"    // a *NotDirError naming a file
		absent = "missing" // fs.ErrNotExist
	)
	// want per Follow: NoLinks, InTree, AnyLinks (InTree without openat2 is NoLinks)
	cases := []struct {
		rel      string
		want     [3]string
		mode     fs.FileMode // of the file found
		notDirAt string
	}{
		{"d/f", [3]string{ok, ok, ok}, 0, ""},
		{"d/e/g", [3]string{ok, ok, ok}, 0, ""},
		{"d", [3]string{ok, ok, ok}, fs.ModeDir, ""},
		{"in", [3]string{ok, ok, ok}, fs.ModeSymlink, ""}, // the last name: the link itself
		{"d/l", [3]string{ok, ok, ok}, fs.ModeSymlink, ""},
		{"in/f", [3]string{link, ok, ok}, 0, "in"},
		{"in/e/g", [3]string{link, ok, ok}, 0, "in"},
		{"chain/e/g", [3]string{link, ok, ok}, 0, "chain"},
		{"d/up/d/f", [3]string{link, ok, ok}, 0, "d/up"},
		{"abs/f", [3]string{link, link, ok}, 0, "abs"},
		{"out/f", [3]string{link, link, ok}, 0, "out"},
		{"esc/f", [3]string{link, link, ok}, 0, "esc"},
		{"d/f/x", [3]string{file, file, file}, 0, "d/f"},
		{"nothere/x", [3]string{absent, absent, absent}, 0, ""},
		{"d/nothere", [3]string{absent, absent, absent}, 0, ""},
		{".", [3]string{ok, ok, ok}, fs.ModeDir, ""},
	}
	for _, walk := range []bool{false, true} {
		if walk && !forceWalk(t) {
			continue
		}
		for _, dir := range []string{root, rootLink} {
			for f, follow := range []Follow{NoLinks, InTree, AnyLinks} {
				r, err := Open(dir, follow)
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range cases {
					want := c.want[f]
					if follow == InTree && !hasOpenat2() {
						want = c.want[0]
					}
					fi, err := r.Lstat(c.rel)
					var nd *NotDirError
					switch {
					case want == ok && err != nil:
						t.Errorf("walk %v, %s, follow %d, %s: %v", walk, dir, follow, c.rel, err)
					case want == ok && fi.Mode().Type() != c.mode:
						t.Errorf("walk %v, follow %d, %s: mode %v, want %v", walk, follow, c.rel, fi.Mode(), c.mode)
					case want == link || want == file:
						if !errors.As(err, &nd) || nd.Symlink != (want == link) || nd.Path != c.notDirAt {
							t.Errorf("walk %v, follow %d, %s: %v, want %s at %s", walk, follow, c.rel, err, want, c.notDirAt)
						}
					case want == absent && !errors.Is(err, fs.ErrNotExist):
						t.Errorf("walk %v, follow %d, %s: %v, want not exist", walk, follow, c.rel, err)
					}
				}
				r.Close()
			}
		}
	}
}

// TestLstatMatchesOS: what a look finds is what os.Lstat finds of the same real path.
func TestLstatMatchesOS(t *testing.T) {
	root, _ := tree(t)
	r, err := Open(root, NoLinks)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, rel := range []string{"d", "d/f", "d/l", "in", "d/e/g"} {
		got, err := r.Lstat(rel)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := os.Lstat(filepath.Join(root, rel))
		if got.Mode() != want.Mode() || got.Size() != want.Size() || !got.ModTime().Equal(want.ModTime()) || got.IsDir() != want.IsDir() || got.Name() != want.Name() {
			t.Errorf("%s: got %v %d %v, want %v %d %v", rel, got.Mode(), got.Size(), got.ModTime(), want.Mode(), want.Size(), want.ModTime())
		}
	}
	if s, err := r.Readlink("d/l"); err != nil || s != "f" {
		t.Errorf("Readlink d/l: %q %v", s, err)
	}
	if _, err := r.Readlink("in/l"); err == nil {
		t.Error("Readlink went through a symlinked directory")
	}
	if _, err := r.Lstat("../root/d"); err == nil {
		t.Error("Lstat of a path above the root")
	}
}

// TestIsDir: a directory, or a symlink to one that the Follow allows.
func TestIsDir(t *testing.T) {
	root, _ := tree(t)
	for _, c := range []struct {
		rel  string
		want [3]bool
	}{
		{"d", [3]bool{true, true, true}},
		{"d/f", [3]bool{false, false, false}},
		{"in", [3]bool{false, true, true}},
		{"out", [3]bool{false, false, true}},
		{"nothere", [3]bool{false, false, false}},
	} {
		for f, follow := range []Follow{NoLinks, InTree, AnyLinks} {
			r, err := Open(root, follow)
			if err != nil {
				t.Fatal(err)
			}
			if got := r.IsDir(c.rel); got != c.want[f] && !(follow == InTree && !hasOpenat2()) {
				t.Errorf("follow %d, IsDir(%s) = %v", follow, c.rel, got)
			}
			r.Close()
		}
	}
}

// TestReadDir: a directory below the root is read through no symlink the root may not
// go through.
func TestReadDir(t *testing.T) {
	root, _ := tree(t)
	r, err := Open(root, NoLinks)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	f, err := r.ReadDir("d")
	if err != nil {
		t.Fatal(err)
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil || len(names) != 4 {
		t.Errorf("ReadDir d: %v %v, want e, f, l, up", names, err)
	}
	for _, rel := range []string{"in", "out", "in/e", "d/f"} {
		if f, err := r.ReadDir(rel); err == nil {
			f.Close()
			t.Errorf("ReadDir %s went through a symlink, or into a file", rel)
		}
	}
	if f, err := r.ReadDir("."); err != nil {
		t.Errorf("ReadDir of the root: %v", err)
	} else {
		f.Close()
	}
}
