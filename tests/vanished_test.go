package tests

// "Vanished" must be proven (issue 24, item 2): a path rsync calls vanished counts as
// vanished only when it is shown gone (lstat of a local source, a listing of the far side
// for a remote one). Every case runs the real rsync against a real daemon on 127.0.0.1 and
// walks DEST and the source.

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestVanishedDaemonChroot: --root rsync://HOST/mod/sub pulls from a SUBDIR of a module.
// With `use chroot = no`, rsync 3.5.0's daemon calls every regular file vanished while
// every one exists (docs/rsync-messages.md): prsync must fail them (exit 23) with a reason
// and a hint, count none vanished, and list them all in --failed. With `use chroot = yes`
// (as root) the same pull copies everything.
func TestVanishedDaemonChroot(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	w := t.TempDir()
	mod := filepath.Join(w, "mod")
	sub := filepath.Join(mod, "sub")
	makeOddTree(t, sub)
	writeFile(t, filepath.Join(mod, "only-at-the-top"), "x", 0o644)
	os.Chmod(w, 0o755)
	list, rels := relList(t, sub)
	files := regularFiles(t, sub)

	t.Run("use chroot = no", func(t *testing.T) {
		t.Parallel() // each case its own daemon over the module
		d := startDaemon(t, mod, "read only = yes\nuse chroot = no")
		url := d.URL() + "sub"

		// plain rsync over the same module, to know what this rsync does there
		plain := exec.Command("rsync", "-a", "--files-from=-", "--from0", url+"/", filepath.Join(t.TempDir(), "plain"))
		plain.Stdin = bytes.NewReader(list)
		out, _ := plain.CombinedOutput()
		plainCode := plain.ProcessState.ExitCode()
		t.Logf("plain rsync exits %d:\n%s", plainCode, out)

		dst := filepath.Join(t.TempDir(), "dst")
		// and one path the module does not have, which is gone
		const gone = "nested/not-in-the-module"
		in := append(slices.Clone(rels), gone)
		r := listRun(t, url, dst, in)
		r.DestHolds(t, sub, dst, in)
		s := r.Identity(t, len(in))
		if plainCode == 0 { // an rsync without the fault: the pull copies everything
			r.Exit(t, 24)
			sameTree(t, sub, dst)
			return
		}
		if plainCode != 24 || !strings.Contains(string(out), "file has vanished") {
			t.Fatalf("plain rsync exits %d, want 24 with file has vanished", plainCode)
		}
		r.Exit(t, 23)
		if n := num(s, "files_vanished"); n != 1 {
			t.Errorf("%d paths counted vanished, want only the one gone", n)
		}
		if n := num(s, "files_failed"); n != int64(len(files)) {
			t.Errorf("%d paths failed, want the %d regular files", n, len(files))
		}
		r.FailedAre(t, append(files, gone)...)
		r.ReasonsName(t)
		for _, e := range r.OfType("path_failed") {
			reason := fmt.Sprint(e["reason"])
			if e["path"] == gone {
				if e["status"] != "vanished" || !strings.Contains(reason, "No such file or directory") {
					t.Errorf("%q: %v %q, want vanished", gone, e["status"], reason)
				}
				continue
			}
			if e["status"] != "failed" || !strings.Contains(reason, "rsync called it vanished, but the far side lists it") || !strings.Contains(reason, "file has vanished") {
				t.Errorf("%q: %v %q", e["path"], e["status"], reason)
			}
		}
		if got := regularFiles(t, dst); len(got) != 0 {
			t.Errorf("DEST holds files rsync did not copy: %q", got)
		}
		if !strings.Contains(r.Stderr, "use chroot = no") || !strings.Contains(r.Stderr, "rsyncd.conf") {
			t.Errorf("no hint about the module's path mapping:\n%s", r.Stderr)
		}
		if !strings.Contains(r.Stderr, fmt.Sprintf("%d failed, 1 vanished", len(files))) {
			t.Errorf("stderr does not count the failed and the vanished paths:\n%s", r.Stderr)
		}
		noProcsLeft(t, sub)

		// the hint's way out that needs no change on the far side: the module's top as
		// --root, the SUBDIR in front of each path
		var viaTop []string
		for _, rel := range rels {
			viaTop = append(viaTop, "sub/"+rel)
		}
		dst2 := filepath.Join(t.TempDir(), "dst")
		r = start(t, startOpts{in: nul(viaTop...)}, "-0", "--root", d.URL(), "--no-throttle", dst2).wait(2 * time.Minute)
		r.Exit(t, 0)
		sameTree(t, sub, filepath.Join(dst2, "sub"))
	})

	t.Run("use chroot = yes", func(t *testing.T) {
		t.Parallel()
		if !isRoot() {
			t.Skip("use chroot = yes needs a daemon run as root")
		}
		d := startDaemon(t, mod, "read only = yes\nuse chroot = yes")
		dst := filepath.Join(t.TempDir(), "dst")
		r := listRun(t, d.URL()+"sub", dst, rels)
		r.Exit(t, 0)
		r.DestHolds(t, sub, dst, rels)
		r.Identity(t, len(rels))
		sameTree(t, sub, dst)
	})
}

// TestVanishedReal: files that really vanish still count as vanished (exit 24): one
// removed before the run while it stays in the input, and one removed during the copy,
// after rsync's file list named it and before its sender opened it (the sender is held on
// a big first file by --bwlimit; the file goes once DEST holds that file's temp file).
// From a local source (checked with lstat), and from a daemon and over ssh (checked with a
// listing).
func TestVanishedReal(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	for _, c := range []struct {
		name   string
		daemon bool
		ssh    bool
		sizes  bool
	}{
		{name: "local"},
		{name: "local --sizes", sizes: true},
		{name: "daemon", daemon: true},
		{name: "ssh", ssh: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel() // each case its own trees, and daemon or sshd
			w := newWork(t)
			os.Chmod(w.Dir, 0o755)
			big := make([]byte, 1<<20)
			rand.Read(big)
			writeFile(t, filepath.Join(w.Src, "a-big"), string(big), 0o644)
			for i := 1; i <= 4; i++ {
				writeFile(t, filepath.Join(w.Src, "m", fmt.Sprintf("f%d", i)), strings.Repeat("x", i), 0o644)
			}
			writeFile(t, filepath.Join(w.Src, "z-during"), "goes during the copy", 0o644)
			writeFile(t, filepath.Join(w.Src, "z-before"), "goes before the run", 0o644)
			var in []byte
			rels := []string{"a-big", "m/f1", "m/f2", "m/f3", "m/f4", "z-during", "z-before"}
			for _, rel := range rels {
				if c.sizes {
					in = fmt.Appendf(in, "%d\t", 20)
				}
				in = append(append(in, rel...), 0)
			}
			os.Remove(filepath.Join(w.Src, "z-before"))

			root, rsyncArgs := w.Src, []string{"--bwlimit=256k"}
			if c.ssh {
				sshConfig, _ := startSSHD(t, "")
				root, rsyncArgs = "h0:"+w.Src, append(rsyncArgs, "-e", "ssh -F "+sshConfig)
			}
			if c.daemon {
				root = startDaemon(t, w.Src, "read only = yes").URL()
			}
			dst := w.Dst
			// one chunk, as before chunks were sized by time: z-during vanishes while it runs
			args := []string{"-0", "--root", root, "--failed", w.Failed, "--no-throttle", "--chunk-time", "0"}
			if c.sizes {
				args = append(args, "--sizes")
			}
			p := start(t, startOpts{in: in}, append(append(args, dst, "--"), rsyncArgs...)...)
			removed := false
			for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
				if m, _ := filepath.Glob(filepath.Join(dst, ".a-big.*")); len(m) > 0 {
					removed = os.Remove(filepath.Join(w.Src, "z-during")) == nil
					break
				}
			}
			r := p.wait(2 * time.Minute)
			if !removed {
				t.Fatalf("the big file's temp file never showed in DEST\n%s", r.Stderr)
			}
			r.Exit(t, 24)
			r.DestHolds(t, w.Src, dst, rels)
			if c.sizes { // the list holds the records as read
				r.FailedAre(t, "20\tz-before", "20\tz-during")
			} else {
				r.FailedAre(t, "z-before", "z-during")
			}
			r.ReasonsName(t)
			r.Identity(t, len(rels))
			r.Counts(t, map[string]int64{"files_vanished": 2, "files_failed": 0, "files_transferred": 5})
			for _, e := range r.OfType("path_failed") {
				if e["status"] != "vanished" {
					t.Errorf("%q: %v %q", e["path"], e["status"], e["reason"])
				}
				if e["path"] == "z-during" && !strings.Contains(fmt.Sprint(e["reason"]), "file has vanished") {
					t.Errorf("z-during did not vanish during the copy: %q", e["reason"])
				}
			}
			if got := regularFiles(t, dst); len(got) != 5 {
				t.Errorf("DEST holds %q, want the 5 files left", got)
			}
			sameTree(t, w.Src, dst)
			noProcsLeft(t, w.Src)
		})
	}
}

// TestVanishedListingFails: when the listing that is to prove a vanish fails itself, the
// paths rsync called vanished are failed with the listing's error, not vanished. The copy
// is the real rsync's; only its --list-only run fails (the fake rsync).
func TestVanishedListingFails(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	w := newWork(t)
	os.Chmod(w.Dir, 0o755)
	rels := []string{"a", "b", "gone"}
	for _, rel := range rels[:2] {
		writeFile(t, filepath.Join(w.Src, rel), rel, 0o644)
	}
	d := startDaemon(t, w.Src, "read only = yes")
	env := []string{"PRSYNC_TEST_FAKE_RSYNC=list-only-fails:10"}
	r := start(t, startOpts{in: nul(rels...), env: env}, "-0", "--rsync", fakeRsyncPath(t), "--root", d.URL(), "--failed", w.Failed, "--no-throttle", w.Dst).wait(time.Minute)
	r.Exit(t, 23)
	r.DestHolds(t, w.Src, w.Dst, rels)
	r.FailedAre(t, "gone")
	r.ReasonsName(t)
	r.Identity(t, 3)
	r.Counts(t, map[string]int64{"files_vanished": 0, "files_failed": 1, "files_transferred": 2})
	for _, e := range r.OfType("path_failed") {
		if reason := fmt.Sprint(e["reason"]); e["status"] != "failed" || !strings.Contains(reason, "listing the far side to prove it failed") || !strings.Contains(reason, "Connection refused") {
			t.Errorf("%q: %v %q", e["path"], e["status"], reason)
		}
	}
	if got := regularFiles(t, w.Dst); len(got) != 2 {
		t.Errorf("DEST holds %q, want a and b", got)
	}
}

// TestVanishedAfterCopy (issue 44, item 2): sources deleted while the copy runs (a
// compaction, a log rotation), some after rsync copied them and others before it reached
// them, in the same chunks. A path whose DEST copy is the one rsync wrote is transferred
// whatever happened to its source afterwards (rsync's line for it and DEST's lstat prove
// it); a path gone before its copy is vanished, with a reason about itself; the run exits
// 24. In both transports. DEST is walked against the files as they were written.
func TestVanishedAfterCopy(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	for _, transport := range []string{"pipe", "direct", "daemon"} {
		t.Run(transport, func(t *testing.T) {
			t.Parallel() // each transport its own trees
			w := newWork(t)
			src, dst := w.Src, w.Dst
			dest := dst
			if transport == "daemon" {
				// a push to a daemon: the copy is confirmed by a dry run, and a source deleted
				// since by a listing of DEST
				if err := os.Mkdir(dst, 0o755); err != nil {
					t.Fatal(err)
				}
				dest, transport = startDaemon(t, dst).URL(), "direct"
			}
			content := map[string]string{}
			var rels []string
			for d := range 4 {
				for f := range 60 {
					rel := fmt.Sprintf("d%d/f%03d", d, f)
					content[rel] = strings.Repeat(rel, 4096/len(rel))
					writeFile(t, filepath.Join(src, rel), content[rel], 0o644)
					rels = append(rels, rel)
				}
			}
			// 2 rsyncs of 2 chunks each, ~1 MB at 256 KiB/s each: about 2 s of copying
			p := start(t, startOpts{dir: w.Dir, in: lines(rels...)}, "--no-throttle", "--transport", transport,
				"-j", "2", "--chunk-files", "60", "--chunk-time", "0", "--root", src, "--failed", w.Failed, dest, "--", "--bwlimit=256")
			// the deleter: the source of every other file complete in DEST, and, at each
			// such deletion, a file rsync has not reached yet
			deletedAfter, deletedBefore := map[string]bool{}, map[string]bool{}
			done := make(chan struct{})
			go func() {
				defer close(done)
				ahead := len(rels) - 1
				for n := 0; n < 3000; n++ {
					if p.ended() {
						return
					}
					for _, rel := range rels {
						fi, err := os.Lstat(filepath.Join(dst, rel))
						if err != nil || fi.Size() != int64(len(content[rel])) || deletedAfter[rel] || deletedBefore[rel] || len(deletedAfter)%2 == 1 && rel[len(rel)-1]%2 == 0 {
							continue
						}
						if os.Remove(filepath.Join(src, rel)) == nil {
							deletedAfter[rel] = true
						}
						for ; ahead > 0; ahead-- {
							if _, err := os.Lstat(filepath.Join(dst, rels[ahead])); err != nil && !deletedAfter[rels[ahead]] && !deletedBefore[rels[ahead]] {
								if os.Remove(filepath.Join(src, rels[ahead])) == nil {
									deletedBefore[rels[ahead]] = true
								}
								ahead -= 7
								break
							}
						}
					}
					time.Sleep(20 * time.Millisecond)
				}
			}()
			r := p.wait(2 * time.Minute)
			<-done
			if len(deletedAfter) == 0 || len(deletedBefore) == 0 {
				t.Fatalf("the deleter removed %d sources after their copy and %d before: the copy was too quick\n%s", len(deletedAfter), len(deletedBefore), r.Stderr)
			}
			s := r.Identity(t, len(rels))
			failed := map[string]bool{}
			for _, p := range r.Failed(t) {
				failed[p] = true
			}
			// DEST, walked: every path not in --failed is there as it was written
			vanished := 0
			for _, rel := range rels {
				b, err := os.ReadFile(filepath.Join(dst, rel))
				switch {
				case err == nil && string(b) != content[rel]:
					t.Errorf("DEST's %s is not the file that was copied", rel)
				case err == nil && failed[rel]:
					t.Errorf("%s: DEST holds its complete copy, yet it is in --failed", rel)
				case err != nil && !failed[rel]:
					t.Errorf("%s is neither in DEST nor in --failed", rel)
				case err != nil && !deletedBefore[rel] && !deletedAfter[rel]:
					t.Errorf("%s is not in DEST, and its source was never deleted", rel)
				case err != nil:
					vanished++
				}
			}
			if got := num(s, "files_failed"); got != 0 {
				t.Errorf("files_failed %d, want 0: every loss is a source gone before its copy", got)
			}
			if got := num(s, "files_vanished"); got != int64(vanished) {
				t.Errorf("files_vanished %d, but %d paths are missing from DEST", got, vanished)
			}
			for _, e := range r.OfType("path_failed") {
				path, reason := fmt.Sprint(e["path"]), fmt.Sprint(e["reason"])
				if e["status"] != "vanished" {
					t.Errorf("%s: %v (%s)", path, e["status"], reason)
				}
				if !strings.Contains(reason, path) {
					t.Errorf("%s: the reason %q is not about the path itself", path, reason)
				}
			}
			r.Exit(t, 24)
			t.Logf("%d sources deleted after their copy, %d before; %d vanished", len(deletedAfter), len(deletedBefore), vanished)
			noTempFiles(t, dst)
			noProcsLeft(t, w.Dir)
		})
	}
}
