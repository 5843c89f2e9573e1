package plan

import (
	"math"
	"time"

	"github.com/prsync/prsync/tune"
)

// # The opening
//
// A list whose end has been read before its first chunk is cut is known whole, but what its
// paths cost is not. Cut into one part per slot at once, a list whose copy is CPU work and
// rsync starts (2,000 small local files on 2 CPUs: 0.8 s of work, 50–100 ms for each
// rsync's start) paid eight starts and eight rsyncs fighting for two CPUs, and lost to one
// rsync -a (issue 23, before the first chunks were sized by time). Cut into one part, a list
// whose paths each wait for a round trip (a network file system) or a bandwidth cap lost its
// parallelism.
//
// So the first chunk is a probe of ProbeFiles paths, and the paths after it are held until
// the probe says what a start and a path cost: its rsync's first logged line comes after its
// start (and a path), its end after the other paths, and its CPU time says how much of its
// time was CPU work. The paths held are then cut into as many parts as
//
//   - carry at least OpeningStarts starts of work each (rest × per path ÷ (OpeningStarts ×
//     start)): a start stays at most a quarter of a part;
//   - the CPUs can run side by side: the CPUs' worth, 4 rsyncs a CPU as -j auto's CPU rule
//     (tune.DefaultPerCPU), ÷ the probe's CPU per second of its time (an rsync busy on one
//     CPU for all its time leaves room for 4 × CPUs of them; one that mostly waits, for many
//     more). It was the CPUs alone, and a pull's probe, its time mostly its start and so on
//     a CPU all along, cut 10,000 paths into 2 parts whenever it ended before its work so far
//     gave every slot a part (1.39 s), and into 8 otherwise (0.91 s);
//
// from 1 to one per slot. A probe that logged nothing (every path up to date, with the quick
// check off) leaves the CPU rule alone. The wait ends as soon as the answer is known: while
// the probe runs, the work it has done is a lower bound of its paths' cost, and once that
// bound alone gives every slot a part, the rest is cut for every slot, or for every slot but
// the probe's when the probe has longer left than a part for its slot would save the others
// (probeLeft): that part starts only when the probe ends. 1,000 files into sshfs at -j 16
// were 16 parts of 69 that ended at 6.5 s but for the one that waited 2.6 s for the probe,
// and ended at 7.1 s; a pull's probe ended 0.05 s after the answer, and its part with the
// others. The wait is at most the chunk target from the first question; then the paths are
// cut for every slot but the probe's.
//
// The moment the lower bound gives every slot a part is known as soon as the probe's first
// line has come (Next's Until), so the splitter waits for that time or for the next event
// (the probe's start, first line or end), not polling.
//
// # When the first chunk is cut
//
// The first chunk waits up to EndWait (and --chunk-wait) for the input's end to be read by
// the reader, which reads ahead of the records placed (a few blocks): a list from a file, or
// from a find that ends within it, is then known whole and probed as above. The splitter
// places no more records meanwhile (Step.Unread), so that what is read by then decides as
// before the planner: a find piped in fills the reader's blocks a pipe's read at a time,
// and is probed as a list still streaming. A file's end comes with the read after its last
// bytes; a find of 10,000 paths on a loaded 2-CPU machine took more than 50 ms. It stops
// waiting once more paths have been read than a short list holds (slots × --chunk-files),
// and once more than minProbeList have been read, after streamWait: a list still streaming
// then is probed at once. The paths read while its probe runs are held, and cut as a short
// list's are if the input ends meanwhile, so waiting longer for the end gains nothing, and
// it delayed the first rsync of a find over a cold tree by a quarter of a second (the first
// chunk started at 0.27 s, against 0.07 s with --chunk-files).
//
// Once the parts are known, a list still streaming has its held paths cut into them (the
// first wave) and sent at once; the paths after them go by the cost model's budget, which
// has learnt from the probe once it ended: no run of 32-path chunks before the first ends.
// The parts may come before the probe has ended (its work so far already gives every slot a
// part, or the wait ran out); until the budget is timed, the chunks after the wave then hold
// at least a part's paths (waveFloor). They wait for the slots the wave took, so smaller ones
// start no sooner: against a daemon with max connections = 3 (bench scenario 6), a find that
// was still streaming when a wave of 8 × 933 was cut left 8 chunks of 32 paths after it,
// each a session of its own. At most slots × --chunk-files paths are held: beyond them the
// input waits, so memory stays bounded.

// ProbeFiles is the paths of the probe chunk.
const ProbeFiles = 16

// OpeningStarts is the fewest starts of work a part of the opening carries.
const OpeningStarts = 4

// DefaultEndWait is how long the first chunk waits for the end of an input still being read.
const DefaultEndWait = 250 * time.Millisecond

// streamWait is how long the first chunk waits for the input's end once more than
// minProbeList paths have been read.
const streamWait = 25 * time.Millisecond

// minProbeList is the fewest paths a list needs to be probed; a shorter one is shared by
// the slots at once.
const minProbeList = 4 * ProbeFiles

// minPartFiles is the fewest paths of a part, in the opening and in the tail: below it,
// another rsync's start costs more than the paths' share of the work saves.
const minPartFiles = 4

// phase is where the opening stands.
type phase int

const (
	phaseStart phase = iota // no chunk cut yet: whether to probe is not decided
	phaseProbe              // the chunk being cut is the probe
	phaseWait               // the probe was cut: the paths after it wait for its figures
	phaseRun                // the opening is over
)

// opening is the state of the opening; under Planner.mu.
type opening struct {
	phase phase
	begin time.Time // the first question
	// the probe: its chunk, when its rsync started, when it logged its first line, the lines
	// logged, and its first end (nil before)
	probeID, probeFiles int
	started, first      time.Time
	lines               int
	end                 *Probe
	partsBy             time.Time // the wait for its figures ends then (zero: not asked yet)
}

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

// ended takes the probe's first end.
func (o *opening) ended(e End) {
	if o.probeID == 0 || e.ID != o.probeID || o.end != nil {
		return
	}
	pr := Probe{Files: e.Files, First: e.First, Elapsed: e.Seconds, CPU: e.CPU, Ended: true}
	// refused, failed or paused: its time says nothing of what its paths cost
	pr.Failed = e.Attempt != 1 || e.Paused || !e.OK
	o.end = &pr
}

// Started notes that a chunk's rsync started (its attempt).
func (p *Planner) Started(now time.Time, id, attempt int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if o := &p.open; id == o.probeID && attempt == 1 && o.started.IsZero() {
		o.started = now
		p.poke()
	}
}

// Watch reports whether the pool tells Logged of the lines of chunk id's rsync: the probe's,
// while the paths after it wait.
func (p *Planner) Watch(id int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return id == p.open.probeID && p.open.phase <= phaseWait
}

// Logged notes that a watched chunk's rsync has logged lines lines so far.
func (p *Planner) Logged(now time.Time, id, lines int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	o := &p.open
	if id != o.probeID {
		return
	}
	o.lines = max(o.lines, lines)
	if o.first.IsZero() {
		o.first = now
		p.poke() // its first line: when the parts are known can be worked out
	}
}

// start decides, for the first chunk, whether to hold the paths read a while longer, to
// probe, or to cut at once; the caller holds p.mu.
func (p *Planner) start(now time.Time, in Input) Step {
	o := &p.open
	if o.begin.IsZero() {
		o.begin = now
	}
	long := int64(p.jobs.limit) * int64(p.cfg.Files) // what a short list holds
	deadline := o.begin.Add(min(p.cfg.EndWait, max(p.cfg.Wait, 0)))
	if !in.EOF && in.Read < long && now.Before(deadline) {
		until := deadline
		if in.Read > minProbeList {
			until = earlier(until, o.begin.Add(streamWait))
		}
		if now.Before(until) {
			return Step{Do: Hold, Until: until, Unread: true}
		}
	}
	// a list not known whole, or a short one, whose paths' cost is not known yet
	probe := p.est.Fit().N == 0 && in.Left > minProbeList && (!in.EOF && in.Read < long || in.EOF && in.Left < long)
	if !probe {
		o.phase = phaseRun
		return Step{Budget: p.budget(in)}
	}
	o.phase = phaseProbe
	return Step{Budget: Budget{Files: min(ProbeFiles, p.cfg.Files), Bytes: p.cfg.Bytes}}
}

// wait answers while the paths after the probe are held: hold them until the parts are
// known, then cut them (Wave); the caller holds p.mu.
func (p *Planner) wait(now time.Time, in Input) Step {
	rest := int64(in.Held)
	if in.EOF {
		rest = in.Left // every path left: the ones not examined yet are cut alike
	}
	if rest <= 0 {
		if in.EOF {
			p.open.phase = phaseRun // the probe was the whole list
			return Step{Budget: p.budget(in)}
		}
		return Step{Do: Hold} // the wait starts with the first path after the probe
	}
	n, until, known := p.parts(now, int(rest))
	if !known {
		return Step{Do: Hold, Until: until}
	}
	p.open.phase = phaseRun
	part := p.partFiles(int(rest), n)
	b := Budget{Files: min(part, p.cfg.Files), Bytes: p.cfg.Bytes}
	if in.EOF {
		// the paths held and the ones after them are all that is left: a short list's
		// rest, cut into the parts said; neither the fit of one probe nor its growth bound
		// cut them
		p.cut.opened, p.cut.tail = true, part
		return Step{Do: Wave, Budget: b}
	}
	p.cut.waveFloor = part
	return Step{Do: Wave, Budget: b, Flush: true}
}

// parts says into how many parts to cut rest paths after the probe, or until when to wait
// for the probe's figures; the caller holds p.mu.
func (p *Planner) parts(now time.Time, rest int) (n int, until time.Time, known bool) {
	o := &p.open
	if o.partsBy.IsZero() {
		o.partsBy = now.Add(time.Duration(p.est.Target() * float64(time.Second)))
	}
	slots := p.jobs.limit
	pr := o.probe(now)
	running := o.end == nil && !o.started.IsZero()
	if n, known := OpeningParts(rest, pr, slots, p.cfg.CPUs); known {
		return n, time.Time{}, true
	}
	if !now.Before(o.partsBy) {
		return max(slots-1, 1), time.Time{}, true // the probe, silent, holds a slot
	}
	until = o.partsBy
	if running && pr.First > 0 {
		// the lower bound of a path's cost gives every slot a part at this time
		most := max(1, min(slots, rest/minPartFiles))
		need := OpeningStarts * pr.First * float64(most) * float64(max(pr.Files-1, 1)) / float64(rest)
		at := o.started.Add(time.Duration((pr.First+need)*float64(time.Second)) + time.Millisecond)
		until = earlier(until, at)
	}
	return 0, until, false
}

// probe returns what the probe has shown by now.
func (o *opening) probe(now time.Time) Probe {
	pr := Probe{Files: o.probeFiles}
	switch {
	case o.end != nil:
		pr = *o.end
	case !o.started.IsZero():
		pr.Elapsed, pr.Logged = now.Sub(o.started).Seconds(), o.lines
		if !o.first.IsZero() {
			pr.First = max(o.first.Sub(o.started).Seconds(), 1e-6)
		}
	}
	return pr
}

// Probe returns what the probe chunk's rsync has shown by now (zero before the probe was
// cut, or without one).
func (p *Planner) Probe(now time.Time) Probe {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.open.probeID == 0 {
		return Probe{}
	}
	return p.open.probe(now)
}

// partFiles returns the paths of each of n parts of rest paths after the probe: more parts
// when n would hold more than --chunk-files, so that the parts stay about equal.
func (p *Planner) partFiles(rest, n int) int {
	n = max(n, (rest+p.cfg.Files-1)/p.cfg.Files, 1)
	return max((rest+n-1)/n, minPartFiles)
}

// OpeningParts says into how many parts to cut rest paths after the probe, with slots
// rsyncs allowed at once and cpus CPUs to run them, and whether that is known yet (false:
// wait and ask again). See The opening.
func OpeningParts(rest int, pr Probe, slots int, cpus float64) (int, bool) {
	slots = max(slots, 1)
	if rest <= 0 {
		return 1, true
	}
	if pr.Failed {
		return slots, true
	}
	most := max(1, min(slots, rest/minPartFiles))
	byWork := func(perPath, start float64) int {
		if start <= 0 {
			return most
		}
		return max(1, min(int(float64(rest)*perPath/(OpeningStarts*start)), most))
	}
	if pr.Ended {
		n := most
		if pr.First > 0 && pr.Files >= 2 && !waitedThenBurst(pr, cpus) {
			n = byWork(max(pr.Elapsed-pr.First, 0)/float64(pr.Files-1), pr.First)
		} // else nothing logged (every path up to date, --no-quick-check), or nothing
		// learnt of a path's cost: the CPU alone says
		if c := cpuParts(pr, cpus); c > 0 {
			n = min(n, c)
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

// burstEnd is how soon after its first logged line a probe that ended had logged them all,
// at most, for its lines to count as one burst at its end (burst): its event times are
// rounded to the millisecond.
const burstEnd = 2 * time.Millisecond

// waitShare is the share of a CPU below which a probe mostly waited (waitedThenBurst).
const waitShare = 0.5

// waitedThenBurst reports whether a probe that ended says nothing of what a path costs: its
// lines came in one burst at its end (rsync passes the itemized lines of a small chunk on
// in one block, so the first comes with the rest), and it mostly waited, off the CPUs.
// Its time before the burst is then its start and its paths together, and a wait in it (a
// daemon's delayed ACK, 40 ms, in a push to a daemon without TCP_NODELAY on its side: bench
// scenario 5) read as a long start and paths that cost nothing, and cut 5,088 paths into
// one part (0.62 s) where 8 took 0.45 s. A wait overlaps across parts, so the CPU rule
// alone bounds them. A probe busy on a CPU all along (a local copy of small files, whose
// starts are CPU work) keeps the rule by work, as does one whose lines came before its end.
func waitedThenBurst(pr Probe, cpus float64) bool {
	if !(pr.CPU > 0 && pr.Elapsed > 0 && cpus > 0) {
		return false
	}
	burst := pr.Elapsed-pr.First <= burstEnd.Seconds()
	return burst && pr.CPU/pr.Elapsed/min(1, cpus) < waitShare
}

// cpuParts returns how many rsyncs like the probe the CPUs run side by side: their worth
// (tune.DefaultPerCPU rsyncs a CPU, as -j auto's CPU rule) ÷ the probe's CPU per second of
// its time, as a share of the CPU one rsync may get (a whole one, or a quota below it), at
// least 1; 0 when that is not known. An rsync is a pipeline whose processes wait on each
// other, and a probe's time is mostly its start, which is CPU work too: a pull's probe of
// 16 paths was on a CPU all its 0.14 s, and one rsync a CPU cut the rest of 10,000 paths
// into 2 parts (1.39 s) where 8 took 0.91 s. Under a quota of half a CPU a probe gets at
// most half a CPU a second: one that got it all is CPU work, and the quota is worth 2.
func cpuParts(pr Probe, cpus float64) int {
	if !(pr.CPU > 0 && pr.Elapsed > 0) || !(cpus > 0) {
		return 0
	}
	share := pr.CPU / pr.Elapsed / min(1, cpus)
	return max(1, int(math.Min(cpus*tune.DefaultPerCPU/share+1e-9, 1<<20)))
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

// earlier returns the earlier of two times.
func earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
