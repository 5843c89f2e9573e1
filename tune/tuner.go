package tune

import (
	"math"

	"github.com/prsync/prsync/refusal"
)

// Observation is what the pool measured over one window.
type Observation struct {
	// Limit is the limit in force during the window.
	Limit int
	// Running is the average number of rsyncs running over the window,
	// paused ones included. Below the limit, the pool had too little work
	// to fill it; above it, it was still finishing rsyncs started under a
	// higher limit (a lower limit stops new starts; it kills nothing).
	Running float64
	// Bytes and Files are the bytes and the files finished per second.
	Bytes float64
	Files float64
	// Paused is the average number of groups the throttle held paused
	// during the window (group-seconds paused over the window's length).
	// Any pause voids the window.
	Paused float64
	// Refused counts the sessions the far side refused in the window: an
	// rsync daemon's "max connections reached", ssh refused at connect.
	Refused int
	// Accepted is how many of prsync's sessions the far side was serving
	// when it refused: the number running then, not counting the refused
	// one (the lowest such count if it refused several times). It is read
	// only when Refused > 0.
	Accepted int
	// Stated is how many sessions the far side says it takes (an rsync
	// daemon's "max connections (N)"), 0 when it says nothing, and Shared
	// says its last refusal was another client's doing: prsync held fewer
	// sessions than it states, none of them a slot not freed yet. Both are
	// read only when Refused > 0.
	Stated int
	Shared bool
	// Drained says that the input has ended and no chunk is queued: from
	// now on the pool cannot fill the limit, whatever it is.
	Drained bool
	// CPUs is how many CPUs prsync may use: a cgroup's CPU quota, or the
	// machine's CPUs. Busy is how many of them were in use over the
	// window, by anyone, and Own how many prsync's rsyncs used, both
	// averaged over the window. CPUs 0 means they were not measured (no
	// /proc), which turns the CPU rule off.
	CPUs, Busy, Own float64
}

// Reasons name what a Decision did.
const (
	// ReasonSettle: the window was skipped because the pool had not yet
	// reached the limit (a Settle window after a change, rsyncs from a
	// higher limit still finishing, or a window run under another limit).
	ReasonSettle = "settle"
	// ReasonIdle: the window was skipped because the pool was not full,
	// the input was drained, or nothing finished.
	ReasonIdle = "idle"
	// ReasonThrottled: the window was skipped because the throttle paused
	// groups in it.
	ReasonThrottled = "throttled"
	// ReasonRefused: the far side refused sessions; the limit is now at
	// most what it accepted.
	ReasonRefused = "refused"
	// ReasonWorkloadChanged: the rate or the file mix at the best limit
	// moved beyond the noise, or a probe measured what no limit could
	// explain; the search starts again from there.
	ReasonWorkloadChanged = "workload-changed"
	// ReasonProbeUp and ReasonProbeDown: the next window tries a higher or
	// a lower limit than Best (which may just have moved, if the previous
	// probe won).
	ReasonProbeUp   = "probe-up"
	ReasonProbeDown = "probe-down"
	// ReasonRevert: the probe lost; back to Best, which is held for a
	// while.
	ReasonRevert = "revert"
	// ReasonHold: the window was measured and the limit stays.
	ReasonHold = "hold"
	// ReasonCPUBound: the CPUs were saturated, mostly by prsync's own
	// rsyncs: the limit drops to the CPUs' worth (Policy.PerCPU a CPU), and
	// no probe passes it while that lasts.
	ReasonCPUBound = "cpu-bound"
	// ReasonCPURoom: in a copy the CPUs bound, a window at the best limit left
	// them a tenth idle or more: the limit rises to one more (the CPU cap).
	ReasonCPURoom = "cpu-room"
	// ReasonClimb: a refusal had cut the ceiling below what the far side
	// accepted at an earlier refusal; no refusal for a while, so the
	// ceiling, and the limit with it, step back towards that.
	ReasonClimb = "climb"
)

// Decision is the result of one Observe.
type Decision struct {
	Limit  int    // the limit for the next window
	Reason string // one of the Reason constants
	// Best is the limit the Tuner holds as the best so far. It equals
	// Limit except while a probe runs.
	Best int
	// Rate is the smoothed rate measured at Best, in bytes/s with files
	// counted at FileCost, and Utility is Rate / K^Best. Both are 0 until
	// a window at Best has been measured.
	Rate    float64
	Utility float64
	// Gain is the utility of the probed limit relative to Best as measured
	// so far (0.05: 5 % better), on windows that measured a probe, and on
	// the window that judged it; 0 otherwise.
	Gain float64
	// Noise is the measured standard deviation of one window's log rate,
	// about the relative swing of one window's rate.
	Noise float64
	// Ceiling is the most sessions the far side is taken to accept; 0 when
	// it has not refused recently.
	Ceiling int
	// CPUCap is the most rsyncs the CPUs are taken to serve, while the
	// copy is CPU-bound; 0 otherwise.
	CPUCap int
}

// Tuner searches for the number of concurrent rsyncs that maximises the
// utility rate / K^n of Policy. It is a pure state machine: no clock, no
// goroutines, no randomness. Call Observe once per window with what the
// pool measured while the previous Decision's Limit was in force, and apply
// the Decision's Limit to the pool.
//
// # The measurement problem
//
// On a 2-CPU VM one window's rate swings by ±20 % (σ ≈ 0.12 in log), while
// the last steps towards an optimum gain 5 % to 15 %. No single window can
// judge such a step, and 30 s hold 15 windows of 2 s, so every window has
// to count. The Tuner compares the mean log rate of a probed limit with
// that of the best limit in units of the noise it measures (Decision.Noise),
// settles the large gains of the first steps on one or two windows, and
// spends more windows where the gains are small.
//
// # Search
//
// The search is a pattern search on the limit, with momentum:
//
//   - A probe sets the limit to best ± step. After the Settle windows it
//     compares the mean log utility of its windows with best's.
//   - During a search (from the start, after a change of workload) a probe
//     upwards wins as soon as it is ClimbZ standard errors better, one
//     downwards Z; either loses as soon as it is one standard error
//     worse. After MaxWindows windows without a verdict a probe upwards
//     still wins unless it is a quarter of a standard error worse, and
//     one downwards loses. The asymmetry is on purpose: on the way up a
//     wrong step costs the penalty of a few idle streams, while stopping
//     short costs rate; on the way down it is the other way round.
//   - Momentum: the first probe doubles Start (4 → 8), as at Start almost
//     every workload still scales. Each win then moves best to the probe
//     and goes on the same way by ×1.5 upwards (÷1.5 downwards), so 20
//     streams are three wins away: 4, 8, 12, 18.
//   - After an overshoot (a loss after a win) the step halves, in the same
//     direction, down to StepAt(best), which brackets the optimum as a
//     binary search would. A search with no win tries the other direction
//     once.
//   - A probe that wins on one lucky window is worse than it looks (the
//     winner's curse), and the next probe is judged against it. So the
//     winner's mean rate is cut to what linear scaling allows, plus half a
//     standard error: more streams cannot raise the rate by more than
//     their ratio.
//   - A search that ended on a probe that was not convincing either way
//     tries that probe once more after the hold, when best has been
//     measured for longer.
//
// # Holding
//
// After a search the Tuner holds best for Hold windows, then probes one
// StepAt(best) step, alternately up and down. Such a periodic probe needs
// MinWindows windows and Z standard errors to win, so on a plateau the
// limit only visits the next step and comes back. Each loss doubles the
// hold, up to MaxHold. A win moves best one step and tries one more step
// the same way, as a search probe; only if that wins too does the search
// go on with its larger steps. So a plateau holds even when the noise
// fools one periodic probe, and a change that leaves the rate at best as
// it was (a faster link above a per-stream cap) is still found, if slowly.
//
// # Changes of workload
//
// While it holds, the Tuner compares the last 3 windows at best with the
// earlier ones. A shift of the rate by 3.5 standard errors and at least
// 35 %, or of the share of the rate due to files by 25 points (big files
// giving way to small ones), is a change of workload: the search starts
// again with ×1.5 steps, keeping only the windows after the shift, upwards
// first if the rate rose or files took a larger share, downwards otherwise.
// A probe is also taken for a change when it measures what no limit could
// explain: a rise of the rate by more than the ratio of the limits, a fall
// by more than that ratio going down, or a rise going down from a settled
// best; the search then goes on from the probed limit in the probe's
// direction.
//
// # Why a pattern search
//
// Falcon's gradient step, n += θ·∂U/∂n, needs the gradient; with ±20 %
// noise a finite difference over a few streams is mostly noise, and a step
// proportional to it follows the noise. The pattern search only asks which
// of two limits is better, which averaging answers, and its steps are
// bounded, so one bad window cannot throw the limit far. AIMD on the rate
// would give up half the rate to learn what one probe tells; the
// multiplicative decrease is kept for refusals, where the far side says no
// and each window of waiting costs failed sessions.
//
// # Windows that say nothing about the limit
//
// A window is skipped, and nothing moves, when it is one of the Settle
// windows after a change; it ran under another limit than the Tuner set;
// Running is off the limit by more than max(0.5, 5 %) of it (below, the
// pool had no work for more rsyncs, which says nothing about more; above,
// rsyncs from a higher limit are still finishing); the throttle paused any
// group (the machine was busy for other reasons); the input is drained; or
// nothing finished. A skipped window neither wins nor loses a probe.
//
// # CPU-bound copies
//
// Where the CPUs prsync may use are saturated (Busy at least 90 % of CPUs)
// and its own rsyncs use at least half of them, many more rsyncs cannot get
// more CPU: they only queue for it, and cost switches, caches and memory. A
// local copy of small files on 2 CPUs is such a copy, and so is a pull whose
// daemon shares the machine. Waiting for the search to find this out on
// ±20 % windows takes far longer than the 10 s such a copy may last, so a
// measured window that shows it acts at once: the limit and best drop to the
// CPUs' worth, and that cap bounds every probe until a window with at least
// that many rsyncs running shows the CPUs with room again (Busy below 75 %).
//
// The CPUs' worth is PerCPU (4) rsyncs a CPU, not one. An rsync is a
// pipeline of processes that wait on each other (the sender, the generator,
// the receiver, and a daemon's process serving them on the same machine),
// so 2 rsyncs saturate 2 CPUs and yet 4 and 8 move more: each keeps more
// work in flight. On the bench machine's 2 CPUs, bench scenarios 3 (a local
// copy), 4 (/usr) and 10 (a pull of tiny files from a daemon on the machine)
// ran fastest at -j 8, and in 10 -j 2 took 1.4 × as long as the defaults' 8 (H59);
// a cap of one rsync a CPU made -j auto 1.09 to 1.20 × the defaults there.
// Below the cap the search decides, and its probes down must win by Z
// standard errors. A copy each of whose rsyncs fills a CPU (one that
// compresses big files) pays for that: up to 4 rsyncs a CPU where 1 would
// do, which the simulation puts at 0.84 to 0.92 × its best rate.
//
// The worth is also one more than the most rsyncs a full window ran without
// saturating the CPUs, if that is more. Such a window at best raises the cap
// to one more, and best with it (ReasonCPURoom): the idle CPU is what the
// copy lacks, and a search's windows of ±20 % cannot tell the 5 % to 10 %
// each step gains. A window that saturates the CPUs with no more rsyncs than
// the most seen with room lowers that count (the copy has grown heavier).
// The search then goes on below the cap, downwards first. The window of a
// change of the limit, or one in which the throttle paused groups, says
// nothing: the starts of new rsyncs, or a busy machine, fill the CPUs too.
//
// # Refusals
//
// A refusal acts at once, whatever else the window says. The count of
// sessions the far side accepted (at least Min) becomes a ceiling no probe
// may pass, and if the limit is above it, the limit drops to it or to best
// below it; a probe upwards that met the refusal goes on at the ceiling if
// that is above best. After Ceiling windows without a refusal the ceiling
// rises by one step, so the Tuner finds out carefully, one step per
// Ceiling windows, whether the far side has room again; a new refusal sets
// it anew.
//
// A refusal that accepted fewer than an earlier one did (top) cuts the
// ceiling below what the far side has shown it takes: another client held a
// slot for a while, or a daemon had not freed the slot of a session that
// ended (on a loaded machine its process exits late, and a refusal that comes
// late can make the pool forget how many ran together). Waiting Ceiling
// windows to find out kept a copy at a daemon's max connections = 3 at 1 or 2
// rsyncs to its end. Such a ceiling climbs back a step after Recover windows
// without a refusal, and best and the limit with it, up to the best the
// refusal cut (ReasonClimb), as a fixed -j climbs back; a refusal of such a
// step doubles the wait, up to Ceiling windows, and a step that holds halves
// it. Above top, only Ceiling windows raise it.
type Tuner struct {
	p    Policy
	logK float64

	limit  int // the limit set for the coming window
	best   int
	settle int // windows left to skip after a change of the limit

	// The search.
	probing  bool
	periodic bool // the probe is a periodic one, from a settled best
	walk     bool // the probe is the step after a periodic win
	cand     int  // the probed limit, while probing
	dir      int  // +1 or -1: direction of the next probe
	step     int  // size of the next probe
	moved    bool // this search has won a probe
	turned   bool // this search may no longer turn to the other direction
	retry    int  // offset from best of this search's largest unconvincing probe; 0 if none
	retried  bool // this search has had its second look
	hold     int  // windows left at best before the next probe
	holdLen  int  // the next hold
	nextDir  int  // direction of the next periodic probe

	base, probe ring // windows at best, and at the probed limit

	absDiff float64 // moving average of |Δ log rate| between measured windows in a row
	lastX   float64 // log rate of the previous window, if it was measured
	lastN   int     // limit of lastX; 0 if the previous window was not measured

	ceiling int // most sessions the far side accepts; 0 = no ceiling
	ceilAge int // windows since the ceiling was set or last rose
	// top is the most sessions the far side accepted at a refusal; a ceiling
	// below it climbs back to it (recover), and best with it up to cut, the
	// best before a refusal took the ceiling below top (0: nothing to recover)
	top, cut  int
	recWait   int  // windows without a refusal before a ceiling below top rises a step
	recovered bool // the ceiling in force was reached by such a step

	cpuCap int // most rsyncs the CPUs serve while the copy is CPU-bound; 0 = none
	// cpuRoom is the most rsyncs a measured window ran without saturating the CPUs, and
	// below every count a window saw saturate them: the CPU cap is never below one more
	cpuRoom int

	// neighbour is the windows left during which another client shares the far side, and
	// fair a fair share of what the far side says it takes (0: it said nothing): below it
	// the ceiling climbs back at every window, and meanwhile no higher
	neighbour, fair int
}

// Constants of the search; see Tuner.
const (
	startGrowth = 2.0  // factor of the first probe from Start
	growth      = 1.5  // factor of the other probes of a search
	rejectZ     = 1.0  // a search's probe loses once this many standard errors worse
	lastZ       = 0.25 // after MaxWindows, a probe upwards wins unless this many standard errors worse
	curseZ      = 0.5  // a won probe keeps at most linear scaling plus this many standard errors

	recent = 3 // windows at best compared with the earlier ones
	// neighbourWindows are the windows after another client's sessions refused one of
	// prsync's during which the ceiling climbs back no higher than a fair share
	neighbourWindows = 3
	minOlder         = 3     // earlier windows the comparison needs
	changeZ          = 3.5   // standard errors a shift of the rate needs to be a change
	changeMin        = 0.3   // and at least this shift of the log rate (35 %)
	changeShare      = 0.25  // or a shift of the files' share of the rate by this much
	minNoise         = 0.01  // floor of the measured noise
	noiseScale       = 0.886 // σ / E|x1 − x2|; see noise

	cpuBusy = 0.9  // a window is CPU-bound when this share of the CPUs is busy
	cpuOwn  = 0.5  // and prsync's rsyncs use at least this share of them
	cpuFree = 0.75 // the cap ends when a window has less than this share busy
)

// New returns a Tuner at p.Start, or the error of p.Validate.
func New(p Policy) (*Tuner, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	t := &Tuner{
		p:       p,
		logK:    math.Log(p.K),
		limit:   p.Start,
		best:    p.Start,
		settle:  p.Settle,
		holdLen: p.Hold,
		nextDir: +1,
		absDiff: p.Noise / noiseScale,
	}
	t.search(+1)
	t.step = t.stepFor(+1, startGrowth)
	return t, nil
}

// Limit returns the limit for the coming window: p.Start before the first
// Observe, then the last Decision's Limit.
func (t *Tuner) Limit() int { return t.limit }

// Observe takes the measurements of one window, run under the previous
// Decision's Limit, and returns the limit for the next one.
func (t *Tuner) Observe(o Observation) Decision {
	if o.Refused > 0 {
		return t.refused(o)
	}
	if t.ageCeiling() {
		t.lastN = 0
		return t.decision(ReasonClimb, 0)
	}
	if d, ok := t.cpuBound(o); ok {
		t.lastN = 0
		return d
	}
	if reason := t.skip(o); reason != "" {
		t.lastN = 0
		return t.decision(reason, 0)
	}
	rate := o.Bytes + t.p.FileCost*o.Files
	x, share := math.Log(rate), t.p.FileCost*o.Files/rate
	t.measureNoise(x, o.Limit)
	if t.probing {
		return t.judge(x, share)
	}
	return t.atBest(x, share)
}

// skip returns why window o says nothing about the limit, or "".
func (t *Tuner) skip(o Observation) string {
	if o.Limit != t.limit {
		t.settle = t.p.Settle
		return ReasonSettle
	}
	if t.settle > 0 {
		t.settle--
		return ReasonSettle
	}
	slack := slack(o.Limit)
	rate := o.Bytes + t.p.FileCost*o.Files
	switch {
	case o.Running > float64(o.Limit)+slack:
		return ReasonSettle
	case o.Paused > 0:
		return ReasonThrottled
	case o.Drained || !(o.Running >= float64(o.Limit)-slack):
		return ReasonIdle
	case !(o.Bytes >= 0 && o.Files >= 0 && rate > 0) || math.IsInf(rate, 1):
		return ReasonIdle
	}
	return ""
}

// atBest handles a window measured at the best limit.
func (t *Tuner) atBest(x, share float64) Decision {
	t.base.push(x, share)
	if up, ok := t.changed(); ok {
		t.base.keepNewer(recent)
		t.holdLen, t.hold = t.p.Hold, 0
		t.search(up)
		return t.restart()
	}
	if t.hold > 0 {
		t.hold--
		return t.decision(ReasonHold, 0)
	}
	if t.base.n < t.p.BaseWindows {
		return t.decision(ReasonHold, 0)
	}
	return t.startProbe("", 0)
}

// restart starts the search after a change of workload: at once if best has
// been measured for BaseWindows windows since, or once it has.
func (t *Tuner) restart() Decision {
	if t.base.n < t.p.BaseWindows {
		t.setLimit(t.best)
		return t.decision(ReasonWorkloadChanged, 0)
	}
	return t.startProbe(ReasonWorkloadChanged, 0)
}

// judge handles a window measured at the probed limit.
func (t *Tuner) judge(x, share float64) Decision {
	t.probe.push(x, share)
	px, _ := t.probe.mean(0, t.probe.n)
	bx, _ := t.base.mean(0, t.base.n)
	r := px - bx // log rate ratio, probe over best
	gain := r - float64(t.cand-t.best)*t.logK
	se := t.noise() * math.Sqrt(1/float64(t.probe.n)+1/float64(t.base.n))
	linear := math.Log(float64(t.cand) / float64(t.best))
	if margin := max(changeZ*se, changeMin); t.cand > t.best && r > linear+margin ||
		t.cand < t.best && r < linear-margin || t.periodic && t.cand < t.best && r > margin {
		dir := t.dir
		t.best, t.base, t.probing = t.cand, t.probe, false
		t.holdLen, t.hold = t.p.Hold, 0
		t.search(dir)
		return t.restart()
	}
	g := math.Expm1(gain)
	last := t.probe.n >= t.p.MaxWindows
	var win bool
	if t.periodic {
		win = t.probe.n >= t.p.MinWindows && gain > t.p.Z*se
	} else {
		z := t.p.ClimbZ
		if t.cand < t.best {
			z = t.p.Z
		}
		win = gain > z*se || last && !t.walk && t.cand > t.best && gain > -lastZ*se
	}
	switch {
	case win:
		if excess := r - linear - curseZ*se; excess > 0 && t.cand > t.best {
			t.probe.shift(-excess)
		}
		t.best, t.base, t.probing = t.cand, t.probe, false
		t.holdLen = t.p.Hold
		if t.periodic {
			// A periodic win may be noise: go on one step, as a search
			// that cannot turn, and search on only if that wins too.
			t.search(t.dir)
			t.turned, t.walk, t.step = true, true, t.p.StepAt(t.best)
		} else {
			t.moved, t.retry, t.walk = true, 0, false
			t.step = t.stepFor(t.dir, growth)
		}
		return t.startProbe("", g)
	case gain < -rejectZ*se || last:
		t.probing = false
		if !t.periodic && gain >= -rejectZ*se && abs(t.cand-t.best) > abs(t.retry) {
			t.retry = t.cand - t.best
		}
		t.periodic = false
		if t.next() {
			return t.startProbe("", g)
		}
		return t.endSearch(g)
	}
	return t.decision(ReasonHold, g)
}

// search sets up a new search from best, first in direction dir.
func (t *Tuner) search(dir int) {
	t.dir, t.moved, t.turned, t.periodic = dir, false, false, false
	t.retry, t.retried, t.walk = 0, false, false
	t.step = t.stepFor(dir, growth)
}

// stepFor returns the step from best in direction dir that multiplies the
// limit by f (up) or divides it by f (down), and at least StepAt(best).
func (t *Tuner) stepFor(dir int, f float64) int {
	b := float64(t.best)
	s := b * (1 - 1/f)
	if dir > 0 {
		s = b * (f - 1)
	}
	return max(t.p.StepAt(t.best), int(math.Round(s)))
}

// next moves the search on after a lost (or impossible) probe and reports
// whether it has another probe to try.
func (t *Tuner) next() bool {
	if !t.moved {
		if t.turned {
			return false
		}
		t.turned = true
		t.dir = -t.dir
		t.step = t.stepFor(t.dir, growth)
		return true
	}
	if s := t.p.StepAt(t.best); t.step > s {
		t.step = max(s, t.step/2)
		return true
	}
	return false
}

// startProbe sets the limit to the next probe of the search, or ends the
// search if no probe is possible. A reason, if given, overrides probe-up or
// probe-down.
func (t *Tuner) startProbe(reason string, gain float64) Decision {
	for {
		c := t.clamp(t.best + t.dir*t.step)
		if c != t.best {
			t.probing, t.cand = true, c
			t.probe.reset()
			if reason == "" {
				reason = ReasonProbeUp
				if c < t.best {
					reason = ReasonProbeDown
				}
			}
			t.setLimit(c)
			return t.decision(reason, gain)
		}
		if !t.next() {
			return t.endSearch(gain)
		}
	}
}

// endSearch returns to best and holds it until the next probe: the second
// look at an unconvincing probe, or a periodic one.
func (t *Tuner) endSearch(gain float64) Decision {
	t.probing = false
	t.hold = t.holdLen
	t.holdLen = min(2*t.holdLen, t.p.MaxHold)
	if t.retry != 0 && !t.retried {
		t.dir, t.step = sign(t.retry), abs(t.retry)
		t.moved, t.turned, t.periodic = false, true, false
		t.retry, t.retried = 0, true
	} else {
		t.setPeriodic()
	}
	reason := ReasonHold
	if t.limit != t.best {
		reason = ReasonRevert
	}
	t.setLimit(t.best)
	return t.decision(reason, gain)
}

// setPeriodic sets up the next probe as a periodic one: one step,
// alternately up and down.
func (t *Tuner) setPeriodic() {
	t.dir, t.nextDir = t.nextDir, -t.nextDir
	t.step = t.p.StepAt(t.best)
	t.moved, t.turned, t.periodic = false, true, true
}

// refused backs off to what the far side accepted and makes it the ceiling, by the
// pool's rule (refusal.Limit).
func (t *Tuner) refused(o Observation) Decision {
	t.lastN = 0
	c := refusal.Limit(o.Accepted, t.p.Min, t.p.Max)
	if o.Stated > 0 {
		// a far side that says what it takes leaves prsync a fair share of it to ask for,
		// whoever holds the slots now: its refused sessions ask again, and get one as a
		// neighbour's session ends
		c = max(c, min(refusal.FairShare(o.Stated), t.limit, t.p.Max))
	}
	t.learnTop(c, o)
	t.ceiling, t.ceilAge = c, 0
	switch {
	case t.limit <= c && t.best <= c:
		// The far side refused someone else's session, or one of ours
		// started under an older, higher limit: nothing is above it.
		return t.decision(ReasonRefused, 0)
	case t.probing && t.cand > c && c > t.best:
		// A probe upwards met the ceiling: it goes on there.
		t.cand = c
		t.probe.reset()
		t.setLimit(c)
		return t.decision(ReasonRefused, 0)
	}
	if t.best > c {
		t.best = c
		t.base.reset()
	}
	t.probing = false
	t.hold = t.p.Hold
	t.setPeriodic()
	t.setLimit(t.best)
	return t.decision(ReasonRefused, 0)
}

// cpuBound applies the CPU rule (see Tuner) to window o, and reports whether
// it decided the window.
func (t *Tuner) cpuBound(o Observation) (Decision, bool) {
	if !(o.CPUs > 0) || o.Limit != t.limit || t.settle > 0 || o.Paused > 0 {
		return Decision{}, false
	}
	full := o.Running >= float64(o.Limit)-slack(o.Limit)
	if o.Busy < cpuFree*o.CPUs && o.Running >= float64(t.cpuCap) {
		t.cpuCap = 0 // room with as many rsyncs as the cap, not only with fewer
	}
	if o.Busy < cpuBusy*o.CPUs {
		if full {
			t.cpuRoom = max(t.cpuRoom, o.Limit) // so many do not saturate them
			if t.cpuCap > 0 && t.cpuCap <= t.cpuRoom {
				t.cpuCap = min(t.cpuRoom+1, t.p.Max) // one more may be worth trying
				if !t.probing && o.Limit == t.best && t.best < t.cpuCap {
					return t.fillCPU(), true
				}
			}
		}
		return Decision{}, false
	}
	if o.Own < cpuOwn*o.CPUs {
		return Decision{}, false
	}
	if o.Limit <= t.cpuRoom {
		t.cpuRoom = o.Limit - 1 // the copy has grown heavier
	}
	return t.capCPU(o.CPUs)
}

// CPUBound applies the CPU rule at once, before any window has shown it: a chunk's rsync
// that ran alone was busy on a CPU all along (the opening's probe), so more rsyncs than the
// worth of cpus, the CPUs the copy may use, only queue for them. It reports whether the limit
// moved.
func (t *Tuner) CPUBound(cpus float64) (Decision, bool) {
	if !(cpus > 0) {
		return Decision{}, false
	}
	return t.capCPU(cpus)
}

// capCPU caps the limit and best at the CPUs' worth: PerCPU a CPU, rounded, or one more than
// the most rsyncs seen not to saturate them.
func (t *Tuner) capCPU(cpus float64) (Decision, bool) {
	c := max(t.p.Min, min(max(int(math.Round(cpus*t.p.PerCPU)), t.cpuRoom+1), t.p.Max))
	t.cpuCap = c
	if t.limit <= c && t.best <= c {
		return Decision{}, false // nothing above it: the window is judged as usual
	}
	if t.best > c {
		t.best = c
		t.base.reset()
	}
	t.probing = false
	t.holdLen, t.hold = t.p.Hold, 0
	t.search(-1)
	t.setLimit(t.best)
	return t.decision(ReasonCPUBound, 0), true
}

// fillCPU raises best and the limit to the CPU cap: the copy was shown CPU-bound, and its
// best left the CPUs idle a tenth or more, which only more rsyncs can use. The search then
// goes on from there, downwards first, as after capCPU: a probe down wins only on a gain.
func (t *Tuner) fillCPU() Decision {
	t.best = t.cpuCap
	t.base.reset()
	t.probing = false
	t.holdLen, t.hold = t.p.Hold, 0
	t.search(-1)
	t.setLimit(t.best)
	return t.decision(ReasonCPURoom, 0)
}

// learnTop takes the ceiling c that a refusal sets, before best moves. At or
// above top, c is what the far side takes now: the new top, with nothing to
// recover. Below it, the far side took more before: the ceiling climbs back
// (recover), and best with it up to what it is now; a refusal of a step back
// doubles the wait for the next.
func (t *Tuner) learnTop(c int, o Observation) {
	if o.Stated > 0 {
		t.fair = refusal.FairShare(o.Stated)
	}
	if o.Shared {
		// another client holds what the far side takes beyond prsync's sessions: above a
		// fair share of it, the ceiling climbs back only once no refusal has shown that
		// client for a while
		t.neighbour = neighbourWindows
	}
	if s := min(o.Stated, t.p.Max); s > max(c, t.top) {
		// the far side says it takes more than prsync's sessions: slots not freed yet, or
		// another client's; they may be prsync's again, a step at a time
		t.top, t.recWait = s, t.p.Recover
	}
	switch {
	case c >= t.top:
		t.top, t.cut, t.recWait = c, 0, t.p.Recover
	case t.recovered && !o.Shared:
		t.recWait = min(2*t.recWait, t.p.Ceiling)
	}
	if c < t.top {
		t.cut = max(t.cut, t.best)
	}
	t.recovered = false
}

// ageCeiling raises the ceiling by one step every p.Ceiling windows, and
// drops it once it reaches Max; a ceiling below top climbs back sooner
// (recover). It reports whether the limit rose with it.
func (t *Tuner) ageCeiling() bool {
	if t.ceiling == 0 {
		return false
	}
	t.ceilAge++
	defer func() { t.neighbour = max(t.neighbour-1, 0) }()
	if t.ceiling < t.top {
		return t.recover()
	}
	if t.ceilAge < t.p.Ceiling {
		return false
	}
	t.ceiling += t.p.StepAt(t.ceiling)
	t.ceilAge = 0
	if t.ceiling >= t.p.Max {
		t.ceiling, t.top = 0, 0
	}
	return false
}

// recover raises a ceiling below top a step once recWait windows have passed
// without a refusal, and best and the limit with it up to cut. A step that
// held (no refusal since the last) halves the wait for the next. It reports
// whether the limit rose.
func (t *Tuner) recover() bool {
	wait := t.recWait
	switch {
	case t.neighbour > 0 && t.ceiling >= t.fair:
		return false // a neighbour holds the rest: no more than a fair share meanwhile
	case t.ceiling < t.fair:
		wait = 1 // below a fair share of what the far side takes: ask again at every window
	}
	if t.ceilAge < wait {
		return false
	}
	if t.recovered {
		t.recWait = max(t.recWait/2, t.p.Recover)
	}
	t.ceiling = min(t.top, t.ceiling+t.p.StepAt(t.ceiling))
	t.ceilAge, t.recovered = 0, true
	b := t.clamp(min(t.cut, t.ceiling))
	if t.ceiling >= t.top {
		t.cut = 0
	}
	if b <= t.best || b <= t.limit {
		return false // nothing was cut below it, or a probe runs there
	}
	t.best, t.probing = b, false
	t.base.reset()
	t.setLimit(b)
	return true
}

// changed reports whether the last windows at best differ from the earlier
// ones beyond the noise, and which way to search first: +1 or -1.
func (t *Tuner) changed() (dir int, ok bool) {
	n := t.base.n
	if n < recent+minOlder {
		return 0, false
	}
	rx, rs := t.base.mean(n-recent, n)
	ox, os := t.base.mean(0, n-recent)
	se := t.noise() * math.Sqrt(1/float64(recent)+1/float64(n-recent))
	switch {
	case math.Abs(rs-os) > changeShare:
		return sign(rs - os), true
	case math.Abs(rx-ox) > max(changeZ*se, changeMin):
		return sign(rx - ox), true
	}
	return 0, false
}

// measureNoise updates the noise from two measured windows in a row at the
// same limit. It keeps a moving average, over about 30 pairs, of the
// absolute difference of their log rates; a difference counts for at most 3
// times the average, so that the jump of a change of workload or an odd
// outlier does not swamp it.
func (t *Tuner) measureNoise(x float64, limit int) {
	if t.lastN == limit {
		d := min(math.Abs(x-t.lastX), 3*t.absDiff)
		t.absDiff = max(t.absDiff+(d-t.absDiff)/16, minNoise/noiseScale)
	}
	t.lastX, t.lastN = x, limit
}

// noise returns the standard deviation σ of one window's log rate. For two
// independent windows E|x1 − x2| = 2σ/√π with normal noise and 2.31σ/√π
// with uniform noise, so σ ≈ 0.886 E|x1 − x2| for either.
func (t *Tuner) noise() float64 { return noiseScale * t.absDiff }

// slack is how far a window's average of rsyncs running may be off limit and still count
// as run at it: max(0.5, 5 %).
func slack(limit int) float64 { return max(0.5, 0.05*float64(limit)) }

// clamp bounds n to Min, Max, the ceiling and the CPU cap.
func (t *Tuner) clamp(n int) int {
	hi := t.p.Max
	if t.ceiling > 0 {
		hi = min(hi, t.ceiling)
	}
	if t.cpuCap > 0 {
		hi = min(hi, t.cpuCap)
	}
	return max(t.p.Min, min(n, hi))
}

// setLimit sets the limit for the coming window; a change starts the
// Settle windows.
func (t *Tuner) setLimit(n int) {
	if n != t.limit {
		t.limit = n
		t.settle = t.p.Settle
	}
}

func (t *Tuner) decision(reason string, gain float64) Decision {
	d := Decision{
		Limit:   t.limit,
		Reason:  reason,
		Best:    t.best,
		Gain:    gain,
		Noise:   t.noise(),
		Ceiling: t.ceiling,
		CPUCap:  t.cpuCap,
	}
	if t.base.n > 0 {
		x, _ := t.base.mean(0, t.base.n)
		d.Rate = math.Exp(x)
		d.Utility = math.Exp(x - float64(t.best)*t.logK)
	}
	return d
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

func sign[T int | float64](x T) int {
	if x < 0 {
		return -1
	}
	return +1
}
