package tests

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestMemoryStreaming streams paths that do not exist (each settles as vanished
// without rsync, so the run is fast) through the prsync binary's stdin and measures
// its peak RSS: memory must not grow with the input. 1 M paths by default;
// PRSYNC_TEST_BIG=1 streams 10 M.
func TestMemoryStreaming(t *testing.T) {
	needRsync(t)
	n := 1_000_000
	if os.Getenv("PRSYNC_TEST_BIG") == "1" {
		n = 10_000_000
	}
	const limit = 64 << 20
	base := t.TempDir()

	pr, pw := io.Pipe()
	go func() {
		w := bufio.NewWriterSize(pw, 256<<10)
		buf := make([]byte, 0, 64)
		for i := 0; i < n; i++ {
			buf = append(buf[:0], "/nonexistent/dir/"...)
			buf = strconv.AppendInt(buf, int64(i), 10)
			buf = append(buf, '\n')
			if _, err := w.Write(buf); err != nil {
				pw.CloseWithError(err)
				return
			}
		}
		pw.CloseWithError(w.Flush())
	}()

	// drain the events without keeping them: count lines, keep the last
	var lines, failed int
	var last []byte
	var p *proc
	var hwm atomic.Int64
	// VmHWM is the process's own peak RSS. (wait4's ru_maxrss is not: on Linux it also
	// counts the test process's RSS, whose address space the child shared until exec.)
	// VmHWM only grows, so polling it until the process exits misses at most its last
	// milliseconds; it is read once more when the summary, the last event, arrives.
	var pid atomic.Int64
	readHWM := func() {
		if v := vmHWM(int(pid.Load())); v > hwm.Load() {
			hwm.Store(v)
		}
	}
	t0 := time.Now()
	p = start(t, startOpts{dir: base, stdin: pr, bin: plainPrsync(t), onLine: func(l []byte) {
		lines++
		if bytes.HasPrefix(l, []byte(`{"type":"path_failed"`)) {
			failed++
		}
		last = append(last[:0], l...)
		if bytes.HasPrefix(last, []byte(`{"type":"summary"`)) {
			readHWM()
		}
	}}, "--no-throttle", "--no-progress", filepath.Join(base, "dst"))
	pid.Store(int64(p.pid()))
	pollDone := make(chan struct{})
	go func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-pollDone:
				return
			case <-tick.C:
				readHWM()
			}
		}
	}()
	r := p.wait(10 * time.Minute)
	close(pollDone)
	el := time.Since(t0)
	peak := hwm.Load()
	var maxrss int64
	if ru, ok := p.cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		maxrss = ru.Maxrss << 10 // KiB on Linux
	}
	t.Logf("%d paths in %v: peak RSS (VmHWM) %.1f MiB, limit %d MiB; %d event lines (wait4 maxrss %.1f MiB, which counts the test process too)",
		n, el.Round(time.Millisecond), float64(peak)/(1<<20), limit>>20, lines, float64(maxrss)/(1<<20))
	if peak == 0 {
		t.Fatal("could not read VmHWM from /proc")
	}

	var s map[string]any
	if err := json.Unmarshal(last, &s); err != nil || s["type"] != "summary" {
		t.Fatalf("last event is not a summary: %q (%v)\nstderr:\n%s", last, err, r.Stderr)
	}
	if r.Code != 24 {
		t.Errorf("exit code %d, want 24 (all vanished)\n%s", r.Code, r.Stderr)
	}
	identity(t, s, int64(n))
	counts(t, s, map[string]int64{"files_vanished": int64(n), "chunks": 0})
	if failed != n {
		t.Errorf("%d path_failed events, want %d", failed, n)
	}
	if peak >= limit {
		t.Errorf("peak RSS %d MiB, want under %d MiB", peak>>20, limit>>20)
	}
}

// vmHWM returns the peak RSS of a live process in bytes, from /proc/PID/status, or 0.
func vmHWM(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
