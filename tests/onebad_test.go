package tests

// Issue 24 item 3: one file that cannot be written must not sink its chunk. Real rsync,
// real tmpfs mounts (root only), and DEST walked after every run.

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

// tmpfsDest mounts a tmpfs of size at dir, and unmounts it when the test ends.
func tmpfsDest(t *testing.T, dir, size string) {
	t.Helper()
	if !isRoot() {
		t.Skip("needs root to mount a tmpfs")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
			exec.Command("umount", "-l", dir).Run()
		}
	})
}

// oneBadTree writes n small files s001… of 20 KB and, when big > 0, a file "a-big" of
// big bytes, which sorts first; it returns the paths relative to src.
func oneBadTree(t *testing.T, src string, n, big int) []string {
	t.Helper()
	var rels []string
	if big > 0 {
		writeFile(t, filepath.Join(src, "a-big"), strings.Repeat("x", big), 0o644)
		rels = append(rels, "a-big")
	}
	for i := 1; i <= n; i++ {
		rel := fmt.Sprintf("s%03d", i)
		writeFile(t, filepath.Join(src, rel), strings.Repeat(fmt.Sprint(i%10), 20000+i), 0o644)
		rels = append(rels, rel)
	}
	return rels
}

// TestOneBadFileBiggerThanDest: 200 small files and one bigger than DEST's file system,
// all in one chunk: exactly the big file fails (exit 23), the small ones land.
func TestOneBadFileBiggerThanDest(t *testing.T) {
	needRsync(t)
	base := t.TempDir()
	src, dst := filepath.Join(base, "src"), filepath.Join(base, "dst")
	rels := oneBadTree(t, src, 200, 50<<20)
	tmpfsDest(t, dst, "20m")
	r, failed := truthRun(t, src, dst, dst, rels, "--chunk-files", "1000", "-j", "2")
	if r.Code != 23 {
		t.Errorf("exit %d, want 23\n%s", r.Code, r.Stderr)
	}
	wantFailed(t, r, failed, "a-big")
	for _, rel := range rels[1:] {
		if !landed(src, dst, rel) {
			t.Errorf("%s not in DEST", rel)
		}
	}
	if a, b := snapshot(t, filepath.Join(src)), snapshot(t, dst); len(b) != len(a)-1 {
		t.Errorf("DEST holds %d entries, want %d (the source's but the big file)", len(b), len(a)-1)
	}
	for _, e := range r.OfType("path_failed") {
		if !strings.Contains(fmt.Sprint(e["reason"]), "No space left on device") {
			t.Errorf("path_failed reason %q does not say rsync's words", e["reason"])
		}
	}
	if n := len(r.OfType("chunk_start")); n != 2 {
		t.Errorf("%d rsync starts, want 2 (the chunk, and its re-run without the big file)", n)
	}
	if s := r.Summary(t); num(s, "files_transferred") != 200 || num(s, "files_failed") != 1 || num(s, "chunks") != 1 {
		t.Errorf("summary %v", s)
	}
	fltNoTemp(t, dst)
	noProcsLeft(t, base)
}

// TestOneBadFullDest: DEST's file system has room for nothing: the re-run without the
// first culprit fails on its first file too, and the run stops as it did before isolation
// (exit 11, every path failed, the hint says the destination is full), after a bounded
// number of rsync starts.
func TestOneBadFullDest(t *testing.T) {
	needRsync(t)
	base := t.TempDir()
	src, dst := filepath.Join(base, "src"), filepath.Join(base, "dst")
	rels := oneBadTree(t, src, 60, 0)
	tmpfsDest(t, dst, "4k")
	failed := filepath.Join(base, "failed")
	r := start(t, startOpts{dir: base, stdin: bytes.NewReader(nul(rels...))}, "-0", "--no-throttle", "--chunk-files", "20", "-j", "2",
		"--root", src, "--failed", failed, dst).wait(2 * time.Minute)
	checkTruth(t, r, src, dst, rels, failed, 0)
	if r.Code != 11 {
		t.Errorf("exit %d, want 11\n%s", r.Code, r.Stderr)
	}
	if !strings.Contains(r.Stderr, "hint: the destination is full") {
		t.Errorf("no hint that the destination is full:\n%s", r.Stderr)
	}
	// two chunks may run at once: each starts once and re-runs once before the run stops
	if n := len(r.OfType("chunk_start")); n > 4 {
		t.Errorf("%d rsync starts, want at most 4", n)
	}
	if s := r.Summary(t); num(s, "files_failed") != int64(len(rels)) || num(s, "retries") != 0 {
		t.Errorf("summary %v", s)
	}
	fltNoTemp(t, dst)
	noProcsLeft(t, base)
}
