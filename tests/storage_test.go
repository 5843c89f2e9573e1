package tests

// Issue 44, item 1: a DEST, a directory under DEST, or the source root that stops being
// the storage it was at the start (a mount that goes away lazily, as sshfs does when its
// link dies, leaving the bare mount point) proves nothing, and the run never exits 0.

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// mountLazy mounts a tmpfs at dir (or binds store there when store is set), and returns
// the function that unmounts it lazily (umount -l); the test's cleanup unmounts it too.
// The test is skipped when it cannot mount.
func mountLazy(t testing.TB, dir, store string) func() {
	t.Helper()
	if !isRoot() {
		t.Skip("mounting needs root")
	}
	args := []string{"-t", "tmpfs", "-o", "size=16m", "tmpfs", dir}
	if store != "" {
		args = []string{"--bind", store, dir}
	}
	if out, err := exec.Command("mount", args...).CombinedOutput(); err != nil {
		t.Skipf("mount %v: %v: %s", args, err, out)
	}
	mounted := true
	unmount := func() {
		if mounted {
			mounted = false
			if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
				t.Errorf("umount -l %s: %v: %s", dir, err, out)
			}
		}
	}
	t.Cleanup(unmount)
	return unmount
}

// TestStorageLost: the mount goes away lazily once the first chunk has ended, while
// others run and more wait. Every path not in --failed is in the storage that was mounted
// (walked, with its content), the run exits 3, and nothing after the loss is counted
// copied. In both transports.
func TestStorageLost(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	if !isRoot() {
		t.Skip("mounting needs root")
	}
	for _, c := range []struct {
		name  string
		where string // "dest", "sub" (a directory under DEST) or "source"
		bind  bool   // a bind mount of a directory on the same filesystem, not a tmpfs
	}{
		{name: "DEST a tmpfs", where: "dest"},
		{name: "DEST a bind mount", where: "dest", bind: true},
		{name: "a directory under DEST", where: "sub", bind: true},
		{name: "the source root", where: "source", bind: true},
	} {
		for _, transport := range []string{"pipe", "direct"} {
			t.Run(c.name+"/"+transport, func(t *testing.T) {
				t.Parallel()
				w := t.TempDir()
				src, dst, store := filepath.Join(w, "src"), filepath.Join(w, "dst"), filepath.Join(w, "store")
				failedList := filepath.Join(w, "failed")
				content := map[string]string{}
				var rels []string
				origin := src // where the files are written
				if c.where == "source" {
					origin = store
				}
				for i := range 400 {
					rel := fmt.Sprintf("d%d/f%03d", i%4, i)
					if c.where == "sub" {
						rel = "sub/" + rel
					}
					content[rel] = strings.Repeat(fmt.Sprint(i%10), 4096)
					writeFile(t, filepath.Join(origin, rel), content[rel], 0o644)
					rels = append(rels, rel)
				}
				for _, d := range []string{src, dst, store, filepath.Join(dst, "sub")} {
					if err := os.MkdirAll(d, 0o755); err != nil {
						t.Fatal(err)
					}
				}
				var unmount func()
				walk := store // the storage that was mounted, where the copies are
				switch c.where {
				case "dest":
					if c.bind {
						unmount = mountLazy(t, dst, store)
					} else {
						// a tmpfs, bound at DEST: once DEST's mount goes, the tmpfs stays at
						// store for the walk
						mountLazy(t, store, "")
						unmount = mountLazy(t, dst, store)
					}
				case "sub":
					unmount = mountLazy(t, filepath.Join(dst, "sub"), store)
					walk = dst
				case "source":
					unmount = mountLazy(t, src, store)
					walk = dst
				}
				// 8 chunks of 50 files (200 KiB), 2 at once at 200 KiB/s each: about 4 s
				p := start(t, startOpts{dir: w, stdin: bytes.NewReader(fltJoin(rels, '\n'))}, "--no-throttle", "--transport", transport,
					"-j", "2", "--chunk-files", "50", "--chunk-time", "0", "--root", src, "--failed", failedList, dst, "--", "--bwlimit=200")
				p.mustWaitFor("the first chunk's end", time.Minute, fltIs("chunk_end"))
				unmount()
				r := p.wait(2 * time.Minute)
				s := r.Summary(t)
				checkIdentity(t, s, int64(len(rels)))
				if r.Code != 3 {
					t.Errorf("exit %d, want 3\n%s", r.Code, r.Stderr)
				}
				if !strings.Contains(r.Stderr, "is no longer the storage it was at the start") {
					t.Errorf("stderr does not say the storage went away:\n%s", r.Stderr)
				}
				failed := map[string]bool{}
				for _, p := range fltList(t, failedList, '\n') {
					failed[p] = true
				}
				if c.where == "sub" {
					walk = store
				}
				done := 0
				for _, rel := range rels {
					at := rel
					if c.where == "sub" {
						at = strings.TrimPrefix(rel, "sub/")
					}
					b, err := os.ReadFile(filepath.Join(walk, at))
					switch {
					case failed[rel]:
					case err != nil:
						t.Errorf("%s is not in --failed, and the storage lacks it: %v", rel, err)
					case string(b) != content[rel]:
						t.Errorf("%s is not in --failed, and the storage holds another file", rel)
					default:
						done++
					}
				}
				if done == 0 || done == len(rels) {
					t.Errorf("%d of %d paths counted done: the loss came too early or too late", done, len(rels))
				}
				if got := num(s, "files_transferred") + num(s, "files_up_to_date"); got != int64(done) {
					t.Errorf("summary counts %d done, DEST holds %d of the paths not in --failed", got, done)
				}
				if num(s, "files_vanished") != 0 {
					t.Errorf("%d paths vanished: the source lost its mount, nothing was deleted", num(s, "files_vanished"))
				}
				t.Logf("%d of %d done before the loss", done, len(rels))
				noProcsLeft(t, w)
			})
		}
	}
}
