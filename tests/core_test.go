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
	if got := num(r.Summary(t), "files_transferred"); got != int64(n) {
		t.Errorf("files_transferred %d, want %d", got, n)
	}
	for _, p := range []string{filepath.Join(w.Dir, "PWNED"), filepath.Join(w.Src, "PWNED"), "PWNED"} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s exists: a name was run as an option", p)
		}
	}
	if len(r.OfType("chunk_start")) < 2 {
		t.Errorf("want several chunks with --chunk-files 4, got %d", len(r.OfType("chunk_start")))
	}
	// a second run has nothing to do: every path is up to date
	r2 := runPrsync(t, w.Dir, list, "-0", "--root", w.Src, w.Dst+"/")
	s2 := r2.Summary(t)
	if r2.Code != 0 || num(s2, "files_up_to_date") != int64(n) || num(s2, "files_transferred") != 0 {
		t.Errorf("re-run: exit %d, summary %v", r2.Code, s2)
	}
	checkIdentity(t, s2, int64(n))
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
		dst := filepath.Join(w.Dir, "abs")
		r := runPrsync(t, w.Dir, abs, "-0", dst)
		r.Exit(t, 0)
		sameTree(t, w.Src, filepath.Join(dst, w.Src))
		r.Identity(t, 2)
	})
	t.Run("root", func(t *testing.T) {
		dst := filepath.Join(w.Dir, "root")
		r := runPrsync(t, w.Dir, abs, "-0", "-C", w.Src, dst)
		r.Exit(t, 0)
		sameTree(t, w.Src, dst)
	})
	t.Run("relative from find", func(t *testing.T) {
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
		dst := filepath.Join(w.Dir, "relroot")
		r := runPrsync(t, w.Dir, []byte("ks1/t1/a.db\n./ks1/t2/b.db\n"), "--root", w.Src, dst)
		r.Exit(t, 0)
		sameTree(t, w.Src, dst)
	})
	t.Run("outside root", func(t *testing.T) {
		dst := filepath.Join(w.Dir, "outside")
		fl := filepath.Join(w.Dir, "outside.failed")
		r := runPrsync(t, w.Dir, nul(filepath.Join(w.Src, "ks1", "t1", "a.db"), "/etc/hostname"), "-0", "--root", filepath.Join(w.Src, "ks1"), "--failed", fl, dst)
		r.Exit(t, 23)
		pf := r.OfType("path_failed")
		if len(pf) != 1 || pf[0]["path"] != "/etc/hostname" || !strings.Contains(fmt.Sprint(pf[0]["reason"]), "outside --root") {
			t.Errorf("path_failed events: %v", pf)
		}
		if b, _ := os.ReadFile(fl); string(b) != "/etc/hostname\x00" {
			t.Errorf("--failed holds %q", b)
		}
		r.Identity(t, 2)
	})
}

// TestDaemon copies to a real rsync daemon on 127.0.0.1.
func TestDaemon(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	oncePerSuite(t)
	needRsync(t)
	w := t.TempDir()
	src, mod := filepath.Join(w, "src"), filepath.Join(w, "module")
	os.MkdirAll(mod, 0o755)
	makeOddTree(t, src)
	os.Remove(filepath.Join(src, "nested", "dangling")) // daemons refuse unsafe links by default
	os.Remove(filepath.Join(src, "link-to-plain"))
	d := startDaemon(t, mod)
	list, n := listTree(t, src)
	r := runPrsync(t, w, list, "-0", "-j", "2", "--chunk-files", "5", "--root", src, d.URL()+"sub/dir/")
	if r.Code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.Code, r.Stderr, r.Stdout)
	}
	sameTree(t, src, filepath.Join(mod, "sub", "dir"))
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
		dst, fl := filepath.Join(w.Dir, "d1"), filepath.Join(w.Dir, "f1")
		gone := filepath.Join(w.Src, "gone\nname")
		r := runPrsync(t, w.Dir, nul(filepath.Join(w.Src, "a"), gone, filepath.Join(w.Src, "b")), "-0", "--root", w.Src, "--failed", fl, dst)
		r.Exit(t, 24)
		if b, _ := os.ReadFile(fl); string(b) != gone+"\x00" {
			t.Errorf("--failed holds %q", b)
		}
		s := r.Summary(t)
		if num(s, "files_vanished") != 1 || num(s, "files_transferred") != 2 {
			t.Errorf("summary %v", s)
		}
		checkIdentity(t, s, 3)
	})
	t.Run("unreadable", func(t *testing.T) {
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
		if b, _ := os.ReadFile(fl); string(b) != locked+"\x00" {
			t.Errorf("--failed holds %q", b)
		}
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
	if r := p.wait(time.Minute); r.Code != 0 {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
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
	if _, err := os.Stat(w.Dst); err == nil {
		t.Error("dry run created DEST")
	}
	if s := r.Summary(t); num(s, "files_transferred") != 1 {
		t.Errorf("dry run reports %v", s)
	}
}
