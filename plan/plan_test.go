package plan

import (
	"fmt"
	"testing"
	"time"
)

// t0 is the fake clock's start.
var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

const ms = time.Millisecond

// timed returns a planner of chunks sized by a 2 s target, slots rsyncs at once and cpus
// CPUs, within 2,000 paths a chunk and --chunk-wait 1 s.
func timed(slots, cpus int) *Planner {
	return New(Config{Target: 2 * time.Second, Files: 2000, Bytes: 128 << 20, Wait: time.Second, Jobs: slots, MaxJobs: 32, CPUs: float64(cpus)})
}

// learn has the cost model learn chunks of perPath seconds a path after a 40 ms start.
func learn(p *Planner, perPath float64) {
	for i, n := range []int{32, 64, 128, 256} {
		p.Ended(t0, End{ID: 1000 + i, Attempt: 1, Files: n, Seconds: 0.04 + perPath*float64(n), OK: true, Settled: true})
	}
}

// TestOpeningParts: the rest of a short list is cut into as many parts as carry 4 starts of
// work each and the CPUs can run side by side, from 1 to one per slot, from what the probe
// showed; a probe still running decides for every slot once the work it has done says so.
func TestOpeningParts(t *testing.T) {
	tests := []struct {
		name      string
		rest      int
		pr        Probe
		slots     int
		cpus      float64
		wantParts int
		wantKnown bool
	}{
		// 2,000 small local files: a 60 ms start, 0.4 ms a path, one CPU busy all along: 0.8 s
		// of work is 3 parts of 4 starts, and the CPUs' worth, 4 rsyncs a CPU, is more
		{"local small files, 2 CPUs", 1984, Probe{Files: 16, First: 0.060, Elapsed: 0.066, CPU: 0.066, Ended: true}, 8, 2, 3, true},
		{"local small files, 16 CPUs", 1984, Probe{Files: 16, First: 0.060, Elapsed: 0.066, CPU: 0.066, Ended: true}, 8, 16, 3, true},
		// 20,000: every slot by the work; 1.5 CPUs busy all along: 2 CPUs run 5 such
		{"local, 20,000 files, busier than one CPU, 2 CPUs", 19984, Probe{Files: 16, First: 0.060, Elapsed: 0.066, CPU: 0.1, Ended: true}, 8, 2, 5, true},
		{"local, 20,000 files, busier than one CPU, 1 CPU", 19984, Probe{Files: 16, First: 0.060, Elapsed: 0.066, CPU: 0.066, Ended: true}, 8, 1, 4, true},
		// under a quota: half a CPU, all of which the probe got, is worth 2 rsyncs (it was
		// rounded up to a CPU, worth 8 to such a probe); 1.5 CPUs, 6
		{"local, 20,000 files, a quota of half a CPU", 19984, Probe{Files: 16, First: 0.060, Elapsed: 0.066, CPU: 0.033, Ended: true}, 8, 0.5, 2, true},
		{"local, 20,000 files, a quota of 1.5 CPUs", 19984, Probe{Files: 16, First: 0.060, Elapsed: 0.066, CPU: 0.066, Ended: true}, 8, 1.5, 6, true},
		{"local, 20,000 files, 16 CPUs", 19984, Probe{Files: 16, First: 0.060, Elapsed: 0.066, CPU: 0.066, Ended: true}, 8, 16, 8, true},
		// a pull from a daemon whose probe ended before the work gave every slot a part, on a
		// CPU all its 0.14 s (its start is CPU work): every slot, as when the work decides
		// while it runs (one rsync a CPU cut 10,000 paths into 2 parts: 1.39 s against 0.91 s)
		{"pull, the probe ended on a CPU all along", 10089, Probe{Files: 16, First: 0.1, Elapsed: 0.142, CPU: 0.142, Ended: true}, 8, 2, 8, true},
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
		// a push to a daemon whose probe waited 40 ms for a delayed ACK, all its 16 lines
		// at its end, on a CPU a tenth of its time: its paths' cost is not known, and its
		// wait overlaps across parts (bench scenario 5: 1 part, 0.62 s, where 8 took 0.45 s)
		{"push, a wait, then its lines at its end", 5088, Probe{Files: 16, First: 0.0550001, Elapsed: 0.055, CPU: 0.0065, Ended: true}, 8, 2, 8, true},
		{"push, a wait, then its lines 1 ms before its end", 5088, Probe{Files: 16, First: 0.054, Elapsed: 0.055, CPU: 0.0065, Ended: true}, 8, 2, 8, true},
		// the same lines at its end on a CPU all along: the rule by work (a start of CPU work)
		{"a burst at its end, on a CPU all along", 5088, Probe{Files: 16, First: 0.0550001, Elapsed: 0.055, CPU: 0.055, Ended: true}, 8, 2, 1, true},
		{"a burst at its end, CPU not known", 5088, Probe{Files: 16, First: 0.0550001, Elapsed: 0.055, Ended: true}, 8, 2, 1, true},
		{"daemon, 10,000 paths", 9984, Probe{Files: 16, First: 0.30, Elapsed: 0.336, CPU: 0.05, Ended: true}, 8, 2, 8, true},
		{"not started yet", 984, Probe{Files: 16, Elapsed: 0.5}, 8, 2, 0, false},
		// nothing logged (--no-quick-check, every path up to date): the CPU alone says
		{"nothing logged, waiting", 984, Probe{Files: 16, Elapsed: 0.5, CPU: 0.05, Ended: true}, 8, 2, 8, true},
		{"nothing logged, CPU-bound, 1 CPU", 984, Probe{Files: 16, Elapsed: 0.5, CPU: 0.5, Ended: true}, 8, 1, 4, true},
		{"refused or failed", 984, Probe{Files: 16, Failed: true, Ended: true}, 8, 2, 8, true},
		{"no path left", 0, Probe{Files: 16, First: 0.1, Elapsed: 0.2, Ended: true}, 8, 2, 1, true},
		// never parts of fewer than 4 paths
		{"few paths left", 10, Probe{Files: 16, First: 0.1, Elapsed: 10, Ended: true}, 8, 2, 2, true},
		{"one slot", 984, Probe{Files: 16, First: 0.11, Elapsed: 0.92, Ended: true}, 1, 2, 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, known := OpeningParts(tt.rest, tt.pr, tt.slots, tt.cpus)
			if known != tt.wantKnown || known && n != tt.wantParts {
				t.Errorf("OpeningParts(%d, %+v, %d, %v) = %d, %v; want %d, %v", tt.rest, tt.pr, tt.slots, tt.cpus, n, known, tt.wantParts, tt.wantKnown)
			}
		})
	}
}

// step describes a Step for the tables: "hold until 250ms", "hold", "cut 16", "wave 95",
// "wave 95 flush".
func step(s Step) string {
	switch s.Do {
	case Hold:
		if s.Until.IsZero() {
			return "hold"
		}
		return fmt.Sprint("hold until ", s.Until.Sub(t0))
	case Wave:
		if s.Flush {
			return fmt.Sprint("wave ", s.Budget.Files, " flush")
		}
		return fmt.Sprint("wave ", s.Budget.Files)
	}
	if s.Budget.Timed {
		return fmt.Sprint("cut ", s.Budget.Files, " timed")
	}
	return fmt.Sprint("cut ", s.Budget.Files)
}

// TestOpeningStart: the first chunk holds the paths read until the input's end has been read
// (at most 250 ms, and --chunk-wait), or until more than 4 probes' paths have been read and
// 25 ms passed, or more than a short list holds; then a short list or one still streaming is
// probed, a list too short for a probe is shared by the slots, and a long one, or one whose
// paths' cost is known, is cut by the budget.
func TestOpeningStart(t *testing.T) {
	type ask struct {
		at   time.Duration
		in   Input
		want string
	}
	tests := []struct {
		name  string
		slots int
		wait  time.Duration // --chunk-wait; 0: 1 s
		learn bool          // the cost model knows what a path costs
		asks  []ask
	}{
		{"a short list, its end read at once: probed", 8, 0, false, []ask{
			{0, Input{Read: 300, EOF: true, Left: 300}, "cut 16"}}},
		{"a short list read in 30 ms: held, then probed", 8, 0, false, []ask{
			{0, Input{Read: 10, Left: 10}, "hold until 250ms"},
			{10 * ms, Input{Read: 40, Left: 40, Held: 39}, "hold until 250ms"},
			{30 * ms, Input{Read: 300, EOF: true, Left: 300, Held: 299}, "cut 16"}}},
		{"a list still streaming: probed once 65 paths were read and 25 ms passed", 8, 0, false, []ask{
			{0, Input{Read: 65, Left: 65}, "hold until 25ms"},
			{25 * ms, Input{Read: 900, Left: 900, Held: 899}, "cut 16"}}},
		{"a few paths streaming: shared by the slots once the wait ran out", 8, 0, false, []ask{
			{0, Input{Read: 3, Left: 3}, "hold until 250ms"},
			{250 * ms, Input{Read: 3, Left: 3, Held: 3}, "cut 32"}}},
		{"a few paths, the end read: shared by the slots", 8, 0, false, []ask{
			{0, Input{Read: 64, EOF: true, Left: 64}, "cut 8"}}},
		{"--chunk-wait shorter than the wait", 8, 100 * ms, false, []ask{
			{0, Input{Read: 3, Left: 3}, "hold until 100ms"},
			{100 * ms, Input{Read: 3, Left: 3, Held: 3}, "cut 32"}}},
		{"a long list: more read than a short list holds", 2, 0, false, []ask{
			{0, Input{Read: 4000, Left: 4000}, "cut 32"}}},
		{"a long list, its end read: shared once rates are known", 2, 0, false, []ask{
			{0, Input{Read: 4100, EOF: true, Left: 4100}, "cut 2000"}}},
		{"rates known: no probe, the budget", 8, 0, true, []ask{
			{0, Input{Read: 300, EOF: true, Left: 300}, "cut 38 timed"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := New(Config{Target: 2 * time.Second, Files: 2000, Bytes: 128 << 20, Wait: cmpOr(tt.wait, time.Second), Jobs: tt.slots})
			if tt.learn {
				learn(p, 0.01)
			}
			for i, a := range tt.asks {
				if got := step(p.Next(at(a.at), a.in)); got != a.want {
					t.Errorf("question %d at %v (%+v): %s, want %s", i, a.at, a.in, got, a.want)
				}
			}
		})
	}
}

func cmpOr(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// probeCut has p cut its probe (chunk 1 of 16 paths) from a short list of n paths whose end
// was read (eof) or not, at the fake clock's start.
func probeCut(t *testing.T, p *Planner, n int, eof bool) {
	t.Helper()
	in := Input{Read: int64(n), EOF: eof, Left: int64(n)}
	if !eof {
		p.Next(t0, in) // holds: the first question
		in.Held = n - 1
	}
	if got := step(p.Next(at(25*ms), in)); got != "cut 16" {
		t.Fatalf("the first chunk: %s, want the probe: cut 16", got)
	}
	p.Cut(1, ProbeFiles, 0)
}

// TestOpeningWait: the paths after the probe are held until its figures say how to cut
// them, no longer than the chunk target from the first question; while it runs with its
// first line in, the answer comes at the time its work gives every slot a part (Until); a
// probe that ended before the question is seen; its end teaches the cost model before the
// parts are cut, so that the chunks after a wave are sized from it.
func TestOpeningWait(t *testing.T) {
	t.Run("held until the probe's end", func(t *testing.T) {
		p := timed(8, 2)
		probeCut(t, p, 2000, true)
		left := Input{Read: 2000, EOF: true, Left: 1984, Held: 1900}
		if got := step(p.Next(at(30*ms), left)); got != "hold until 2.03s" {
			t.Errorf("nothing shown yet: %s, want hold until the target from the first question, 2.03s", got)
		}
		p.Started(at(40*ms), 1, 1)
		// 60 ms start, 0.4 ms a path: 0.8 s of work is 3 parts of 4 starts (one CPU busy
		// all along: 2 CPUs run 8 such)
		p.Ended(at(110*ms), End{ID: 1, Attempt: 1, Files: 16, Seconds: 0.066, First: 0.06, CPU: 0.066, OK: true, Settled: true})
		if got := step(p.Next(at(111*ms), left)); got != "wave 662" {
			t.Errorf("the probe ended: %s, want the rest in 3 parts: wave 662", got)
		}
		if b := p.Next(at(112*ms), left).Budget; b.Files != 662 {
			t.Errorf("after the wave: %d paths a chunk, want the parts' 662 to the end", b.Files)
		}
	})
	t.Run("a nas: every slot once the work so far says so", func(t *testing.T) {
		p := timed(8, 2)
		probeCut(t, p, 1000, true)
		left := Input{Read: 1000, EOF: true, Left: 984, Held: 984}
		p.Started(at(30*ms), 1, 1)
		p.Logged(at(140*ms), 1, 1) // its first line after 110 ms
		// the lower bound of a path's cost gives 8 parts at 110 ms + 4 × 0.11 × 8 × 15 /
		// 984 s = 53.7 ms later
		got := p.Next(at(150*ms), left)
		if got.Do != Hold || got.Until.Sub(t0).Round(ms) != 195*ms {
			t.Errorf("first line in: %s, want hold until 195ms (30 + 110 + 54 + 1)", step(got))
		}
		p.Logged(at(180*ms), 1, 2)
		if got := step(p.Next(got.Until, left)); got != "wave 141" {
			t.Errorf("at that time: %s, want every slot but the probe's: wave 141", got)
		}
	})
	t.Run("silent: every slot but the probe's after the target", func(t *testing.T) {
		p := timed(4, 2)
		probeCut(t, p, 500, true)
		left := Input{Read: 500, EOF: true, Left: 484, Held: 484}
		p.Next(at(30*ms), left)
		p.Started(at(40*ms), 1, 1)
		if got := step(p.Next(at(2029*ms), left)); got != "hold until 2.03s" {
			t.Errorf("before the target: %s", got)
		}
		if got := step(p.Next(at(2030*ms), left)); got != "wave 162" {
			t.Errorf("at the target: %s, want 3 parts: wave 162", got)
		}
	})
	t.Run("the probe refused before the question: every slot", func(t *testing.T) {
		p := timed(4, 2)
		probeCut(t, p, 500, true)
		p.Started(at(30*ms), 1, 1)
		p.Ended(at(40*ms), End{ID: 1, Attempt: 1, Files: 16, Seconds: 0.01})
		if got := step(p.Next(at(50*ms), Input{Read: 500, EOF: true, Left: 484, Held: 484})); got != "wave 121" {
			t.Errorf("%s, want 4 parts: wave 121", got)
		}
	})
	t.Run("streaming: the wave sent at once, then chunks sized from the probe", func(t *testing.T) {
		p := timed(8, 1)
		probeCut(t, p, 900, false)
		if got := step(p.Next(at(30*ms), Input{Read: 900, Left: 884})); got != "hold" {
			t.Errorf("nothing held yet: %s, want hold (the wait starts with a path)", got)
		}
		p.Started(at(30*ms), 1, 1)
		// split at its first line: a start of 0.057 s, 2.7 ms a path, so 728 paths fill 2 s;
		// its CPU, a whole CPU's for its time, leaves room for 4 on one CPU (4 rsyncs a CPU)
		p.Ended(at(130*ms), End{ID: 1, Attempt: 1, Files: 16, Seconds: 0.1, First: 0.06, CPU: 0.1, OK: true, Settled: true})
		if got := step(p.Next(at(131*ms), Input{Read: 900, Left: 884, Held: 884})); got != "wave 221 flush" {
			t.Errorf("%s, want 4 parts, sent at once: wave 221 flush", got)
		}
		if got := step(p.Next(at(132*ms), Input{Read: 1000, Left: 100})); got != "cut 728 timed" {
			t.Errorf("after the wave: %s, want the budget the probe taught: cut 728 timed", got)
		}
	})
}

// TestTail: once the input's end has been read, the paths left are shared by the slots when
// the budget would leave some without a chunk: a part each, but none shorter than MinPart
// once rates are known, and, while nothing is known, none smaller than a part of a wave
// that took the slots (bench scenario 6: the 1,753 paths left after a wave of 8 × 1,042,
// against a daemon that took 3, went into 8 parts of 220, a session each).
func TestTail(t *testing.T) {
	tests := []struct {
		name      string
		perPath   float64 // seconds a path after a 40 ms start, as learnt; 0: nothing known
		waveFloor int
		left      int
		want      int // paths a part
	}{
		{"nothing known, no wave: every slot", 0, 0, 1753, 220},
		{"nothing known, after a wave: a wave part's", 0, 1042, 1753, 1042},
		{"nothing known, after a wave bigger than what is left", 0, 1042, 800, 1042},
		{"rates known, paths cheap: one part", 0.0002, 1042, 1753, 1753},
		{"rates known, paths dear: every slot, the wave aside", 0.01, 1042, 1753, 220},
		// the model puts 14,058 paths at 0.7 s, 3 parts by MinPart; a cold cache's later
		// directories made them 3 s each (bench H74): parts of at most 2,000 paths instead
		{"rates known, paths cheap and many: no part over 2,000 paths", 0.00005, 1042, 14058, 1758},
		{"rates known, paths cheap, a few thousand: parts of 2,000 at most", 0.00005, 1042, 4100, 1367},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := timed(8, 2)
			p.open.phase = phaseRun
			if tt.perPath > 0 {
				learn(p, tt.perPath)
			}
			p.cut.waveFloor = tt.waveFloor
			b := p.Next(t0, Input{Read: 9000, EOF: true, Left: int64(tt.left)}).Budget
			if p.cut.tail != tt.want || b.Files != min(tt.want, 2000) {
				t.Errorf("parts of %d paths, budget %d; want %d", p.cut.tail, b.Files, tt.want)
			}
		})
	}
}

// TestTailCuts: once the input has ended, a waiting chunk is cut so that every free slot
// gets a part, unless the parts would be too short.
func TestTailCuts(t *testing.T) {
	known := timed(8, 2)
	known.open.phase = phaseRun
	for i := range 3 {
		known.Ended(t0, End{ID: 10 + i, Attempt: 1, Files: 100, Seconds: 0.02 + 0.1, OK: true, Settled: true})
		known.Ended(t0, End{ID: 20 + i, Attempt: 1, Files: 400, Seconds: 0.02 + 0.4, OK: true, Settled: true})
	}
	tests := []struct {
		name                string
		p                   *Planner
		files, queued, free int
		want                int // parts
	}{
		{"a short list, nothing known: one part per slot", timed(8, 2), 300, 1, 8, 8},
		{"other chunks wait too", known, 2000, 3, 8, 6},
		{"enough chunks wait", known, 2000, 8, 8, 1},
		{"more waiting than slots", known, 2000, 12, 8, 1},
		{"few paths: at least 4 a part", timed(8, 2), 12, 1, 8, 3},
		{"one path", known, 1, 1, 8, 1},
		// 40 paths take 40 ms: parts of at least 250 ms after a start of 20 ms allow none
		{"short work: not worth a start", known, 40, 1, 8, 1},
		// 1,000 paths take 1 s: 4 parts of 250 ms
		{"parts no shorter than a quarter of a second", known, 1000, 1, 8, 4},
		{"chunks cut by count: never", New(Config{Files: 2000, Jobs: 8}), 300, 1, 8, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sizes := make([]int64, tc.files)
			others := make([]Work, tc.queued-1) // chunks like it wait too
			for i := range others {
				others[i] = Work{Files: tc.files}
			}
			if got := len(tc.p.TailCuts(sizes, 0, tc.queued, tc.free, others)) + 1; got != tc.want {
				t.Errorf("TailCuts(%d paths, %d queued, %d free): %d parts, want %d", tc.files, tc.queued, tc.free, got, tc.want)
			}
		})
	}
}

// TestPick: the biggest waiting chunk starts first, the older among equals; a root's chunk
// only once the input has ended, nothing else waits and nothing runs.
func TestPick(t *testing.T) {
	w := []Waiting{{ID: 1, Bytes: 10}, {ID: 2, Bytes: 500}, {ID: 3, Root: true}, {ID: 4, Bytes: 500}, {ID: 5, Bytes: 20}}
	tests := []struct {
		name    string
		waiting []Waiting
		busy    int
		ended   bool
		want    int // index; -1: none
	}{
		{"the biggest, the older first", w, 3, false, 1},
		{"nothing waits", nil, 0, true, -1},
		{"a root alone, input open", []Waiting{{ID: 3, Root: true}}, 0, false, -1},
		{"a root alone, chunks running", []Waiting{{ID: 3, Root: true}}, 1, true, -1},
		{"a root alone, all done", []Waiting{{ID: 3, Root: true}}, 0, true, 0},
		{"roots go in order", []Waiting{{ID: 9, Root: true}, {ID: 8, Root: true}}, 0, true, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Pick(tt.waiting, tt.busy, tt.ended); got != tt.want {
				t.Errorf("Pick = %d, want %d", got, tt.want)
			}
		})
	}
}

// TestProbeBound: with -j auto, a probe whose rsync was busy on a CPU three quarters of its
// time or more says the copy is CPU work: the number of rsyncs comes down to the CPUs the
// copy may use at its end, with a jobs change; one that mostly waited leaves it, and so does
// a pinned -j.
func TestProbeBound(t *testing.T) {
	tests := []struct {
		name string
		auto bool
		cpus float64
		cpu  float64 // the probe's CPU seconds in 0.1 s
		want string  // the change; "": none
	}{
		{"CPU work, 2 CPUs: they run 8", true, 2, 0.09, ""},
		{"CPU work, a quota of 1", true, 1, 0.1, "8 -> 4 auto-cpu-bound"},
		// a quota of half a CPU gives the probe at most 0.05 CPU-s in 0.1 s: all of it is
		// CPU work, and the quota is worth 2
		{"CPU work, a quota of half a CPU", true, 0.5, 0.05, "8 -> 2 auto-cpu-bound"},
		{"half of what a quota of half a CPU gave", true, 0.5, 0.025, ""},
		{"mostly waiting", true, 2, 0.02, ""},
		{"CPUs not known", true, 0, 0.1, ""},
		{"-j 8 pinned", false, 2, 0.1, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := pinnedPlanner(int(tt.cpus), 8)
			if tt.auto {
				p = autoPlanner(2, 8)
				p.cfg.CPUs = tt.cpus
			}
			probeCut(t, p, 300, true)
			c, ok := p.Ended(at(200*ms), End{ID: 1, Attempt: 1, Files: 16, Seconds: 0.1, First: 0.06, CPU: tt.cpu, OK: true, Settled: true})
			got := ""
			if ok {
				got = fmt.Sprintf("%d -> %d %s", c.Old, c.New, c.Reason)
			}
			if got != tt.want || ok && p.Limit() != c.New {
				t.Errorf("change %q (limit %d), want %q", got, p.Limit(), tt.want)
			}
			if _, again := p.Ended(at(300*ms), End{ID: 1, Attempt: 2, Files: 16, Seconds: 0.1, CPU: 0.1, OK: true}); again {
				t.Error("the probe's second end changed the limit again")
			}
		})
	}
}
