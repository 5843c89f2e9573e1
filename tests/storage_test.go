package tests

// Issue 44, item 1: a DEST, a directory under DEST, or the source root that stops being
// the storage it was at the start (a mount that goes away lazily, as sshfs does when its
// link dies, leaving the bare mount point) proves nothing, and the run never exits 0.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

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
				w := newWork(t)
				src, dst, store := w.Src, w.Dst, filepath.Join(w.Dir, "store")
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
				var m *mounted
				walk := store // the storage that was mounted, where the copies are
				switch c.where {
				case "dest":
					if !c.bind {
						// a tmpfs, bound at DEST: once DEST's mount goes, the tmpfs stays at
						// store for the walk
						mountTmpfs(t, store, "size=16m").lazy = true
					}
					m = mountBind(t, store, dst)
				case "sub":
					m = mountBind(t, store, filepath.Join(dst, "sub"))
					walk = dst
				case "source":
					m = mountBind(t, store, src)
					walk = dst
				}
				m.lazy = true // unmounted as a network mount goes when its link dies: umount -l
				// 8 chunks of 50 files (200 KiB), 2 at once at 200 KiB/s each: about 4 s
				p := start(t, startOpts{dir: w.Dir, in: lines(rels...)}, "--no-throttle", "--transport", transport,
					"-j", "2", "--chunk-files", "50", "--chunk-time", "0", "--root", src, "--failed", w.Failed, dst, "--", "--bwlimit=200")
				p.mustWaitFor("the first chunk's end", time.Minute, is("chunk_end"))
				m.Unmount()
				r := p.wait(2 * time.Minute)
				s := r.Identity(t, len(rels))
				if r.Code != 3 {
					t.Errorf("exit %d, want 3\n%s", r.Code, r.Stderr)
				}
				if !strings.Contains(r.Stderr, "is no longer the storage it was at the start") {
					t.Errorf("stderr does not say the storage went away:\n%s", r.Stderr)
				}
				failed := map[string]bool{}
				for _, p := range r.Failed(t) {
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
				noProcsLeft(t, w.Dir)
			})
		}
	}
}
