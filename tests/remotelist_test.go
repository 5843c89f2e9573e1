package tests

// The lists of a push held on the far side (--remote-lists, issue 45): in a push to a
// daemon or over ssh, each chunk's rsync reads its list with --files-from=:NAME, which the
// far side sends in blocks, from DEST/.prsync-lists/HOST-PID-START.CHUNK. The lists are
// never copied, never deleted by --delete, gone once the run ends, swept by the next run
// after a crash, and prsync falls back to stdin where the far side cannot hold them.

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const listDir = ".prsync-lists"

// remoteLists returns the summary's remote_lists object, or nil.
func remoteLists(t testing.TB, r *Run) map[string]any {
	t.Helper()
	m, _ := r.Summary(t)["remote_lists"].(map[string]any)
	return m
}

// remoteStarts counts the chunk_start events whose rsync read its list on the far side.
func remoteStarts(r *Run) int {
	n := 0
	for _, e := range r.OfType("chunk_start") {
		if e["list"] == "remote" {
			n++
		}
	}
	return n
}

// noListsLeft fails if DEST holds the lists' directory.
func noListsLeft(t testing.TB, dst string) {
	t.Helper()
	if ents, err := os.ReadDir(filepath.Join(dst, listDir)); err == nil {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("%s left in DEST, holding %q", listDir, names)
	}
}

// The mode and mtime of longTree's root, which a copy gives DEST itself: the removal of
// the lists' directory must come before the root's chunk, which sets them.
const longTreeRootPerm = 0o750

var longTreeRootTime = time.Date(2020, 2, 3, 4, 5, 6, 0, time.UTC)

// longTree writes n files with long names (the lists of a few chunks pass 32 KiB: auto
// puts them on the far side) plus the odd names, and returns the input, NUL-separated,
// relative to src, with the root (.) first, as find prints it. The root gets
// longTreeRootPerm and longTreeRootTime.
func longTree(t testing.TB, src string, n int) ([]byte, int) {
	t.Helper()
	makeOddTree(t, src)
	// a daemon without chroot takes the leading / off an absolute symlink's target
	// (sanitize_paths): not a list's doing
	if err := os.Remove(filepath.Join(src, "nested", "dangling")); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		writeFile(t, filepath.Join(src, fmt.Sprintf("keyspace_%02d/table_with_a_rather_long_name-%04d", i%7, i%40),
			fmt.Sprintf("nb-%05d-big-Statistics-component.db", i)), strings.Repeat("s", i%300), 0o644)
	}
	if err := errors.Join(os.Chmod(src, longTreeRootPerm), os.Chtimes(src, longTreeRootTime, longTreeRootTime)); err != nil {
		t.Fatal(err)
	}
	var list []byte
	count := 0
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		list = append(append(list, rel...), 0)
		count++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return list, count
}

// TestRemoteListDaemon: a push to a daemon with the lists on the far side copies exactly,
// odd names included (a newline, a leading # or ;, a leading -, spaces, invalid UTF-8):
// with on, every chunk but the root's reads its list there; with auto (the default), the
// chunks after the opening do, with fewer uploads than such chunks. Nothing is left in DEST.
func TestRemoteListDaemon(t *testing.T) {
	t.Parallel()
	needRsync(t)
	for _, mode := range []string{"on", "auto"} {
		t.Run(mode, func(t *testing.T) {
			w := t.TempDir()
			src, dst := filepath.Join(w, "src"), filepath.Join(w, "dst")
			os.MkdirAll(dst, 0o755)
			list, n := longTree(t, src, 3000)
			d := startDaemon(t, dst)
			args := []string{"-0", "--root", src, "--no-throttle"}
			if mode == "on" {
				args = append(args, "--remote-lists", "on")
			}
			r := runPrsync(t, "", list, append(args, d.URL())...)
			if r.Code != 0 {
				t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
			}
			s := r.Summary(t)
			identity(t, s, int64(n))
			sameTree(t, src, dst) // a walk of DEST: exactly the source, and no list
			noListsLeft(t, dst)
			destHasRootAttrs(t, dst, longTreeRootPerm, longTreeRootTime)
			if st := r.OfType("start"); len(st) != 1 || st[0]["remote_lists"] != mode {
				t.Errorf("start event's remote_lists %v, want %q", st[0]["remote_lists"], mode)
			}
			rl := remoteLists(t, r)
			if rl == nil || rl["off"] != nil || num(rl, "uploads") < 1 || num(rl, "uploads_failed") != 0 {
				t.Fatalf("summary's remote_lists %v: want uploads, none failed, not off", rl)
			}
			// the last chunk to end had read its list before its end, and freed its slot:
			// the lists go then at the latest, beside the copy, before the root's chunk
			if rl["removal"] != "early" {
				t.Errorf("summary's remote_lists removal %v, want early", rl["removal"])
			}
			starts, remote := len(r.OfType("chunk_start")), remoteStarts(r)
			if int64(remote) != num(rl, "rsyncs") {
				t.Errorf("%d chunk_start events with a remote list, the summary says %d", remote, num(rl, "rsyncs"))
			}
			switch mode {
			case "on":
				if remote != starts-1 { // the root's chunk reads its one entry on stdin
					t.Errorf("%d of %d rsyncs read their list on the far side, want all but the root's", remote, starts)
				}
			case "auto":
				// an upload runs for a chunk that then reads its list there, and carries the
				// lists of the chunks cut by then
				if remote < 1 || num(rl, "uploads") > int64(remote) {
					t.Errorf("%d rsyncs read a remote list after %d uploads: want some, and no more uploads than them", remote, num(rl, "uploads"))
				}
			}
			t.Logf("%d chunks, %d with a remote list, %d uploads", starts, remote, num(rl, "uploads"))
		})
	}
}

// sshTarget starts a private sshd on 127.0.0.1 (root, sshd, ssh-keygen) and returns the
// environment that makes rsync reach it as host "h0" (RSYNC_RSH with the test's ssh
// config); the test is skipped where that cannot run.
func sshTarget(t *testing.T) []string {
	t.Helper()
	if !isRoot() {
		t.Skip("sshd: needs root (a private sshd logs in as root with a test key)")
	}
	bins := map[string]string{}
	for _, p := range []string{"sshd", "ssh", "ssh-keygen"} {
		if bins[p] = scaleLook(p); bins[p] == "" {
			t.Skipf("%s not installed (apt-get install openssh-server openssh-client)", p)
		}
	}
	d := t.TempDir()
	for _, k := range []string{"hostkey", "clientkey"} {
		if out, err := exec.Command(bins["ssh-keygen"], "-q", "-t", "ed25519", "-N", "", "-C", "prsync-test", "-f", filepath.Join(d, k)).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v\n%s", err, out)
		}
	}
	pub, err := os.ReadFile(filepath.Join(d, "clientkey.pub"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(d, "authorized_keys"), string(pub), 0o600)
	if err := privsepDir.hold(); err != nil {
		t.Skipf("sshd: cannot create its privilege-separation directory /run/sshd: %v", err)
	}
	t.Cleanup(privsepDir.release)
	port := freePort(t)
	cfg := fmt.Sprintf("Port %d\nListenAddress 127.0.0.1\nHostKey %[2]s/hostkey\nPidFile %[2]s/sshd.pid\n"+
		"AuthorizedKeysFile %[2]s/authorized_keys\nPermitRootLogin prohibit-password\nPubkeyAuthentication yes\n"+
		"PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nX11Forwarding no\n"+
		"AllowTcpForwarding no\nMaxStartups 20\n", port, d)
	sc := filepath.Join(d, "sshd_config")
	writeFile(t, sc, cfg, 0o600)
	if out, err := exec.Command(bins["sshd"], "-t", "-f", sc).CombinedOutput(); err != nil {
		t.Skipf("sshd -t: %v: %s", err, out)
	}
	startChildDaemon(t, "sshd", cleanEnv(), filepath.Join(d, "sshd.log"), bins["sshd"], "-D", "-e", "-f", sc)
	client := filepath.Join(d, "ssh_config")
	writeFile(t, client, fmt.Sprintf("Host h0\n  HostName 127.0.0.1\n  Port %d\n  User root\n  IdentityFile %[2]s/clientkey\n"+
		"  IdentitiesOnly yes\n  UserKnownHostsFile %[2]s/known_hosts\n  StrictHostKeyChecking accept-new\n  BatchMode yes\n"+
		"  LogLevel ERROR\n  ConnectTimeout 10\n", port, d), 0o600)
	var out []byte
	for i := 0; i < 100; i++ {
		if out, err = exec.Command(bins["ssh"], "-F", client, "h0", "true").CombinedOutput(); err == nil {
			return []string{"RSYNC_RSH=" + bins["ssh"] + " -F " + client}
		}
		time.Sleep(50 * time.Millisecond)
	}
	log, _ := os.ReadFile(filepath.Join(d, "sshd.log"))
	t.Fatalf("ssh h0 true: %v\n%s\nsshd log:\n%s", err, out, log)
	return nil
}

// TestRemoteListSSH: a push over ssh to 127.0.0.1 with the lists on the far side (their
// path is DEST's own there) copies exactly, odd names included, and leaves no list.
func TestRemoteListSSH(t *testing.T) {
	t.Parallel()
	needRsync(t)
	env := sshTarget(t)
	w := t.TempDir()
	src, dst := filepath.Join(w, "src"), filepath.Join(w, "dst")
	os.MkdirAll(dst, 0o755)
	list, n := longTree(t, src, 600)
	r := start(t, startOpts{stdin: bytes.NewReader(list), env: env}, "-0", "--root", src, "--no-throttle", "--remote-lists", "on", "h0:"+dst).wait(5 * time.Minute)
	copiedNoLists(t, r, src, dst, n)
	rl := remoteLists(t, r)
	if rl == nil || rl["off"] != nil || remoteStarts(r) < 1 {
		t.Errorf("summary's remote_lists %v, %d rsyncs with a remote list: want some, not off", rl, remoteStarts(r))
	}
}

// TestRemoteListKilled: an rsync of prsync's killed (SIGKILL, by its PID) while it copies
// with a remote list is retried, and the run leaves no list; prsync itself killed leaves
// its lists in DEST and its staging directory in TMPDIR, and the next run into DEST copies
// exactly and sweeps both.
func TestRemoteListKilled(t *testing.T) {
	t.Parallel()
	needRsync(t)
	w := t.TempDir()
	src, dst := filepath.Join(w, "src"), filepath.Join(w, "dst")
	os.MkdirAll(dst, 0o755)
	list, n := longTree(t, src, 400)
	d := startDaemon(t, dst)
	args := []string{"-0", "--root", src, "--no-throttle", "--remote-lists", "on", "-j", "2", "--chunk-files", "100"}
	remoteStarted := func(e map[string]any) bool { return e["type"] == "chunk_start" && e["list"] == "remote" }

	t.Run("rsync", func(t *testing.T) {
		p := start(t, startOpts{stdin: bytes.NewReader(list)}, append(args, d.URL(), "--", "--bwlimit=20k")...)
		e := p.mustWaitFor("chunk_start with a remote list", time.Minute, remoteStarted)
		pid := int(num(e, "pid"))
		time.Sleep(200 * time.Millisecond)
		syscall.Kill(pid, syscall.SIGKILL) // prsync's child, by its PID
		r := p.wait(5 * time.Minute)
		copiedNoLists(t, r, src, dst, n)
	})

	t.Run("prsync", func(t *testing.T) {
		os.RemoveAll(dst)
		os.MkdirAll(dst, 0o755)
		tmp := t.TempDir() // the runs' TMPDIR, where they stage their lists
		env := []string{"TMPDIR=" + tmp}
		p := start(t, startOpts{stdin: bytes.NewReader(list), env: env}, append(args, d.URL(), "--", "--bwlimit=10k")...)
		p.mustWaitFor("chunk_start with a remote list", time.Minute, remoteStarted)
		// prsync and all it started (its rsyncs and their uploads, in groups of their own,
		// would outlive it), then the daemon's sessions with them: DEST holds what it will
		killTree(t, p.cmd.Process.Pid)
		p.wait(time.Minute)
		settle(t, "the daemon's sessions", func() bool { return len(children(d.PID())) == 0 })
		left, err := os.ReadDir(filepath.Join(dst, listDir))
		if err != nil || len(left) == 0 {
			t.Fatalf("a killed prsync left no list in DEST (%v)", err)
		}
		prefix := fmt.Sprintf("-%d-", p.cmd.Process.Pid)
		for _, e := range left {
			if !strings.Contains(e.Name(), prefix) {
				t.Errorf("list %q left, want the killed prsync's (%s)", e.Name(), prefix)
			}
		}

		if staged, _ := os.ReadDir(tmp); len(staged) != 1 {
			t.Errorf("the killed prsync left %d staging directories in its TMPDIR, want its own", len(staged))
		}

		r := start(t, startOpts{stdin: bytes.NewReader(list), env: env}, "-0", "--root", src, "--no-throttle", "--remote-lists", "on", d.URL()).wait(5 * time.Minute)
		copiedNoLists(t, r, src, dst, n)
		if rl := remoteLists(t, r); rl == nil || num(rl, "swept") != int64(len(left)) {
			t.Errorf("summary's remote_lists %v: want %d swept", rl, len(left))
		}
		// the killed prsync's staging directory went when the next one made its own
		if staged, _ := os.ReadDir(tmp); len(staged) != 0 {
			t.Errorf("%d staging directories left in TMPDIR: %v", len(staged), staged)
		}
	})
}

// TestRemoteListDelete: the deletion pass of a push never deletes a list, another run's
// (a shard's, running now) or a crashed one's not yet swept, and never names one deleted,
// while it deletes what the source lacks in the same directory (DEST's root).
func TestRemoteListDelete(t *testing.T) {
	t.Parallel()
	needRsync(t)
	w := t.TempDir()
	src, dst := filepath.Join(w, "src"), filepath.Join(w, "dst")
	os.MkdirAll(dst, 0o755)
	list, n := longTree(t, src, 1500)
	// a list of another host's run (new: not stale) and a stray file of DEST's root
	other := filepath.Join(dst, listDir, "otherhost-4242-1700000000.7")
	writeFile(t, other, "a/b\x00", 0o600)
	writeFile(t, filepath.Join(dst, "stray.txt"), "not in the source", 0o644)
	d := startDaemon(t, dst)
	r := runPrsync(t, "", list, "-0", "--root", src, "--no-throttle", "--remote-lists", "on", "--delete", d.URL())
	if r.Code != 0 {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
	s := r.Summary(t)
	identity(t, s, int64(n))
	if s["delete_pass"] != "ran" {
		t.Fatalf("delete_pass %v", s["delete_pass"])
	}
	deleted := deletedSet(t, r)
	for p := range deleted {
		if strings.Contains(p, listDir) {
			t.Errorf("deleted event for %q", p)
		}
	}
	if _, ok := deleted["stray.txt"]; !ok {
		t.Errorf("stray.txt in DEST's root not deleted (deleted: %v): the pass did not cover the root", deleted)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("another run's list: %v", err)
	}
	ents, _ := os.ReadDir(filepath.Join(dst, listDir))
	if len(ents) != 1 {
		t.Errorf("%s holds %d lists, want the other run's alone", listDir, len(ents))
	}
	os.RemoveAll(filepath.Join(dst, listDir))
	sameTree(t, src, dst)
	if remoteStarts(r) < 1 {
		t.Error("no rsync read its list on the far side")
	}
}

// TestRemoteListFallback: where the far side cannot hold the lists, or cannot read one,
// prsync reads them on stdin, and the run ends as it would with --remote-lists off: a
// read-only module (every copy refused, as without lists), a module whose uid cannot make
// the lists' directory in DEST's root (the copy lands below it), a daemon at its max
// connections (a refused upload sends one chunk's list on stdin), and a list that is gone
// when its rsync reads it (the chunk runs again at once from stdin).
func TestRemoteListFallback(t *testing.T) {
	t.Parallel()
	needRsync(t)

	t.Run("read-only", func(t *testing.T) {
		w := t.TempDir()
		src, dst := filepath.Join(w, "src"), filepath.Join(w, "dst")
		os.MkdirAll(dst, 0o755)
		list, n := longTree(t, src, 200)
		d := startDaemon(t, dst, "read only = yes")
		var runs []*Run
		for _, mode := range []string{"off", "on"} {
			r := runPrsync(t, "", list, "-0", "--root", src, "--no-throttle", "--remote-lists", mode, d.URL())
			identity(t, r.Summary(t), int64(n))
			if !strings.Contains(r.Stderr, "module is read only") {
				t.Errorf("%s: stderr does not say the module is read only:\n%s", mode, r.Stderr)
			}
			runs = append(runs, r)
		}
		off, on := runs[0], runs[1]
		so, sn := off.Summary(t), on.Summary(t)
		if on.Code != off.Code || num(sn, "files_failed") != num(so, "files_failed") || num(sn, "files_transferred") != 0 {
			t.Errorf("on: exit %d, %d failed, %d transferred; off: exit %d, %d failed", on.Code, num(sn, "files_failed"), num(sn, "files_transferred"), off.Code, num(so, "files_failed"))
		}
		if rl := remoteLists(t, on); rl == nil || !strings.Contains(fmt.Sprint(rl["off"]), "read only") || remoteStarts(on) != 0 {
			t.Errorf("summary's remote_lists %v, %d remote: want off for the read-only module, none", rl, remoteStarts(on))
		}
		if ents, _ := os.ReadDir(dst); len(ents) != 0 {
			t.Errorf("the read-only module's directory holds %d entries", len(ents))
		}
	})

	t.Run("unwritable", func(t *testing.T) {
		if !isRoot() {
			t.Skip("needs root: the module's uid is nobody")
		}
		w := t.TempDir()
		os.Chmod(w, 0o755) // nobody goes through it to the module
		src, dst := filepath.Join(w, "src"), filepath.Join(w, "dst")
		os.MkdirAll(filepath.Join(dst, "data"), 0o755)
		if err := os.Chown(filepath.Join(dst, "data"), 65534, 65534); err != nil {
			t.Fatal(err)
		}
		var names []string
		for i := range 300 {
			name := fmt.Sprintf("data/table_with_a_rather_long_name-%02d/nb-%05d-big-Data.db", i%9, i)
			writeFile(t, filepath.Join(src, name), strings.Repeat("d", i), 0o644)
			names = append(names, name)
		}
		d := startDaemon(t, dst, "uid = nobody", "gid = nogroup")
		r := runPrsync(t, "", nul(names...), "-0", "--root", src, "--no-throttle", "--remote-lists", "on", d.URL())
		if r.Code != 0 {
			t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
		}
		identity(t, r.Summary(t), int64(len(names)))
		rl := remoteLists(t, r)
		if rl == nil || !strings.Contains(fmt.Sprint(rl["off"]), "Permission denied") || remoteStarts(r) != 0 {
			t.Errorf("summary's remote_lists %v, %d remote: want off (Permission denied), none", rl, remoteStarts(r))
		}
		if !strings.Contains(r.Stderr, "--remote-lists on") {
			t.Errorf("no warning for the lists asked for and off:\n%s", r.Stderr)
		}
		noListsLeft(t, dst)
		for _, name := range names {
			a, err1 := os.ReadFile(filepath.Join(src, name))
			b, err2 := os.ReadFile(filepath.Join(dst, name))
			if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
				t.Errorf("%s: not copied (%v, %v)", name, err1, err2)
			}
		}
	})

	t.Run("max connections", func(t *testing.T) {
		w := t.TempDir()
		src, dst := filepath.Join(w, "src"), filepath.Join(w, "dst")
		os.MkdirAll(dst, 0o755)
		list, n := longTree(t, src, 1500)
		d := startDaemon(t, dst, "max connections = 2")
		r := runPrsync(t, "", list, "-0", "--root", src, "--no-throttle", "--remote-lists", "on", "-j", "4", "--chunk-files", "200", d.URL())
		copiedNoLists(t, r, src, dst, n)
		// a refused upload sends that chunk's list on stdin, and turns nothing off
		rl := remoteLists(t, r)
		if rl == nil || rl["off"] != nil || remoteStarts(r) < 1 {
			t.Errorf("summary's remote_lists %v, %d remote: want some, not off", rl, remoteStarts(r))
		}
		t.Logf("remote_lists %v; %d rsyncs read a remote list", rl, remoteStarts(r))
	})

	t.Run("unread", func(t *testing.T) {
		w := t.TempDir()
		src, dst := filepath.Join(w, "src"), filepath.Join(w, "dst")
		os.MkdirAll(dst, 0o755)
		list, n := longTree(t, src, 300)
		// an rsync that removes its remote list from the module before it runs
		wrap := filepath.Join(w, "rsync-losing-lists")
		real, err := exec.LookPath("rsync")
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, wrap, fmt.Sprintf("#!/bin/sh\nfor a in \"$@\"; do case \"$a\" in --files-from=:*) rm -f %q/\"${a#--files-from=:}\" ;; esac; done\nexec %q \"$@\"\n", dst, real), 0o755)
		d := startDaemon(t, dst)
		// -j 1: the first chunk's rsync finds its list gone before any other starts
		r := runPrsync(t, "", list, "-0", "--root", src, "--no-throttle", "--remote-lists", "on", "-j", "1", "--rsync", wrap, d.URL())
		copiedNoLists(t, r, src, dst, n)
		rl := remoteLists(t, r)
		if rl == nil || !strings.Contains(fmt.Sprint(rl["off"]), "could not read") || remoteStarts(r) != 1 {
			t.Errorf("summary's remote_lists %v, %d remote: want one rsync that could not read it, then off", rl, remoteStarts(r))
		}
		retrying := 0
		for _, e := range r.OfType("chunk_end") {
			if e["status"] == "retrying" && strings.Contains(fmt.Sprint(e["hint"]), "could not read the chunk's list") {
				retrying++
			}
		}
		if retrying != 1 {
			t.Errorf("%d chunk_end events retrying for an unread list, want 1", retrying)
		}
	})
}

// copiedNoLists checks a run with remote lists that should have copied all n paths: exit 0,
// the accounting identity, DEST walked and equal to src, and no list left in DEST.
func copiedNoLists(t *testing.T, r *Run, src, dst string, n int) {
	t.Helper()
	if r.Code != 0 {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
	identity(t, r.Summary(t), int64(n))
	sameTree(t, src, dst)
	noListsLeft(t, dst)
	destHasRootAttrs(t, dst, longTreeRootPerm, longTreeRootTime)
}
