package tests

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestThrottleUnderCPUHog: under real CPU pressure prsync stops its rsync groups (state T),
// says so, resumes them when the pressure ends, and finishes an exact copy.
//
// On a machine others keep busy, the pressure does not end when the test's hog stops, and
// only --max-suspend resumes the groups: the test measures the host first, and then
// checks the pause, the stopped groups and the copy, with the resume that rule makes.
func TestThrottleUnderCPUHog(t *testing.T) {
	needRsync(t)
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	w := newWork(t)
	list := nul(under(w.Src, files(t, w.Src, 16, 100_000))...)
	maxSuspend := "30s" // longer than the test waits: the resume must be the hog's end
	if cpu, ok := hostCPU(t, time.Second); ok && cpu >= 50 {
		maxSuspend = "2s"
		t.Logf("the host is busy without the hog (%.0f%% CPU over 1 s): the resume cannot be the pressure's end; checking the pause, state T and the copy, resumed by --max-suspend %s", cpu, maxSuspend)
	}
	l := start(t, startOpts{in: list}, "-0", "-j", "2", "--chunk-files", "4", "--root", w.Src,
		"--suspend-threshold", "85", "--resume-threshold", "60", "--throttle-interval", "300ms", "--max-suspend", maxSuspend,
		w.Dst, "--", "--bwlimit=400")
	l.mustWaitFor("chunk_start", 10*time.Second, is("chunk_start"))
	stopHog := startHog(t)
	l.mustWaitFor("suspend event", 15*time.Second, is("throttle", "action", "suspend"))
	seenT := false
	for i := 0; i < 50 && !seenT; i++ {
		seenT = stoppedProcs(w.Dst) > 0
		time.Sleep(100 * time.Millisecond)
	}
	if !seenT {
		t.Error("no rsync process seen in state T under the hog")
	}
	stopHog()
	l.mustWaitFor("resume event", 30*time.Second, is("throttle", "action", "resume"))
	r := l.wait(90 * time.Second)
	r.Exit(t, 0)
	sameTree(t, w.Src, w.Dst)
	s := r.Identity(t, 16)
	if num(s, "suspensions") < 1 || s["seconds_suspended"].(float64) <= 0 {
		t.Errorf("summary suspensions %v, seconds_suspended %v", s["suspensions"], s["seconds_suspended"])
	}
	for _, e := range r.OfType("throttle") {
		if e["reason"] == nil || e["pid"] == nil || e["running"] == nil || e["suspended"] == nil || e["cpu_percent"] == nil {
			t.Errorf("throttle event lacks fields: %v", e)
		}
	}
	// progress events carry "suspended"; one taken while groups were paused shows them
	sawSuspendedProgress := false
	for _, e := range r.OfType("progress") {
		if _, ok := e["suspended"]; !ok {
			t.Errorf("progress event without suspended: %v", e)
		}
		if num(e, "suspended") > 0 {
			sawSuspendedProgress = true
		}
	}
	if secs, _ := s["seconds_suspended"].(float64); !sawSuspendedProgress && secs > 2 {
		t.Errorf("groups were paused for %.1f s, yet no progress event shows one suspended", secs)
	}
	noProcsLeft(t, w.Dst)
}

// TestInterruptWhilePaused: SIGINT while rsync groups are stopped ends in exit 20 within a
// few seconds, with a summary, nothing stopped, no rsync left and no temp file in DEST.
func TestInterruptWhilePaused(t *testing.T) {
	needRsync(t)
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			w := newWork(t)
			list := nul(under(w.Src, files(t, w.Src, 8, 200_000))...)
			l := start(t, startOpts{in: list}, "-0", "-j", "2", "--chunk-files", "2", "--root", w.Src, "--failed", w.Failed,
				"--suspend-threshold", "70", "--resume-threshold", "40", "--throttle-interval", "200ms", "--max-suspend", "30s",
				w.Dst, "--", "--bwlimit=300")
			l.mustWaitFor("chunk_start", 10*time.Second, is("chunk_start"))
			time.Sleep(500 * time.Millisecond) // let rsync open its temp files
			startHog(t)
			l.mustWaitFor("suspend event", 15*time.Second, is("throttle", "action", "suspend"))
			for i := 0; i < 50 && stoppedProcs(w.Dst) == 0; i++ {
				time.Sleep(100 * time.Millisecond)
			}
			if stoppedProcs(w.Dst) == 0 {
				t.Fatal("no rsync in state T")
			}
			t0 := time.Now()
			l.signal(sig)
			r := l.wait(15 * time.Second)
			r.Exit(t, 20)
			checkStoppedByTerm(t, r, time.Since(t0))
			s := r.Identity(t, 8)
			if num(s, "exit_code") != 20 || num(s, "files_not_done") == 0 {
				t.Errorf("summary %v", s)
			}
			if n := stoppedProcs(w.Dst); n > 0 {
				t.Errorf("%d processes left stopped", n)
			}
			noProcsLeft(t, w.Dst)
			noTempFiles(t, w.Dst)
			// every path not copied is in --failed
			if listed := len(r.Failed(t)); int64(listed) != num(s, "files_not_done")+num(s, "files_failed")+num(s, "files_vanished") {
				t.Errorf("--failed lists %d paths, summary %v", listed, s)
			}
		})
	}
}

// checkStoppedByTerm checks that the rsyncs a signal cancelled while paused ended for the
// TERM that prsync sends with a CONT (rsync's own exit 20), not killed once the grace
// (10 s) ran out, and that prsync ended, took seconds after the signal, within it. That a
// stopped group acts on TERM only once continued is what this proves; how long a loaded
// machine takes to run the rsyncs' cleanup and prsync's end is not (it was a 5 s bound).
func checkStoppedByTerm(t *testing.T, r *Run, took time.Duration) {
	t.Helper()
	cancelled := 0
	for _, e := range r.OfType("chunk_end") {
		if e["status"] != "cancelled" {
			continue
		}
		cancelled++
		if num(e, "exit_code") != 20 {
			t.Errorf("a cancelled rsync exited %v, want rsync's 20 for TERM (not killed): %v", e["exit_code"], e)
		}
	}
	if cancelled == 0 {
		t.Errorf("no chunk_end cancelled: %v", r.OfType("chunk_end"))
	}
	if took >= 10*time.Second {
		t.Errorf("prsync took %v to end after the signal, the grace before KILL", took)
	}
}

// TestNoThrottle: with --no-throttle nothing is paused under the same hog.
func TestNoThrottle(t *testing.T) {
	needRsync(t)
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	w := newWork(t)
	list := nul(under(w.Src, files(t, w.Src, 8, 100_000))...)
	startHog(t)
	l := start(t, startOpts{in: list}, "-0", "-j", "2", "--chunk-files", "4", "--root", w.Src, "--no-throttle",
		"--suspend-threshold", "70", "--resume-threshold", "40", "--throttle-interval", "200ms",
		w.Dst, "--", "--bwlimit=400")
	l.mustWaitFor("chunk_start", 10*time.Second, is("chunk_start"))
	seenT := false
	for !l.ended() {
		time.Sleep(100 * time.Millisecond)
		seenT = seenT || stoppedProcs(w.Dst) > 0
	}
	r := l.wait(60 * time.Second)
	r.Exit(t, 0)
	if seenT {
		t.Error("an rsync was stopped with --no-throttle")
	}
	if n := len(r.OfType("throttle")); n > 0 {
		t.Errorf("%d throttle events with --no-throttle", n)
	}
	r.Counts(t, map[string]int64{"suspensions": 0})
	sameTree(t, w.Src, w.Dst)
}

// TestThrottleDeletePass: the deletion pass starts while every core is busy. The copy
// has ended, the throttle's gate is closed, and nothing runs; the pass's rsync waits at
// the gate, and --max-suspend lets it through as it lets a copy's chunk through (make
// test-busy once hung here for 10 minutes: the pass waited where the throttle did not
// count it).
func TestThrottleDeletePass(t *testing.T) {
	needRsync(t)
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	w := newWork(t)
	var list []string
	for i := 0; i < 4; i++ {
		name := fmt.Sprintf("d/f%d", i)
		writeFile(t, filepath.Join(w.Src, name), name, 0o644)
		list = append(list, name)
	}
	writeFile(t, filepath.Join(w.Dst, "d", "extra"), "not in the source", 0o644)
	in, feed := io.Pipe()
	l := start(t, startOpts{stdin: in}, "-0", "--root", w.Src, "--delete",
		"--throttle-interval", "200ms", "--max-suspend", "2s", w.Dst)
	if _, err := feed.Write(nul(list...)); err != nil {
		t.Fatal(err)
	}
	l.mustWaitFor("chunk_end", 30*time.Second, is("chunk_end"))
	startHog(t)
	// the copy is done and the input still open: the hot machine closes the gate, with
	// nothing paused and nothing running, before the list ends and the pass begins
	time.Sleep(2 * time.Second)
	feed.Close()
	r := l.wait(60 * time.Second)
	r.Exit(t, 0)
	absent(t, w.Dst, "d/extra") // deleted
	sameTree(t, w.Src, w.Dst)
	if s := r.Summary(t); s["delete_pass"] != "ran" {
		t.Errorf("delete_pass %q", s["delete_pass"])
	}
}

// TestFeederOwnCPU: the process that writes prsync's stdin (a find piped into it) counts as
// prsync's own CPU: a producer that keeps a core busy while the rsyncs copy does not make a
// copy pause itself (issue 23: a find over /usr was a quarter of the machine as other
// load, and paused an rsync every other second). The producer here writes half the list,
// keeps a core busy for 2 s, then writes the rest; all it used from prsync's start on is
// in prsync's own CPU (checkOwnCPU).
func TestFeederOwnCPU(t *testing.T) {
	needRsync(t)
	if _, err := os.Stat("/proc/self/fd/0"); err != nil {
		t.Skip("own CPU is measured on Linux only")
	}
	w := newWork(t)
	files(t, w.Src, 40, 60_000) // f00 … f39
	// the busy loop looks at the clock every 20,000 rounds, so date's forks are few
	producer := `printf '%s\n' f0* f1*; end=$(($(date +%s) + 2)); n=0
while :; do n=$((n + 1)); if [ $((n % 20000)) = 0 ] && [ "$(date +%s)" -ge "$end" ]; then break; fi; done
printf '%s\n' f2* f3*`
	bin(t) // built before the producer starts: its busy loop is to run beside the copy
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	feed := exec.Command("sh", "-c", producer)
	feed.Dir, feed.Stdout = w.Src, pw
	if err := feed.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	cpu := watchCPU(t, feed.Process.Pid)
	r := start(t, startOpts{stdin: pr}, "--root", w.Src, "-j", "2", "--chunk-files", "5",
		"--suspend-threshold", "30", "--resume-threshold", "20", "--throttle-interval", "250ms",
		w.Dst, "--", "--bwlimit=300").wait(2 * time.Minute)
	pr.Close()
	cpu.Stop() // before the wait reaps the producer and its /proc entry goes
	if err := feed.Wait(); err != nil {
		t.Fatalf("the producer: %v", err)
	}
	r.Exit(t, 0)
	sameTree(t, w.Src, w.Dst)
	checkOwnCPU(t, r, cpu, "the list's producer", false, 30)
}

// TestThrottleHeldNotice: a copy the throttle holds whole says so on stderr, with no
// terminal (stdout and stderr are pipes, as under cron): after 10 s of every rsync paused,
// one warning line with the cause and its figure, the threshold and the flags that change
// it; and one line when --max-suspend lets an rsync run again. The hogs fill every core,
// and --suspend-threshold 30 is far below what they make, whatever else the machine runs.
func TestThrottleHeldNotice(t *testing.T) {
	needRsync(t)
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	w := newWork(t)
	list := nul(under(w.Src, files(t, w.Src, 8, 300_000))...)
	stopHog := startHog(t)
	l := start(t, startOpts{in: list}, "-0", "-j", "2", "--chunk-files", "2", "--root", w.Src,
		"--suspend-threshold", "30", "--resume-threshold", "20", "--throttle-interval", "300ms", "--max-suspend", "15s",
		w.Dst, "--", "--bwlimit=200")
	started := time.Now()
	held := l.waitStderr("held notice", regexp.MustCompile(`^prsync: warning: every rsync has been paused for 1\ds: `), 40*time.Second)
	t.Logf("after %v: %s", time.Since(started).Round(time.Millisecond), held)
	for _, want := range []string{"the machine's CPU use is ", "above --suspend-threshold 30; ",
		"raise --suspend-threshold", "--max-suspend (15s", "--no-throttle"} {
		if !strings.Contains(held, want) {
			t.Errorf("the held notice lacks %q: %s", want, held)
		}
	}
	if cpu := regexp.MustCompile(`CPU use is (\d+)%`).FindStringSubmatch(held); cpu == nil {
		t.Errorf("the held notice gives no CPU figure: %s", held)
	} else if v, _ := strconv.Atoi(cpu[1]); v <= 30 {
		t.Errorf("the held notice's CPU %d%% is not above the threshold 30: %s", v, held)
	}
	l.waitStderr("the notice that one runs again", regexp.MustCompile(`^prsync: the throttle lets one rsync run after 1\ds of all paused \(--max-suspend 15s\)`), 30*time.Second)
	stopHog()
	r := l.wait(2 * time.Minute)
	r.Exit(t, 0)
	if n := strings.Count(r.Stderr, "every rsync has been paused"); n != 1 {
		t.Errorf("%d held notices in a run held once for 15 s, want 1:\n%s", n, r.Stderr)
	}
	sameTree(t, w.Src, w.Dst)
	r.Identity(t, 8)
}
