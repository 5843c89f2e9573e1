package tests

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestOddNames: find -print0 | prsync -0 --root copies names with newlines, leading dashes,
// '#', ';', spaces, backslashes, colons and invalid UTF-8 byte for byte, and runs none of them.
func TestOddNames(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	w := newWork(t)
	makeOddTree(t, w.Src)
	list, n := listTree(t, w.Src)
	r := runPrsync(t, w.Dir, list, "-0", "-j", "3", "--chunk-files", "4", "--root", w.Src, w.Dst+"/")
	r.Exit(t, 0)
	sameTree(t, w.Src, w.Dst)
	r.Identity(t, n)
	r.Counts(t, map[string]int64{"files_transferred": int64(n)})
	absent(t, "", filepath.Join(w.Dir, "PWNED"), filepath.Join(w.Src, "PWNED"), "PWNED") // no name was run as an option
	if len(r.OfType("chunk_start")) < 2 {
		t.Errorf("want several chunks with --chunk-files 4, got %d", len(r.OfType("chunk_start")))
	}
	// a second run has nothing to do: every path is up to date
	r2 := runPrsync(t, w.Dir, list, "-0", "--root", w.Src, w.Dst+"/")
	r2.Exit(t, 0)
	r2.Identity(t, n)
	r2.Counts(t, map[string]int64{"files_up_to_date": int64(n), "files_transferred": 0})
	noProcsLeft(t, w.Dst)
}

// TestLayouts: absolute input lands under DEST/<absolute path> without --root and directly
// under DEST with it; relative newline input from `find .` lands under DEST.
func TestLayouts(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	w := newWork(t)
	writeFile(t, filepath.Join(w.Src, "ks1", "t1", "a.db"), "a", 0o644)
	writeFile(t, filepath.Join(w.Src, "ks1", "t2", "b.db"), "bb", 0o600)
	abs := nul(filepath.Join(w.Src, "ks1", "t1", "a.db"), filepath.Join(w.Src, "ks1", "t2", "b.db"))

	t.Run("absolute", func(t *testing.T) {
		t.Parallel()
		dst := filepath.Join(w.Dir, "abs")
		r := runPrsync(t, w.Dir, abs, "-0", dst)
		r.Exit(t, 0)
		sameTree(t, w.Src, filepath.Join(dst, w.Src))
		r.Identity(t, 2)
	})
	t.Run("root", func(t *testing.T) {
		t.Parallel()
		dst := filepath.Join(w.Dir, "root")
		r := runPrsync(t, w.Dir, abs, "-0", "-C", w.Src, dst)
		r.Exit(t, 0)
		sameTree(t, w.Src, dst)
	})
	t.Run("relative from find", func(t *testing.T) {
		t.Parallel()
		dst := filepath.Join(w.Dir, "rel")
		cmd := exec.Command("find", ".", "-type", "f")
		cmd.Dir = w.Src
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		r := runPrsync(t, w.Src, out, dst)
		r.Exit(t, 0)
		sameTree(t, w.Src, dst)
		r.Identity(t, 2)
	})
	t.Run("relative with root", func(t *testing.T) {
		t.Parallel()
		dst := filepath.Join(w.Dir, "relroot")
		r := runPrsync(t, w.Dir, []byte("ks1/t1/a.db\n./ks1/t2/b.db\n"), "--root", w.Src, dst)
		r.Exit(t, 0)
		sameTree(t, w.Src, dst)
	})
	t.Run("outside root", func(t *testing.T) {
		t.Parallel()
		dst := filepath.Join(w.Dir, "outside")
		r := runPrsync(t, w.Dir, nul(filepath.Join(w.Src, "ks1", "t1", "a.db"), "/etc/hostname"), "-0", "--root", filepath.Join(w.Src, "ks1"), "--failed", w.Failed, dst)
		r.Exit(t, 23)
		r.PathFailed(t, map[string]string{"/etc/hostname": "failed"})
		if pf := r.OfType("path_failed"); !strings.Contains(fmt.Sprint(pf[0]["reason"]), "outside --root") {
			t.Errorf("path_failed events: %v", pf)
		}
		r.FailedAre(t, "/etc/hostname")
		r.Identity(t, 2)
	})
}

// TestDaemon copies to a real rsync daemon on 127.0.0.1.
func TestDaemon(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	oncePerSuite(t)
	needRsync(t)
	w := newWork(t)
	makeOddTree(t, w.Src)
	os.Remove(filepath.Join(w.Src, "nested", "dangling")) // daemons refuse unsafe links by default
	os.Remove(filepath.Join(w.Src, "link-to-plain"))
	d := startDaemon(t, w.Dst)
	list, n := listTree(t, w.Src)
	r := runPrsync(t, w.Dir, list, "-0", "-j", "2", "--chunk-files", "5", "--root", w.Src, d.URL()+"sub/dir/")
	r.Exit(t, 0)
	sameTree(t, w.Src, filepath.Join(w.Dst, "sub", "dir"))
	r.Identity(t, n)
	d.Stop()
	noProcsLeft(t, d.conf)
}

// TestVanishedAndUnreadable: a missing path gives exit 24 and exactly that path in --failed;
// an unreadable file, copied by an unprivileged user, gives exit 23 and that path.
func TestVanishedAndUnreadable(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	w := newWork(t)
	for _, f := range []string{"a", "b", "c"} {
		writeFile(t, filepath.Join(w.Src, f), f, 0o644)
	}
	t.Run("vanished", func(t *testing.T) {
		t.Parallel()
		dst, fl := filepath.Join(w.Dir, "d1"), filepath.Join(w.Dir, "f1")
		gone := filepath.Join(w.Src, "gone\nname")
		r := runPrsync(t, w.Dir, nul(filepath.Join(w.Src, "a"), gone, filepath.Join(w.Src, "b")), "-0", "--root", w.Src, "--failed", fl, dst)
		r.Exit(t, 24)
		r.FailedAre(t, gone)
		r.Identity(t, 3)
		r.Counts(t, map[string]int64{"files_vanished": 1, "files_transferred": 2})
	})
	t.Run("unreadable", func(t *testing.T) {
		t.Parallel()
		if os.Geteuid() != 0 {
			t.Skip("needs root to run the copy as another user")
		}
		runuser, err := exec.LookPath("setpriv")
		if err != nil {
			t.Skip("no setpriv")
		}
		locked := filepath.Join(w.Src, "locked")
		writeFile(t, locked, "secret", 0o600)
		dst := filepath.Join(w.Dir, "d2")
		os.MkdirAll(dst, 0o777)
		os.Chmod(dst, 0o777)
		fl := filepath.Join(dst, "failed.list")
		os.Chmod(w.Dir, 0o755)
		os.Chmod(filepath.Dir(w.Dir), 0o755)
		r := start(t, startOpts{in: nul(filepath.Join(w.Src, "a"), locked, filepath.Join(w.Src, "c")),
			wrap: []string{runuser, "--reuid=65534", "--regid=65534", "--clear-groups"}},
			"-0", "--root", w.Src, "--failed", fl, dst+"/out").wait(time.Minute)
		r.Exit(t, 23)
		r.FailedAre(t, locked)
		for _, f := range []string{"a", "c"} {
			if _, err := os.Stat(filepath.Join(dst, "out", f)); err != nil {
				t.Errorf("%s not copied: %v", f, err)
			}
		}
		ends := r.OfType("chunk_end")
		if len(ends) != 1 || ends[0]["status"] != "partial" || !strings.Contains(fmt.Sprint(ends[0]["error"]), "locked") {
			t.Errorf("chunk_end: %v", ends)
		}
		r.Identity(t, 3)
	})
}

// TestStreaming: copying starts while stdin is still open.
func TestStreaming(t *testing.T) {
	needRsync(t)
	w := newWork(t)
	for i := 0; i < 6; i++ {
		writeFile(t, filepath.Join(w.Src, fmt.Sprint(i)), "x", 0o644)
	}
	pr, pw := io.Pipe()
	p := start(t, startOpts{stdin: pr}, "-0", "--root", w.Src, "--chunk-wait", "200ms", w.Dst)
	for i := 0; i < 3; i++ {
		fmt.Fprintf(pw, "%s\x00", filepath.Join(w.Src, fmt.Sprint(i)))
	}
	m := p.mustWaitFor("chunk_end while stdin is open", 20*time.Second, is("chunk_end"))
	if num(m, "files") != 3 {
		t.Errorf("first chunk has %d files, want 3", num(m, "files"))
	}
	if _, err := os.Stat(filepath.Join(w.Dst, "2")); err != nil {
		t.Errorf("first chunk not copied before stdin closed: %v", err)
	}
	for i := 3; i < 6; i++ {
		fmt.Fprintf(pw, "%s\x00", filepath.Join(w.Src, fmt.Sprint(i)))
	}
	pw.Close()
	p.wait(time.Minute).Exit(t, 0)
	sameTree(t, w.Src, w.Dst)
}

// TestDryRun plans and reports without copying.
func TestDryRun(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	w := newWork(t)
	writeFile(t, filepath.Join(w.Src, "a"), "a", 0o644)
	r := runPrsync(t, w.Dir, nul(filepath.Join(w.Src, "a")), "-0", "-n", "--root", w.Src, w.Dst)
	r.Exit(t, 0)
	absent(t, "", w.Dst) // a dry run creates no DEST
	r.Counts(t, map[string]int64{"files_transferred": 1})
}
