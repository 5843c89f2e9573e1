package tests

// The fault matrix of issue 4: every row runs the prsync binary against a real rsync (the
// fake rsync only where a fault cannot be produced on demand) and asserts the exit code,
// the events, the exact --failed list, the accounting identity, and that no rsync or
// stopped process is left. Helpers private to this file are prefixed flt.

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ---------------------------------------------------------------- rows 1–11

// Row 1: a path that does not exist when prsync reads it is vanished (exit 24), and it
// is listed in --failed with the input's separator.
func TestFault01VanishedBeforeRead(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	for _, tc := range []struct {
		name    string
		null    bool
		missing string
	}{
		{"newline", false, "gone one.txt"},
		{"nul", true, "gone\nwith newline"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWork(t)
			names := files(t, w.Src, 3, 1000)
			sep := byte('\n')
			args := []string{"--no-throttle"}
			if tc.null {
				sep = 0
				args = append(args, "-0")
			}
			in := []string{names[0], tc.missing, names[1], names[2]}
			args = append(args, "--root", w.Src, "--failed", w.Failed, w.Dst)
			r := start(t, startOpts{dir: w.Dir, in: join(sep, in...)}, args...).wait(30 * time.Second)
			r.Exit(t, 24)
			r.Identity(t, 4)
			r.Counts(t, map[string]int64{"files_transferred": 3, "files_vanished": 1, "files_failed": 0, "files_not_done": 0})
			r.PathFailed(t, map[string]string{tc.missing: "vanished"})
			r.FailedAre(t, tc.missing)
			sameTree(t, w.Src, w.Dst)
			noProcsLeft(t, w.Dir)
		})
	}
}

// Row 2: a file deleted after rsync built its list, before it was sent: rsync's
// "file has vanished" (code 24).
func TestFault02VanishedDuringCopy(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	w := newWork(t)
	names := files(t, w.Src, 4, 25<<10)
	last := names[len(names)-1]
	// 100 kB at 25 kB/s: the last file is sent 3 s in, time enough to remove it on a busy machine
	p := start(t, startOpts{dir: w.Dir, in: lines(names...)}, "--no-throttle", "--root", w.Src, "--failed", w.Failed, w.Dst, "--", "--bwlimit=25")
	// a temp file in DEST means the receiver is writing the first file: the list is built
	p.midFile(w.Dst)
	if err := os.Remove(filepath.Join(w.Src, last)); err != nil {
		t.Fatal(err)
	}
	r := p.wait(30 * time.Second)
	r.Exit(t, 24)
	r.Identity(t, 4)
	r.Counts(t, map[string]int64{"files_transferred": 3, "files_vanished": 1, "files_failed": 0})
	r.PathFailed(t, map[string]string{last: "vanished"})
	if st := r.Statuses(); !slices.Equal(st, []string{"vanished"}) {
		t.Errorf("chunk_end statuses %q, want [vanished]", st)
	}
	if e := r.OfType("path_failed"); len(e) == 1 && !strings.Contains(fmt.Sprint(e[0]["reason"]), "vanished") {
		t.Errorf("reason %q does not say it vanished during the copy", e[0]["reason"])
	}
	r.FailedAre(t, last)
	sameTree(t, w.Src, w.Dst)
	noTempFiles(t, w.Dst)
	noProcsLeft(t, w.Dir)
}

// Row 3: a file the (unprivileged) user cannot read fails alone (23); the rest is copied.
func TestFault03Unreadable(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	w := newWork(t)
	o := asNobody(t, w.Dir)
	src, dst, out := w.Src, w.Dst, filepath.Join(w.Dir, "out")
	names := files(t, src, 3, 2000)
	writeFile(t, filepath.Join(src, "locked"), "secret\n", 0o600) // root's, unreadable by nobody
	nobodysDir(t, dst)
	nobodysDir(t, out)
	o.dir, o.in = w.Dir, lines(append(slices.Clone(names[:2]), "locked", names[2])...)
	r := start(t, o, "--no-throttle", "--root", src, "--failed", filepath.Join(out, "failed"), dst).wait(30 * time.Second)
	r.Exit(t, 23)
	r.Identity(t, 4)
	r.Counts(t, map[string]int64{"files_transferred": 3, "files_failed": 1, "files_vanished": 0})
	r.PathFailed(t, map[string]string{"locked": "failed"})
	if e := r.OfType("path_failed"); len(e) == 1 && !strings.Contains(fmt.Sprint(e[0]["reason"]), "Permission denied") {
		t.Errorf("reason %q does not name the cause", e[0]["reason"])
	}
	if st := r.Statuses(); !slices.Equal(st, []string{"partial"}) {
		t.Errorf("chunk_end statuses %q, want [partial]", st)
	}
	r.FailedAre(t, "locked")
	for _, n := range names {
		if !copied(src, dst, n) {
			t.Errorf("%s not copied", n)
		}
	}
	absent(t, dst, "locked")
	noTempFiles(t, dst)
	noProcsLeft(t, w.Dir)
}

// Row 4: the destination fills up (a 2 MB tmpfs): the run stops (ENOSPC is not retried),
// and every path not copied is in --failed.
func TestFault04DiskFull(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	w := newWork(t)
	mountTmpfs(t, w.Dst, "size=2m")
	names := files(t, w.Src, 16, 256<<10) // 4 MiB into 2 MiB
	r := start(t, startOpts{dir: w.Dir, in: lines(names...)}, "--no-throttle", "-j", "2", "--chunk-files", "4", "--root", w.Src, "--failed", w.Failed, w.Dst).wait(60 * time.Second)
	if r.Code != 11 && r.Code != 23 {
		t.Errorf("exit code %d, want 11 (or 23: rsync's code when ENOSPC hits a file)\n%s", r.Code, r.Stderr)
	}
	r.Exit(t, r.Code)
	s := r.Identity(t, len(names))
	full := false
	for _, e := range r.OfType("chunk_end") {
		if e["status"] == "failed" && strings.Contains(fmt.Sprint(e["hint"]), "full") {
			full = true
		}
		if e["status"] == "retrying" {
			t.Errorf("disk full was retried: %v", e)
		}
	}
	if !full {
		t.Errorf("no failed chunk_end with a disk-full hint: %q", r.Statuses())
	}
	if num(s, "retries") != 0 {
		t.Errorf("summary retries %d, want 0", num(s, "retries"))
	}
	r.OneError(t, true)
	list := r.Failed(t)
	var notCopied []string
	for _, n := range names {
		if !copied(w.Src, w.Dst, n) {
			notCopied = append(notCopied, n)
		}
	}
	if len(notCopied) == 0 {
		t.Fatalf("everything fit into the tmpfs; the test needs more data")
	}
	for _, n := range notCopied {
		if !slices.Contains(list, n) {
			t.Errorf("%s was not copied and is not in --failed", n)
		}
	}
	want := map[string]string{}
	for _, n := range list {
		if !slices.Contains(names, n) {
			t.Errorf("--failed holds %q, not an input path", n)
		}
		want[n] = "failed"
	}
	r.PathFailed(t, want) // the events and the list agree, no duplicates
	if got := num(s, "files_failed"); got != int64(len(list)) {
		t.Errorf("summary files_failed %d, --failed holds %d", got, len(list))
	}
	t.Logf("disk full: exit %d, %d copied, %d failed, temp files left: %q", r.Code, len(names)-len(list), len(list), tempFiles(w.Dst))
	noTempFiles(t, w.Dst)
	noProcsLeft(t, w.Dir)
}

// Row 5: the rsync daemon is killed mid-copy (a transient code 12/10), restarted on the
// same port, and the retry completes the copy.
func TestFault05DaemonKilled(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	oncePerSuite(t)
	needRsync(t)
	w := newWork(t)
	mod := filepath.Join(w.Dir, "mod")
	names := files(t, w.Src, 4, 40<<10)
	d := startDaemon(t, mod)
	marker := fmt.Sprintf("127.0.0.1:%d/mod", d.Port)
	p := start(t, startOpts{dir: w.Dir, in: lines(names...), env: []string{"PRSYNC_RETRY_DELAY=300ms"}}, "--no-throttle", "--retries", "10", "--root", w.Src, "--failed", w.Failed, d.URL(), "--", "--bwlimit=100")
	p.midFile(mod)
	// Ten retries from 300 ms, doubled with 0.5-1.5x jitter, outlast the restart: it takes
	// about 2 s where PID 1 reaps the killed session child late (Stop waits for its group
	// to be gone), and three retries ran out in a clean-clone CI once.
	down := time.Now()
	d.Stop()
	stopped := time.Since(down)
	d.start(t)
	t.Logf("daemon down for %v (stop %v)", time.Since(down).Round(time.Millisecond), stopped.Round(time.Millisecond))
	r := p.wait(60 * time.Second)
	r.Exit(t, 0)
	s := r.Identity(t, 4)
	r.Counts(t, map[string]int64{"files_failed": 0, "files_not_done": 0, "files_vanished": 0})
	if num(s, "retries") < 1 {
		t.Errorf("summary retries %d, want at least 1", num(s, "retries"))
	}
	st := r.Statuses()
	if !slices.Contains(st, "retrying") || st[len(st)-1] != "ok" {
		t.Errorf("chunk_end statuses %q, want a retrying then ok", st)
	}
	for _, e := range r.OfType("chunk_end") {
		if e["status"] == "retrying" {
			t.Logf("daemon killed: rsync exit %v (%v)", e["exit_code"], e["hint"])
		}
	}
	r.PathFailed(t, nil)
	r.FailedAre(t)
	// The daemon's own receiver was SIGKILLed with the daemon and may leave its temp file
	// in the module: that is the remote side's, which prsync cannot sweep (remote DEST).
	for _, tf := range tempFiles(mod) {
		t.Logf("temp file left on the daemon side by the killed daemon (not prsync's to sweep): %s", filepath.Base(tf))
		os.Remove(tf)
	}
	sameTree(t, w.Src, mod)
	noProcsLeft(t, marker)
}

// Row 6: a daemon that is never there: code 10, retried, then the run stops and every
// path is failed.
func TestFault06DaemonNeverThere(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	oncePerSuite(t)
	needRsync(t)
	w := newWork(t)
	names := files(t, w.Src, 6, 100)
	port := freePort(t)
	url := fmt.Sprintf("rsync://127.0.0.1:%d/mod/", port)
	t0 := time.Now()
	r := start(t, startOpts{dir: w.Dir, in: nul(names...)}, "--no-throttle", "-0", "-j", "2", "--chunk-files", "2", "--root", w.Src, "--failed", w.Failed, url).wait(60 * time.Second)
	el := time.Since(t0)
	r.Exit(t, 10)
	s := r.Identity(t, 6)
	r.Counts(t, map[string]int64{"files_failed": 6, "files_transferred": 0})
	if el > 20*time.Second {
		t.Errorf("took %v; want a fast failure", el)
	}
	if n := num(s, "retries"); n < 2 {
		t.Errorf("summary retries %d, want at least 2 (--retries 2)", n)
	}
	if n := len(r.OfType("chunk_start")); n > 2*3 {
		t.Errorf("%d rsyncs started; want at most the first chunks' attempts (jobs 2 × 3)", n)
	}
	st := r.Statuses()
	if !slices.Contains(st, "retrying") || !slices.Contains(st, "failed") {
		t.Errorf("chunk_end statuses %q, want retrying and failed", st)
	}
	want := map[string]string{}
	for _, n := range names {
		want[n] = "failed"
	}
	r.PathFailed(t, want)
	r.FailedAre(t, names...)
	r.OneError(t, true)
	if !strings.Contains(r.Stderr, "code 10") {
		t.Errorf("error does not give rsync's code 10:\n%s", r.Stderr)
	}
	noProcsLeft(t, fmt.Sprintf("127.0.0.1:%d", port))
}

// Row 7: the test SIGKILLs an rsync group mid-file. The chunk is retried and the run
// ends 0 with an exact copy. The killed receiver leaves its ".name.XXXXXX" temp file;
// prsync sweeps it in a local DEST because the attempt died of a signal.
func TestFault07RsyncKilled(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	w := newWork(t)
	names := files(t, w.Src, 4, 40<<10)
	// 100 kB at 25 kB/s: the last file is sent 3 s in, time enough to remove it on a busy machine
	p := start(t, startOpts{dir: w.Dir, in: lines(names...)}, "--no-throttle", "--root", w.Src, "--failed", w.Failed, w.Dst, "--", "--bwlimit=25")
	cs := p.midFile(w.Dst)
	pid := int(num(cs, "pid"))
	if st, ok := procsMentioning(w.Dst)[pid]; !ok {
		t.Fatalf("rsync %d from chunk_start is not running (%v)", pid, procsMentioning(w.Dst))
	} else {
		t.Logf("killing rsync group %d (state %s)", pid, st)
	}
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r := p.wait(60 * time.Second)
	r.Exit(t, 0)
	s := r.Identity(t, 4)
	r.Counts(t, map[string]int64{"files_failed": 0, "files_not_done": 0})
	if num(s, "retries") < 1 {
		t.Errorf("summary retries %d, want at least 1", num(s, "retries"))
	}
	if p.waitFor(0, is("chunk_end", "status", "retrying", "exit_code", -1)) == nil {
		t.Errorf("no chunk_end retrying with exit_code -1: %q", r.Statuses())
	}
	r.PathFailed(t, nil)
	r.FailedAre(t)
	noTempFiles(t, w.Dst)
	sameTree(t, w.Src, w.Dst)
	noProcsLeft(t, w.Dir)
}

// Row 8: SIGINT at a random moment, 20 times: exit 20 (or 0 when the copy had ended),
// a summary last, the identity, every path copied or in --failed, and no process left.
func TestSignal08InterruptLoop(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	src := newWork(t).Src
	names := files(t, src, 6, 20<<10)
	loops := 20
	if s := os.Getenv("PRSYNC_TEST_INT_LOOPS"); s != "" {
		loops, _ = strconv.Atoi(s)
	}
	codes := make([]int, loops)
	bin(t) // build before the parallel subtests: bin is not safe for concurrent first use
	for i := 0; i < loops; i++ {
		t.Run(fmt.Sprintf("n%02d", i), func(t *testing.T) {
			t.Parallel()
			w := newWork(t)
			// 2 chunks of 3 × 20 KiB at 60 KiB/s: about 1 s of copying
			p := start(t, startOpts{dir: w.Dir, in: lines(names...)}, "--no-throttle", "-j", "2", "--chunk-files", "3", "--root", src, "--failed", w.Failed, w.Dst, "--", "--bwlimit=60")
			// a random moment 0–1.5 s after the start event: before prsync's handlers are
			// installed, a SIGINT kills any Go program (the few milliseconds of runtime
			// start-up); the window between them and the start event, where prsync checks
			// rsync, is covered by TestSignalDuringStartup
			p.mustWaitFor("start", 10*time.Second, is("start"))
			delay := time.Duration(rand.Int64N(int64(1500 * time.Millisecond)))
			time.Sleep(delay)
			p.signal(syscall.SIGINT)
			r := p.wait(30 * time.Second)
			codes[i] = r.Code
			if r.Code != 20 && r.Code != 0 {
				t.Errorf("delay %v: exit code %d, want 20 (or 0)\n%s", delay, r.Code, r.Stderr)
			}
			r.Exit(t, r.Code)
			t.Logf("SIGINT %v after the start event: exit %d", delay, r.Code)
			// paths still in the pipe when the signal came were never read: they are
			// the only ones allowed to be neither copied nor listed
			r.CutShort(t, src, w.Dst, names)
			if r.Code == 0 {
				sameTree(t, src, w.Dst)
			}
			noTempFiles(t, w.Dst)
			noProcsLeft(t, w.Dst)
		})
	}
	t.Cleanup(func() { t.Logf("exit codes: %v", codes) })
}

// Row 9: SIGTERM while the throttle has paused the rsyncs: exit 20 within seconds,
// nothing left stopped or running, no temp file.
func TestSignal09TermWhilePaused(t *testing.T) {
	needRsync(t)
	w := newWork(t)
	names := files(t, w.Src, 8, 40<<10)
	// keep the machine over 1 % CPU until a pause is seen
	stopBusy := busyLoop()
	defer stopBusy()
	p := start(t, startOpts{dir: w.Dir, in: lines(names...)}, "--suspend-threshold", "1", "--resume-threshold", "0.5", "--throttle-interval", "200ms", "--max-suspend", "30s", "-j", "2", "--chunk-files", "4", "--root", w.Src, "--failed", w.Failed, w.Dst, "--", "--bwlimit=40")
	sus := p.mustWaitFor("throttle suspend", 15*time.Second, is("throttle", "action", "suspend"))
	stopBusy()
	// wait until the group is really stopped, so TERM finds it in state T
	pid := int(num(sus, "pid"))
	deadline := time.Now().Add(5 * time.Second)
	for procsMentioning(w.Dst)[pid] != "T" && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if st := procsMentioning(w.Dst)[pid]; st != "T" {
		t.Fatalf("paused rsync %d is in state %q, not T: the test would not test TERM to a stopped group", pid, st)
	}
	t0 := time.Now()
	p.signal(syscall.SIGTERM)
	r := p.wait(30 * time.Second)
	el := time.Since(t0)
	r.Exit(t, 20)
	checkStoppedByTerm(t, r, el)
	s := r.Identity(t, 8)
	if num(s, "suspensions") < 1 {
		t.Errorf("summary suspensions %d, want at least 1", num(s, "suspensions"))
	}
	for pid, st := range procsMentioning(w.Dir) {
		if st == "T" {
			t.Errorf("process %d left stopped", pid)
		}
	}
	list := r.Failed(t)
	for _, n := range names {
		if !slices.Contains(list, n) && !copied(w.Src, w.Dst, n) {
			t.Errorf("%s neither copied nor in --failed", n)
		}
	}
	if got := num(s, "files_not_done") + num(s, "files_failed"); got != int64(len(list)) {
		t.Errorf("--failed holds %d paths, summary not_done+failed %d", len(list), got)
	}
	noTempFiles(t, w.Dst)
	noProcsLeft(t, w.Dir)
	t.Logf("ended %v after SIGTERM; statuses %q", el.Round(time.Millisecond), r.Statuses())
}

// Rows 10 and 11: setup faults fail fast with one clear error, before any copying rsync.
func TestFault10and11Setup(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	w := newWork(t)
	names := files(t, w.Src, 2, 100)
	afile := filepath.Join(w.Dir, "afile")
	writeFile(t, afile, "x", 0o644)
	state := filepath.Join(w.Dir, "fake-state")
	fake := fakeRsyncPath(t)
	for _, tc := range []struct {
		name string
		args []string
		env  []string
		code int
	}{
		{"10-rsync-missing", []string{"--rsync", "/nonexistent/rsync", filepath.Join(w.Dir, "d1")}, nil, 127},
		{"10-rsync-is-a-dir", []string{"--rsync", w.Dir + "/", filepath.Join(w.Dir, "d2")}, nil, 127},
		{"11-dest-is-a-file", []string{"--rsync", fake, afile},
			[]string{"PRSYNC_TEST_FAKE_RSYNC=exit:0", "PRSYNC_TEST_FAKE_STATE=" + state}, 3},
		{"11-dest-under-a-file", []string{"--rsync", fake, filepath.Join(afile, "sub")},
			[]string{"PRSYNC_TEST_FAKE_RSYNC=exit:0", "PRSYNC_TEST_FAKE_STATE=" + state}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := start(t, startOpts{dir: w.Dir, in: lines(names...), env: tc.env}, append([]string{"--no-throttle", "--root", w.Src}, tc.args...)...).wait(30 * time.Second)
			if r.Code != tc.code {
				t.Errorf("exit code %d, want %d\n%s", r.Code, tc.code, r.Stderr)
			}
			if len(r.Events) != 0 {
				t.Errorf("events written before the run started: %s", r.Stdout)
			}
			r.OneError(t, false)
			t.Logf("stderr: %s", strings.TrimSpace(r.Stderr))
			if _, err := os.Stat(state); err == nil {
				t.Errorf("a copying rsync was started")
			}
			noProcsLeft(t, w.Dir)
		})
	}
}

// ---------------------------------------------------------------- signals beyond the rows

// SIGHUP is treated like SIGTERM: exit 20, the summary, not-done paths in --failed.
func TestSignalHUP(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	w := newWork(t)
	names := files(t, w.Src, 4, 40<<10)
	p := start(t, startOpts{dir: w.Dir, in: lines(names...)}, "--no-throttle", "--root", w.Src, "--failed", w.Failed, w.Dst, "--", "--bwlimit=50")
	p.midFile(w.Dst)
	p.signal(syscall.SIGHUP)
	r := p.wait(30 * time.Second)
	r.Exit(t, 20)
	r.Identity(t, 4)
	if st := r.Statuses(); !slices.Equal(st, []string{"cancelled"}) {
		t.Errorf("chunk_end statuses %q, want [cancelled]", st)
	}
	var notCopied []string
	want := map[string]string{}
	for _, n := range names {
		if !copied(w.Src, w.Dst, n) {
			notCopied = append(notCopied, n)
			want[n] = "not_done"
		}
	}
	if len(notCopied) == 0 {
		t.Fatal("the copy ended before SIGHUP")
	}
	r.Counts(t, map[string]int64{"files_not_done": int64(len(notCopied))})
	r.PathFailed(t, want)
	r.FailedAre(t, notCopied...)
	noTempFiles(t, w.Dst)
	noProcsLeft(t, w.Dir)
}

// A second SIGINT sends KILL to the groups: exit 20, nothing left, and no temp file in
// a local DEST (rsync removed it on TERM, or prsync swept it after the KILL).
func TestSignalSecondInterruptKills(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	w := newWork(t)
	names := files(t, w.Src, 2, 200<<10)
	// 100 kB at 25 kB/s: the last file is sent 3 s in, time enough to remove it on a busy machine
	p := start(t, startOpts{dir: w.Dir, in: lines(names...)}, "--no-throttle", "--root", w.Src, "--failed", w.Failed, w.Dst, "--", "--bwlimit=25")
	p.midFile(w.Dst)
	p.signal(syscall.SIGINT)
	p.signal(syscall.SIGINT)
	r := p.wait(30 * time.Second)
	r.Exit(t, 20)
	r.Identity(t, 2)
	r.Counts(t, map[string]int64{"files_not_done": 2})
	r.FailedAre(t, names...)
	noTempFiles(t, w.Dst)
	noProcsLeft(t, w.Dir)
	t.Logf("chunk_end %v; stderr: %s", r.OfType("chunk_end"), strings.TrimSpace(r.Stderr))
}

// SIGINT while prsync is still starting (checking rsync) still ends with exit 20 and a
// summary: the handlers are installed before anything slow happens. The signal is sent
// once prsync is seen asking rsync its version (the wrapper says so, then waits for the
// signal), not after a fixed sleep: on a busy machine a race-built prsync may need more
// than a second to reach that point, and a signal before its main is the Go runtime's to
// take, not prsync's.
func TestSignalDuringStartup(t *testing.T) {
	needRsync(t)
	w := newWork(t)
	names := files(t, w.Src, 2, 100)
	asking, sent := filepath.Join(w.Dir, "asking"), filepath.Join(w.Dir, "sent")
	slow := filepath.Join(w.Dir, "slow-rsync")
	// every --version call says it is under way, then waits (at most 60 s) until the test
	// has sent the signal, and a little more, so that the signal meets prsync in its check
	writeFile(t, slow, fmt.Sprintf(`#!/bin/sh
for a; do
  if [ "$a" = --version ]; then
    : > '%s'; i=0
    while [ ! -e '%s' ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
    sleep 0.2
  fi
done
exec rsync "$@"
`, asking, sent), 0o755)
	p := start(t, startOpts{dir: w.Dir, in: lines(names...)}, "--no-throttle", "--rsync", slow, "--root", w.Src, "--failed", w.Failed, w.Dst)
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := os.Stat(asking); err == nil {
			break
		}
		if time.Now().After(deadline) {
			r := p.wait(time.Second)
			t.Fatalf("prsync never asked rsync its version within 60 s: exit %d\n%s", r.Code, r.Stderr)
		}
		time.Sleep(5 * time.Millisecond)
	}
	p.signal(syscall.SIGINT)
	writeFile(t, sent, "", 0o644)
	r := p.wait(60 * time.Second)
	if r.Code == -1 {
		t.Fatalf("prsync was killed by SIGINT during startup (no handler yet); stdout:\n%s", r.Stdout)
	}
	r.Exit(t, 20)
	s := r.Identity(t, -1)
	if len(r.OfType("chunk_start")) != 0 {
		t.Errorf("an rsync started after the interrupt")
	}
	list := r.Failed(t)
	if got := num(s, "files_not_done"); got != int64(len(list)) {
		t.Errorf("summary files_not_done %d, --failed holds %d", got, len(list))
	}
	// DEST holds nothing of the source: no path was copied, so none may be missing from
	// the account (--failed names every path not in DEST)
	inFailed := map[string]bool{}
	for _, n := range list {
		inFailed[n] = true
	}
	for _, n := range names {
		if _, err := os.Lstat(filepath.Join(w.Dst, n)); err == nil {
			t.Errorf("%s is in DEST after an interrupt before any rsync ran", n)
		} else if !inFailed[n] && num(s, "files") > 0 {
			t.Errorf("%s is neither in DEST nor in --failed", n)
		}
	}
	noProcsLeft(t, w.Dir)
}

// ---------------------------------------------------------------- --failed round trip

// Fail some paths (unreadable for an unprivileged run, and missing), fix the causes,
// re-run from the --failed list alone, and end with an exact copy.
func TestFailedRoundTrip(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	w := newWork(t)
	src, dst, out := w.Src, w.Dst, filepath.Join(w.Dir, "out")
	names := files(t, src, 4, 3000)
	var o startOpts
	var wantFailed []string
	missing := "later\nwith a newline"
	if isRoot() {
		o = asNobody(t, w.Dir)
		writeFile(t, filepath.Join(src, "locked one"), "secret\n", 0o600)
		nobodysDir(t, dst)
		nobodysDir(t, out)
		wantFailed = append(wantFailed, "locked one")
	} else {
		os.MkdirAll(out, 0o755)
	}
	o.dir = w.Dir
	wantFailed = append(wantFailed, missing)
	in := append(slices.Clone(names), wantFailed...)
	failed := filepath.Join(out, "failed")
	o.in = nul(in...)
	r := start(t, o, "--no-throttle", "-0", "--root", src, "--failed", failed, dst).wait(30 * time.Second)
	want := 24
	if len(wantFailed) > 1 {
		want = 23
	}
	r.Exit(t, want)
	r.Identity(t, len(in))
	r.FailedAre(t, wantFailed...)

	// fix the causes
	if len(wantFailed) > 1 {
		if err := os.Chmod(filepath.Join(src, "locked one"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(src, missing), "now here\n", 0o644)

	// the tempting loop, prsync --failed FILE < FILE, is refused before FILE is truncated
	// (it read an empty list and exited 0, and the failed paths were gone)
	before, err := os.ReadFile(failed)
	if err != nil {
		t.Fatal(err)
	}
	same, err := os.Open(failed)
	if err != nil {
		t.Fatal(err)
	}
	defer same.Close()
	o.stdin = same
	r1 := start(t, o, "--no-throttle", "-0", "--root", src, "--failed", failed, dst).wait(30 * time.Second)
	if r1.Code != 1 || !strings.Contains(r1.Stderr, "prsync: error: --failed "+failed+" is the list prsync reads (stdin)") {
		t.Errorf("--failed FILE < FILE: exit %d, stderr %q; want 1 and the reason", r1.Code, r1.Stderr)
	}
	if after, _ := os.ReadFile(failed); !bytes.Equal(after, before) {
		t.Errorf("--failed FILE < FILE changed FILE: %q, was %q", after, before)
	}
	if _, err := os.Lstat(filepath.Join(dst, missing)); err == nil {
		t.Errorf("--failed FILE < FILE copied %q although it was refused", missing)
	}

	// prsync -0 DEST < FILE
	fh, err := os.Open(failed)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	o.stdin = fh
	r2 := start(t, o, "--no-throttle", "-0", "--root", src, "--failed", filepath.Join(out, "failed2"), dst).wait(30 * time.Second)
	r2.Exit(t, 0)
	r2.Identity(t, len(wantFailed))
	r2.Counts(t, map[string]int64{"files_transferred": int64(len(wantFailed))})
	r2.FailedAre(t)
	sameTree(t, src, dst)
	noProcsLeft(t, w.Dir)
}

// ---------------------------------------------------------------- DEST inside the source

// TestDestInsideSource: `cd SRC && find . | prsync ./backup` lists the backup's own files
// on every run after the first. They fail with the reason and a hint, instead of being
// copied into DEST a level deeper each time; the rest of the tree is copied. A DEST above
// the source (restoring an archive into its parent) is copied as before.
func TestDestInsideSource(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	src := filepath.Join(t.TempDir(), "data")
	var tree []string
	for i := 0; i < 6; i++ {
		name := fmt.Sprintf("d%d/f%d", i%2, i)
		writeFile(t, filepath.Join(src, name), name, 0o644)
		tree = append(tree, name)
	}
	list := func() []byte { // as find . -print0 lists the tree, DEST included once it exists
		var b []byte
		filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(src, p)
			b = append(b, "./"+rel+"\x00"...)
			return nil
		})
		return b
	}
	dest := filepath.Join(src, "backup")
	if err := os.MkdirAll(dest, 0o755); err != nil {
		t.Fatal(err)
	}
	first := start(t, startOpts{dir: src, in: list()}, "--no-throttle", "-0", "./backup/").wait(30 * time.Second)
	first.Exit(t, 23) // ./backup itself is in the list
	for _, f := range tree {
		if b, err := os.ReadFile(filepath.Join(dest, f)); err != nil || string(b) != f {
			t.Errorf("first run: %s in DEST: %q, %v", f, b, err)
		}
	}
	second := start(t, startOpts{dir: src, in: list()}, "--no-throttle", "-0", "--failed", filepath.Join(t.TempDir(), "failed"), "./backup/").wait(30 * time.Second)
	second.Exit(t, 23)
	var inside []string
	listed := strings.Split(strings.TrimSuffix(string(list()), "\x00"), "\x00")
	for _, p := range listed {
		if p == "./backup" || strings.HasPrefix(p, "./backup/") {
			inside = append(inside, p)
		}
	}
	second.Identity(t, len(listed))
	second.FailedAre(t, inside...)
	for _, e := range second.OfType("path_failed") {
		if !strings.HasPrefix(fmt.Sprint(e["reason"]), "inside DEST") {
			t.Errorf("path_failed %v: want the reason inside DEST", e)
		}
	}
	if !strings.Contains(second.Stderr, "prsync: hint: the list holds DEST ./backup") || !strings.Contains(second.Stderr, "find . -path ./backup -prune -o -print0") {
		t.Errorf("no hint naming DEST and the find test:\n%s", second.Stderr)
	}
	// DEST holds the tree once, and no copy of itself
	absent(t, dest, "backup")
	filepath.WalkDir(dest, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dest, p)
			if !slices.Contains(tree, rel) {
				t.Errorf("DEST holds %s, not a file of the source", rel)
			}
		}
		return nil
	})

	// a restore into the parent: the paths are inside DEST, which is above the source
	restore := filepath.Join(src, "d0")
	r := start(t, startOpts{dir: restore, in: nul("f0", "f2")}, "--no-throttle", "-0", src).wait(30 * time.Second)
	r.Exit(t, 0)
	for _, f := range []string{"f0", "f2"} {
		if b, err := os.ReadFile(filepath.Join(src, f)); err != nil || string(b) != "d0/"+f {
			t.Errorf("restore into the parent: %s: %q, %v", f, b, err)
		}
	}
}

// TestRootAlone: the root in the list (".", as find . prints it first) is copied alone,
// after the other paths: rsync lists a "." entry's contents one level deep, so in a chunk
// it copied top-level names the list left out, and the paths landing after it changed
// DEST's mtime.
func TestRootAlone(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	w := newWork(t)
	writeFile(t, filepath.Join(w.Src, "keep"), "keep", 0o644)
	writeFile(t, filepath.Join(w.Src, "left out.tmp"), "not listed", 0o644)
	writeFile(t, filepath.Join(w.Src, "sub", "inner"), "inner", 0o644)
	writeFile(t, filepath.Join(w.Src, "skipped dir", "x"), "not listed", 0o644)
	old := time.Date(2021, 3, 4, 5, 6, 7, 0, time.UTC)
	if err := os.Chmod(w.Src, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(w.Src, old, old); err != nil {
		t.Fatal(err)
	}
	in := nul(".", "keep", "sub", "sub/inner") // as find . ! -name '*.tmp' ! -path './skipped*' lists it
	r := start(t, startOpts{dir: w.Src, in: in}, "--no-throttle", "-0", "-j", "2", w.Dst).wait(30 * time.Second)
	r.Exit(t, 0)
	r.Identity(t, 4)
	r.Counts(t, map[string]int64{"files_transferred": 4})
	absent(t, w.Dst, "left out.tmp", "skipped dir") // the list left them out
	for _, p := range []string{"keep", "sub/inner"} {
		if _, err := os.Lstat(filepath.Join(w.Dst, p)); err != nil {
			t.Errorf("DEST lacks %q: %v", p, err)
		}
	}
	destHasRootAttrs(t, w.Dst, 0o750, old)
	// the root's chunk, cut last, started after every other chunk had ended
	var rootID int64
	for _, e := range r.OfType("chunk_start") {
		rootID = max(rootID, num(e, "chunk"))
	}
	var rootStart, lastEnd time.Time
	for _, e := range r.OfType("chunk_start") {
		if num(e, "chunk") == rootID {
			rootStart = at(t, e)
			if num(e, "files") != 1 {
				t.Errorf("the last chunk %v: want the root alone", e)
			}
		}
	}
	for _, e := range r.OfType("chunk_end") {
		if num(e, "chunk") != rootID && at(t, e).After(lastEnd) {
			lastEnd = at(t, e)
		}
	}
	if rootID < 2 || rootStart.Before(lastEnd) {
		t.Errorf("the root's chunk %d started at %v, the other chunks ended at %v: want it after", rootID, rootStart, lastEnd)
	}
}

// ---------------------------------------------------------------- input faults

// A read error on the input ends it cleanly: an error event, a summary, a non-zero exit,
// and no hang.
func TestFaultStdinReadError(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	w := newWork(t)
	dir := filepath.Join(w.Dir, "adir")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		stdin func(t *testing.T) io.Reader
		args  []string
	}{
		{"from-a-directory", nil, []string{"--from", dir}},
		{"stdin-is-a-directory", func(t *testing.T) io.Reader {
			fh, err := os.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { fh.Close() })
			return fh
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var in io.Reader
			if tc.stdin != nil {
				in = tc.stdin(t)
			}
			dst := filepath.Join(w.Dir, "dst-"+tc.name)
			r := start(t, startOpts{dir: w.Dir, stdin: in}, append(append([]string{"--no-throttle"}, tc.args...), dst)...).wait(20 * time.Second)
			if r.Code == 0 {
				t.Errorf("exit code 0 after a read error")
			}
			r.Exit(t, r.Code)
			r.Identity(t, 0)
			errs := r.OfType("error")
			if len(errs) != 1 || !strings.Contains(fmt.Sprint(errs[0]["error"]), "is a directory") {
				t.Errorf("want one error event naming the cause, got %v", errs)
			}
			r.OneError(t, false)
			t.Logf("exit %d: %s", r.Code, strings.TrimSpace(r.Stderr))
			noProcsLeft(t, dst)
		})
	}
}

// Empty input (or only empty records) is a successful no-op with a summary.
func TestFaultEmptyInput(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	for _, tc := range []struct {
		name  string
		in    string
		args  []string
		empty int64
	}{
		{"nothing", "", nil, 0},
		{"newlines", "\n\n\n", nil, 3},
		{"nuls", "\x00\x00", []string{"-0"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWork(t)
			r := start(t, startOpts{dir: w.Dir, in: []byte(tc.in)}, append(append([]string{"--no-throttle", "--failed", w.Failed}, tc.args...), w.Dst)...).wait(20 * time.Second)
			r.Exit(t, 0)
			r.Identity(t, 0)
			r.Counts(t, map[string]int64{"empty_records": tc.empty, "chunks": 0})
			if n := len(r.OfType("chunk_start")); n != 0 {
				t.Errorf("%d rsyncs started for empty input", n)
			}
			r.FailedAre(t)
			if r.Stderr != "" {
				t.Errorf("stderr: %s", r.Stderr)
			}
			noProcsLeft(t, w.Dir)
		})
	}
}

// A 1 MB record is a per-path failure (file name too long); the other paths are copied.
func TestFaultLongRecord(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	w := newWork(t)
	names := files(t, w.Src, 2, 100)
	long := strings.Repeat("x", 1<<20)
	in := []string{names[0], long, names[1]}
	r := start(t, startOpts{dir: w.Dir, in: lines(in...)}, "--no-throttle", "--root", w.Src, "--failed", w.Failed, w.Dst).wait(30 * time.Second)
	r.Exit(t, 23)
	r.Identity(t, 3)
	r.Counts(t, map[string]int64{"files_failed": 1, "files_transferred": 2})
	r.PathFailed(t, map[string]string{long: "failed"})
	if e := r.OfType("path_failed"); len(e) == 1 && !strings.Contains(fmt.Sprint(e[0]["reason"]), "file name too long") {
		t.Errorf("reason %q, want file name too long", e[0]["reason"])
	}
	r.FailedAre(t, long)
	sameTree(t, w.Src, w.Dst)
	noProcsLeft(t, w.Dir)
}

// ---------------------------------------------------------------- exit codes via the fake rsync

// A chunk whose rsync lost a race to create a directory of DEST to another rsync (two
// sessions of one copy into a new directory of a daemon's module, with --mkpath: "mkdir ...
// failed: File exists (17)", exit 11) is tried again without using up a retry: with
// --retries 0 the copy still ends whole. Such retries are bounded (10 a chunk): a race that
// never ends fails the chunk as before. The real rsync meets the race only by chance
// (tests/adaptive_test.go TestNeighboursShareDaemon met it once in many runs).
func TestFaultOwnMkdirRace(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	fake := fakeRsyncPath(t)
	for _, tc := range []struct {
		mode     string
		code     int
		statuses []string
	}{
		{"mkdir-race:2", 0, []string{"retrying", "retrying", "ok"}},
		{"mkdir-race:100", 11, append(slices.Repeat([]string{"retrying"}, 10), "failed")},
	} {
		t.Run(strings.ReplaceAll(tc.mode, ":", "_"), func(t *testing.T) {
			t.Parallel()
			w := newWork(t)
			names := files(t, w.Src, 3, 500)
			env := []string{"PRSYNC_TEST_FAKE_RSYNC=" + tc.mode, "PRSYNC_TEST_FAKE_STATE=" + filepath.Join(w.Dir, "state")}
			r := start(t, startOpts{dir: w.Dir, in: lines(names...), env: env}, "--no-throttle", "--rsync", fake, "--retries", "0", "--root", w.Src, "--failed", w.Failed, w.Dst).wait(60 * time.Second)
			r.Exit(t, tc.code)
			r.Identity(t, 3)
			if st := r.Statuses(); !slices.Equal(st, tc.statuses) {
				t.Errorf("chunk_end statuses %q, want %q", st, tc.statuses)
			}
			if tc.code == 0 {
				sameTree(t, w.Src, w.Dst)
				r.FailedAre(t)
			} else {
				r.FailedAre(t, names...)
			}
			noProcsLeft(t, w.Dir)
		})
	}
}

// Transient codes are retried; config errors are not, and carry a hint.
func TestFaultFakeRsyncCodes(t *testing.T) {
	t.Parallel() // a correctness test: it runs beside the others, after the timing tests ran alone
	needRsync(t)
	fake := fakeRsyncPath(t)
	for _, tc := range []struct {
		mode     string
		code     int
		statuses []string
		retries  int64
		hint     string // in the last chunk_end
	}{
		{"fail-first:1:255", 0, []string{"retrying", "ok"}, 1, ""},
		{"fail-first:2:30", 0, []string{"retrying", "retrying", "ok"}, 2, ""},
		{"exit:12", 12, []string{"retrying", "retrying", "failed"}, 2, "connection"},
		{"exit:35", 35, []string{"retrying", "retrying", "failed"}, 2, "reach"},
		{"exit:5", 5, []string{"failed"}, 0, "daemon refused"},
		{"exit:3", 3, []string{"failed"}, 0, "destination"},
		{"exit:1", 1, []string{"failed"}, 0, "options"},
	} {
		t.Run(strings.ReplaceAll(tc.mode, ":", "_"), func(t *testing.T) {
			t.Parallel() // each case its own trees and fake state; most of the time is retry backoff
			w := newWork(t)
			names := files(t, w.Src, 3, 500)
			env := []string{"PRSYNC_TEST_FAKE_RSYNC=" + tc.mode, "PRSYNC_TEST_FAKE_STATE=" + filepath.Join(w.Dir, "state")}
			r := start(t, startOpts{dir: w.Dir, in: lines(names...), env: env}, "--no-throttle", "--rsync", fake, "--root", w.Src, "--failed", w.Failed, w.Dst).wait(30 * time.Second)
			r.Exit(t, tc.code)
			r.Identity(t, 3)
			r.Counts(t, map[string]int64{"retries": tc.retries})
			if st := r.Statuses(); !slices.Equal(st, tc.statuses) {
				t.Errorf("chunk_end statuses %q, want %q", st, tc.statuses)
			}
			ends := r.OfType("chunk_end")
			for _, e := range ends {
				if e["status"] != "ok" && e["hint"] == nil {
					t.Errorf("chunk_end without a hint: %v", e)
				}
			}
			if tc.code == 0 {
				sameTree(t, w.Src, w.Dst)
				r.PathFailed(t, nil)
				r.FailedAre(t)
			} else {
				if last := ends[len(ends)-1]; !strings.Contains(fmt.Sprint(last["hint"]), tc.hint) {
					t.Errorf("hint %q, want it to mention %q", last["hint"], tc.hint)
				}
				want := map[string]string{}
				for _, n := range names {
					want[n] = "failed"
				}
				r.PathFailed(t, want)
				r.FailedAre(t, names...)
				r.OneError(t, true)
			}
			noProcsLeft(t, w.Dir)
		})
	}
}
