package tests

// Issue 24 item 3: one file that cannot be written must not sink its chunk. Real rsync,
// real tmpfs mounts (root only), and DEST walked after every run.

import (
	"fmt"
	"math/bits"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// oneBadTree writes n small files s001… of 20 KB and, when big > 0, a file "a-big" of
// big bytes, which sorts first; it returns the paths relative to src.
func oneBadTree(t testing.TB, src string, n, big int) []string {
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
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	w := newWork(t)
	rels := oneBadTree(t, w.Src, 200, 50<<20)
	mountTmpfs(t, w.Dst, "size=20m")
	r, _ := truthRun(t, w.Src, w.Dst, w.Dst, rels, "--chunk-files", "1000", "-j", "2")
	oneBadNoSpace(t, r, w.Src, w.Dst)
	for _, rel := range rels[1:] {
		if !landed(w.Src, w.Dst, rel) {
			t.Errorf("%s not in DEST", rel)
		}
	}
	noProcsLeft(t, w.Dir)
}

// oneBadNoSpace checks a run of oneBadTree's 200 small files and its big one in one
// chunk, into dst (a local DEST or a daemon's module) too small for the big file: exactly
// it fails, with rsync's words, dst holds the rest, and the chunk took two rsync starts.
func oneBadNoSpace(t *testing.T, r *Run, src, dst string) {
	t.Helper()
	r.Exit(t, 23)
	r.FailedAre(t, "a-big")
	r.ReasonsName(t)
	sameTree(t, src, dst, "a-big")
	for _, e := range r.OfType("path_failed") {
		if !strings.Contains(fmt.Sprint(e["reason"]), "No space left on device") {
			t.Errorf("path_failed reason %q does not say rsync's words", e["reason"])
		}
	}
	if n := len(r.OfType("chunk_start")); n != 2 {
		t.Errorf("%d rsync starts, want 2 (the chunk, and its re-run without the big file)", n)
	}
	r.Counts(t, map[string]int64{"files_transferred": 200, "files_failed": 1, "chunks": 1})
	noTempFiles(t, dst)
	t.Logf("statuses %q; path_failed %v", r.Statuses(), r.OfType("path_failed"))
}

// TestOneBadFullDest: DEST's file system has room for nothing: the re-run without the
// first culprit fails on its first file too, and the run stops as it did before isolation
// (exit 11, every path failed, the hint says the destination is full), after a bounded
// number of rsync starts.
func TestOneBadFullDest(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	w := newWork(t)
	rels := oneBadTree(t, w.Src, 60, 0)
	mountTmpfs(t, w.Dst, "size=4k")
	r, _ := truthRun(t, w.Src, w.Dst, w.Dst, rels, "--chunk-files", "20", "-j", "2")
	oneBadFull(t, r, w.Dst, rels)
	r.Counts(t, map[string]int64{"files_failed": int64(len(rels)), "retries": 0})
	noProcsLeft(t, w.Dir)
}

// TestOneBadFullRace: rsync reports a full destination with exit 11, or with 19 when its
// receiver's SIGUSR1 to its partner wins the race to exit (CI saw it in TestOneBadFullDest):
// the run ends with 11 all the same, and its error says what rsync exited with (the fake
// rsync, as the race cannot be had on demand).
func TestOneBadFullRace(t *testing.T) {
	t.Parallel()
	needRsync(t)
	for _, code := range []int{11, 19} {
		t.Run(fmt.Sprint("exit ", code), func(t *testing.T) {
			t.Parallel()
			w := newWork(t)
			rels := oneBadTree(t, w.Src, 30, 0)
			r, _ := oneBadFake(t, w.Src, w.Dst, rels, fmt.Sprint("full:", code), 10)
			oneBadFull(t, r, w.Dst, rels)
			if want := fmt.Sprintf("rsync exited with code %d:", code); !strings.Contains(r.Stderr, want) {
				t.Errorf("stderr does not say %q:\n%s", want, r.Stderr)
			}
		})
	}
}

// oneBadFull checks a run of rels into dst (a local DEST or a daemon's module) with room
// for nothing: exit 11, every path in --failed, the hint, and, as two chunks may run at
// once, each started once and re-run once before the run stops: 4 rsync starts at most.
func oneBadFull(t *testing.T, r *Run, dst string, rels []string) {
	t.Helper()
	r.Exit(t, 11)
	r.FailedAre(t, rels...)
	if !strings.Contains(r.Stderr, "hint: the destination is full") {
		t.Errorf("no hint that the destination is full:\n%s", r.Stderr)
	}
	if n := len(r.OfType("chunk_start")); n > 4 {
		t.Errorf("%d rsync starts, want at most 4", n)
	}
	noTempFiles(t, dst)
	t.Logf("statuses %q; %d starts", r.Statuses(), len(r.OfType("chunk_start")))
}

// oneBadFake runs prsync over rels with the fake rsync in mode, one chunk per chunkFiles
// paths, one rsync at a time, and checks the truth by walking DEST (DestHolds); it returns
// the run and the fake's log of its runs ("fail N" or "rsync N" a line).
func oneBadFake(t *testing.T, src, dst string, rels []string, mode string, chunkFiles int) (*Run, []string) {
	t.Helper()
	log := filepath.Join(t.TempDir(), "fake-log")
	env := []string{"PRSYNC_TEST_FAKE_RSYNC=" + mode, "PRSYNC_TEST_FAKE_LOG=" + log}
	r := start(t, startOpts{in: nul(rels...), env: env}, "-0", "--no-throttle", "--rsync", fakeRsyncPath(t),
		"--chunk-files", fmt.Sprint(chunkFiles), "-j", "1", "--root", src, "--failed", filepath.Join(t.TempDir(), "failed"), dst).wait(5 * time.Minute)
	r.DestHolds(t, src, dst, rels)
	b, _ := os.ReadFile(log)
	return r, strings.Fields(strings.ReplaceAll(string(b), " ", "_"))
}

// TestOneBadPathless: a chunk whose rsync fails for a reason that names no path while one
// path is in its list (the fake rsync; the real one runs when that path is not) is halved
// until that path stands alone: exactly it fails (exit 23), every other path is in DEST,
// and the chunk takes at most 2·⌈log₂ n⌉ extra rsync starts.
func TestOneBadPathless(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	for _, tc := range []struct {
		name, bad string
		code      int
		n         int
	}{
		{"last of 200, exit 13", "s200", 13, 200}, // always in the bigger half: the longest way down
		{"first of 200, exit 11", "s001", 11, 200},
		{"middle of 37, exit 19", "s019", 19, 37},
		{"one of 2, exit 2", "s002", 2, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // each case its own trees and fake rsync; they wait on rsync starts
			w := newWork(t)
			rels := oneBadTree(t, w.Src, tc.n, 0)
			r, log := oneBadFake(t, w.Src, w.Dst, rels, fmt.Sprintf("pathless:%d:%s", tc.code, tc.bad), 1000)
			r.Exit(t, 23)
			r.Identity(t, tc.n)
			r.FailedAre(t, tc.bad)
			r.ReasonsName(t)
			r.PathFailed(t, map[string]string{tc.bad: "failed"})
			for _, e := range r.OfType("path_failed") {
				if want := fmt.Sprintf("rsync exit %d: rsync: [sender] fstat failed", tc.code); !strings.Contains(fmt.Sprint(e["reason"]), want) {
					t.Errorf("path_failed reason %q is not rsync's line", e["reason"])
				}
			}
			// DEST walked against the source: everything but the culprit, as the source has it
			sameTree(t, w.Src, w.Dst, tc.bad)
			starts := len(r.OfType("chunk_start"))
			bound := 1 + 2*bits.Len(uint(tc.n-1))
			if starts > bound || starts != len(log) {
				t.Errorf("%d rsync starts (the fake saw %d), want at most %d", starts, len(log), bound)
			}
			r.Counts(t, map[string]int64{"files_transferred": int64(tc.n - 1), "files_failed": 1, "chunks": 1, "retries": 0})
			if st := r.Statuses(); st[len(st)-1] != "partial" || slices.Index(st, "isolating") != 0 {
				t.Errorf("chunk_end statuses %q, want isolating … partial", st)
			}
			noTempFiles(t, w.Dst)
			noProcsLeft(t, w.Dir)
			t.Logf("%d paths, culprit %s: %d rsync starts (bound %d): %v", tc.n, tc.bad, starts, bound, log)
		})
	}
}

// TestOneBadPathlessShared: when both halves of the first split fail with the line the
// whole chunk failed with, the cause is taken for one that every chunk shares and halving
// stops: a fake rsync that always fails (exit 13) costs each chunk 3 starts, not its
// budget; two culprits, one in each half, look the same and fail the chunk as before.
func TestOneBadPathlessShared(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	var all []string
	for i := 1; i <= 64; i++ {
		all = append(all, fmt.Sprintf("s%03d", i))
	}
	for _, tc := range []struct {
		name, mode string
		starts     int      // 4 chunks of 16: 3 starts for a chunk that fails, 1 for one that does not
		failed     []string // exactly
	}{
		{"every run fails", "pathless:13:" + strings.Join(all, "|"), 12, all},
		{"one culprit in each half", "pathless:13:s005|s012", 6, all[:16]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // each case its own trees and fake rsync
			w := newWork(t)
			rels := oneBadTree(t, w.Src, 64, 0)
			r, log := oneBadFake(t, w.Src, w.Dst, rels, tc.mode, 16)
			r.Exit(t, 23)
			r.Identity(t, 64)
			if starts := len(r.OfType("chunk_start")); starts != len(log) || starts != tc.starts {
				t.Errorf("%d rsync starts (the fake saw %d), want %d", starts, len(log), tc.starts)
			}
			r.FailedAre(t, tc.failed...)
			r.ReasonsName(t)
			if len(tc.failed) < 64 {
				sameTree(t, w.Src, w.Dst, tc.failed...)
			}
			t.Logf("fake runs %v", log)
			noTempFiles(t, w.Dst)
			noProcsLeft(t, w.Dir)
		})
	}
}

// TestOneBadSignalWhileIsolating: SIGINT while a chunk's isolating re-run is copying (the
// first run failed for no path; the re-run over the first half is the real rsync, slowed
// by --bwlimit) ends the run as any interrupt does: exit 20, the accounting identity, no
// path counted twice, DEST holding only complete files equal to the source's and every
// path not in --failed, no temp file and no process left.
func TestOneBadSignalWhileIsolating(t *testing.T) {
	t.Parallel() // a correctness test: it waits for the re-run it interrupts, however late it comes
	needRsync(t)
	// the runs: 1 all 40 (fails), 2 s001…s020 (copies), 3 s021…s040 (fails), 4 s021…s030
	// (copies), …: interrupt the first re-run, and one a level further down
	for _, attempt := range []int{2, 4} {
		t.Run(fmt.Sprint("during run ", attempt), func(t *testing.T) {
			t.Parallel()
			oneBadSignal(t, attempt)
		})
	}
}

func oneBadSignal(t *testing.T, attempt int) {
	w := newWork(t)
	rels := oneBadTree(t, w.Src, 40, 0)
	env := []string{"PRSYNC_TEST_FAKE_RSYNC=pathless:13:s040"}
	p := start(t, startOpts{dir: w.Dir, in: nul(rels...), env: env}, "-0", "--no-throttle", "--rsync", fakeRsyncPath(t),
		"--chunk-files", "1000", "-j", "1", "--root", w.Src, "--failed", w.Failed, w.Dst, "--", "--bwlimit=100")
	p.mustWaitFor("the re-run's chunk_start", time.Minute, is("chunk_start", "attempt", attempt))
	p.waitTemp(w.Dst, 30*time.Second)
	time.Sleep(500 * time.Millisecond) // a file or two of the re-run land
	p.signal(syscall.SIGINT)
	r := p.wait(time.Minute)
	r.Exit(t, 20)
	s := r.Identity(t, len(rels))
	got := r.DestHolds(t, w.Src, w.Dst, rels)
	list := r.Failed(t)
	if len(list) != len(got) {
		t.Errorf("--failed holds %d entries, %d distinct", len(list), len(got))
	}
	if n := num(s, "files_failed") + num(s, "files_not_done"); n != int64(len(list)) {
		t.Errorf("summary failed+not_done %d, --failed holds %d", n, len(list))
	}
	for p := range r.failedStatus(t) { // each path once
		if !got[p] {
			t.Errorf("path_failed %q is not in --failed", p)
		}
	}
	if n := num(s, "files_not_done"); n == 0 || num(s, "files_transferred")+n+num(s, "files_failed") != int64(len(rels)) {
		t.Errorf("summary %v: want some paths not done, the rest transferred or failed", s)
	}
	if attempt == 4 && num(s, "files_transferred") < 20 {
		t.Errorf("summary %v: the re-run over s001…s020 ended before the interrupt, yet fewer than 20 transferred", s)
	}
	final := 0
	for _, st := range r.Statuses() {
		if st != "isolating" && st != "retrying" {
			final++
		}
	}
	if final != 1 {
		t.Errorf("chunk_end statuses %q: want one final chunk_end for the one chunk", r.Statuses())
	}
	onlyCopies(t, w.Src, w.Dst) // only complete files, each the source's
	noTempFiles(t, w.Dst)
	noProcsLeft(t, w.Dir)
	t.Logf("%d files in DEST; statuses %q; summary transferred %d, failed %d, not done %d", len(snapshot(t, w.Dst)), r.Statuses(), num(s, "files_transferred"), num(s, "files_failed"), num(s, "files_not_done"))
}

// TestOneBadDaemonDest: the same as TestOneBadFileBiggerThanDest into an rsync daemon's
// module on a 20 MB tmpfs: the daemon's receiver stops on the big file, "write failed on
// "a-big" (in mod)", and exactly that path fails; the module is walked.
func TestOneBadDaemonDest(t *testing.T) {
	oncePerSuite(t)
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	w := newWork(t)
	mod := filepath.Join(w.Dir, "mod")
	rels := oneBadTree(t, w.Src, 200, 50<<20)
	mountTmpfs(t, mod, "size=20m")
	d := startDaemon(t, mod)
	r, _ := truthRun(t, w.Src, d.URL(), mod, rels, "--chunk-files", "1000", "-j", "2")
	oneBadNoSpace(t, r, w.Src, mod)
	noProcsLeft(t, w.Dir)
}

// TestOneBadDaemonFullDest: TestOneBadFullDest into a daemon's module: room for nothing,
// the run stops as before (exit 11, every path failed, the hint) after at most 4 starts.
func TestOneBadDaemonFullDest(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	oncePerSuite(t)
	needRsync(t)
	w := newWork(t)
	mod := filepath.Join(w.Dir, "mod")
	rels := oneBadTree(t, w.Src, 60, 0)
	mountTmpfs(t, mod, "size=4k")
	d := startDaemon(t, mod)
	r, _ := truthRun(t, w.Src, d.URL(), mod, rels, "--chunk-files", "20", "-j", "2")
	oneBadFull(t, r, mod, rels)
	noProcsLeft(t, w.Dir)
}
