package exec

import (
	"sort"
	"time"
)

// reason says who paused an rsync group. A group runs only when nothing holds it: no
// reason of its own, no Ctrl-Z (Hold) and no pause of the whole run by live control.
type reason uint8

const (
	byThrottle reason = 1 << iota // the CPU throttle
	byBW                          // the total bandwidth limit
)

// stopped reports whether a group is held by anything; the caller holds p.mu.
func (p *Pool) stopped(pr *proc) bool { return pr.pausedBy != 0 || p.slots.holding() }

// set changes what holds the groups with change, and stops or continues those whose state
// flips; the caller holds p.mu.
func (p *Pool) set(change func()) {
	before := make(map[*proc]bool, len(p.procs))
	for _, pr := range p.procs {
		before[pr] = p.stopped(pr)
	}
	change()
	for _, pr := range p.procs {
		switch after := p.stopped(pr); {
		case after && !before[pr]:
			stopGroup(pr.pid)
			pr.wasStopped = true
		case !after && before[pr]:
			continueGroup(pr.pid)
		}
	}
}

// pause holds one group for why; it returns false when the group is gone, or when the run
// is ending (a group being cancelled must run to act on its TERM).
func (p *Pool) pause(chunk int, why reason) error {
	p.init()
	p.mu.Lock()
	defer p.mu.Unlock()
	pr, ok := p.procs[chunk]
	if !ok || pr.pausedBy&why != 0 || p.closing {
		return nil
	}
	if !p.stopped(pr) {
		if err := stopGroup(pr.pid); err != nil {
			return err
		}
		pr.wasStopped = true
	}
	pr.pausedBy |= why
	if why == byThrottle {
		pr.pausedAt = time.Now()
	}
	return nil
}

// resume lets go of one group for why, and continues it when nothing else holds it.
func (p *Pool) resume(chunk int, why reason) error {
	p.init()
	p.mu.Lock()
	defer p.mu.Unlock()
	pr, ok := p.procs[chunk]
	if !ok || pr.pausedBy&why == 0 {
		return nil
	}
	pr.pausedBy &^= why
	if p.stopped(pr) {
		return nil
	}
	return continueGroup(pr.pid)
}

// Pause stops a chunk's rsync group for the throttle (SIGSTOP).
func (p *Pool) Pause(chunk int) error { return p.pause(chunk, byThrottle) }

// Resume lets the throttle's hold of a group go, and continues it (SIGCONT) unless
// something else holds it.
func (p *Pool) Resume(chunk int) error { return p.resume(chunk, byThrottle) }

// PauseBW stops a chunk's rsync group for the bandwidth limit.
func (p *Pool) PauseBW(chunk int) error { return p.pause(chunk, byBW) }

// ResumeBW lets the bandwidth limit's hold of a group go.
func (p *Pool) ResumeBW(chunk int) error { return p.resume(chunk, byBW) }

// Counts returns the number of running rsync groups and of those held (paused by the
// throttle or the bandwidth limit, stopped by Ctrl-Z or by live control).
func (p *Pool) Counts() (running, paused int) {
	p.init()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pr := range p.procs {
		if p.stopped(pr) {
			paused++
		} else {
			running++
		}
	}
	return running, paused
}

// SetGate allows or forbids starting new rsyncs (the throttle's gate).
func (p *Pool) SetGate(open bool) {
	p.init()
	p.slots.setHolds(func(s *Slots) { s.gate = open })
}

// Hold stops every rsync group with SIGSTOP and starts no new one until Release: job
// control (Ctrl-Z) for the whole run.
func (p *Pool) Hold() {
	p.init()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.set(func() { p.slots.setHolds(func(s *Slots) { s.held = true }) })
}

// Release ends a Hold: it continues every group nothing else holds.
func (p *Pool) Release() {
	p.init()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.set(func() { p.slots.setHolds(func(s *Slots) { s.held = false }) })
}

// PauseAll stops every rsync group, and starts no new one, until ResumeAll: live control.
// It reports whether the run was running.
func (p *Pool) PauseAll() bool { return !p.setCtlHeld(true) }

// ResumeAll ends PauseAll. It reports whether the run was paused.
func (p *Pool) ResumeAll() bool { return p.setCtlHeld(false) }

// setCtlHeld holds or releases the run for live control, and reports whether it was held.
func (p *Pool) setCtlHeld(held bool) (was bool) {
	p.init()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.set(func() {
		p.slots.setHolds(func(s *Slots) {
			was = s.ctlHeld
			s.ctlHeld = held
		})
	})
	return was
}

// PausedAll reports whether live control paused the run.
func (p *Pool) PausedAll() bool {
	p.init()
	return p.slots.paused()
}

// ContinueAll sends SIGCONT to every group and forgets every hold: the way out.
func (p *Pool) ContinueAll() {
	p.init()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.slots.setHolds(func(s *Slots) { s.held, s.ctlHeld = false, false })
	for _, pr := range p.procs {
		pr.pausedBy = 0
		continueGroup(pr.pid)
	}
}

// BWGroup is a running rsync group as the bandwidth limit sees it.
type BWGroup struct {
	Chunk   int
	Started time.Time
	Moved   int64   // bytes it has moved, as MeasureIO last read them
	Cap     float64 // its rsync's own --bwlimit, bytes per second; 0: none
	// Held: something else holds it (the throttle, Ctrl-Z, live control), or it ended.
	Held bool
}

// BWGroups returns the running groups, oldest first, with what they moved, measured
// first when measure is set.
func (p *Pool) BWGroups(measure bool) []BWGroup {
	p.init()
	if measure {
		p.MeasureIO()
	}
	moved := p.Moved()
	p.meter.mu.Lock()
	ended := p.meter.ended
	p.meter.ended = nil
	p.meter.mu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]BWGroup, 0, len(p.procs)+len(ended))
	for _, pr := range p.procs {
		out = append(out, BWGroup{Chunk: pr.chunk, Started: pr.started, Moved: moved[pr.pid], Cap: pr.bwCap,
			Held: p.slots.holding() || pr.pausedBy&^byBW != 0})
	}
	out = append(out, ended...) // once, with all they moved: they are gone after
	sort.Slice(out, func(i, j int) bool { return out[i].Started.Before(out[j].Started) })
	return out
}
