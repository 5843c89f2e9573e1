package tests

// Small truths in prsync's messages (issue 24, item 7), against the real rsync, by walking
// DEST.

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestRefusalsFinalLimit: -j 15 against a daemon with max connections = 3, each session
// long enough (100 kB at 60 kB/s) that the first fifteen overlap on a loaded machine too.
// The limit comes down in steps; stderr says the refusal once as it happens, without a limit that will not
// last, and once at the end the limit the run ended at, which is the last jobs event's.
func TestRefusalsFinalLimit(t *testing.T) {
	t.Parallel() // its sessions overlap on a loaded machine too, and it judges the messages by the run's own events
	needRsync(t)
	w := newWork(t)
	names := spreadFiles(t, w.Src, 20, 3, 100_000)
	d := startDaemon(t, w.Dst, "max connections = 3")
	r, _ := truthRun(t, w.Src, d.URL(), w.Dst, names, "-j", "15", "--chunk-files", "1", "--retries", "5", "--", "--bwlimit=60k")
	r.Exit(t, 0)
	jobs := r.OfType("jobs")
	if len(jobs) == 0 {
		t.Fatalf("no jobs event: the daemon never refused, the test proves nothing\n%s\nchunk_ends: %v", r.Stderr, r.OfType("chunk_end"))
	}
	// Where the limit ends depends on how many sessions were alive when each refusal came
	// (max(1, active-1, the last minute's peak)), which a busy machine changes: the test
	// holds the message to the last jobs event, whatever that is.
	last := num(jobs[len(jobs)-1], "new")
	if last >= 15 {
		t.Errorf("the limit ended at %d: the refusals never lowered it: %v", last, jobs)
	}
	if n := strings.Count(r.Stderr, "refused a session"); n != 1 {
		t.Errorf("the refusal is said %d times, want once:\n%s", n, r.Stderr)
	}
	for _, m := range regexp.MustCompile(`at most (\d+)`).FindAllStringSubmatch(r.Stderr, -1) {
		if n, _ := strconv.ParseInt(m[1], 10, 64); n != last {
			t.Errorf("stderr tells a limit that did not last (%d; the run ended at %d):\n%s", n, last, r.Stderr)
		}
	}
	m := regexp.MustCompile(`(?m)^prsync: warning: the far side's refusals lowered the limit (once|\d+ times): the run ended running at most (\d+) rsyncs at once$`).FindAllStringSubmatch(r.Stderr, -1)
	if len(m) != 1 {
		t.Fatalf("want one closing line with the final limit:\n%s", r.Stderr)
	}
	if got, _ := strconv.ParseInt(m[0][2], 10, 64); got != last {
		t.Errorf("the closing line says %d, the last jobs event %d", got, last)
	}
	t.Logf("stderr:\n%s", r.Stderr)
}

// TestDeleteMountPoint: DEST holds a mount point (a tmpfs) that the source lacks. --delete
// empties the mount and then fails on its rmdir, as `rsync -a --delete` does: exit 23 with
// the pass failed. With `-- -x` the mount and its files are kept, and the run exits 0.
func TestDeleteMountPoint(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	w := newWork(t)
	mnt := filepath.Join(w.Dst, "mnt")
	names := []string{"d0", "d1"}
	for i := 0; i < 6; i++ {
		n := fmt.Sprintf("d%d/f%d", i%2, i)
		writeFile(t, filepath.Join(w.Src, n), fmt.Sprint(i), 0o644)
		names = append(names, n)
	}
	mount := func() *mounted {
		m := mountTmpfs(t, mnt, "size=1m")
		writeFile(t, filepath.Join(mnt, "data"), "on the mount", 0o644)
		writeFile(t, filepath.Join(mnt, "sub", "more"), "on the mount too", 0o644)
		return m
	}
	m := mount()
	r := runPrsync(t, "", nul(names...), "-0", "--root", w.Src, "--delete", w.Dst)
	r.Exit(t, 23)
	s := r.Identity(t, len(names))
	if p, _ := s["delete_pass"].(string); !strings.HasPrefix(p, "failed: ") || !strings.Contains(p, "rmdir(mnt) failed: Device or resource busy") {
		t.Errorf("delete_pass %q", s["delete_pass"])
	}
	if ents, err := os.ReadDir(mnt); err != nil || len(ents) != 0 {
		t.Errorf("the mount holds %v (%v): rsync empties it", ents, err)
	}
	// the walk: DEST is the source's, plus the emptied mount point
	m.Unmount()
	os.Remove(mnt)
	sameTree(t, w.Src, w.Dst)

	// with -x, rsync deletes nothing across the mount point
	mount()
	r = runPrsync(t, "", nul(names...), "-0", "--root", w.Src, "--delete", w.Dst, "--", "-x")
	if r.Code != 0 || r.Summary(t)["delete_pass"] != "ran" {
		t.Fatalf("with -x: exit %d, delete_pass %v\n%s", r.Code, r.Summary(t)["delete_pass"], r.Stderr)
	}
	for p, want := range map[string]string{"data": "on the mount", "sub/more": "on the mount too"} {
		if b, err := os.ReadFile(filepath.Join(mnt, p)); err != nil || string(b) != want {
			t.Errorf("with -x, the mount's %s holds %q (%v)", p, b, err)
		}
	}
}
