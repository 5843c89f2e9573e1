package tests

// The total bandwidth limit (issue 14), measured by the test itself from DEST's growth:
// many chunks at -j 4 share one limit; a single chunk uses all of it; live control
// changes it mid-run.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// growth samples the bytes under dir every tick until stop is closed.
func growth(dir string, tick time.Duration, stop <-chan struct{}) <-chan []sample {
	out := make(chan []sample, 1)
	go func() {
		var s []sample
		t := time.NewTicker(tick)
		defer t.Stop()
		for {
			select {
			case <-stop:
				out <- s
				return
			case at := <-t.C:
				s = append(s, sample{at, duBytes(dir)})
			}
		}
	}()
	return out
}

type sample struct {
	at    time.Time
	bytes int64
}

// duBytes is the size of the regular files under dir, temp files included.
func duBytes(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// active trims the samples to the span in which DEST grew: from the first sample that
// shows growth to the last. (The sample before the first growth would add up to a tick of
// idle time: 8 % of a 3 s copy sampled every 250 ms.)
func active(s []sample) []sample {
	first, last := -1, -1
	for i := 1; i < len(s); i++ {
		if s[i].bytes > s[i-1].bytes {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	if first < 0 {
		return nil
	}
	return s[first : last+1]
}

func rateOf(a, b sample) float64 { return float64(b.bytes-a.bytes) / b.at.Sub(a.at).Seconds() }

// TestBandwidthTotal checks that prsync's rsyncs together stay within 10 % of --bwlimit (a 10 s window 15 % under),
// over the whole run and over every 10 s window, and that one chunk alone uses all of it.
// On a machine others keep busy, the copy may not reach 8 MiB/s at all (its pipes run
// through the race-built prsync): the host is measured first, and when it is busy only the
// limit itself (the upper bound) is checked.
func TestBandwidthTotal(t *testing.T) {
	needRsync(t)
	const limit = 8 << 20 // --bwlimit 8M
	busy := false
	if cpu, ok := hostCPU(t, time.Second); ok && cpu >= 50 {
		busy = true
		t.Logf("the host is busy without the copy (%.0f%% CPU over 1 s): checking that the rate stays under the limit, not that it reaches it", cpu)
	}
	// within is the check of a rate against the limit: at most 10 % over, and at least
	// under × the limit unless the host was busy
	within := func(got, under float64, busy bool) bool { return (busy || got >= under*limit) && got <= 1.1*limit }
	w := newWork(t)
	names := files(t, w.Src, 48, 2_000_000) // random bytes: nothing for rsync to compress

	t.Run("48 chunks at -j 4", func(t *testing.T) {
		dst := filepath.Join(t.TempDir(), "dst")
		stop := make(chan struct{})
		samples := growth(dst, 250*time.Millisecond, stop)
		r := start(t, startOpts{in: nul(names...)}, "-0", "--root", w.Src, "-j", "4", "--chunk-files", "1",
			"--no-throttle", "--bwlimit", "8M", dst).wait(2 * time.Minute)
		close(stop)
		r.Exit(t, 0)
		s := active(<-samples)
		if len(s) < 8 {
			t.Fatalf("too few samples: %v", s)
		}
		busyHere := busy
		if other, ok := otherLoad(r.Events); ok && other >= 25 && !busy {
			// the host got busy during the copy (the other tests of the package run beside it)
			t.Logf("other load during the copy: %.0f%% CPU on average; checking only the upper bound", other)
			busyHere = true
		}
		if got := rateOf(s[0], s[len(s)-1]); !within(got, 0.9, busyHere) {
			t.Errorf("total %.2f MiB/s, want 8 MiB/s ± 10 %%", got/(1<<20))
		}
		// every 10 s window inside the run
		for i := range s {
			for j := i + 1; j < len(s); j++ {
				if s[j].at.Sub(s[i].at) >= 10*time.Second {
					// a window may run up to 15 % under: rsync paces each file itself, and a
					// chunk's start and end fall unevenly into 10 s (7.10 MiB/s was seen in
					// .ci/run beside the other tests, with little other load measured)
					if got := rateOf(s[i], s[j]); !within(got, 0.85, busyHere) {
						t.Errorf("10 s window from %v: %.2f MiB/s, want 8 MiB/s, -15 %% to +10 %%", s[i].at.Sub(s[0].at), got/(1<<20))
					}
					break
				}
			}
		}
		if st := r.Start(t); st["bwlimit"] != "8M" {
			t.Errorf("start bwlimit %v", st["bwlimit"])
		}
		sameTree(t, w.Src, dst)
	})

	t.Run("one chunk", func(t *testing.T) {
		big := filepath.Join(w.Dir, "big")
		one := files(t, big, 1, 40_000_000)
		dst := filepath.Join(t.TempDir(), "dst")
		stop := make(chan struct{})
		samples := growth(dst, 250*time.Millisecond, stop)
		r := start(t, startOpts{in: lines(one...)}, "--root", big, "--no-throttle", "--bwlimit", "8M", dst).wait(time.Minute)
		close(stop)
		r.Exit(t, 0)
		s := active(<-samples)
		// one rsync's own --bwlimit pacing, sampled every 250 ms over a 5 s copy, lands
		// within 15 % below the limit (7.18 MiB/s was seen on a quiet machine); above it, 10 %
		if got := rateOf(s[0], s[len(s)-1]); (!busy && got < 0.85*limit) || got > 1.1*limit {
			t.Errorf("one chunk alone: %.2f MiB/s, want the whole 8 MiB/s, -15 %% to +10 %%", got/(1<<20))
		}
	})

	t.Run("live change", func(t *testing.T) {
		dst := filepath.Join(t.TempDir(), "dst")
		run := filepath.Join(t.TempDir(), "run")
		os.Mkdir(run, 0o700)
		p := start(t, startOpts{in: nul(names[:24]...), env: []string{"XDG_RUNTIME_DIR=" + run}},
			"-0", "--root", w.Src, "-j", "4", "--chunk-files", "1", "--no-throttle", "--bwlimit", "8M", dst)
		st := p.mustWaitFor("start", 10*time.Second, is("start"))
		time.Sleep(1500 * time.Millisecond)
		if out, code := ctl(t, fmt.Sprint(st["control_socket"]), "bwlimit", "2M"); code != 0 || !strings.Contains(out, "8M -> 2M") {
			t.Fatalf("ctl bwlimit 2M: %d %q", code, out)
		}
		p.mustWaitFor("bwlimit event", 5*time.Second, is("bwlimit", "old", "8M", "new", "2M"))
		time.Sleep(500 * time.Millisecond)
		a := sample{time.Now(), duBytes(dst)}
		time.Sleep(4 * time.Second)
		b := sample{time.Now(), duBytes(dst)}
		if got := rateOf(a, b); (!busy && got < 0.8*(2<<20)) || got > 1.2*(2<<20) {
			t.Errorf("after ctl bwlimit 2M: %.2f MiB/s", got/(1<<20))
		}
		if out, code := ctl(t, fmt.Sprint(st["control_socket"]), "bwlimit", "off"); code != 0 {
			t.Fatalf("ctl bwlimit off: %d %q", code, out)
		}
		r := p.wait(2 * time.Minute)
		r.Exit(t, 0)
		if len(r.OfType("control")) != 2 {
			t.Errorf("control events %v", r.OfType("control"))
		}
	})
}

// otherLoad is the mean CPU use, in percent of the machine, that prsync's progress events
// measured outside prsync, its rsyncs and the kernel's threads; false without such events
// (on systems where prsync does not tell its own CPU from the rest).
func otherLoad(events []map[string]any) (float64, bool) {
	var sum float64
	var n int
	for _, e := range events {
		cpu, ok1 := e["cpu_percent"].(float64)
		own, ok2 := e["own_cpu_percent"].(float64)
		if e["type"] != "progress" || !ok1 || !ok2 {
			continue
		}
		kernel, _ := e["kernel_cpu_percent"].(float64)
		sum += max(0, cpu-own-kernel)
		n++
	}
	if n == 0 {
		return 0, false
	}
	return sum / float64(n), true
}
