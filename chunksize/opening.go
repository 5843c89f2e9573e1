package chunksize

// # The opening of a short list
//
// A list whose end has been read before its first chunk is cut is known whole, but what its
// paths cost is not. Cut into one part per slot at once, a list whose copy is CPU work and
// rsync starts (2,000 small local files on 2 CPUs: 0.8 s of work, 50–100 ms for each
// rsync's start) paid eight starts and eight rsyncs fighting for two CPUs, and lost to one
// rsync -a. Cut into one part, a list whose paths each wait for a round trip (a network file
// system) or a bandwidth cap lost its parallelism.
//
// So the first chunk is a probe of ProbeFiles paths, and the rest waits until the probe says
// what a start and a path cost: its rsync's first logged line comes after its start (and a
// path), its end after the other paths, and its CPU time says how much of its time was CPU
// work. The rest is then cut into as many parts as
//
//   - carry at least OpeningStarts starts of work each (rest × per path ÷ (OpeningStarts ×
//     start)): a start stays at most a quarter of a part;
//   - the CPUs can run side by side: CPUs ÷ the probe's CPU per second of its time (an rsync
//     busy on one CPU for all its time leaves room for CPUs of them; one that mostly waits,
//     for many more);
//
// from 1 to one per slot. A probe that logged nothing (every path up to date, with the quick
// check off) leaves the CPU rule alone. The wait ends as soon as the answer is known: while the probe
// runs, the work it has done is a lower bound of its paths' cost, and once that bound
// alone gives every slot a part, the rest is cut for every slot, or for every slot but
// the probe's when the probe has longer left than a part for its slot would save the others
// (probeLeft): that part starts only when the probe ends. 1,000 files into sshfs at -j 16
// were 16 parts of 69 that ended at 6.5 s but for the one that waited 2.6 s for the probe,
// and ended at 7.1 s; a pull's probe ended 0.05 s after the answer, and its part with the
// others.

// ProbeFiles is the paths of the probe chunk of a short list.
const ProbeFiles = 16

// OpeningStarts is the fewest starts of work a part of a short list carries.
const OpeningStarts = 4

// Probe is what the probe chunk's rsync has shown so far.
type Probe struct {
	Files   int     // its paths
	First   float64 // seconds from its start to its first logged line; 0: none yet (or none)
	Elapsed float64 // seconds since its start, or its duration once Ended
	Logged  int     // the lines its rsync has logged so far, while it runs
	CPU     float64 // CPU seconds of its processes, once Ended; 0: not known
	Ended   bool    // its rsync ended, every path settled
	Failed  bool    // it ended otherwise (refused, failed, paused): it says nothing
}

// OpeningParts says into how many parts to cut rest paths of a short list after its probe,
// with slots rsyncs allowed at once and cpus CPUs to run them, and whether that is known
// yet (false: wait and ask again).
func (p Policy) OpeningParts(rest int, pr Probe, slots, cpus int) (int, bool) {
	slots = max(slots, 1)
	if rest <= 0 {
		return 1, true
	}
	if pr.Failed {
		return slots, true
	}
	most := max(1, min(slots, rest/p.MinPartFiles))
	byWork := func(perPath, start float64) int {
		if start <= 0 {
			return most
		}
		return max(1, min(int(float64(rest)*perPath/(OpeningStarts*start)), most))
	}
	if pr.Ended {
		n := most
		if pr.First > 0 && pr.Files >= 2 {
			n = byWork(max(pr.Elapsed-pr.First, 0)/float64(pr.Files-1), pr.First)
		} // else nothing logged (every path up to date, --no-quick-check): the CPU alone says
		if pr.CPU > 0 && pr.Elapsed > 0 && cpus > 0 {
			n = min(n, max(1, int(float64(cpus)*pr.Elapsed/pr.CPU)))
		}
		return n, true
	}
	if pr.First <= 0 {
		return 0, false // still starting
	}
	// running: the paths after the first have cost at least this much each so far
	lower := max(pr.Elapsed-pr.First, 0) / float64(max(pr.Files-1, 1))
	n := byWork(lower, pr.First)
	if n < most {
		return 0, false
	}
	if most > 1 && probeLeft(pr) > float64(rest)*lower/float64(most*(most-1)) {
		// the probe holds its slot longer than a part for it would save: every slot but its
		n = most - 1
	}
	return n, true
}

// probeLeft estimates the seconds a running probe has left: its paths not logged yet, at
// what each logged after the first took (at least the time since the first line, when no
// other came yet). A part cut for the probe's slot starts only when the probe ends; cut for
// the other slots only, the parts are longer by a part's share over them. The probe's part
// pays when the probe ends sooner than that share: a pull from a daemon whose probe ended
// 0.05 s after the answer, against parts of 0.6 s. A probe of 1,000 files into sshfs at -j
// 16 ran 2.6 s more, and its part ended 0.6 s after the 15 others.
func probeLeft(pr Probe) float64 {
	logged := max(pr.Logged, 1)
	if logged >= pr.Files {
		return 0
	}
	per := max(pr.Elapsed-pr.First, 0) / float64(max(logged-1, 1))
	return float64(pr.Files-logged) * per
}
