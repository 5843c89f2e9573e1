package splitter

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestQuickCheckMissing: a DEST directory found missing spares the lstat of its files
// and of its subdirectories' files, for each of several directories walked at once,
// and never makes a path up to date.
func TestQuickCheckMissing(t *testing.T) {
	src, dest := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Lstat(filepath.Join(src, "f"), &st); err != nil {
		t.Fatal(err)
	}
	q := &QuickCheck{Dest: dest}
	for i := range 8 {
		if q.upToDate(fmt.Sprintf("d%d/f", i), &st, filepath.Join(src, "f"), nil) {
			t.Fatal("a path under a missing directory is up to date")
		}
	}
	tests := []struct {
		dir  string
		want bool
	}{
		{"d0", true},
		{"d7", true},
		{"d3/sub/deeper", true},
		{"d30", false}, // a sibling whose name starts alike
		{"d8", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := q.isMissing(filepath.Join(dest, tt.dir)); got != tt.want {
			t.Errorf("isMissing(%q) = %v, want %v", tt.dir, got, tt.want)
		}
	}
	for i := range 16 {
		q.setMissing(filepath.Join(dest, fmt.Sprintf("other%d", i)))
	}
	if q.isMissing(filepath.Join(dest, "d0")) {
		t.Error("the ring should have forgotten d0 after 16 newer directories")
	}
}

// TestQuickCheckDestSymlink: a copy that matches, found through a symlink below DEST
// where the source has a directory, is not up to date (rsync would replace the link
// with an empty directory); the same copy under a real directory is, and so is one
// under a DEST whose own path is a symlink. Each way in: through a worker's cursor, the
// first file of a directory and the next ones, and without a cursor.
func TestQuickCheckDestSymlink(t *testing.T) {
	w := t.TempDir()
	src, dest, elsewhere := filepath.Join(w, "src"), filepath.Join(w, "dest"), filepath.Join(w, "elsewhere")
	for _, d := range []string{"src/x/t/u", "dest/x/real/u", "dest/x", "elsewhere/u", "dest/in/u"} {
		if err := os.MkdirAll(filepath.Join(w, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	stamp := time.Unix(1_700_000_000, 0)
	var files []string
	for _, f := range []string{"a", "b", "u/c", "l"} {
		files = append(files, f)
		for _, dir := range []string{"src/x/t", "dest/x/real", "elsewhere", "dest/in"} {
			p := filepath.Join(w, dir, f)
			if f == "l" {
				if err := os.Symlink("a", p); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if err := os.WriteFile(p, []byte("same"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(p, stamp, stamp); err != nil {
				t.Fatal(err)
			}
		}
	}
	os.Symlink(elsewhere, filepath.Join(dest, "x/t"))               // out of DEST
	os.Symlink("../in", filepath.Join(dest, "x/rel"))               // in DEST, relative
	os.Symlink("t", filepath.Join(dest, "x/chain"))                 // a link to a link
	os.Symlink(filepath.Join(dest, "x"), filepath.Join(dest, "up")) // a link above the files
	os.Symlink(dest, filepath.Join(w, "destlink"))
	stat := func(rel string) (*syscall.Stat_t, string) {
		p := filepath.Join(src, "x/t", rel)
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			t.Fatal(err)
		}
		return &st, p
	}
	for _, d := range []string{dest, filepath.Join(w, "destlink")} {
		q := &QuickCheck{Dest: d}
		var c cursor
		for _, cur := range []*cursor{&c, nil} {
			for _, dir := range []string{"x/real", "x/t", "x/rel", "x/chain", "up/real", "up/t"} {
				for _, f := range files {
					st, p := stat(f)
					want := dir == "x/real"
					if got := q.upToDate(dir+"/"+f, st, p, cur); got != want {
						t.Errorf("DEST %s, cursor %v: %s/%s up to date %v, want %v", d, cur != nil, dir, f, got, want)
					}
				}
			}
		}
		c.reset()
		q.ref.close()
	}
}

// TestBeneathRefLstat: a DEST dirRef lstats what lstat by path gives where no symlink
// is on the way, and fails where one is, with a cursor (which keeps the failure for the
// directory's next files) and without.
func TestBeneathRefLstat(t *testing.T) {
	w := t.TempDir()
	dir := filepath.Join(w, "tree")
	for _, d := range []string{"tree/a/b", "elsewhere/b"} {
		if err := os.MkdirAll(filepath.Join(w, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"tree/top", "tree/a/1", "tree/a/b/2", "elsewhere/1", "elsewhere/b/2"} {
		if err := os.WriteFile(filepath.Join(w, f), []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.Symlink(filepath.Join(w, "elsewhere"), filepath.Join(dir, "out"))
	os.Symlink("a", filepath.Join(dir, "in"))
	os.Symlink("1", filepath.Join(dir, "a/l"))
	r := newBeneathRef(dir)
	defer r.close()
	var c cursor
	defer c.reset()
	for _, cur := range []*cursor{&c, nil} {
		for _, rel := range []string{"top", "a", "a/1", "a/1", "a/b/2", "a/l", "in", "a/missing", "nodir/x", "nodir/y", "top/x"} {
			p := filepath.Join(dir, rel)
			var got, want syscall.Stat_t
			gotErr, wantErr := r.lstatIn(cur, p, &got), syscall.Lstat(p, &want)
			if gotErr != wantErr || got != want {
				t.Errorf("%s: got %v %+v, want %v %+v", rel, gotErr, got, wantErr, want)
			}
		}
		for _, rel := range []string{"out/1", "out/1", "out/b/2", "in/1", "in/b/2", "in/l"} {
			var st syscall.Stat_t
			if err := r.lstatIn(cur, filepath.Join(dir, rel), &st); err == nil {
				t.Errorf("%s: found through a symlink", rel)
			}
		}
		if s, err := r.readlinkIn(cur, filepath.Join(dir, "a/l")); err != nil || s != "1" {
			t.Errorf("readlink a/l: %q %v", s, err)
		}
		if s, err := r.readlinkIn(cur, filepath.Join(dir, "in/l")); err == nil {
			t.Errorf("readlink in/l through a symlink: %q", s)
		}
	}
	missing := newBeneathRef(filepath.Join(w, "nothere"))
	var st syscall.Stat_t
	if err := missing.lstatIn(nil, filepath.Join(w, "nothere/a/1"), &st); err != syscall.ENOENT {
		t.Errorf("under a DEST that is missing: %v", err)
	}
}
