package tests

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Work is a test's own directory, with the places most runs use in it: the source, DEST
// and the --failed list (none of them is made).
type Work struct {
	Dir, Src, Dst, Failed string
}

// newWork makes a temporary directory for the test.
func newWork(t testing.TB) Work {
	t.Helper()
	d := t.TempDir()
	return Work{Dir: d, Src: filepath.Join(d, "src"), Dst: filepath.Join(d, "dst"), Failed: filepath.Join(d, "failed")}
}

func writeFile(t testing.TB, p string, data string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

// files writes n files of size bytes under dir, each its own random bytes (seeded: the
// same n and size give the same files), named f00, f01 … (f000 … from 101 files on), and
// returns their names.
func files(t testing.TB, dir string, n, size int) []string {
	t.Helper()
	rng := rand.New(rand.NewPCG(uint64(n), uint64(size)))
	width := max(2, len(fmt.Sprint(n-1)))
	data := make([]byte, size)
	var names []string
	for i := 0; i < n; i++ {
		for j := 0; j < size; j += 8 {
			v := rng.Uint64()
			for k := j; k < min(j+8, size); k++ {
				data[k] = byte(v >> (8 * (k - j)))
			}
		}
		name := fmt.Sprintf("f%0*d", width, i)
		writeFile(t, filepath.Join(dir, name), string(data), 0o644)
		names = append(names, name)
	}
	return names
}

// spreadFiles writes n files of size bytes under dir, the i-th named d<i%dirs>/f<i> and
// filled with the digit i%10, and returns their names in order.
func spreadFiles(t testing.TB, dir string, n, dirs, size int) []string {
	t.Helper()
	names := make([]string, 0, n)
	for i := range n {
		name := fmt.Sprintf("d%d/f%03d", i%dirs, i)
		writeFile(t, filepath.Join(dir, name), strings.Repeat(fmt.Sprint(i%10), size), 0o644)
		names = append(names, name)
	}
	return names
}

// oddNames are file names that break naive tools.
var oddNames = []string{
	"new\nline", "-e touch PWNED", "--remove-source-files", "#hash.db", ";semi", " lead space",
	"trail space ", `back\slash`, "host:file", "bad\xffutf8", `\#012literal`, "cr\r", "plain.db",
}

// makeOddTree writes files with odd names, nested dirs and a symlink under dir.
func makeOddTree(t testing.TB, dir string) {
	t.Helper()
	for i, n := range oddNames {
		writeFile(t, filepath.Join(dir, n), fmt.Sprintf("content %d of %q\n", i, n), 0o644)
		writeFile(t, filepath.Join(dir, "nested", "deeper", n), strings.Repeat("x", i*100), 0o640)
	}
	writeFile(t, filepath.Join(dir, "exec.sh"), "#!/bin/sh\n", 0o755)
	if err := os.Symlink("plain.db", filepath.Join(dir, "link-to-plain")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/nonexistent/target", filepath.Join(dir, "nested", "dangling")); err != nil {
		t.Fatal(err)
	}
}

// nul joins paths with NUL terminators.
func nul(paths ...string) []byte { return join('\x00', paths...) }

// lines joins paths with newline terminators.
func lines(paths ...string) []byte { return join('\n', paths...) }

// join terminates each path with sep.
func join(sep byte, paths ...string) []byte {
	var b []byte
	for _, p := range paths {
		b = append(append(b, p...), sep)
	}
	return b
}

// under returns the paths rels below dir.
func under(dir string, rels []string) []string {
	out := make([]string, len(rels))
	for i, rel := range rels {
		out[i] = filepath.Join(dir, rel)
	}
	return out
}

// writeList writes list into dir, as a list for --from, and returns its path.
func writeList(t testing.TB, dir string, list []byte) string {
	t.Helper()
	p := filepath.Join(dir, "list")
	if err := os.WriteFile(p, list, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// listTree returns every file and symlink under dir, NUL-separated, absolute (find -print0).
func listTree(t testing.TB, dir string) ([]byte, int) {
	t.Helper()
	var b []byte
	n := 0
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			b = append(append(b, p...), 0)
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b, n
}

// relList returns every file and symlink under dir, relative to it, NUL-terminated, and
// their names.
func relList(t testing.TB, dir string) ([]byte, []string) {
	t.Helper()
	var rels []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			rels = append(rels, rel)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return nul(rels...), rels
}

// sizedList returns SIZE<TAB>PATH records (NUL-terminated) for every file and symlink
// under dir, relative to it, as find -printf '%s\t%P\0' writes them.
func sizedList(t testing.TB, dir string) ([]byte, int) {
	t.Helper()
	var b []byte
	n := 0
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		b = append(b, fmt.Sprintf("%d\t%s\x00", fi.Size(), rel)...)
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b, n
}

// regularFiles returns the regular files under dir, relative to it.
func regularFiles(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	return out
}

// snapshot maps each entry under root (not following symlinks) to its kind: "dir",
// "link:TARGET", or "file MODE DIGEST".
func snapshot(t testing.TB, root string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			tgt, _ := os.Readlink(p)
			m[rel] = "link:" + tgt
		case fi.IsDir():
			m[rel] = "dir"
		default:
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			m[rel] = fmt.Sprintf("file %v %x", fi.Mode().Perm(), sha256.Sum256(data)) // a digest: hex of MBs under -race takes seconds
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// sameTree fails the test unless dst holds exactly src's files (names, contents, modes,
// symlinks), but the paths except, which it must not hold.
func sameTree(t testing.TB, src, dst string, except ...string) {
	t.Helper()
	a, b := snapshot(t, src), snapshot(t, dst)
	for _, p := range except {
		delete(a, p)
	}
	for k, v := range a {
		if w, ok := b[k]; !ok {
			t.Errorf("missing in %s: %q", dst, k)
		} else if v != w {
			t.Errorf("differs: %q: %s vs %s", k, v, w)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			t.Errorf("extra in %s: %q", dst, k)
		}
	}
}

// onlyCopies fails the test unless every file under dst is src's file of its name, byte
// for byte: a copy cut short holds no partial file.
func onlyCopies(t testing.TB, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(dst, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dst, p)
		if !copied(src, dst, rel) {
			t.Errorf("DEST holds %q, not the source's file", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// destHasRootAttrs checks that DEST itself got the source root's permissions and mtime.
func destHasRootAttrs(t testing.TB, dst string, perm os.FileMode, mtime time.Time) {
	t.Helper()
	fi, err := os.Stat(dst)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != perm || !fi.ModTime().Equal(mtime) {
		t.Errorf("DEST itself: mode %v, mtime %v; want the root's, %v and %v", fi.Mode().Perm(), fi.ModTime(), perm, mtime)
	}
}

// landed reports whether dst/rel holds src/rel as the source has it: type, and for a
// regular file size and mtime (whole seconds), for a symlink its target.
func landed(src, dst, rel string) bool {
	a, err1 := os.Lstat(filepath.Join(src, rel))
	b, err2 := os.Lstat(filepath.Join(dst, rel))
	if err1 != nil || err2 != nil || a.Mode().Type() != b.Mode().Type() {
		return false
	}
	switch {
	case a.Mode().IsRegular():
		return a.Size() == b.Size() && a.ModTime().Unix() == b.ModTime().Unix()
	case a.Mode()&os.ModeSymlink != 0:
		x, _ := os.Readlink(filepath.Join(src, rel))
		y, _ := os.Readlink(filepath.Join(dst, rel))
		return x == y
	}
	return true
}

// copied reports whether dst/name holds exactly src/name's bytes.
func copied(src, dst, name string) bool {
	a, err1 := os.ReadFile(filepath.Join(src, name))
	b, err2 := os.ReadFile(filepath.Join(dst, name))
	return err1 == nil && err2 == nil && bytes.Equal(a, b)
}

// absent checks that none of the paths below dir exists.
func absent(t testing.TB, dir string, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if p == "" {
			continue
		}
		if _, err := os.Lstat(filepath.Join(dir, p)); !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			t.Errorf("%s exists (%v)", filepath.Join(dir, p), err)
		}
	}
}

// tempName matches rsync's temp file names: "." + name + "." + 6 characters.
func tempName(name string) bool {
	if len(name) < 9 || name[0] != '.' {
		return false
	}
	dot := strings.LastIndexByte(name, '.')
	return dot > 1 && len(name)-dot-1 == 6
}

// tempFiles lists rsync temp files under dir.
func tempFiles(dir string) []string {
	var out []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && tempName(d.Name()) {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// noTempFiles fails if rsync temp files remain under dir.
func noTempFiles(t testing.TB, dir string) {
	t.Helper()
	if left := tempFiles(dir); len(left) > 0 {
		t.Errorf("stale rsync temp files in %s: %q", dir, left)
	}
}

// mustRead returns a file's content; the test fails if it cannot be read.
func mustRead(t testing.TB, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
