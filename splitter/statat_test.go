package splitter

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestDirRefLstat: lstat relative to a directory's descriptor gives what lstat by path
// gives, field by field and error by error, for paths under it and for paths that are not.
func TestDirRefLstat(t *testing.T) {
	w := t.TempDir()
	dir := filepath.Join(w, "tree")
	for _, d := range []string{"tree/sub", "treeish", "elsewhere"} {
		if err := os.MkdirAll(filepath.Join(w, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"tree/f", "tree/sub/g", "treeish/h", "elsewhere/e"} {
		if err := os.WriteFile(filepath.Join(w, f), []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.Symlink("f", filepath.Join(dir, "link"))
	os.Symlink(filepath.Join(w, "elsewhere"), filepath.Join(dir, "dirlink"))
	paths := []string{
		filepath.Join(dir, "f"),
		filepath.Join(dir, "sub"),
		filepath.Join(dir, "sub/g"),
		filepath.Join(dir, "link"),         // the link itself, not its target
		filepath.Join(dir, "dirlink/e"),    // through a symlinked directory
		filepath.Join(dir, "missing"),      // ENOENT
		filepath.Join(dir, "f/under-file"), // ENOTDIR
		dir,                                // the directory itself
		filepath.Join(w, "treeish/h"),      // a sibling whose name starts alike
		filepath.Join(w, "elsewhere/e"),
	}
	for _, base := range []string{dir, "/"} {
		r := newDirRef(base)
		for _, p := range paths {
			var got, want syscall.Stat_t
			gotErr, wantErr := r.lstat(p, &got), syscall.Lstat(p, &want)
			if gotErr != wantErr || got != want {
				t.Errorf("base %s, %s: got %v %+v, want %v %+v", base, p, gotErr, got, wantErr, want)
			}
		}
		r.close()
	}
	var nilRef *dirRef
	var st syscall.Stat_t
	if err := nilRef.lstat(filepath.Join(dir, "f"), &st); err != nil || st.Size != int64(len("tree/f")) {
		t.Errorf("a nil dirRef: %v, size %d", err, st.Size)
	}
}

// TestCursorLstat: lstat through a worker's cursor gives what lstat by path gives, for a
// run of paths that moves between directories, into a symlinked directory, a missing
// one and a file named as a directory; and after a reset it sees a directory that was
// replaced, not the one it had open.
func TestCursorLstat(t *testing.T) {
	w := t.TempDir()
	dir := filepath.Join(w, "tree")
	for _, d := range []string{"tree/a", "tree/b/c", "elsewhere"} {
		if err := os.MkdirAll(filepath.Join(w, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"tree/top", "tree/a/1", "tree/a/2", "tree/b/c/3", "elsewhere/e"} {
		if err := os.WriteFile(filepath.Join(w, f), []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.Symlink(filepath.Join(w, "elsewhere"), filepath.Join(dir, "dirlink"))
	os.Symlink("a", filepath.Join(dir, "alink"))
	r := newDirRef(dir)
	defer r.close()
	var c cursor
	defer c.reset()
	check := func(rel string) {
		t.Helper()
		p := filepath.Join(dir, rel)
		var got, want syscall.Stat_t
		gotErr, wantErr := r.lstatIn(&c, p, &got), syscall.Lstat(p, &want)
		if gotErr != wantErr || got != want {
			t.Errorf("%s: got %v %+v, want %v %+v", rel, gotErr, got, wantErr, want)
		}
	}
	check("a/1")
	if c.ok {
		t.Fatal("a directory opened at its first file")
	}
	check("a/2")
	if !c.ok || c.dir != "a" {
		t.Fatalf("after two files in a, the cursor is %+v, want a open", c)
	}
	for _, rel := range []string{
		"a/missing", // a name not in the open directory
		"top", "a",  // no directory part: looked up from the tree
		"b/c/3", "b/c", "b/c/3", // deeper, and back
		"dirlink/e", "alink", // through a symlinked directory; the link itself
		"alink/1",            // the same directory by another name
		"nodir/x", "nodir/y", // ENOENT, twice from the failed open
		"top/under-file", // ENOTDIR
		"a/1/..",         // ENOTDIR through a file
	} {
		check(rel)
	}
	// a directory replaced while the cursor had it open: the cursor must not be trusted
	// past a reset
	check("a/1")
	c.reset()
	if err := os.Rename(filepath.Join(dir, "a"), filepath.Join(w, "old-a")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	check("a/1") // now ENOENT
	check("a/2")
	check("a/3")
	if c.ok {
		var st syscall.Stat_t
		if err := unix.Fstat(c.fd, (*unix.Stat_t)(unsafe.Pointer(&st))); err == nil {
			var now syscall.Stat_t
			syscall.Lstat(filepath.Join(dir, "a"), &now)
			if st.Ino != now.Ino {
				t.Error("the cursor holds the replaced directory")
			}
		}
	}
}
