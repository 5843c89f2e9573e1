package chunksize

import "testing"

// TestOpeningParts: the rest of a short list is cut into as many parts as carry 4 starts of
// work each and the CPUs can run side by side, from 1 to one per slot, from what the probe
// showed; a probe still running decides for every slot once the work it has done says so.
func TestOpeningParts(t *testing.T) {
	p := DefaultPolicy(DefaultTarget, 2000, 128<<20)
	tests := []struct {
		name      string
		rest      int
		pr        Probe
		slots     int
		cpus      int
		wantParts int
		wantKnown bool
	}{
		// 2,000 small local files: a 60 ms start, 0.4 ms a path, one CPU busy all along: 2
		// CPUs run 2 (0.8 s of work is 3 parts of 4 starts)
		{"local small files, 2 CPUs", 1984, Probe{Files: 16, First: 0.060, Elapsed: 0.066, CPU: 0.066, Ended: true}, 8, 2, 2, true},
		{"local small files, 16 CPUs", 1984, Probe{Files: 16, First: 0.060, Elapsed: 0.066, CPU: 0.066, Ended: true}, 8, 16, 3, true},
		{"local, busier than one CPU", 1984, Probe{Files: 16, First: 0.060, Elapsed: 0.066, CPU: 0.1, Ended: true}, 8, 2, 1, true},
		{"local, 20,000 files, 16 CPUs", 19984, Probe{Files: 16, First: 0.060, Elapsed: 0.066, CPU: 0.066, Ended: true}, 8, 16, 8, true},
		{"CPU not known", 1984, Probe{Files: 16, First: 0.060, Elapsed: 0.066, Ended: true}, 8, 2, 3, true},
		// a network file system, 54 ms a path, little CPU: decided while it runs. The probe,
		// 2 lines logged of 16, has longer left than a part for its slot would save: every
		// slot but its
		{"nas, running", 984, Probe{Files: 16, First: 0.11, Elapsed: 0.2, Logged: 2}, 8, 2, 7, true},
		{"nas, running, 16 slots", 984, Probe{Files: 16, First: 0.11, Elapsed: 0.3, Logged: 2}, 16, 2, 15, true},
		// with 2 slots a part is half the rest: the probe's 1.3 s left is less than that
		{"nas, running, 2 slots", 984, Probe{Files: 16, First: 0.11, Elapsed: 0.2, Logged: 1}, 2, 2, 2, true},
		{"nas, running, 1 slot", 984, Probe{Files: 16, First: 0.11, Elapsed: 0.2, Logged: 2}, 1, 2, 1, true},
		// a pull from a daemon: the probe has 2 paths of 16 left, 2 ms, and a part for its
		// slot saves the others 0.1 s each: every slot
		{"pull, probe near its end", 10089, Probe{Files: 16, First: 0.08, Elapsed: 0.09, Logged: 14}, 8, 2, 8, true},
		{"pull, probe logged all", 10089, Probe{Files: 16, First: 0.08, Elapsed: 0.09, Logged: 16}, 8, 2, 8, true},
		{"nas, too early to say", 984, Probe{Files: 16, First: 0.11, Elapsed: 0.15}, 8, 2, 0, false},
		{"nas, ended", 984, Probe{Files: 16, First: 0.11, Elapsed: 0.92, CPU: 0.05, Ended: true}, 8, 2, 8, true},
		// rsyncs slowed by --bwlimit to a daemon: 4 ms a path, no CPU to speak of
		{"bandwidth-capped", 284, Probe{Files: 16, First: 0.05, Elapsed: 0.11, CPU: 0.02, Ended: true}, 4, 2, 4, true},
		// a daemon on a loaded machine: a 300 ms start, 1.5 ms a path
		{"daemon", 984, Probe{Files: 16, First: 0.30, Elapsed: 0.32, CPU: 0.05, Ended: true}, 8, 2, 1, true},
		{"daemon, 10,000 paths", 9984, Probe{Files: 16, First: 0.30, Elapsed: 0.336, CPU: 0.05, Ended: true}, 8, 2, 8, true},
		{"not started yet", 984, Probe{Files: 16, Elapsed: 0.5}, 8, 2, 0, false},
		// nothing logged (--no-quick-check, every path up to date): the CPU alone says
		{"nothing logged, waiting", 984, Probe{Files: 16, Elapsed: 0.5, CPU: 0.05, Ended: true}, 8, 2, 8, true},
		{"nothing logged, CPU-bound", 984, Probe{Files: 16, Elapsed: 0.5, CPU: 0.5, Ended: true}, 8, 2, 2, true},
		{"refused or failed", 984, Probe{Files: 16, Failed: true, Ended: true}, 8, 2, 8, true},
		{"no path left", 0, Probe{Files: 16, First: 0.1, Elapsed: 0.2, Ended: true}, 8, 2, 1, true},
		// never parts of fewer than 4 paths
		{"few paths left", 10, Probe{Files: 16, First: 0.1, Elapsed: 10, Ended: true}, 8, 2, 2, true},
		{"one slot", 984, Probe{Files: 16, First: 0.11, Elapsed: 0.92, Ended: true}, 1, 2, 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, known := p.OpeningParts(tt.rest, tt.pr, tt.slots, tt.cpus)
			if known != tt.wantKnown || known && n != tt.wantParts {
				t.Errorf("OpeningParts(%d, %+v, %d, %d) = %d, %v; want %d, %v", tt.rest, tt.pr, tt.slots, tt.cpus, n, known, tt.wantParts, tt.wantKnown)
			}
		})
	}
}
