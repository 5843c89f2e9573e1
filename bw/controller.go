package bw

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"syscall"
	"time"
)

// GroupIO is one running rsync process group, as the Target reports it.
type GroupIO struct {
	ID      int       // the chunk's id, which PauseBW and ResumeBW take
	Started time.Time // when its rsync started; the oldest groups run first
	// Bytes is what the group has moved so far, cumulative. It must be
	// current to within a tick (as wchar in /proc/PID/io is): a counter
	// that moves in steps of a second would look like bursts that
	// overdraw the bucket. And it must count each byte once: the wchar of
	// every process in the group counts a byte twice when rsync writes it
	// into ssh and ssh into the socket, and the limit would be halved.
	Bytes int64
	// Cap is the --bwlimit its rsync runs with, in bytes per second (the
	// limit when it started, through RsyncArg), or 0 if it has none.
	Cap float64
	// PausedByOthers says that something else (the CPU throttle, live
	// control, Ctrl-Z) holds the group stopped.
	PausedByOthers bool
}

// Target is the pool of rsync groups whose total rate a Controller limits.
// Its methods are called from the goroutine running Controller.Run.
type Target interface {
	// Groups returns a snapshot of the running groups, paused or not.
	Groups() []GroupIO
	// PauseBW stops the group of chunk id for the bandwidth limit, as
	// kill(-pgid, SIGSTOP), or only notes the hold if it is stopped
	// already. An error wrapping syscall.ESRCH means the group has gone.
	PauseBW(id int) error
	// ResumeBW lets go of the bandwidth limit's hold on the group, and
	// continues it (SIGCONT) only if nothing else holds it stopped. An
	// error wrapping syscall.ESRCH means the group has gone.
	ResumeBW(id int) error
}

// Change reports that the limit in force changed.
type Change struct {
	At        time.Time
	Old, New  float64 // bytes per second; Unlimited (0) for no limit
	Unlimited bool    // New is Unlimited
	// Next is when the schedule changes the limit again; zero if never.
	Next time.Time
}

// Stats counts what a Controller did.
type Stats struct {
	Pauses int // groups paused for a tick or more
	Pulses int // groups run for part of a tick (see Pulse)
	// PausedSeconds is the time groups spent paused by the Controller, in
	// group-seconds (two groups paused for 1 s count 2 s), including
	// pauses still going on.
	PausedSeconds float64
	Bytes         int64 // bytes the groups moved, as measured, since Run started
	// Errors counts PauseBW and ResumeBW calls that failed for a reason
	// other than the group having gone.
	Errors int
}

// Controller holds the total rate of Target's rsync groups to the limit
// that Schedule sets: every Tick it reads the groups' byte counters, asks a
// State (see State for the design) which groups to run, and pauses and
// continues groups to match, by PauseBW and ResumeBW.
//
// Set the fields before Run; after that, change the schedule only with
// SetSchedule.
type Controller struct {
	Schedule Schedule
	Tick     time.Duration // 0 means DefaultTick
	Policy   Policy
	Target   Target
	// Now is the clock that Schedule is read by, and State decides by;
	// nil means time.Now. Ticks and pulses are timed by the time package.
	Now func() time.Time
	// OnChange, if set, is called from Run's goroutine when the limit in
	// force changes, after the tick that first applies it: the place to
	// report the change and give new rsyncs the new RsyncArg. It is not
	// called for the limit in force when Run starts.
	OnChange func(Change)

	mu        sync.Mutex
	known     bool // limit has been read by Run
	limit     float64
	paused    map[int]time.Time // groups paused by this controller, since when
	pausedFor time.Duration     // total pause time of groups no longer paused
	stats     Stats
}

// Run limits Target until ctx is done, then returns nil. It returns at
// once with an error if the controller is misconfigured.
//
// However Run returns, even by a panic in OnChange, it first continues
// every group it paused (by ResumeBW, so a group that something else
// holds stays stopped); if any of those fails, other than for a group
// that has gone, Run returns the errors. Run must not be called
// concurrently with itself.
func (c *Controller) Run(ctx context.Context) (err error) {
	tick := c.Tick
	switch {
	case c.Target == nil:
		return errors.New("bw: no target")
	case tick < 0:
		return fmt.Errorf("bw: tick %v must be positive", tick)
	case tick == 0:
		tick = DefaultTick
	}
	c.mu.Lock()
	c.paused, c.pausedFor, c.stats, c.known = map[int]time.Time{}, 0, Stats{}, false
	c.mu.Unlock()

	if ctx.Err() != nil {
		return nil
	}
	l := &loop{c: c, state: NewState(c.Policy), prev: map[int]int64{}}
	defer func() {
		if e := l.stop(); err == nil {
			err = e
		}
	}()
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	pulse := time.NewTimer(time.Hour)
	pulse.Stop()
	defer pulse.Stop()

	for {
		if d := l.tick(); d > 0 {
			pulse.Reset(d)
		}
		for waiting := true; waiting; {
			select {
			case <-ctx.Done():
				return nil
			case <-pulse.C:
				l.endPulses()
			case <-ticker.C:
				waiting = false
			}
		}
	}
}

// Limit returns the limit in force, in bytes per second, and whether there
// is none (then rate is Unlimited). Before Run has read the schedule, it
// is the schedule's limit now. It is safe to call at any time.
func (c *Controller) Limit() (rate float64, unlimited bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.known {
		return c.Schedule.At(c.clock())
	}
	return c.limit, c.limit == Unlimited
}

// SetSchedule replaces the schedule; the next tick applies it. It is safe
// to call at any time, from any goroutine.
func (c *Controller) SetSchedule(s Schedule) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.Schedule = s
}

// Stats returns what the controller has done since Run started. It is safe
// to call at any time.
func (c *Controller) Stats() Stats {
	now := c.clock()
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.stats
	total := c.pausedFor
	for _, at := range c.paused {
		total += now.Sub(at)
	}
	st.PausedSeconds = total.Seconds()
	return st
}

func (c *Controller) clock() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// loop is the state of one Run, owned by its goroutine.
type loop struct {
	c       *Controller
	state   *State
	prev    map[int]int64 // each group's cumulative bytes at the last tick
	pulsing []int         // groups running a pulse, to pause when it ends
	// lastTick is when the last tick read the groups: a group first seen that started
	// after it counts with all it moved
	lastTick time.Time
}

// tick measures, decides and acts once; it returns the length of the
// pulses it started, if any.
func (l *loop) tick() time.Duration {
	c := l.c
	l.endPulses() // in case a pulse outlived its tick
	now := c.clock()
	ios := c.Target.Groups()
	slices.SortFunc(ios, func(a, b GroupIO) int {
		return cmp.Or(a.Started.Compare(b.Started), cmp.Compare(a.ID, b.ID))
	})

	c.mu.Lock()
	sched := c.Schedule
	present := make(map[int]bool, len(ios))
	groups := make([]Group, len(ios))
	var moved int64
	for i, g := range ios {
		present[g.ID] = true
		delta := int64(0)
		if last, ok := l.prev[g.ID]; ok && g.Bytes > last {
			delta = g.Bytes - last
		} else if !ok && !l.lastTick.IsZero() && g.Started.After(l.lastTick) {
			delta = g.Bytes // started since the last tick: all it moved is new
		}
		l.prev[g.ID] = g.Bytes
		moved += delta
		_, paused := c.paused[g.ID]
		groups[i] = Group{ID: g.ID, Paused: paused, PausedByOthers: g.PausedByOthers, Bytes: delta, Cap: g.Cap}
	}
	for id := range l.prev {
		if !present[id] {
			delete(l.prev, id)
		}
	}
	for id, at := range c.paused {
		if !present[id] { // ended, or was cancelled, while paused
			c.pausedFor += now.Sub(at)
			delete(c.paused, id)
		}
	}
	c.stats.Bytes += moved
	l.lastTick = now
	rate, unlimited := sched.At(now)
	var change *Change
	if c.known && rate != c.limit {
		change = &Change{At: now, Old: c.limit, New: rate, Unlimited: unlimited, Next: sched.Next(now)}
	}
	c.known, c.limit = true, rate
	c.mu.Unlock()

	d := l.state.Decide(now, rate, groups)
	for _, id := range d.Pause {
		l.pause(id, now)
	}
	for _, id := range d.Resume {
		l.resume(id, now)
	}
	var longest time.Duration
	for _, p := range d.Pulse {
		if l.resume(p.ID, now) {
			l.pulsing = append(l.pulsing, p.ID)
			longest = max(longest, p.For)
		}
	}
	if len(d.Pulse) > 0 {
		c.mu.Lock()
		c.stats.Pulses += len(d.Pulse)
		c.mu.Unlock()
	}
	if change != nil && c.OnChange != nil {
		c.OnChange(*change)
	}
	return longest
}

// endPulses pauses the groups whose pulse has run.
func (l *loop) endPulses() {
	if len(l.pulsing) == 0 {
		return
	}
	now := l.c.clock()
	for _, id := range l.pulsing {
		l.pauseQuiet(id, now)
	}
	l.pulsing = l.pulsing[:0]
}

// pause pauses id, counting the pause.
func (l *loop) pause(id int, now time.Time) {
	if l.pauseQuiet(id, now) {
		c := l.c
		c.mu.Lock()
		c.stats.Pauses++
		c.mu.Unlock()
	}
}

// pauseQuiet pauses id and reports whether it did.
func (l *loop) pauseQuiet(id int, now time.Time) bool {
	c := l.c
	c.mu.Lock()
	_, already := c.paused[id]
	c.mu.Unlock()
	if already {
		return false
	}
	err := c.Target.PauseBW(id)
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case err == nil:
		c.paused[id] = now
		return true
	case !errors.Is(err, syscall.ESRCH):
		c.stats.Errors++
	}
	return false
}

// resume continues id if this controller paused it, and reports whether
// the group now runs (or was not paused by this controller).
func (l *loop) resume(id int, now time.Time) bool {
	c := l.c
	c.mu.Lock()
	since, ok := c.paused[id]
	c.mu.Unlock()
	if !ok {
		return true
	}
	err := c.Target.ResumeBW(id)
	gone := errors.Is(err, syscall.ESRCH)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil || gone {
		c.pausedFor += now.Sub(since)
		delete(c.paused, id)
	}
	if err != nil && !gone {
		c.stats.Errors++
	}
	return err == nil
}

// stop continues every group the controller paused, and returns the
// errors of those it could not continue, other than for groups gone.
func (l *loop) stop() error {
	c := l.c
	l.pulsing = nil
	now := c.clock()
	c.mu.Lock()
	ids := make([]int, 0, len(c.paused))
	for id := range c.paused {
		ids = append(ids, id)
	}
	c.mu.Unlock()
	slices.Sort(ids)
	var errs []error
	for _, id := range ids {
		err := c.Target.ResumeBW(id)
		gone := errors.Is(err, syscall.ESRCH)
		c.mu.Lock()
		if err == nil || gone {
			c.pausedFor += now.Sub(c.paused[id])
			delete(c.paused, id)
		}
		c.mu.Unlock()
		if err != nil && !gone {
			errs = append(errs, fmt.Errorf("bw: resume chunk %d: %w", id, err))
		}
	}
	return errors.Join(errs...)
}
