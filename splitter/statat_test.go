package splitter

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
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
