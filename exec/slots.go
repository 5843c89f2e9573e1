package exec

import (
	"context"
	"sync"
	"time"

	"github.com/prsync/prsync/plan"
	"github.com/prsync/prsync/refusal"
	"github.com/prsync/prsync/rsync"
)

// Slots are the pool's slots, the planner's counterpart: how many rsyncs may run at once
// (the planner's limit, which the far side's refusals lower and which climbs back), the
// slots taken, the runs waiting for one (a refused chunk queueing again goes first), the
// throttle's gate, the holds of the whole run (Ctrl-Z, live control), and the far side's
// hold on new sessions after a refusal. The planner decides; Slots applies its decisions
// to the goroutines that wait, wakes them when a decision may have changed (a slot freed,
// the limit moved, a hold ended), and reports each change of the limit.
type Slots struct {
	plan   *plan.Planner
	report func(Report)

	mu       sync.Mutex
	cond     *sync.Cond
	changed  chan struct{} // signalled with every wake-up, for the pool's Run loop
	active   int           // slots taken: rsyncs running or about to, and their confirmations
	gate     bool          // the throttle allows new rsyncs
	held     bool          // job control stopped the run (Ctrl-Z)
	ctlHeld  bool          // live control paused the run
	stopped  bool          // the run was aborted: nothing may start
	queued   int           // runs waiting in acquire for a slot
	requeued int           // refused chunks waiting in acquire (counted in queued too): they go first
	backoff  int           // refused chunks that gave their slot up and wait to queue again
	waiting  bool          // Run waits for a slot, with work to start
	wakeAt   time.Time     // the latest wake-up arranged for the far side's hold
	climbAt  time.Time     // the wake-up arranged for the limit's next climb
}

func newSlots(pl *plan.Planner, report func(Report)) *Slots {
	s := &Slots{plan: pl, report: report, gate: true, changed: make(chan struct{}, 1)}
	s.cond = sync.NewCond(&s.mu)
	return s
}

// broadcast wakes every goroutine waiting for a slot; the caller holds s.mu.
func (s *Slots) broadcast() {
	s.cond.Broadcast()
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// wake wakes the waiters.
func (s *Slots) wake() {
	s.mu.Lock()
	s.broadcast()
	s.mu.Unlock()
}

// open reports whether a new rsync may start now; the caller holds s.mu. A chunk the far
// side refused, queueing again, goes before any other that waits (refused says which
// asks): without that, the new chunks taken meanwhile won the slots as they freed, and one
// refused in the first wave ran alone at the end (bench scenario 6: 854 paths waited 1.4 s
// of a 1.6 s run).
func (s *Slots) open(now time.Time, refused bool) bool {
	return s.gate && !s.held && !s.ctlHeld && !s.stopped && (refused || s.requeued == 0) && s.plan.MayStart(now, s.active)
}

// waitSlot waits once for a change that may free a slot; the caller holds s.mu. While the
// far side holds new sessions back it arranges a wake-up for when the hold ends, as it
// stands now: a refusal that doubles the settle after a session's end extends the hold past
// the wake-ups arranged before, and the waiters slept on with every slot free (make test:
// TestAutoSettlesAtConnectionLimit hung, 5 refused chunks waiting and nothing running).
func (s *Slots) waitSlot() {
	s.arrangeHeld(time.Now())
	s.cond.Wait()
}

// arrangeHeld arranges a wake-up for the end of the far side's hold, when there is one and
// none is arranged for it yet; the caller holds s.mu. The hold depends on the slots taken
// (a slot settles after its session ends only when the limit leaves no other free), so it
// may end sooner than a wake-up arranged before: one is arranged for each end it says.
func (s *Slots) arrangeHeld(now time.Time) {
	if until := s.plan.HeldUntil(s.active); until.After(now) && !until.Equal(s.wakeAt) {
		s.wakeAt = until
		s.wakeAfter(until.Sub(now) + time.Millisecond)
	}
}

// wakeAfter wakes the goroutines waiting for a slot after d.
func (s *Slots) wakeAfter(d time.Duration) {
	time.AfterFunc(d, s.wake)
}

// acquire takes a slot. It returns false when ctx ended or the run was stopped. While it
// waits it counts in queued, whoever waits: a chunk the far side refused that queues
// again (refused: it goes first), or the deletion pass (which, uncounted, sat at a closed
// gate with nothing running for as long as the machine stayed busy: make test-busy hung in
// TestDeleteBlocked).
func (s *Slots) acquire(ctx context.Context, refused bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queued++
	defer func() { s.queued-- }()
	if refused {
		s.requeued++
		defer func() {
			if s.requeued--; s.requeued == 0 {
				s.broadcast() // the others may go now
			}
		}()
	}
	for !s.open(time.Now(), refused) && ctx.Err() == nil && !s.stopped {
		// a chunk waiting here is work the limit holds back, as one in Run's queue is:
		// once the input has ended and every chunk has started, the refused ones wait
		// only here, and without this the limit never climbed back (bench/neighbours.sh:
		// a copy sat at 1 rsync, 7 refused chunks waiting, for 2.4 s after its neighbour
		// had ended)
		if c, ok := s.climbLocked(time.Now()); ok {
			s.mu.Unlock()
			s.reportClimb(c)
			s.mu.Lock()
			continue
		}
		s.waitSlot()
	}
	if ctx.Err() != nil || s.stopped {
		return false
	}
	s.active++
	return true
}

// settled waits, a slot taken, until the slots of prsync's sessions that ended lately have
// settled for a new session beside the others it holds (plan.Planner.SettledAt), or ctx
// ends. acquire and take judged the slot settled when they took it, but a session may end
// in it before its rsync starts: a push's list upload runs in the slot of the chunk that
// needs it (RemoteLists.For), and a chunk waiting for another's upload starts as it ends.
// A daemon frees the upload's slot a moment after it ends, so two rsyncs started at once
// beside a third, at max connections = 3, had one refused; started after settle's wait, it
// was judged another client's refusal, and the limit fell to 2 for the copy's last chunks
// (bench scenario 6, H66: 4 runs in 15 at 1.22 to 1.51 s, against 0.84 to 1.09 s). A
// refusal's hold that began after the slot was taken is not waited for: such a slot is one
// the lowered limit no longer has, and waiting only put its refusal off (H66: 5 to 10 %
// longer).
func (s *Slots) settled(ctx context.Context) {
	for {
		s.mu.Lock()
		d := time.Until(s.plan.SettledAt(s.active - 1))
		s.mu.Unlock()
		if d <= 0 {
			return
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// take takes a slot for Run if one is open now, without waiting.
func (s *Slots) take() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.open(time.Now(), false) {
		return false
	}
	s.active++
	return true
}

// release gives a slot back.
func (s *Slots) release() {
	s.mu.Lock()
	s.active--
	s.broadcast()
	s.mu.Unlock()
}

// setWaiting says whether Run waits for a slot with work to start (Queued).
func (s *Slots) setWaiting(w bool) {
	s.mu.Lock()
	s.waiting = w
	if w {
		s.arrangeHeld(time.Now())
	}
	s.mu.Unlock()
}

// free returns the slots free now: the limit less the slots taken, the runs waiting for one,
// and the refused chunks that wait to queue again; 0 while the throttle, job control or live
// control hold new rsyncs. Without the refused ones, the tail could cut the last chunks for
// slots that the refused chunks took back a moment later: against a daemon with max
// connections = 3 (bench scenario 6, issue 23) the defaults' median went from 1.34 to
// 1.16 s with this, side by side with the build before.
func (s *Slots) free() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.gate || s.held || s.ctlHeld || s.stopped {
		return 0
	}
	return max(0, s.plan.Limit()-s.active-s.queued-s.backoff)
}

// backingOff counts a refused chunk that gave its slot up and waits to queue again (d 1),
// and then stops counting it (d -1).
func (s *Slots) backingOff(d int) {
	s.mu.Lock()
	s.backoff += d
	s.mu.Unlock()
}

// climbed is a step of the limit back up: from old to n.
type climbed struct{ old, n int }

// climb raises a limit that refusals lowered, when the planner says so, while work waits
// for a slot (Run's queue, or a chunk waiting in acquire), and arranges a wake-up for the
// next step.
func (s *Slots) climb(now time.Time) {
	s.mu.Lock()
	c, ok := s.climbLocked(now)
	s.mu.Unlock()
	if ok {
		s.reportClimb(c)
	}
}

// climbLocked is climb; the caller holds s.mu, and reports the step (reportClimb) once it
// has let go of it.
func (s *Slots) climbLocked(now time.Time) (climbed, bool) {
	if s.active < s.plan.Limit() {
		return climbed{}, false // only a limit that holds work back climbs
	}
	old, n, ok := s.plan.Climb(now)
	if ok {
		s.broadcast()
	}
	s.wakeForClimb(now)
	return climbed{old, n}, ok
}

func (s *Slots) reportClimb(c climbed) {
	s.report(LimitChanged{Old: c.old, New: c.n, Reason: "climb", Detail: "no refusal for a while: one step back towards -j"})
}

// wakeForClimb wakes the waiters when the limit may climb next, unless a wake-up is
// arranged for then already (each refusal and each step sets that time anew); the caller
// holds s.mu.
func (s *Slots) wakeForClimb(now time.Time) {
	if at := s.plan.NextClimb(); at.After(now) && !at.Equal(s.climbAt) {
		s.climbAt = at
		s.wakeAfter(at.Sub(now) + time.Millisecond)
	}
}

// setLimit sets the limit as asked (live control, -j auto), and reports the change, with the
// rate measured behind it (bits per second; 0 when there is none).
func (s *Slots) setLimit(n int, reason, detail string, rateBps float64) {
	old, now := s.plan.SetLimit(n)
	s.wake()
	if now != old {
		s.report(LimitChanged{Old: old, New: now, Reason: reason, Detail: detail, RateBps: rateBps})
	}
}

// refused tells the planner of the far side's refusal of a session started at started
// (zero: now) and refused after took, while accepted of prsync's sessions had been
// accepted; the planner lowers the limit to what the far side accepts and holds new
// sessions back as it decides.
func (s *Slots) refused(now time.Time, detail string, took time.Duration, started time.Time, accepted int) refusal.Decision {
	if started.IsZero() {
		started = now
	}
	s.mu.Lock()
	d, old, n := s.plan.Refused(now, refusal.Session{Started: started, Active: s.active, Accepted: accepted,
		Stated: rsync.StatedLimit(detail)}, took)
	s.wakeAfter(d.Hold)
	s.wakeForClimb(now) // a refusal that kept the limit may still move the next step
	s.mu.Unlock()
	if n < old {
		s.report(LimitChanged{Old: old, New: n, Reason: "refused", Detail: detail})
	}
	return d
}

// holding reports whether job control or live control holds the whole run.
func (s *Slots) holding() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held || s.ctlHeld
}

// paused reports whether live control holds the whole run.
func (s *Slots) paused() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ctlHeld
}

// setHolds changes the holds of the whole run and the gate with change, and wakes the
// waiters.
func (s *Slots) setHolds(change func(s *Slots)) {
	s.mu.Lock()
	change(s)
	s.broadcast()
	s.mu.Unlock()
}

// stop stops every new start: the run was aborted.
func (s *Slots) stop() { s.setHolds(func(s *Slots) { s.stopped = true }) }

// queuedNow returns the runs waiting for a slot, plus one while the throttle's closed gate
// keeps Run from starting the next chunk (Pool.Queued).
func (s *Slots) queuedNow() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.waiting && !s.gate {
		return s.queued + 1
	}
	return s.queued
}
