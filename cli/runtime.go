package cli

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"sync"

	"github.com/prsync/prsync/splitter"
)

// tuneRuntime makes the process-wide settings of prsync's Go runtime, each unless the
// environment sets it: GOGC at 300, and GOMAXPROCS by goProcs. Only Main calls it, once the
// command line is valid: a run from Run (tests, embedding) leaves the process as it is.
// stats says whether prsync lstats the paths itself. It returns the function to call once
// the input's paths have all been examined (never nil): the stat workers are done, and
// GOMAXPROCS drops to what a run without them gets.
func tuneRuntime(stats bool) (examined func()) {
	if _, set := os.LookupEnv("GOGC"); !set {
		// prsync's live heap is a few MiB: at Go's default it collects every few MiB
		// allocated, a tenth of its CPU on a fresh copy; this trades a little memory for it
		debug.SetGCPercent(300)
	}
	if _, set := os.LookupEnv("GOMAXPROCS"); set {
		return func() {}
	}
	// since Go 1.25 (go.mod says 1.26) the runtime's own GOMAXPROCS already follows
	// a cgroup's CPU quota, rounded up, and runtime.NumCPU does not
	n, cpus := runtime.GOMAXPROCS(0), runtime.NumCPU()
	runtime.GOMAXPROCS(goProcs(n, cpus, stats))
	if !stats {
		return func() {}
	}
	var once sync.Once
	return func() { once.Do(func() { runtime.GOMAXPROCS(goProcs(n, cpus, false)) }) }
}

// goProcs returns how many CPUs (Ps) prsync's Go code may use at once, of the n the
// runtime would use (a cgroup's CPU quota included) on a machine of cpus CPUs. stats says
// whether prsync lstats paths itself.
//
// When it does, it gets at least one P per stat worker. A worker whose lstat waits on a
// cold inode keeps its P until the runtime's monitor takes it back, tens of microseconds
// to milliseconds later, and with fewer Ps than workers the others wait for it while a
// CPU idles: on 2 CPUs, 8 Ps made a cold re-run of 200,000 files 9 % faster (pairs,
// median) than 2 Ps, and left a fresh copy's wall time and prsync's CPU as they were
// (bench/RESULTS.md). The kernel still runs the workers' threads on the CPUs there are.
// Under a CPU quota below the machine's CPUs (n < cpus) it keeps n: there the extra Ps
// only queue for the quota, and under a 1-CPU quota 1 P was 10 % faster than 8 (issue 23).
//
// When it does not (--sizes, or a remote source), and once the stat workers are done (the
// input has ended), a quarter, at least one. Its work is then parsing rsync's output, a
// twentieth of its rsyncs' CPU, and every extra P is a thread that spins and polls when it
// finds nothing to do: on 2 CPUs one P cut prsync's own CPU by 13 % on a fresh copy with
// --sizes, wall time unchanged, and by a quarter (94 to 70 ms) in an 8 s copy of 1,000
// files that rsync's --bwlimit slowed, where the 8 Ps of the stat workers stayed to the end.
func goProcs(n, cpus int, stats bool) int {
	if stats && n < cpus {
		return n
	}
	if stats {
		return max(n, splitter.DefaultStatWorkers)
	}
	return max(1, n/4)
}

// startProfile starts a Go CPU profile of prsync itself into the file PRSYNC_CPUPROFILE
// names, for development, and returns what stops it. Only Main calls it, never for the pipe
// helper (the profiling timer would survive its exec of rsync).
func startProfile() (stop func()) {
	p := os.Getenv("PRSYNC_CPUPROFILE")
	if p == "" {
		return func() {}
	}
	f, err := os.Create(p)
	if err != nil {
		return func() {}
	}
	if pprof.StartCPUProfile(f) != nil {
		f.Close()
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}
