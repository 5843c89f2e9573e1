package plan

import (
	"time"

	"github.com/prsync/prsync/refusal"
)

// # How many
//
// -j N pins the number of rsyncs; -j auto, the default, hands it to the tuner (package tune),
// which searches for the number that moves the most with a cost for each extra rsync, from
// the windows Sampled measures: the copy's own CPU against the CPUs it may use (a copy whose
// rsyncs saturate them comes down to 4 a CPU, tune.DefaultPerCPU: an rsync is processes that
// wait on each other; one whose probe was CPU work all along does so at the probe's end,
// probeBound), the rate of
// bytes and files (a copy bound by per-path latency or by a cap on each stream climbs, since
// more rsyncs move more), and the far side's refusals (a ceiling).
//
// The far side's refusals (an rsync daemon's max connections, sshd's MaxStartups) lower the
// number to what it accepts, whatever set it (refusal.FarSide), and hold new sessions back a
// moment. A pinned number lowered so climbs back a step at a time while work waits and no
// session is refused (refusal.FarSide.Climb): the far side, or another client of it, may
// free slots. -j auto's tuner has its own ceiling, which climbs back the same way.
//
// # Neighbours
//
// Two prsyncs against one far side share it. When the far side says how many sessions it
// takes (a daemon's "max connections (N)") and refuses one while prsync's own sessions,
// running or just ended, are fewer, another client holds the rest. Then prsync keeps what it
// holds, at most a fair share (half of N, rounded up), and not what it ran lately; below a
// fair share it asks for a slot again every half second, without the doubled holds and waits
// of its own refusals and without using up a chunk's --retries; above it, it climbs only
// once the neighbour has refused none of its sessions for a while. The one that came first
// so gives way at the first session of the other's that beats it to a slot, and the one
// that came second climbs as soon as slots free. A copy that holds every slot the far side
// states sees no refusal when another comes, and retakes each slot its own session frees
// within milliseconds: so, from 2 s after the far side said what it takes, at most once
// every 5 s, it leaves one such slot free 200 ms (refusal.FarSide.Yield). A neighbour that
// takes it shows itself at prsync's next session. -j auto keeps a fair share as its floor
// and its tuner's ceiling alike. Before, the second fell to one rsync and stayed there, each
// step back refused and doubling the wait to a minute, while the first ran on at all it
// had: in a simulation of two copies against max connections of 3 to 6, one ended 2 to 4
// times later than the other (TestPolicyFairNeighbours; now within 1.5 times).

// jobs is the number of rsyncs; under Planner.mu.
type jobs struct {
	limit int // rsyncs allowed at once
	want  int // the limit asked for (-j, SetLimit), which refusals may lower limit below
	max   int // bound of SetLimit
	far   refusal.FarSide
	auto  autoWindow // -j auto's window, when Config.Auto is set
}

func (j *jobs) init(cfg Config) {
	j.limit = max(cfg.Jobs, 1)
	j.want = j.limit
	j.max = max(cfg.MaxJobs, j.limit)
}

// Limit returns the number of rsyncs allowed at once.
func (p *Planner) Limit() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.jobs.limit
}

// MaxJobs returns the most rsyncs SetLimit may allow.
func (p *Planner) MaxJobs() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.jobs.max
}

// SetLimit sets the number of rsyncs allowed at once, within 1 and MaxJobs, as asked for:
// live control, or -j auto's tuner. It returns the limit before and after.
func (p *Planner) SetLimit(n int) (old, now int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.setLimit(n)
}

func (p *Planner) setLimit(n int) (old, now int) {
	j := &p.jobs
	n = max(1, min(n, j.max))
	old = j.limit
	j.limit, j.want = n, n
	if n != old {
		p.poke()
	}
	return old, n
}

// MayStart reports whether a new rsync may start at now, active slots taken: the limit, and
// the far side's hold after a refusal or while a slot it has not freed yet settles.
func (p *Planner) MayStart(now time.Time, active int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return active < p.jobs.limit && !p.jobs.far.HeldBack(now, active, p.jobs.limit)
}

// HeldUntil returns when the far side's hold on a new session beside active slots taken
// ends, as it stands now (zero or past: none).
func (p *Planner) HeldUntil(active int) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.jobs.far.HeldUntil(active, p.jobs.limit)
}

// SettledAt returns when the slot of a session that ended lately has settled for a new
// session beside active slots taken (refusal.FarSide.SettledAt): HeldUntil without a
// refusal's hold or a slot left free for another client, which a session whose slot was
// taken before them does not wait for.
func (p *Planner) SettledAt(active int) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.jobs.far.SettledAt(active, p.jobs.limit)
}

// Refused learns from a session the far side refused (refusal.FarSide.RefusedSession) that
// ran took before its refusal; s.Limit is filled in. It lowers the limit to what the far
// side accepts, and returns the decision with the limit before and after.
func (p *Planner) Refused(now time.Time, s refusal.Session, took time.Duration) (d refusal.Decision, old, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	j := &p.jobs
	j.far.RefusedAfter(took)
	s.Limit = j.limit
	d = j.far.RefusedSession(now, s)
	old = j.limit
	n = d.Limit
	if stated, _ := j.far.Last(); p.cfg.Auto != nil && stated > 0 {
		// -j auto keeps a fair share of a far side that says what it takes, as its tuner
		// does: the refused chunk asks again soon (refusal.Decision.Hold), so that a slot
		// a neighbour frees goes to prsync as often as to it
		n = max(n, min(old, refusal.FairShare(stated)))
	}
	if n < old {
		j.limit = n
	}
	return d, old, j.limit
}

// Climb raises a limit that refusals lowered a step back towards the one asked for, when the
// far side has refused nothing for a while (refusal.FarSide.Climb), and returns the limit
// before and after. Only a pinned limit climbs so (-j auto's tuner has its own ceiling), and
// only while work waits for a slot: the caller asks only then.
func (p *Planner) Climb(now time.Time) (old, n int, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	j := &p.jobs
	if p.cfg.Auto != nil {
		return j.limit, j.limit, false
	}
	old = j.limit
	n, ok = j.far.Climb(now, j.limit, j.want)
	if ok {
		j.limit = n
		p.poke()
	}
	return old, n, ok
}

// NextClimb returns when the limit may climb next (zero: no refusal lowered it, or it is
// not pinned).
func (p *Planner) NextClimb() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cfg.Auto != nil || p.jobs.limit >= p.jobs.want {
		return time.Time{}
	}
	return p.jobs.far.NextClimb()
}

// Accepted notes that the far side took a session.
func (p *Planner) Accepted() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.jobs.far.Accepted()
}

// SessionEnded notes that a session ended at now, the far side having accepted it (held) or
// not, with others of prsync's sessions still running that it had accepted, and returns how
// long its slot waits before another of prsync's sessions may take it (0: none): it settles,
// or is left free for another client (refusal.FarSide.Yield).
func (p *Planner) SessionEnded(now time.Time, held bool, others int) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	d := p.jobs.far.Ended(now, held)
	if held {
		d = max(d, p.jobs.far.Yield(now, others))
	}
	return d
}

// Admitted reports whether the far side accepted a session started at started, by now: it
// logged a line (spoke) or ran longer than a refusal takes.
func (p *Planner) Admitted(started time.Time, spoke bool, now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.jobs.far.Admitted(started, spoke, now)
}

// Peak takes a sample of the sessions running now that the far side accepted, and returns
// the most that ran together lately.
func (p *Planner) Peak(accepted int, now time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.jobs.far.Peak(accepted, now)
}

// Refusals returns the sessions refused so far, and what the far side accepted at the last.
func (p *Planner) Refusals() (refused int64, accepted int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.jobs.far.Refusals()
}
