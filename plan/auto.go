package plan

import (
	"fmt"
	"time"

	"github.com/prsync/prsync/tune"
)

// Sample is what the sampler measured of the pool at one tick, for -j auto.
type Sample struct {
	// Running and Paused are the rsync groups running and paused (by the throttle or
	// Ctrl-Z) now.
	Running, Paused int
	// Bytes and Files are what the pool has moved so far, cumulative.
	Bytes, Files float64
	// Drained says no work waits: the input has ended and nothing is queued.
	Drained bool
	// CPUs is how many CPUs the copy may use, Busy how many are in use by anyone, Own how
	// many the copy's own processes use (its rsyncs, and what serves them on this machine);
	// CPUs 0: not known.
	CPUs, Busy, Own float64
}

// Change is a change of the limit the planner made on its own.
type Change struct {
	Old, New int
	Reason   string
	Detail   string
	RateBps  float64 // the rate measured behind it, bits per second; 0: none
}

// autoWindow is -j auto's window being measured: the sums of its ticks.
type autoWindow struct {
	started         bool
	prev            Sample // the cumulative counts at the window's start
	prevAt          time.Time
	running, paused float64
	busy, own, cpus float64
	n, cpuN         int
	refusedAt       int64 // the refusals counted at the window's start
	windows         int   // the windows handed to the tuner so far
}

// firstTicks is the length of -j auto's first window, in ticks: the tuner skips it
// whatever it holds (its Settle window after the start), so it only has to see the first
// wave's rsyncs under way, not measure them. One tick (0.5 s) puts the tuner's first move
// 1.5 s sooner than a whole window would: at 4.5 s, not 6.0 s, in bench scenario 8 (every
// stream capped), whose first wave is running within 0.4 s. A window that still holds
// the ramp of a slower start is skipped by the tuner too: fewer rsyncs ran in it on
// average than the limit.
const firstTicks = 1

// Sampled takes one tick of -j auto's measurements at now. Every tune.Window of ticks it
// hands the tuner one window's observation, applies its decision to the limit, and returns
// the change when the limit moved. Without -j auto it does nothing. apply false measures
// without applying (live control pinned the limit).
func (p *Planner) Sampled(now time.Time, s Sample, apply bool) (Change, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := p.cfg.Auto
	if t == nil {
		return Change{}, false
	}
	w := &p.jobs.auto
	refused, accepted := p.jobs.far.Refusals()
	if !w.started {
		w.started, w.prev, w.prevAt, w.refusedAt = true, s, now, refused
		return Change{}, false
	}
	w.running += float64(s.Running + s.Paused)
	w.paused += float64(s.Paused)
	if s.CPUs > 0 {
		w.busy, w.own, w.cpus = w.busy+s.Busy, w.own+s.Own, s.CPUs
		w.cpuN++
	}
	per := max(int(tune.Window/p.cfg.Tick), 1)
	if w.windows == 0 {
		per = firstTicks
	}
	if w.n++; w.n < per {
		return Change{}, false
	}
	dt := now.Sub(w.prevAt).Seconds()
	if dt <= 0 {
		dt = tune.Window.Seconds()
	}
	o := tune.Observation{
		Limit:   p.jobs.limit,
		Running: w.running / float64(w.n),
		Paused:  w.paused / float64(w.n),
		Bytes:   (s.Bytes - w.prev.Bytes) / dt,
		Files:   (s.Files - w.prev.Files) / dt,
		Refused: int(refused - w.refusedAt),
		Drained: s.Drained,
	}
	if o.Refused > 0 {
		o.Accepted = accepted
		o.Stated, o.Shared = p.jobs.far.Last()
	}
	if w.cpuN == w.n { // measured all along the window
		o.CPUs, o.Busy, o.Own = w.cpus, w.busy/float64(w.n), w.own/float64(w.n)
	}
	*w = autoWindow{started: true, prev: s, prevAt: now, refusedAt: refused, windows: w.windows + 1}
	d := t.Observe(o)
	if d.Limit == o.Limit || !apply {
		return Change{}, false
	}
	detail := fmt.Sprintf("best %d, utility %.3g, gain %+.2f", d.Best, d.Utility, d.Gain)
	if d.Reason == tune.ReasonCPUBound || d.Reason == tune.ReasonCPURoom {
		detail = fmt.Sprintf("%.1f of %.3g CPUs busy, %.1f by the rsyncs", o.Busy, o.CPUs, o.Own)
	}
	old, n := p.setLimit(d.Limit)
	if n == old {
		return Change{}, false
	}
	return Change{Old: old, New: n, Reason: "auto-" + d.Reason, Detail: detail, RateBps: d.Rate * 8}, true
}

// cpuBoundShare is the CPU a probe's rsync used per second of its time from which its copy
// is CPU work: three quarters of its time on a CPU (a local rsync's start is mostly its
// fork, exec and file list, CPU too).
const cpuBoundShare = 0.75

// probeBound applies what the probe showed to -j auto's number of rsyncs: one that was busy
// on a CPU all along (its processes' CPU time over its duration; under a quota below one
// CPU, on all the quota gave it) says the copy is CPU work, and more rsyncs than the CPUs'
// worth (tune.Policy.PerCPU for each CPU it may use) only queue for them, so the limit comes
// down to that at once rather than once a window has shown the CPUs saturated (2 to 4 s
// later). The caller holds p.mu.
func (p *Planner) probeBound(pr Probe) (Change, bool) {
	t := p.cfg.Auto
	cpus := p.cfg.CPUs
	if t == nil || pr.Failed || !(cpus > 0) || !(pr.Elapsed > 0) || pr.CPU < cpuBoundShare*pr.Elapsed*min(1, cpus) {
		return Change{}, false
	}
	d, ok := t.CPUBound(cpus)
	if !ok {
		return Change{}, false
	}
	old, n := p.setLimit(d.Limit)
	if n == old {
		return Change{}, false
	}
	detail := fmt.Sprintf("the probe's rsync used %.3g CPU-s in %.3g s: %.3g CPUs run %d", pr.CPU, pr.Elapsed, cpus, n)
	return Change{Old: old, New: n, Reason: "auto-" + d.Reason, Detail: detail}, true
}
