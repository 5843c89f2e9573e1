package bw

import (
	"math"
	"time"
)

// Defaults for Policy and Controller.
const (
	// DefaultTick is how often the Controller measures and decides: a
	// fifth of the burst, so that the bucket is read several times as it
	// swings, and rarely enough that reading every group's counters and
	// signalling a few of them costs little.
	DefaultTick = 100 * time.Millisecond
	// DefaultBurst is the depth of the token bucket, in time at the limit.
	// The total over a window is the limit × the window, give or take the
	// swing of the bucket's level (at most one burst, and in practice
	// half, ¼ to ¾) plus a tick's overdraft, so half a second keeps a 10 s
	// window within about ±5 % of the limit, leaving half the 10 % for
	// noise, while five ticks of depth leave the feedback room to act. A
	// deeper bucket would mean longer runs and rests of the marginal
	// group (see State), and a shallower one more of them.
	DefaultBurst = 500 * time.Millisecond
	// DefaultMinRun is how long a group that State continued runs, at the
	// least, before it may be paused again, unless the bucket is
	// overdrawn: two ticks.
	DefaultMinRun = 200 * time.Millisecond
	// DefaultSmoothing is the time constant of each group's rate estimate.
	DefaultSmoothing = time.Second
)

const (
	// lowLevel and highLevel are the bucket levels at which State runs one
	// group fewer, or one more: the marginal group's run or rest moves
	// half a burst of the limit's bytes at the least.
	lowLevel, highLevel = 0.25, 0.75
	// refillLevel is the level an overdrawn bucket refills to before any
	// group runs again.
	refillLevel = 0.5
	// fitRunning and fitPaused are the share of the limit that estimated
	// rates must fit in, for a running and for a paused group, to be among
	// those the estimates say fit; the gap keeps noise in the estimates
	// from moving groups in and out.
	fitRunning, fitPaused = 1.05, 1.0
	// oversize marks a group whose estimated rate is over the limit by
	// more than the bucket can smooth, because its rsync started under a
	// higher limit or none: it runs last, and in pulses.
	oversize = 1.5
	// uncappedGuess is the rate, in limits, State assumes for a group
	// with no cap until it has measured it: a fast group, so that its
	// first runs are short pulses.
	uncappedGuess = 10
	// minPulse is the shortest pulse of a fast group worth giving; below
	// it the bucket saves up for a longer one.
	minPulse = 5 * time.Millisecond
	// maxDebt bounds the overdraft of the bucket, in bursts (10 s at the
	// default burst), so that bytes the controller could not stop (a
	// group it failed to pause) stall the other groups for a bounded time.
	maxDebt = 20
)

// Policy sets how State holds the total rate of the groups to the limit.
// The zero value uses the defaults.
type Policy struct {
	Burst     time.Duration // depth of the token bucket, in time at the limit; 0 means DefaultBurst
	MinRun    time.Duration // least run of a group State continued; 0 means DefaultMinRun, negative none
	Smoothing time.Duration // time constant of the rate estimates; 0 means DefaultSmoothing
}

func (p Policy) withDefaults() Policy {
	if p.Burst <= 0 {
		p.Burst = DefaultBurst
	}
	if p.MinRun == 0 {
		p.MinRun = DefaultMinRun
	}
	if p.Smoothing <= 0 {
		p.Smoothing = DefaultSmoothing
	}
	return p
}

// Group is one running rsync group as Decide sees it at one tick.
type Group struct {
	ID int
	// Paused says the group is paused by this policy's controller: Decide
	// asked for the pause, the pause succeeded, and no resume since.
	Paused bool
	// PausedByOthers says something else holds the group stopped (the CPU
	// throttle, live control). It moves nothing, and Decide never resumes
	// it, even if Paused is true as well.
	PausedByOthers bool
	// Bytes is what the group moved since the previous Decide; 0 the
	// first time Decide sees the group.
	Bytes int64
	// Cap is the --bwlimit its rsync runs with, in bytes per second
	// (RsyncArg of the limit when it started), or 0 if it has none.
	Cap float64
}

// Decision says which groups to pause and which to continue. Neither list
// has a group whose state would not change. No list has a group paused by
// others.
type Decision struct {
	Pause  []int
	Resume []int
	// Pulse lists groups to run for less than a tick: each is continued
	// if it is paused, and paused again once For has passed.
	Pulse []Pulse
	// Level is the fill of the token bucket after the tick: 1 is full, 0
	// empty, below 0 overdrawn. It is 0 when there is no limit.
	Level float64
	// Extra is how many groups run beyond those whose estimated rates fit
	// in the limit (negative: short of them). It is 0 when there is no
	// limit.
	Extra int
}

// Pulse is a run of one group for less than a tick.
type Pulse struct {
	ID  int
	For time.Duration
}

// State decides, tick by tick, which rsync groups run so that their total
// rate is the limit. It is a pure state machine: the clock is an argument
// of Decide, and nothing runs in the background.
//
// Every rsync is assumed to run with rsync's own --bwlimit at the whole
// limit (see RsyncArg), so that any one group alone runs at most at the
// limit, and smoothly. State keeps the total at the limit by running some
// of the groups and pausing the others. It has four parts.
//
// A token bucket fills at the limit and drains by the bytes all groups
// move, paused or not (bytes in flight count). It holds Burst of the limit
// at most and may be overdrawn, so over any window the bytes moved are the
// limit × the window, give or take the bucket's swing: the bucket, not any
// estimate, is what holds the average. When it is overdrawn, every group is
// paused, MinRun or not, until it has refilled to half. That is the hard
// stop, and it is rarely reached.
//
// Each group has a rate estimate: the mean of its rate over the ticks it
// ran whole, starting from its Cap as one sample, and once Smoothing worth
// of ticks have passed, an exponentially weighted moving average with that
// time constant. Ticks before its first byte (ssh, the file list) are not
// counted. The estimates give the feed-forward part: taking the groups
// oldest first, those whose estimates fit together in the limit, and the
// oldest always. It is a first fit: a group too fast for the room left is
// passed over for younger, slower ones, so streams slower than the limit
// fill it. In the common case, every group as fast as the limit, that is
// the oldest group alone.
//
// The feedback part is a counter: that many groups more than those run
// (or, negative, that many fewer), the others oldest first. It goes up by
// one when the bucket's level is above ¾ and not falling, at most once per
// MinRun, and down by one, at most once a tick, when it is below ¼ and not
// rising. So the marginal group, the one the counter adds, runs while the
// bucket drains from ¾ to ¼ and rests while it refills: each phase moves
// half a burst, a quarter second of the limit, so a marginal group no
// faster than the limit cycles once a second or slower, and the
// total is the limit even when the groups are slower than the limit
// (latency-bound streams) or the estimates are wrong. A group Decide
// continued runs for MinRun at least.
//
// This is the "run what fits, oldest first" rule made exact: that rule
// alone leaves the limit short by up to a group's rate (two streams at 0.6
// of the limit would give 0.6), and a budget that shrinks as the bucket
// drains either flaps the marginal group every tick or, with hysteresis
// wide enough not to, lets the bucket overdraw. A counter on the level,
// with the level's trend as a brake, neither flaps nor winds up.
//
// A group much faster than the limit (one whose rsync started under a
// higher limit, or with none, until measured at uncappedGuess × the limit)
// runs last, only when the others leave room, and in pulses: runs shorter
// than a tick, sized to what the bucket can spare, so that after a step
// down from 200M to 20M an rsync still capped at 200M moves 20M on
// average, in bursts of a tenth of a tick rather than of a second.
//
// With no limit, every group this policy paused is continued at once
// (except those others hold, which are continued once they let go), and
// the bucket starts again half full when a limit returns. When the limit
// changes, the bucket keeps its level, so a step of the limit is a step of
// the rate, with no burst.
//
// So with one group left, capped at the limit by its rsync, it runs
// unpaused: it cannot drain the bucket. With several groups each capped at
// the limit, one runs, and another fills the little room the first leaves
// now and then, so the total is the limit, not a multiple of it.
type State struct {
	policy    Policy
	started   bool
	last      time.Time
	limit     float64   // the limit of the last Decide
	tokens    float64   // bytes in the bucket; negative is an overdraft
	refill    bool      // overdrawn, and not yet back to refillLevel
	extra     int       // the feedback counter
	changed   time.Time // when extra last changed
	prevLevel float64   // the bucket's level at the last Decide
	groups    map[int]*track
}

// track is what State knows of one group.
type track struct {
	est     float64       // estimated rate while running, bytes per second
	weight  int           // samples in est, counting the initial guess as one
	running bool          // whether the last Decide left it to run
	pulse   time.Duration // the pulse the last Decide gave it, if any
	moving  bool          // it has moved bytes since it appeared
	resumed time.Time     // when Decide last continued it; zero if never
}

// NewState returns a State with no groups yet, that decides by p.
func NewState(p Policy) *State {
	return &State{policy: p.withDefaults(), groups: map[int]*track{}}
}

// Decide returns what to do at now, with the limit in force (bytes per
// second, or Unlimited) and the running groups, oldest first. Call it once
// per tick, with every group that is running, paused or not; a group
// missing from groups has ended and is forgotten.
func (s *State) Decide(now time.Time, limit float64, groups []Group) Decision {
	dt := 0.0
	if s.started {
		dt = max(0, now.Sub(s.last).Seconds())
	}
	first, prevLimit := !s.started, s.limit
	s.started, s.last, s.limit = true, now, limit
	moved := s.measure(limit, dt, groups)

	if limit <= 0 {
		return s.unlimited(now, groups)
	}
	burst := limit * s.policy.Burst.Seconds()
	if first || prevLimit <= 0 {
		s.tokens, s.extra, s.refill = burst/2, 0, false
	} else {
		s.tokens = (s.tokens + prevLimit*dt - moved) * limit / prevLimit
	}
	s.tokens = min(max(s.tokens, -maxDebt*burst), burst)
	level := s.tokens / burst

	var run map[int]time.Duration
	switch {
	case level < 0:
		if !s.refill {
			s.extra--
		}
		s.refill = true
	case s.refill && level >= refillLevel:
		s.refill = false
	}
	if !s.refill {
		run = s.choose(now, limit, dt, groups)
	}
	s.prevLevel = level

	d := Decision{Level: level, Extra: s.extra}
	for _, g := range groups {
		t := s.groups[g.ID]
		pulse, ok := run[g.ID]
		t.running, t.pulse = ok && !g.PausedByOthers, 0
		switch {
		case g.PausedByOthers:
		case pulse > 0:
			d.Pulse = append(d.Pulse, Pulse{ID: g.ID, For: pulse})
			t.pulse = pulse
		case ok && g.Paused:
			d.Resume = append(d.Resume, g.ID)
			t.resumed = now
		case !ok && !g.Paused:
			d.Pause = append(d.Pause, g.ID)
		}
	}
	return d
}

// measure forgets the groups that have gone, adds new ones, folds the
// rates of those that ran the whole tick into their estimates, and returns
// the bytes all groups moved.
func (s *State) measure(limit, dt float64, groups []Group) (moved float64) {
	present := make(map[int]bool, len(groups))
	for _, g := range groups {
		present[g.ID] = true
		moved += float64(g.Bytes)
		t := s.groups[g.ID]
		switch {
		case t == nil:
			t = &track{}
			if g.Cap > 0 {
				t.est, t.weight = g.Cap, 1
			}
			s.groups[g.ID] = t
			continue
		case !t.moving && g.Bytes == 0:
			// Still starting (connecting, exchanging the file list):
			// its rate is not known yet.
			continue
		}
		t.moving = true
		switch {
		case t.pulse > 0 && !g.PausedByOthers:
			t.fold(float64(g.Bytes)/t.pulse.Seconds(), t.pulse.Seconds(), s.policy.Smoothing)
		case t.running && !g.Paused && !g.PausedByOthers && dt > 0:
			t.fold(float64(g.Bytes)/dt, dt, s.policy.Smoothing)
		}
	}
	for id := range s.groups {
		if !present[id] {
			delete(s.groups, id)
		}
	}
	return moved
}

// choose returns the groups to run when the bucket is not overdrawn, each
// with 0 to run the whole tick or the length of its pulse: see the doc
// comment of State. dt is the length of the last tick.
func (s *State) choose(now time.Time, limit, dt float64, groups []Group) map[int]time.Duration {
	var fit, rest, fast []Group
	sum := 0.0
	for _, g := range groups {
		if g.PausedByOthers {
			continue
		}
		est := s.groups[g.ID].rate(limit)
		room := fitRunning * limit
		if g.Paused {
			room = fitPaused * limit
		}
		switch {
		case est > oversize*limit:
			fast = append(fast, g)
		case len(fit) == 0 || sum+est <= room:
			fit = append(fit, g)
			sum += est
		default:
			rest = append(rest, g)
		}
	}
	if len(fit) == 0 && len(fast) > 0 {
		fit, fast = fast[:1], fast[1:]
	}
	order := append(append(fit, rest...), fast...)

	burst := limit * s.policy.Burst.Seconds()
	level := s.tokens / burst
	switch {
	case level > highLevel && level >= s.prevLevel && now.Sub(s.changed) >= s.policy.MinRun:
		s.extra++
		s.changed = now
	case level < lowLevel && level <= s.prevLevel:
		s.extra--
		s.changed = now
	}
	s.extra = min(max(s.extra, 1-len(fit)), len(order)-len(fit))
	n := len(fit) + s.extra

	run := make(map[int]time.Duration, n)
	var pulsed []*track
	rate := 0.0 // estimated rate of the groups that run the whole tick
	for i, g := range order {
		t := s.groups[g.ID]
		dwell := !g.Paused && !t.resumed.IsZero() && now.Sub(t.resumed) < s.policy.MinRun
		switch {
		case i >= n && !dwell:
		case t.rate(limit) > oversize*limit:
			pulsed = append(pulsed, t)
			run[g.ID] = -1 // for now
		default:
			run[g.ID] = 0
			rate += t.rate(limit)
		}
	}
	if len(pulsed) == 0 {
		return run
	}

	// Share what the bucket can spare over the coming tick, down to
	// lowLevel, among the fast groups, oldest first, as pulses.
	if dt <= 0 {
		dt = DefaultTick.Seconds()
	}
	spare := s.tokens - lowLevel*burst + (limit-rate)*dt
	for _, g := range order {
		if run[g.ID] >= 0 {
			continue
		}
		est := s.groups[g.ID].rate(limit)
		secs := min(spare/est, dt)
		if secs < minPulse.Seconds() {
			delete(run, g.ID)
			continue
		}
		run[g.ID] = time.Duration(secs * float64(time.Second))
		if secs >= dt {
			run[g.ID] = 0 // the whole tick
		}
		spare -= secs * est
	}
	return run
}

// unlimited continues every group paused by this policy and not by others.
func (s *State) unlimited(now time.Time, groups []Group) Decision {
	var d Decision
	s.tokens = 0
	for _, g := range groups {
		t := s.groups[g.ID]
		t.running = !g.PausedByOthers
		if g.Paused && !g.PausedByOthers {
			d.Resume = append(d.Resume, g.ID)
			t.resumed = now
		}
	}
	return d
}

// fold adds one measured rate x, over dt seconds, to the estimate.
func (t *track) fold(x, dt float64, smoothing time.Duration) {
	t.weight++
	w := max(1-math.Exp(-dt/smoothing.Seconds()), 1/float64(t.weight))
	t.est += w * (x - t.est)
}

// rate returns the estimate, or for a group with no cap whose rate is not
// known yet, a guess of uncappedGuess × limit.
func (t *track) rate(limit float64) float64 {
	if t.weight == 0 {
		return uncappedGuess * limit
	}
	return t.est
}
