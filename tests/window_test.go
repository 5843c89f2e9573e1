package tests

// --max-duration, the time window: a copy slowed with rsync's --bwlimit that cannot end
// within it, into a local DEST, into an rsync daemon, and with every rsync paused by the
// throttle when the window ends. Judged by invariants that load cannot change: the
// kernel's start times of the rsyncs against prsync's own, the wall time between two
// bounds, the walk of DEST against --failed, and the processes left.

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestMaxDuration: with --max-duration 4s and a grace of 4s, over a 1 MiB file (26 s at
// 40 KiB/s: it cannot end) and 12 files of 40 KiB in chunks of 3 (3 s each: one starts
// between the window's end and its grace's, unless prsync holds it back), 2 rsyncs at
// once: the run exits 124 once the grace has passed, and within 10 s more; no rsync
// starts after the window (the kernel's start time of each, against prsync's); every
// path not in --failed is in DEST as the source has it, every path in --failed is
// not_done with a reason that names the window (or failed) and, in a local DEST, not
// there as the source has it; the paths never read are the only ones in neither; no
// rsync temp file is left in DEST, and no rsync runs or is stopped. The summary says
// max_duration_reached and the identity holds. The three cases run side by side (and still
// apart from the other tests): the invariants each is judged by hold under any load.
func TestMaxDuration(t *testing.T) {
	needRsync(t)
	for _, how := range []string{"local", "daemon", "paused"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			maxDuration(t, how)
		})
	}
}

func maxDuration(t *testing.T, how string) {
	const window, grace = 4 * time.Second, 4 * time.Second
	w := newWork(t)
	src, dst, logs := w.Src, w.Dst, filepath.Join(w.Dir, "starts")
	for _, d := range []string{dst, logs} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(src, "big"), strings.Repeat("0123456789abcdef", 1<<16), 0o644)
	names := append([]string{"big"}, files(t, src, 12, 40<<10)...)
	// every rsync prsync starts (not the server side of the pipe transport) writes its
	// /proc stat, which holds the kernel's time of its start, whenever it gets to it
	wrapper := filepath.Join(w.Dir, "rsync-wrapper")
	writeFile(t, wrapper, fmt.Sprintf(`#!/bin/sh
case " $* " in *" --server "*) ;; *) cat /proc/$$/stat > '%s'/$$ ;; esac
exec rsync "$@"
`, logs), 0o755)
	dest := dst
	args := []string{"--rsync", wrapper, "--root", src, "-j", "2", "--chunk-files", "3", "--failed", w.Failed,
		"--max-duration", window.String(), "--max-duration-grace", grace.String()}
	switch how {
	case "daemon":
		dest = startDaemon(t, dst).URL()
		args = append(args, "--no-throttle")
	case "paused":
		// the throttle pauses every rsync as soon as it samples, and keeps them paused
		// (--max-suspend 0: for ever) while this busy loop keeps the machine over 1 % CPU:
		// only the window's end continues them
		args = append(args, "--suspend-threshold", "1", "--resume-threshold", "0.5", "--throttle-interval", "200ms", "--max-suspend", "0")
		stop := busyLoop()
		defer stop()
	default:
		args = append(args, "--no-throttle")
	}
	p := start(t, startOpts{dir: w.Dir, in: lines(names...)}, append(args, dest, "--", "--bwlimit=40")...)
	pid := p.pid()
	prsyncStart, ok := procStart(pid)
	if !ok {
		t.Fatalf("cannot read the start time of prsync (pid %d)", pid)
	}
	st := p.mustWaitFor("start", time.Minute, is("start"))
	r := p.wait(2 * time.Minute)
	took := time.Since(p.started)
	r.Exit(t, 124)
	s := r.Identity(t, -1)
	if s["max_duration_reached"] != true {
		t.Errorf("summary max_duration_reached %v, want true", s["max_duration_reached"])
	}
	if st["max_duration"] != window.Seconds() || st["max_duration_grace"] != grace.Seconds() {
		t.Errorf("start event max_duration %v, max_duration_grace %v", st["max_duration"], st["max_duration_grace"])
	}

	// the wall time: the big file's rsync runs until the grace has passed, and then ends
	if lo, hi := window+grace, window+grace+10*time.Second; took < lo || took > hi {
		t.Errorf("the run took %v, want between %v and %v", took, lo, hi)
	}

	// no rsync started after the window: prsync counts it from its main, which came after
	// the process started and before its start event was written
	t0, err := time.Parse(time.RFC3339Nano, fmt.Sprint(st["time"]))
	if err != nil {
		t.Fatal(err)
	}
	slack := t0.Sub(p.started) // at least the time from prsync's process start to its main
	limit := prsyncStart + ticks(window+slack) + 1
	starts, err := os.ReadDir(logs)
	if err != nil {
		t.Fatal(err)
	}
	copies := 0
	for _, e := range starts {
		b, err := os.ReadFile(filepath.Join(logs, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		at, ok := statStart(b)
		if !ok {
			t.Fatalf("rsync %s: cannot read its start time from %q", e.Name(), b)
		}
		copies++
		if at > limit {
			t.Errorf("rsync %s started %d ticks after prsync, after the window (%v, %v after prsync's start to its main): at most %d",
				e.Name(), at-prsyncStart, window, slack, limit-prsyncStart)
		}
	}
	if n := len(r.OfType("chunk_start")); n < 2 || copies < n {
		t.Errorf("%d rsync starts logged, %d chunk_start events: want at least 2, and every one logged", copies, n)
	}

	// DEST against --failed: every path is in DEST as the source has it, or in --failed;
	// those in neither are the paths never read
	listed := r.CutShort(t, src, dst, names)
	if listed["big"] == nil {
		t.Errorf("big, which cannot be copied within the window, is not in --failed: %q", r.Failed(t))
	}
	for n, e := range listed {
		if e["status"] == "not_done" && !strings.HasPrefix(fmt.Sprint(e["reason"]), "the time window ended (--max-duration 4s") {
			t.Errorf("%s: not done with the reason %q, which does not name the window", n, e["reason"])
		}
		// a local DEST is looked at (lstat) after a stopped rsync: a path that landed
		// is proven, not listed; a daemon's is not, and a path that landed before
		// the stop stays listed, to be found up to date by the next run
		if how != "daemon" && copied(src, dst, n) {
			t.Errorf("%s: in --failed, but DEST holds it as the source has it", n)
		}
	}
	if num(s, "files_not_done") == 0 {
		t.Errorf("no path not done")
	}
	noTempFiles(t, dst)
	noProcsLeft(t, src)

	if how == "paused" {
		// the throttle paused the rsyncs, and the window's end continued them: before
		// the grace ended (the first chunk it cancelled), not only at the run's end
		paused, resumed, cancelled := -1, -1, -1
		for i, e := range r.Events {
			switch {
			case paused < 0 && is("throttle", "action", "suspend")(e):
				paused = i
			case resumed < 0 && is("throttle", "action", "resume", "reason", "stop")(e):
				resumed = i
			case cancelled < 0 && is("chunk_end", "status", "cancelled")(e):
				cancelled = i
			}
		}
		if paused < 0 || resumed < paused || cancelled >= 0 && resumed > cancelled {
			t.Errorf("no pause by the throttle (event %d), or no resume at the window's end (event %d) before the first cancelled chunk (event %d): %v",
				paused, resumed, cancelled, r.OfType("throttle"))
		}
	}
	if !strings.Contains(r.Stderr, "prsync: the time window ended (--max-duration 4s): no rsync starts any more") ||
		!strings.Contains(r.Stderr, "prsync: error: the time window ended (--max-duration 4s): ") {
		t.Errorf("stderr does not say the window ended:\n%s", r.Stderr)
	}
	t.Logf("%s: %v, %d rsyncs, %d not done, %d transferred; stderr:\n%s", how, took.Round(time.Millisecond), copies,
		num(s, "files_not_done"), num(s, "files_transferred"), r.Stderr)
}

// ticks returns d in clock ticks, rounded up.
func ticks(d time.Duration) int64 {
	return int64((d*clockTicks + time.Second - 1) / time.Second)
}

// procStart returns when process pid started, in clock ticks since boot.
func procStart(pid int) (int64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	return statStart(b)
}

// statStart returns the start time (field 22) of a /proc/PID/stat line.
func statStart(b []byte) (int64, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:])) // field 3 on
	if len(f) < 20 {
		return 0, false
	}
	v, err := strconv.ParseInt(f[19], 10, 64)
	return v, err == nil
}
