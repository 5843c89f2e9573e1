package tests

// -j auto (issue 11) end to end: a real daemon whose max connections caps the total, and
// --bwlimit after -- capping each stream. The tuner starts at the default -j, the daemon refuses the
// fourth session, and the limit settles at the 3 the daemon accepts; everything is copied.

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"
)

func TestAutoSettlesAtConnectionLimit(t *testing.T) {
	needRsync(t)
	w := t.TempDir()
	src, mod := filepath.Join(w, "src"), filepath.Join(w, "mod")
	os.MkdirAll(mod, 0o755)
	names := spreadFiles(t, src, 36, 4, 150_000)
	user := rootModule()
	d := startDaemonConf(t, mod, 0, user+"max connections = 3")
	failed := filepath.Join(w, "failed")
	r := start(t, startOpts{stdin: bytes.NewReader(nul(names...))}, "-0", "--root", src, "-j", "auto",
		"--chunk-files", "1", "--failed", failed, "--no-throttle", "--retries", "5", d.URL(), "--", "--bwlimit=150k").wait(3 * time.Minute)
	if r.Code != 0 {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
	checkTruth(t, r, src, mod, names, failed, 0)
	if st := r.Events[0]; st["jobs_auto"] != true || num(st, "jobs") != int64(max(runtime.NumCPU(), 8)) {
		t.Errorf("start: jobs_auto %v, jobs %v; want true, the default -j", st["jobs_auto"], st["jobs"])
	}
	// from the default -j, refusals bring the limit down to the 3 the daemon accepts
	all := r.OfType("jobs")
	k := 0
	for k < len(all) && all[k]["reason"] == "refused" && num(all[k], "new") > 3 {
		k++
	}
	if k == len(all) || all[k]["reason"] != "refused" || num(all[k], "new") != 3 {
		t.Fatalf("the first jobs events should be refusals bringing the limit to the 3 the daemon accepts: %v", all)
	}
	jobs := all[k:]
	for _, j := range jobs[1:] {
		if num(j, "new") > 3 {
			t.Errorf("the limit rose above what the daemon accepted: %v", j)
		}
	}
	var over int
	for _, p := range r.OfType("progress") {
		if num(p, "jobs") > 3 && p["time"].(string) > jobs[0]["time"].(string) {
			over++
		}
		// before the first refusal, the first wave runs (on a busy machine a refusal can
		// take a second to come)
		if num(p, "running") > 3 && p["time"].(string) > jobs[0]["time"].(string) {
			t.Errorf("%d rsyncs running at once against a daemon that takes 3, after it refused", num(p, "running"))
		}
	}
	s := r.Summary(t)
	if num(s, "jobs_max") != int64(max(runtime.NumCPU(), 8)) || num(s, "jobs_min") < 1 || num(s, "jobs_min") > 3 {
		t.Errorf("summary jobs range %v..%v", s["jobs_min"], s["jobs_max"])
	}
	last := r.OfType("progress")
	if n := len(last); n > 0 && num(last[n-1], "jobs") != 3 {
		t.Errorf("the limit ended at %v, want 3", last[n-1]["jobs"])
	}
}

// TestAutoCPUBound (issue 23): a local copy of small files keeps the CPUs busy with the
// rsyncs' own work, so -j auto, which starts at the default -j, drops to the CPUs' worth
// within a window of seeing it. Whether the CPUs saturate depends on the machine and its
// load, so the test reads the CPU figures of the progress events and asks for the drop only
// where two seconds of them showed it.
func TestAutoCPUBound(t *testing.T) {
	needRsync(t)
	if runtime.GOOS != "linux" {
		t.Skip("prsync tells its rsyncs' CPU from others' on Linux only")
	}
	w := t.TempDir()
	src, dst := filepath.Join(w, "src"), filepath.Join(w, "dst")
	const files = 24_000
	names := make([]string, files)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < files; i += 8 {
				names[i] = fmt.Sprintf("d%03d/f%05d", i%240, i)
				p := filepath.Join(src, names[i])
				os.MkdirAll(filepath.Dir(p), 0o755)
				if err := os.WriteFile(p, bytes.Repeat([]byte{byte(i)}, 256+i%2048), 0o644); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	os.MkdirAll(dst, 0o755)
	failed := filepath.Join(w, "failed")
	r := start(t, startOpts{stdin: bytes.NewReader(nul(names...))}, "-0", "--root", src, "-j", "auto",
		"--no-throttle", "--throttle-interval", "250ms", "--failed", failed, dst).wait(5 * time.Minute)
	if r.Code != 0 {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
	checkTruth(t, r, src, dst, names, failed, 0)
	sameTree(t, src, dst)

	cpus := float64(runtime.NumCPU())
	jobs := r.OfType("jobs")
	drop := -1
	for i, j := range jobs {
		if j["reason"] == "auto-cpu-bound" {
			drop = i
			if num(j, "new") != int64(math.Round(cpus)) || num(j, "new") >= num(j, "old") {
				t.Errorf("cpu-bound: %v, want the limit down to %v", j, cpus)
			}
			break
		}
	}
	// when did 2 s of progress first show the CPUs saturated, mostly by the rsyncs, with
	// more rsyncs allowed than CPUs? The first 2 s (rsyncs starting) do not count
	since, sat := -1.0, -1.0
	for _, p := range r.OfType("progress") {
		at := p["elapsed"].(float64)
		own, _ := p["own_cpu_percent"].(float64)
		hot := at > 2 && num(p, "jobs") > int64(cpus) && p["cpu_percent"].(float64) >= 95 && own >= 60
		switch {
		case !hot:
			since = -1
		case since < 0:
			since = at
		case at >= since+2:
			sat = at
		}
		if sat >= 0 {
			break
		}
	}
	switch {
	case drop >= 0:
		t.Logf("dropped to %v (%v); saturated from %.1f s to %.1f s; the copy took %v s", jobs[drop]["new"], jobs[drop]["detail"], since, sat, r.Summary(t)["seconds"])
	case sat < 0:
		t.Skipf("the CPUs never stayed saturated by the rsyncs for 2 s on this machine (%v CPUs); nothing to drop for", cpus)
	default:
		t.Errorf("the CPUs were saturated by the rsyncs from %.1f s to %.1f s, and -j auto never dropped: %v", since, sat, jobs)
	}
	// once down, the limit stays at or below the CPUs while they stay saturated
	for _, j := range jobs[drop+1:] {
		if num(j, "new") > int64(cpus) && j["reason"] != "auto-probe-up" {
			t.Errorf("after the drop: %v", j)
		}
	}
}
