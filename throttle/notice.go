package throttle

import (
	"fmt"
	"time"
)

// When the throttle says that it holds the whole copy: once every rsync has been held
// (paused, or waiting at the closed gate, with none running) for HeldAfter, and again
// at most every HeldEvery while that lasts.
const (
	HeldAfter = 10 * time.Second
	HeldEvery = 5 * time.Minute
)

// Notice is a word for the user: the throttle has held every rsync for a while (Held), or
// it lets them run again after a Held notice. The controller gives it; only the CLI
// writes it, on stderr, terminal or not.
type Notice struct {
	Held bool
	// For is how long every rsync has been held (Held), or was held.
	For time.Duration
	// Reason is the decision's reason: the limit that holds them (Held); "" when they run
	// again because the machine cooled, ReasonStarved when MaxSuspend let one run.
	Reason string
	Sample Sample // the newest sample
	Policy Policy
}

// Message is the notice as one line, without the "prsync: " prefix, and whether it is a
// warning: the cause with its figure, the limit, and the flags that change it.
//
//	every rsync has been paused for 10s: the machine's CPU use is 97% (95% not the copy's), above --suspend-threshold 80; to pause less, raise --suspend-threshold (at most 100), lower --max-suspend (30s: then one rsync runs on a busy machine), or use --no-throttle
func (n Notice) Message() (msg string, warning bool) {
	d := n.For.Round(time.Second)
	if !n.Held {
		if n.Reason == ReasonStarved {
			return fmt.Sprintf("the throttle lets one rsync run after %v of all paused (--max-suspend %v); the machine is still busy", d, n.Policy.MaxSuspend), false
		}
		return fmt.Sprintf("the throttle lets the rsyncs run again after %v of all paused: the machine is below its limits", d), false
	}
	cause := Cause(n.Policy, n.Sample)
	if cause == "" {
		cause = "the machine was busy" // cooled since the decision: the next interval resumes
	}
	return fmt.Sprintf("every rsync has been paused for %v: %s; %s", d, cause, Fix(n.Policy, n.Sample)), true
}

// Cause says which limit holds the rsyncs in s under p, with its figure and its flag,
// such as "the 1-minute load average is 9.1, above --max-load 8", or "" when s meets
// every limit (the machine is cool). A limit above its pause level is named first; one
// between its resume and pause levels is "not yet below" its resume level.
func Cause(p Policy, s Sample) string {
	if r := hotReason(p, s); r != "" {
		return describe(p, s, r, true)
	}
	if r := warmReason(p, s); r != "" {
		return describe(p, s, r, false)
	}
	return ""
}

// describe words one limit: its figure, then "above" its pause level (hot), or "not yet
// below" its resume level.
func describe(p Policy, s Sample, reason string, hot bool) string {
	ratio := p.Resume / p.Suspend
	level := func(limit float64, flag string) string {
		if hot {
			return fmt.Sprintf("above %s %s", flag, num(limit))
		}
		return fmt.Sprintf("not yet below %s, where %s %s resumes", num(limit*ratio), flag, num(limit))
	}
	cpuLevel := fmt.Sprintf("above --suspend-threshold %s", num(p.Suspend))
	if !hot {
		cpuLevel = fmt.Sprintf("not yet below --resume-threshold %s", num(p.Resume))
	}
	switch reason {
	case ReasonCPU:
		if s.HasOwn {
			return fmt.Sprintf("the machine's CPU use is %.0f%% (%.0f%% not the copy's), %s", s.CPU, max(0, s.CPU-s.Own-s.Kernel), cpuLevel)
		}
		return fmt.Sprintf("the machine's CPU use is %.0f%%, %s", s.CPU, cpuLevel)
	case ReasonCgroupCPU:
		return fmt.Sprintf("the cgroup's CPU use is %.0f%% of its quota of %s CPUs, %s", s.CgroupCPU, num(s.CgroupCPUs), cpuLevel)
	case ReasonLoad:
		return fmt.Sprintf("the 1-minute load average is %.2f, %s", s.Load, level(p.MaxLoad, "--max-load"))
	case ReasonCPUPressure:
		return fmt.Sprintf(`PSI cpu "some avg10" is %.1f%%, %s`, s.CPUPressure, level(p.MaxCPUPressure, "--max-cpu-pressure"))
	case ReasonIO:
		return fmt.Sprintf(`PSI io "some avg10" is %.1f%%, %s`, s.IOPressure, level(p.MaxIOPressure, "--max-io-pressure"))
	}
	return "reason " + reason
}

// Fix says how to pause less for the limit that holds the rsyncs in s: the flag of that
// limit, --max-suspend and --no-throttle.
func Fix(p Policy, s Sample) string {
	reason := hotReason(p, s)
	if reason == "" {
		reason = warmReason(p, s)
	}
	var limit string
	switch reason {
	case ReasonLoad:
		limit = "raise --max-load (or drop it)"
	case ReasonCPUPressure:
		limit = "raise --max-cpu-pressure (or drop it)"
	case ReasonIO:
		limit = "raise --max-io-pressure (or drop it)"
	default:
		limit = "raise --suspend-threshold (at most 100)"
	}
	suspend := fmt.Sprintf("lower --max-suspend (%v: then one rsync runs on a busy machine)", p.MaxSuspend)
	if p.MaxSuspend <= 0 {
		suspend = "set --max-suspend (0 now: paused for as long as the machine is busy)"
	}
	return fmt.Sprintf("to pause less, %s, %s, or use --no-throttle", limit, suspend)
}

// num writes a limit as the user gave it: 80, 0.5.
func num(v float64) string { return fmt.Sprintf("%g", v) }

// heldWatch decides when to give a Notice, from whether every rsync is held at each
// interval: a Held notice once they have been held for after, and again at most every
// every (counted from the last one, over stalls apart too) while they stay held; and,
// after a Held notice, one that they run again. It is pure: the caller gives it the time.
type heldWatch struct {
	after, every time.Duration
	since        time.Time // when the current stall began; zero while something runs
	last         time.Time // when the last Held notice was given; zero before the first
	told         bool      // a Held notice was given in the current stall
}

// notice is what heldWatch.observe asks for.
type notice int

const (
	noNotice notice = iota
	heldNotice
	runningNotice
)

// observe takes the state at now, after the interval's action: held says that nothing
// runs while something waits, paused or at the closed gate. It returns the notice to give
// and how long the rsyncs have been (were) held.
func (w *heldWatch) observe(now time.Time, held bool) (notice, time.Duration) {
	if !held {
		n, d := noNotice, time.Duration(0)
		if w.told {
			n, d = runningNotice, now.Sub(w.since)
		}
		w.since, w.told = time.Time{}, false
		return n, d
	}
	if w.since.IsZero() {
		w.since = now
	}
	d := now.Sub(w.since)
	if d >= w.after && (w.last.IsZero() || now.Sub(w.last) >= w.every) {
		w.last, w.told = now, true
		return heldNotice, d
	}
	return noNotice, d
}
