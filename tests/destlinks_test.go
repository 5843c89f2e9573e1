package tests

// DEST's own symlinks (issue 24, item 1): DEST holds x/t -> TARGET where the source has a
// directory x/t/. rsync without -K replaces the link with a real directory and copies
// into it; with -K it writes through a link that stays in DEST (rsync 3.5.0 fails the
// paths below one that leads out). prsync's quick check, confirmation and deletion pass
// must see DEST as rsync writes it. Every run is checked against DEST walked without
// following a symlink, against TARGET, and against plain rsync on a copy of the same
// trees.

import (
	"bytes"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

var (
	linkStamp = time.Unix(1_700_000_000, 0)
	oldStamp  = time.Unix(1_600_000_000, 0)
)

// linkFiles are the source's files below x, and x/keep beside the directory.
var linkFiles = []string{"x/keep", "x/t/a", "x/t/b", "x/t/u/c", "x/t/l"}

// linkDirs are the source's directories, as find lists them before their files.
var linkDirs = []string{"x", "x/t", "x/t/u"}

// linkCase is one way DEST's symlink can stand where the source has a directory.
type linkCase struct {
	list   string // "files": the files only; "dirs": the directories too
	target string // what the link's target holds: "empty", "matching" copies, "different" ones
	delete bool
	// link: "out" (absolute, to a directory out of DEST), or "in" (relative, to
	// DEST/y/store, below a directory of the source that no path touches, so that
	// --delete leaves it)
	link string
	keep bool // -K after --
	// destVia: how DEST is named: "" (its own path), "link" (a symlink to it), "parent"
	// (a path through a symlinked parent)
	destVia string
}

func (c linkCase) String() string {
	s := fmt.Sprintf("%s,%s,%s", c.list, c.target, c.link)
	if c.delete {
		s += ",delete"
	}
	if c.keep {
		s += ",K"
	}
	if c.destVia != "" {
		s += ",dest-" + c.destVia
	}
	return s
}

// rels is the list the case gives prsync and rsync, relative to the source.
func (c linkCase) rels() []string {
	if c.list == "files" {
		return linkFiles
	}
	return []string{"x", "x/keep", "x/t", "x/t/a", "x/t/b", "x/t/l", "x/t/u", "x/t/u/c"}
}

// linkTrees makes w/src, w/dest (x/extra, a file the source lacks, and the symlink
// x/t), and the link's target; it returns DEST as the run names it and the target.
func (c linkCase) linkTrees(t testing.TB, w string) (dest, target string) {
	t.Helper()
	src, real := filepath.Join(w, "src"), filepath.Join(w, "dest")
	for i, f := range linkFiles {
		p := filepath.Join(src, f)
		if strings.HasSuffix(f, "/l") {
			os.MkdirAll(filepath.Dir(p), 0o755)
			if err := os.Symlink("a", p); err != nil {
				t.Fatal(err)
			}
			continue
		}
		writeFile(t, p, strings.Repeat(fmt.Sprint(i), 100+i), 0o644)
		os.Chtimes(p, linkStamp, linkStamp)
	}
	for _, d := range linkDirs {
		os.Chtimes(filepath.Join(src, d), linkStamp, linkStamp)
	}
	writeFile(t, filepath.Join(src, "y/unlisted"), "not in the list", 0o644)
	writeFile(t, filepath.Join(real, "x/extra"), "DEST only", 0o644)
	// A fixed time: this tree and plain rsync's reference are made a second apart.
	os.Chtimes(filepath.Join(real, "x/extra"), oldStamp, oldStamp)
	target = filepath.Join(w, "elsewhere")
	link := target
	if c.link == "in" {
		target, link = filepath.Join(real, "y/store"), "../y/store"
	}
	if err := os.MkdirAll(target, 0o755); err != nil {
		t.Fatal(err)
	}
	switch c.target {
	case "matching":
		if out, err := exec.Command("cp", "-a", filepath.Join(src, "x/t")+"/.", target).CombinedOutput(); err != nil {
			t.Fatalf("cp: %v: %s", err, out)
		}
	case "different":
		for _, f := range []string{"a", "b", "u/c", "l", "stale"} {
			writeFile(t, filepath.Join(target, f), "old content", 0o600)
			os.Chtimes(filepath.Join(target, f), oldStamp, oldStamp)
		}
	}
	if err := os.Symlink(link, filepath.Join(real, "x/t")); err != nil {
		t.Fatal(err)
	}
	switch c.destVia {
	case "link":
		dest = filepath.Join(w, "destlink")
		if err := os.Symlink(real, dest); err != nil {
			t.Fatal(err)
		}
	case "parent":
		if err := os.Symlink(w, filepath.Join(w, "via")); err != nil {
			t.Fatal(err)
		}
		dest = filepath.Join(w, "via", "dest")
	default:
		dest = real
	}
	return dest, target
}

// treeState maps each entry below root (found without following a symlink below root;
// root's own path may hold some) to its type and, for a file, content, mode and mtime;
// for a symlink its target, with the test's directory w written as "W". With inodes, a
// file's inode too: a file rewritten in place of an equal one shows.
func treeState(t testing.TB, w, root string, inodes bool) map[string]string {
	t.Helper()
	root, err := filepath.EvalSymlinks(root)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case rel == ".":
		case fi.Mode()&os.ModeSymlink != 0:
			tgt, _ := os.Readlink(p)
			m[rel] = "link " + strings.Replace(tgt, w, "W", 1)
		case fi.IsDir():
			m[rel] = "dir"
		default:
			data, _ := os.ReadFile(p)
			m[rel] = fmt.Sprintf("file %v %d %q", fi.Mode().Perm(), fi.ModTime().Unix(), data)
			if inodes {
				m[rel] += fmt.Sprint(" ino ", fi.Sys().(*syscall.Stat_t).Ino)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// realUnder fails the test unless dest/rel is as the source has it (type; a file's
// size and mtime; a symlink's target), reached through real directories only: no
// symlink on the way below dest.
func realUnder(t testing.TB, src, dest, rel string) {
	t.Helper()
	parts := strings.Split(rel, "/")
	for i := 1; i < len(parts); i++ {
		p := filepath.Join(dest, filepath.Join(parts[:i]...))
		fi, err := os.Lstat(p)
		if err != nil || !fi.IsDir() {
			t.Errorf("%s: %s is not a real directory in DEST (%v)", rel, filepath.Join(parts[:i]...), describe(fi, err))
			return
		}
	}
	if !landed(src, dest, rel) {
		fi, err := os.Lstat(filepath.Join(dest, rel))
		t.Errorf("%s is not in DEST as in the source (%v)", rel, describe(fi, err))
	}
}

func describe(fi os.FileInfo, err error) string {
	if err != nil {
		return err.Error()
	}
	return fi.Mode().String()
}

// plainRsync copies rels from src to dest with plain rsync -a and the extra options,
// and returns its exit code: the reference for what prsync must leave in DEST.
func plainRsync(t testing.TB, src, dest string, rels []string, extra ...string) int {
	t.Helper()
	args := append(append([]string{"-a"}, extra...), "--from0", "--files-from=-", src+"/", dest+"/")
	cmd := exec.Command("rsync", args...)
	cmd.Stdin = bytes.NewReader(nul(rels...))
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		t.Logf("plain rsync exited %d: %s", ee.ExitCode(), out)
		return ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return 0
}

// TestTruthDestSymlink: DEST holds x/t -> TARGET where the source has the directory x/t/.
// Without -K, rsync replaces the link with a real directory: after exit 0 every path is
// a real file under real directories in DEST, TARGET is untouched, and DEST is what
// plain rsync makes of the same trees (less what --delete removes); a re-run finds
// everything up to date. The paths go through chunks of one, four at once, so that one
// chunk's rsync replaces the link while others are checked.
func TestTruthDestSymlink(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	var cases []linkCase
	for _, list := range []string{"files", "dirs"} {
		for _, target := range []string{"empty", "matching", "different"} {
			for _, del := range []bool{false, true} {
				cases = append(cases, linkCase{list: list, target: target, delete: del, link: "out"})
			}
		}
	}
	cases = append(cases,
		linkCase{list: "files", target: "matching", link: "in"}, // a link that stays in DEST
		linkCase{list: "dirs", target: "matching", link: "in", delete: true},
		linkCase{list: "files", target: "matching", link: "out", destVia: "link"},
		linkCase{list: "dirs", target: "different", link: "out", delete: true, destVia: "link"},
		linkCase{list: "files", target: "matching", link: "out", destVia: "parent"},
	)
	for _, c := range cases {
		t.Run(c.String(), func(t *testing.T) {
			t.Parallel() // each case its own trees, in its own temp dirs
			w, ref := t.TempDir(), t.TempDir()
			dest, target := c.linkTrees(t, w)
			refDest, _ := c.linkTrees(t, ref)
			src := filepath.Join(w, "src")
			outside := c.link == "out"
			before := treeState(t, w, target, true)

			refCode := plainRsync(t, filepath.Join(ref, "src"), refDest, c.rels())
			if refCode != 0 {
				t.Fatalf("plain rsync exited %d", refCode)
			}
			args := []string{"--chunk-files", "1", "-j", "4"}
			if c.delete {
				args = append(args, "--delete")
			}
			r, failed := truthRun(t, src, dest, dest, c.rels(), args...)
			if r.Code != 0 || len(failed) > 0 {
				t.Fatalf("exit %d, failed %v\n%s\n%v", r.Code, failed, r.Stderr, r.OfType("path_failed"))
			}
			for _, rel := range c.rels() {
				realUnder(t, src, dest, rel)
			}
			if outside {
				if after := treeState(t, w, target, true); !maps.Equal(before, after) {
					t.Errorf("the link's target was written:\nbefore %v\nafter  %v", before, after)
				}
			}
			got, want := treeState(t, w, dest, false), treeState(t, ref, refDest, false)
			if c.delete {
				if _, ok := got["x/extra"]; ok {
					t.Error("--delete left x/extra, which the source lacks")
				}
				delete(want, "x/extra")
			}
			if !maps.Equal(got, want) {
				t.Errorf("DEST is not what plain rsync makes of it:\nprsync %v\nrsync  %v", got, want)
			}

			again, _ := truthRun(t, src, dest, dest, c.rels(), args...)
			s := again.Summary(t)
			if again.Code != 0 || num(s, "files_up_to_date") != int64(len(c.rels())) {
				t.Errorf("re-run: exit %d, %d of %d up to date\n%s", again.Code, num(s, "files_up_to_date"), len(c.rels()), again.Stderr)
			}
		})
	}
}

// TestTruthDestSymlinkKeep: with -K after --, rsync writes through DEST's symlink to a
// directory that stays in DEST, and prsync's account follows it there: the files land
// in the target, the link stays, and DEST with the target is what plain rsync -aK makes
// of the same trees (less what --delete removes, through the link too). A link that
// leads out of DEST fails its paths in rsync 3.5.0 (an older rsync writes through it):
// prsync exits as plain rsync does, and claims none of the paths rsync did not write.
func TestTruthDestSymlinkKeep(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	var cases []linkCase
	for _, list := range []string{"files", "dirs"} {
		for _, target := range []string{"empty", "matching", "different"} {
			for _, del := range []bool{false, true} {
				cases = append(cases, linkCase{list: list, target: target, delete: del, link: "in", keep: true})
			}
		}
		cases = append(cases, linkCase{list: list, target: "matching", link: "out", keep: true})
	}
	cases = append(cases, linkCase{list: "files", target: "different", link: "in", keep: true, destVia: "link"})
	for _, c := range cases {
		t.Run(c.String(), func(t *testing.T) {
			t.Parallel() // each case its own trees, in its own temp dirs
			w, ref := t.TempDir(), t.TempDir()
			dest, target := c.linkTrees(t, w)
			refDest, refTarget := c.linkTrees(t, ref)
			src := filepath.Join(w, "src")
			refCode := plainRsync(t, filepath.Join(ref, "src"), refDest, c.rels(), "-K")
			if c.link == "in" && refCode != 0 {
				t.Fatalf("plain rsync -aK exited %d through a symlink that stays in DEST", refCode)
			}

			args := []string{"--chunk-files", "1", "-j", "4"}
			if c.delete {
				args = append(args, "--delete")
			}
			r, failed := linkRun(t, src, dest, c.rels(), append(args, "--", "-K")...)
			if (r.Code == 0) != (refCode == 0) {
				t.Fatalf("exit %d, plain rsync -aK exited %d\n%s", r.Code, refCode, r.Stderr)
			}
			if ls, err := os.Lstat(filepath.Join(w, "dest/x/t")); err != nil || ls.Mode()&os.ModeSymlink == 0 {
				t.Errorf("-K: x/t is no longer a symlink (%v)", describe(ls, err))
			}
			for _, rel := range c.rels() {
				if failed[rel] {
					continue
				}
				if !keptLanded(src, dest, rel) {
					t.Errorf("%s is neither in --failed nor in DEST as rsync -K lays it out (exit %d)", rel, r.Code)
				}
				if r := strings.TrimPrefix(rel, "x/t/"); r != rel && !landed(filepath.Join(src, "x/t"), target, r) {
					t.Errorf("-K: %s is not in the link's target", rel)
				}
			}
			if refCode != 0 {
				for _, rel := range c.rels() {
					if strings.HasPrefix(rel, "x/t/") && !failed[rel] {
						t.Errorf("%s is not in --failed, but rsync wrote nothing below x/t (exit %d)", rel, r.Code)
					}
				}
			}
			got, want := treeState(t, w, dest, false), treeState(t, ref, refDest, false)
			gotT, wantT := treeState(t, w, target, false), treeState(t, ref, refTarget, false)
			if c.delete {
				if _, ok := got["x/extra"]; ok {
					t.Error("--delete left x/extra, which the source lacks")
				}
				if _, ok := gotT["stale"]; ok {
					t.Error("-K --delete left stale in the link's target, which the source lacks")
				}
				delete(want, "x/extra")
				delete(want, "y/store/stale")
				delete(wantT, "stale")
			}
			if !maps.Equal(got, want) || !maps.Equal(gotT, wantT) {
				t.Errorf("DEST is not what plain rsync -aK makes of it:\nprsync %v\n       %v\nrsync  %v\n       %v", got, gotT, want, wantT)
			}
		})
	}
}

// linkRun copies rels from src to a local DEST as truthRun does, and checks the
// accounting identity, but leaves DEST's walk to the caller (with -K, DEST's symlinks
// are part of where paths land). It returns the paths in the --failed list.
func linkRun(t testing.TB, src, dest string, rels []string, args ...string) (*Run, map[string]bool) {
	t.Helper()
	r := listRun(t, src, dest, rels, args...)
	s := r.Identity(t, len(rels))
	if int64(r.Code) != num(s, "exit_code") {
		t.Errorf("exit %d, summary exit_code %d", r.Code, num(s, "exit_code"))
	}
	failed := map[string]bool{}
	for _, p := range r.Failed(t) {
		failed[p] = true
	}
	if r.Code == 0 && len(failed) > 0 {
		t.Errorf("exit 0 with %d paths in --failed", len(failed))
	}
	return r, failed
}

// keptLanded is landed as rsync -K lays DEST out: a directory may be a symlink to one,
// and a path may go through such symlinks.
func keptLanded(src, dest, rel string) bool {
	a, err := os.Lstat(filepath.Join(src, rel))
	if err == nil && a.IsDir() {
		b, err := os.Stat(filepath.Join(dest, rel))
		return err == nil && b.IsDir()
	}
	return landed(src, dest, rel)
}
