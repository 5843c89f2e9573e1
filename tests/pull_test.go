package tests

// Pull mode (issue 13): a remote --root (rsync daemon, ssh) into a local DEST, and
// --sizes, where the list carries the sizes and the source is never lstat'ed.

import (
	"bytes"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPullDaemon: a daemon's module as the source, odd names, nested directories and
// symlinks; with and without --sizes.
func TestPullDaemon(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	oncePerSuite(t)
	needRsync(t)
	mod := filepath.Join(t.TempDir(), "mod")
	makeOddTree(t, mod)
	d := startDaemon(t, mod, "read only = yes")
	for _, sized := range []bool{false, true} {
		t.Run(fmt.Sprintf("sizes=%v", sized), func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "dst")
			list, rels := relList(t, mod)
			args := []string{"-0", "--root", d.URL(), dst}
			if sized {
				list, _ = sizedList(t, mod)
				args = append([]string{"--sizes"}, args...)
			}
			r := start(t, startOpts{in: list}, args...).wait(time.Minute)
			r.Exit(t, 0)
			st := r.Start(t)
			if st["source_remote"] != true || st["quick_check"] != false || st["transport"] != "direct" || st["sizes"] != sized {
				t.Errorf("start event: %v", st)
			}
			r.Identity(t, len(rels))
			sameTree(t, mod, dst)
		})
	}
}

// TestPullSSH: pull over ssh from the suite's private sshd on 127.0.0.1.
func TestPullSSH(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	sshConfig, _ := startSSHD(t, "")
	w := newWork(t)
	makeOddTree(t, w.Src)
	list, rels := relList(t, w.Src)
	r := start(t, startOpts{in: list}, "-0", "--root", "h0:"+w.Src, w.Dst, "--", "-e", "ssh -F "+sshConfig).wait(time.Minute)
	r.Exit(t, 0)
	r.Identity(t, len(rels))
	sameTree(t, w.Src, w.Dst)

	// absolute input paths must lie under the root; others fail with a reason
	dst2 := filepath.Join(w.Dir, "dst2")
	in := nul(filepath.Join(w.Src, "plain.db"), "/etc/hostname", "../escape")
	r = start(t, startOpts{in: in}, "-0", "--root", "h0:"+w.Src, dst2, "--", "-e", "ssh -F "+sshConfig).wait(time.Minute)
	r.Exit(t, 23)
	r.PathFailed(t, map[string]string{"/etc/hostname": "failed", "../escape": "failed"})
	if _, err := os.Stat(filepath.Join(dst2, "plain.db")); err != nil {
		t.Errorf("the absolute path under the root was not copied: %v", err)
	}
}

// TestSizes: with --sizes, chunks close by the sizes the list gives (here made up, much
// bigger than the files), the source is never lstat'ed (a path that does not exist goes
// to rsync, which says it vanished, instead of prsync's own lstat), and malformed records
// are failed paths.
func TestSizes(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	w := newWork(t)
	var in bytes.Buffer
	for i := 0; i < 6; i++ {
		name := fmt.Sprintf("f%d", i)
		writeFile(t, filepath.Join(w.Src, name), "tiny", 0o644)
		fmt.Fprintf(&in, "%d\t%s\x00", (i+1)<<20, name) // says 1..6 MiB
	}
	writeFile(t, filepath.Join(w.Src, "tab\there"), "tab", 0o644)
	in.WriteString("3\ttab\there\x00")             // only the first tab splits
	in.WriteString("100\tnot-there\x00")           // no lstat: rsync finds it missing
	in.WriteString("no-tab-at-all\x00")            // malformed
	in.WriteString("12kb\tf0\x00")                 // malformed size
	in.WriteString("99999999999999999999\tf1\x00") // out of range
	r := start(t, startOpts{stdin: &in}, "-0", "--sizes", "--root", w.Src, "--chunk-bytes", "4M", "--failed", w.Failed,
		"-j", "1", w.Dst).wait(time.Minute)
	r.Exit(t, 23)
	s := r.Identity(t, 11)
	r.Counts(t, map[string]int64{"files_transferred": 7, "files_vanished": 1, "files_failed": 3})
	if got := num(s, "bytes"); got != 21<<20+3+100 {
		t.Errorf("summary bytes %d, want the sizes the list gave (%d)", got, 21<<20+3+100)
	}
	var bytesOf []int64
	for _, c := range r.OfType("chunk_start") {
		bytesOf = append(bytesOf, num(c, "bytes"))
	}
	// 1+2 MiB, then 3, 4, 5, 6 MiB each alone (4M closes a chunk), then the small ones
	for _, b := range bytesOf {
		if b > 4<<20 && b != 5<<20 && b != 6<<20 {
			t.Errorf("a chunk of %d bytes: chunks did not close by the given sizes (%v)", b, bytesOf)
		}
	}
	if len(bytesOf) < 5 {
		t.Errorf("%d chunks %v; the given sizes should make at least 5", len(bytesOf), bytesOf)
	}
	for _, e := range r.OfType("path_failed") {
		reason := fmt.Sprint(e["reason"])
		switch e["path"] {
		case "100\tnot-there":
			if e["status"] != "vanished" || strings.Contains(reason, "lstat:") || !strings.Contains(reason, "rsync") {
				t.Errorf("not-there: %v %q; want vanished, as rsync said (prsync made no lstat)", e["status"], reason)
			}
		case "no-tab-at-all", "12kb\tf0", "99999999999999999999\tf1":
			if e["status"] != "failed" || !strings.Contains(reason, "--sizes") {
				t.Errorf("%q: %v %q", e["path"], e["status"], reason)
			}
		default:
			t.Errorf("unexpected path_failed %v", e)
		}
	}
	// the --failed list holds the records as read, so it pipes back in with --sizes
	r.FailedAre(t, "100\tnot-there", "no-tab-at-all", "12kb\tf0", "99999999999999999999\tf1")
	if b, _ := os.ReadFile(filepath.Join(w.Dst, "tab\there")); string(b) != "tab" {
		t.Errorf("a path holding a tab: %q", b)
	}
}

// TestSizesFindRoot: `find ROOT -printf '%s\t%P\0'` begins with ROOT itself, whose %P is
// empty; that record is the root, ".", and its mode and mtime reach DEST like any
// directory's, with exit 0 (it was a failed path, exit 23, on every such list).
func TestSizesFindRoot(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	if err := osexec.Command("find", ".", "-maxdepth", "0", "-printf", "%P").Run(); err != nil {
		t.Skipf("find has no -printf (not GNU find): %v", err)
	}
	w := newWork(t)
	writeFile(t, filepath.Join(w.Src, "top"), "top", 0o644)
	writeFile(t, filepath.Join(w.Src, "d", "f"), "in d", 0o600)
	old := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, d := range []string{filepath.Join(w.Src, "d"), w.Src} {
		if err := os.Chmod(d, 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(d, old, old); err != nil {
			t.Fatal(err)
		}
	}
	list, err := osexec.Command("find", w.Src, "-printf", `%s\t%P\0`).Output()
	if err != nil {
		t.Fatal(err)
	}
	recs := bytes.Split(bytes.TrimSuffix(list, []byte{0}), []byte{0})
	if len(recs) != 4 || !bytes.HasSuffix(recs[0], []byte("\t")) {
		t.Fatalf("find's list %q: want 4 records, the first the root's with no path", list)
	}
	r := start(t, startOpts{in: list}, "-0", "--sizes", "--root", w.Src, "-j", "2", w.Dst).wait(time.Minute)
	r.Exit(t, 0)
	r.Identity(t, 4)
	r.Counts(t, map[string]int64{"files_failed": 0, "files_transferred": 4})
	sameTree(t, w.Src, w.Dst)
	destHasRootAttrs(t, w.Dst, 0o750, old)
}

// TestPullFaults: on the remote side, a path that vanished between listing and copying is
// vanished (exit 24), one the daemon cannot read is failed (exit 23); a daemon whose max
// connections is below -j still serves the whole pull.
func TestPullFaults(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	oncePerSuite(t)
	needRsync(t)
	if !isRoot() {
		t.Skip("needs root (a daemon running as nobody, a file only root can read)")
	}
	w := t.TempDir()
	mod := filepath.Join(w, "mod")
	os.Chmod(w, 0o755)
	names := spreadFiles(t, mod, 12, 3, 20000)
	t.Run("vanished and unreadable", func(t *testing.T) {
		writeFile(t, filepath.Join(mod, "secret"), "root only", 0o600)
		d := startDaemon(t, mod, "uid = nobody\ngid = nogroup\nread only = yes")
		w := newWork(t)
		r := start(t, startOpts{in: nul(append([]string{"gone/away", "secret"}, names...)...)},
			"-0", "--root", d.URL(), "--failed", w.Failed, w.Dst).wait(time.Minute)
		r.Exit(t, 23)
		r.PathFailed(t, map[string]string{"gone/away": "vanished", "secret": "failed"})
		r.FailedAre(t, "gone/away", "secret")
		for _, n := range names {
			if !landed(mod, w.Dst, n) {
				t.Errorf("%s not copied", n)
			}
		}
		// only vanished: exit 24
		r = start(t, startOpts{in: nul("gone/away", names[0])}, "-0", "--root", d.URL(),
			filepath.Join(t.TempDir(), "dst")).wait(time.Minute)
		r.Exit(t, 24) // only a vanished path
	})
	t.Run("max connections below -j", func(t *testing.T) {
		d := startDaemon(t, mod, "read only = yes\nmax connections = 2")
		dst := filepath.Join(t.TempDir(), "dst")
		r := listRun(t, d.URL(), dst, names, "-j", "8", "--chunk-files", "1", "--", "--bwlimit=1m")
		r.Exit(t, 0)
		r.DestHolds(t, mod, dst, names)
		if len(r.OfType("jobs")) == 0 {
			t.Errorf("no jobs event: the limit did not come down")
		}
	})
}
