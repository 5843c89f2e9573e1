package throttle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"syscall"
	"time"
)

// Proc is one running rsync process group, as the Target sees it.
type Proc struct {
	Chunk    int       // chunk id
	PID      int       // rsync's PID, which is also its process group id
	Started  time.Time // when the rsync started
	Paused   bool      // whether the group is stopped
	PausedAt time.Time // when it was stopped; zero unless Paused
}

// Target is the pool of rsync groups that a Controller throttles.
// Its methods are called from the goroutine running Controller.Run.
type Target interface {
	// Procs returns a snapshot of the running rsync groups, paused or not.
	Procs() []Proc
	// Queued returns the number of chunks waiting to start.
	Queued() int
	// Pause stops the group of chunk, as kill(-pgid, SIGSTOP). An error
	// wrapping syscall.ESRCH means the group has already gone.
	Pause(chunk int) error
	// Resume continues the group of chunk, as kill(-pgid, SIGCONT). An
	// error wrapping syscall.ESRCH means the group has already gone.
	Resume(chunk int) error
	// SetGate allows or forbids starting new chunks. The gate is assumed
	// open when Run starts.
	SetGate(open bool)
}

// Event reports one pause or resume of a group.
type Event struct {
	Action string // "suspend" or "resume"
	Chunk  int
	PID    int
	Sample Sample // the sample behind the action; on stop, the last sample
	// Reason is the Decision's reason: "cpu", "cgroup-cpu", "load",
	// "cpu-pressure" or "io" for a suspend, "" for a resume on a cool
	// machine, and ReasonStop for the resumes done when Run returns.
	Reason    string
	Running   int // groups running and not paused, after the action
	Suspended int // groups paused, after the action
}

// ReasonStop is the Event reason for the resumes done when Run returns.
const ReasonStop = "stop"

// Controller samples the machine every Interval, asks Decide what to do, and
// applies the decision to Target: it pauses or resumes at most one group per
// interval and opens or closes the gate for new chunks.
//
// It pauses the most recently started running group and resumes the group
// paused longest ago. A Pause or Resume error other than ESRCH leaves the
// group as it was, and the next interval decides again.
type Controller struct {
	Policy   Policy
	Interval time.Duration
	Sampler  Sampler
	Target   Target
	// OnEvent, if set, is called after each pause or resume.
	OnEvent func(Event)
	// OnSample, if set, is called with every sample, for progress reports.
	OnSample func(Sample)
	// OnNotice, if set, is called when every rsync has been held for HeldAfter, again at
	// most every HeldEvery while they stay held, and once when they run again after such
	// a notice (see Notice).
	OnNotice func(Notice)

	now func() time.Time // time.Now unless a test sets it

	mu          sync.Mutex
	paused      map[int]time.Time // when each group this controller paused and still tracks was paused
	suspensions int
	pausedFor   time.Duration // total pause time of groups no longer paused
}

// Run throttles Target until ctx is done, then returns nil. It returns early
// with an error if the controller is misconfigured or the Sampler fails.
//
// However Run returns, even by a panic in a callback, it first resumes every
// group it paused that is still running, emitting a resume event for each
// with Reason "stop", and opens the gate. Run must not be called
// concurrently with itself.
func (c *Controller) Run(ctx context.Context) error {
	if err := c.check(); err != nil {
		return err
	}
	c.mu.Lock()
	if c.paused == nil {
		c.paused = make(map[int]time.Time)
	}
	c.mu.Unlock()

	l := &loop{c: c, gate: true, held: heldWatch{after: HeldAfter, every: HeldEvery}}
	defer l.stop()

	ticker := time.NewTicker(c.Interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
		if err := l.tick(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
}

// Stats returns how many times a group was paused and the total time groups
// spent paused, in group-seconds (two groups paused for 1s count 2s),
// including pauses still going on. It is safe to call at any time,
// including while Run is running.
func (c *Controller) Stats() (suspensions int, secondsSuspended float64) {
	now := c.clock()
	c.mu.Lock()
	defer c.mu.Unlock()
	total := c.pausedFor
	for _, at := range c.paused {
		total += now.Sub(at)
	}
	return c.suspensions, total.Seconds()
}

func (c *Controller) check() error {
	if err := c.Policy.Validate(); err != nil {
		return fmt.Errorf("throttle: %w", err)
	}
	switch {
	case c.Interval <= 0:
		return fmt.Errorf("throttle: interval %v must be positive", c.Interval)
	case c.Sampler == nil:
		return errors.New("throttle: no sampler")
	case c.Target == nil:
		return errors.New("throttle: no target")
	}
	return nil
}

func (c *Controller) clock() time.Time {
	if c.now != nil {
		return c.now()
	}
	return time.Now()
}

// isPaused reports whether p is paused, by the Target's account or ours.
func (c *Controller) isPaused(p Proc) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.paused[p.Chunk]
	return ok || p.Paused
}

// markPaused starts tracking the pause of p.
func (c *Controller) markPaused(p Proc, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.paused[p.Chunk] = at
	c.suspensions++
}

// endPause stops tracking the pause of chunk, if it is tracked.
func (c *Controller) endPause(chunk int, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if since, ok := c.paused[chunk]; ok {
		c.pausedFor += at.Sub(since)
		delete(c.paused, chunk)
	}
}

// forgetGone ends the pauses of tracked groups missing from procs: they
// ended or were cancelled while paused.
func (c *Controller) forgetGone(procs []Proc, at time.Time) {
	present := make(map[int]bool, len(procs))
	for _, p := range procs {
		present[p.Chunk] = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for chunk, since := range c.paused {
		if !present[chunk] {
			c.pausedFor += at.Sub(since)
			delete(c.paused, chunk)
		}
	}
}

// tracked returns the chunks this controller has paused, oldest pause first.
func (c *Controller) tracked() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	chunks := make([]int, 0, len(c.paused))
	for chunk := range c.paused {
		chunks = append(chunks, chunk)
	}
	slices.SortFunc(chunks, func(a, b int) int {
		if d := c.paused[a].Compare(c.paused[b]); d != 0 {
			return d
		}
		return a - b
	})
	return chunks
}

// loop holds the state of one Run.
type loop struct {
	c          *Controller
	gate       bool
	lastSample Sample
	// stalledSince is when every group was last found paused with none running (zero
	// while some run); trickle is set after a starved resume, until the machine cools.
	stalledSince time.Time
	trickle      bool
	held         heldWatch // when to give a Notice
}

func (l *loop) tick(ctx context.Context) error {
	c := l.c
	s, err := c.Sampler.Sample(ctx)
	if err != nil {
		return fmt.Errorf("throttle: sample: %w", err)
	}
	l.lastSample = s
	if c.OnSample != nil {
		c.OnSample(s)
	}

	now := c.clock()
	procs := c.Target.Procs()
	c.forgetGone(procs, now)
	var running, paused []Proc
	for _, p := range procs {
		if c.isPaused(p) {
			paused = append(paused, p)
		} else {
			running = append(running, p)
		}
	}
	// stalled: nothing runs, and something waits, paused or queued behind the closed gate
	// (the last group may end just as it is paused, leaving only the gate)
	queued := c.Target.Queued()
	if len(running) > 0 || (len(paused) == 0 && (l.gate || queued == 0)) {
		l.stalledSince = time.Time{}
	} else if l.stalledSince.IsZero() {
		l.stalledSince = now
	}
	st := State{
		Running:   len(running),
		Suspended: len(paused),
		Queued:    queued,
		GateOpen:  l.gate,
		Starved:   c.Policy.MaxSuspend > 0 && !l.stalledSince.IsZero() && now.Sub(l.stalledSince) >= c.Policy.MaxSuspend,
		Trickle:   l.trickle,
	}
	d := Decide(c.Policy, st, s)
	switch {
	case d.Reason == ReasonStarved:
		l.trickle = true
	case d.Reason == "":
		l.trickle = false // the machine cooled
	}

	// Close the gate before pausing, so no new chunk starts in between;
	// open it after resuming, so paused work goes first.
	if !d.GateOpen {
		l.setGate(false)
	}
	nRun, nPaused := st.Running, st.Suspended // after the action
	switch d.Action {
	case Suspend:
		p := slices.MaxFunc(running, func(a, b Proc) int {
			if d := a.Started.Compare(b.Started); d != 0 {
				return d
			}
			return a.Chunk - b.Chunk
		})
		// On ESRCH the group has gone and the next snapshot will not
		// list it; on another error the next interval decides again.
		if err := c.Target.Pause(p.Chunk); err == nil {
			c.markPaused(p, now)
			nRun, nPaused = nRun-1, nPaused+1
			l.emit(Suspend, p, d.Reason, nRun, nPaused)
		}
	case Resume:
		p := slices.MinFunc(paused, func(a, b Proc) int {
			if d := c.pausedAt(a).Compare(c.pausedAt(b)); d != 0 {
				return d
			}
			return a.Chunk - b.Chunk
		})
		err := c.Target.Resume(p.Chunk)
		if err == nil || errors.Is(err, syscall.ESRCH) {
			c.endPause(p.Chunk, now)
			nPaused--
		}
		if err == nil {
			nRun++
			l.emit(Resume, p, d.Reason, nRun, nPaused)
		}
	}
	if d.GateOpen {
		l.setGate(true)
	}
	l.notice(now, d.Reason, s, nRun, nPaused, queued)
	return nil
}

// notice gives the interval's Notice, if one is due: held says that, after the action,
// nothing runs while something waits, paused or queued at the closed gate. That the
// rsyncs run again is said only while one does (not when the paused ones ended).
func (l *loop) notice(now time.Time, reason string, s Sample, running, suspended, queued int) {
	held := running == 0 && (suspended > 0 || (!l.gate && queued > 0))
	kind, d := l.held.observe(now, held)
	if l.c.OnNotice == nil || kind == noNotice || kind == runningNotice && running == 0 {
		return
	}
	l.c.OnNotice(Notice{Held: kind == heldNotice, For: d, Reason: reason, Sample: s, Policy: l.c.Policy})
}

// pausedAt returns when p was paused, by the Target's account or ours.
func (c *Controller) pausedAt(p Proc) time.Time {
	if !p.PausedAt.IsZero() {
		return p.PausedAt
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.paused[p.Chunk]
}

func (l *loop) setGate(open bool) {
	if l.gate != open {
		l.c.Target.SetGate(open)
		l.gate = open
	}
}

func (l *loop) emit(a Action, p Proc, reason string, running, suspended int) {
	if l.c.OnEvent == nil {
		return
	}
	l.c.OnEvent(Event{
		Action:    a.String(),
		Chunk:     p.Chunk,
		PID:       p.PID,
		Sample:    l.lastSample,
		Reason:    reason,
		Running:   running,
		Suspended: suspended,
	})
}

// stop resumes every group the controller paused that is still running and
// opens the gate. It signals first and emits events last, so a panicking
// OnEvent cannot leave a group stopped.
func (l *loop) stop() {
	c := l.c
	now := c.clock()
	procs := c.Target.Procs()
	c.forgetGone(procs, now)
	running, paused := 0, 0
	for _, p := range procs {
		if c.isPaused(p) {
			paused++
		} else {
			running++
		}
	}

	var resumed []Proc
	for _, chunk := range c.tracked() {
		i := slices.IndexFunc(procs, func(p Proc) bool { return p.Chunk == chunk })
		err := c.Target.Resume(chunk)
		if err == nil || errors.Is(err, syscall.ESRCH) {
			c.endPause(chunk, now)
		}
		if err == nil && i >= 0 {
			resumed = append(resumed, procs[i])
		}
	}
	c.Target.SetGate(true)
	l.gate = true

	for _, p := range resumed {
		running++
		paused--
		l.emit(Resume, p, ReasonStop, running, paused)
	}
}
