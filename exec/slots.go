package exec

import (
	"context"
	"time"

	"github.com/prsync/prsync/refusal"
	"github.com/prsync/prsync/rsync"
)

// The pool's slots: the live limit of rsyncs at once, and the gate a new one waits at.

// open reports whether a new rsync may start now; the caller holds p.mu. A chunk the far
// side refused, queueing again, goes before any other that waits (refused says which
// asks): without that, the new chunks taken meanwhile won the slots as they freed, and one
// refused in the first wave ran alone at the end (bench scenario 6: 854 paths waited 1.4 s
// of a 1.6 s run).
func (p *Pool) open(refused bool) bool {
	return p.gate && !p.held && !p.ctlHeld && p.active < p.limit && (refused || p.requeued == 0) && !p.far.HeldBack(time.Now())
}

// waitSlot waits once for a change that may free a slot; the caller holds p.mu. While the
// far side holds new sessions back it arranges a wake-up for when the hold ends, as it
// stands now: a refusal that doubles the settle after a session's end extends the hold past
// the wake-ups arranged before, and the waiters slept on with every slot free (make test:
// TestAutoSettlesAtConnectionLimit hung, 5 refused chunks waiting and nothing running).
func (p *Pool) waitSlot() {
	now := time.Now()
	if until := p.far.HeldUntil(); until.After(now) && until.After(p.wakeAt) {
		p.wakeAt = until
		p.wakeAfter(until.Sub(now) + time.Millisecond)
	}
	p.cond.Wait()
}

// wakeAfter wakes the goroutines waiting for a slot after d.
func (p *Pool) wakeAfter(d time.Duration) {
	time.AfterFunc(d, func() {
		p.mu.Lock()
		p.cond.Broadcast()
		p.mu.Unlock()
	})
}

// sessionEnded notes that an rsync ended, the far side having accepted its session (held)
// or not, and wakes the waiters once its slot has settled; the caller holds p.mu.
func (p *Pool) sessionEnded(now time.Time, held bool) {
	if d := p.far.Ended(now, held); d > 0 {
		p.wakeAfter(d)
	}
}

// sessionAccepted notes that the far side took a session.
func (p *Pool) sessionAccepted() {
	p.mu.Lock()
	p.far.Accepted()
	p.mu.Unlock()
}

// waitFree blocks until a slot is free, ctx has ended or the run was aborted. Meanwhile
// a limit that refusals lowered climbs back when its time comes.
func (p *Pool) waitFree(ctx context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.waiting = true
	for {
		if old, n, ok := p.climb(time.Now()); ok {
			p.mu.Unlock()
			p.report(LimitChanged{Old: old, New: n, Reason: "climb", Detail: "no refusal for a while: one step back towards -j"})
			p.mu.Lock()
			continue
		}
		if p.open(false) || ctx.Err() != nil || p.abort != nil {
			break
		}
		p.waitSlot()
	}
	p.waiting = false
}

// climb raises a limit that refusals lowered, when refusal.FarSide.Climb says so, and
// arranges a wake-up for the next step; the caller holds p.mu.
func (p *Pool) climb(now time.Time) (old, n int, ok bool) {
	if !p.ClimbBack || p.active < p.limit {
		return 0, 0, false // only a limit that holds work back climbs
	}
	old = p.limit
	n, ok = p.far.Climb(now, p.limit, p.want)
	if ok {
		p.limit = n
		p.cond.Broadcast()
		p.wakeForClimb(now)
	}
	return old, n, ok
}

// wakeForClimb wakes the waiters when the limit may climb next (each refusal and each
// step sets that time anew, and arranges its own wake-up); the caller holds p.mu.
func (p *Pool) wakeForClimb(now time.Time) {
	if p.ClimbBack && p.limit < p.want {
		p.wakeAfter(p.far.NextClimb().Sub(now) + time.Millisecond)
	}
}

// acquire takes a slot. It returns false when ctx ended or the run was aborted. While it
// waits it counts in Queued, whoever waits: a chunk of the copy, one the far side refused
// that queues again, or the deletion pass (which, uncounted, sat at a closed gate with
// nothing running for as long as the machine stayed busy: make test-busy hung in
// TestDeleteBlocked).
func (p *Pool) acquire(ctx context.Context) bool {
	return p.acquireAs(ctx, false, false)
}

// acquireAs is acquire; refused says the chunk was refused and queues again, ahead of the
// others (open), and taken that Run just took it from its channel: it is counted in took
// with the lock that counts it in queued (FreeAfter).
func (p *Pool) acquireAs(ctx context.Context, refused, taken bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if taken {
		p.took++
	}
	p.queued++
	defer func() { p.queued-- }()
	if refused {
		p.requeued++
		defer func() {
			if p.requeued--; p.requeued == 0 {
				p.cond.Broadcast() // the others may go now
			}
		}()
	}
	for !p.open(refused) && ctx.Err() == nil && p.abort == nil {
		p.waitSlot()
	}
	if ctx.Err() != nil || p.abort != nil {
		return false
	}
	p.active++
	return true
}

func (p *Pool) release() {
	p.mu.Lock()
	p.active--
	p.cond.Broadcast()
	p.mu.Unlock()
}

// Limit returns the number of rsyncs allowed at once.
func (p *Pool) Limit() int {
	p.init()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.limit
}

// SetLimit changes the number of rsyncs allowed at once, within 1 and MaxJobs. Lowering
// it lets running rsyncs finish; it never stops one. It reports the change, with the rate
// measured behind it (bits per second; 0 when there is none).
func (p *Pool) SetLimit(n int, reason, detail string, rateBps float64) {
	p.init()
	p.mu.Lock()
	n = max(1, min(n, p.MaxJobs))
	old := p.limit
	p.limit, p.want = n, n
	p.cond.Broadcast()
	p.mu.Unlock()
	if n != old {
		p.report(LimitChanged{Old: old, New: n, Reason: reason, Detail: detail, RateBps: rateBps})
	}
}

// lowerForRefusal tells the far side's refusal of one more session, started at started
// (zero: now) and refused after took, to p.far, holds new sessions back as it decides, and
// brings the limit down to what the far side accepts.
func (p *Pool) lowerForRefusal(detail string, took time.Duration, started time.Time) refusal.Decision {
	p.mu.Lock()
	now := time.Now()
	if started.IsZero() {
		started = now
	}
	p.far.RefusedAfter(took)
	d := p.far.RefusedSession(now, refusal.Session{Started: started, Limit: p.limit, Active: p.active,
		Accepted: p.acceptedNow(now), Stated: rsync.StatedLimit(detail)})
	p.wakeAfter(d.Hold)
	old := p.limit
	if d.Limit >= old {
		p.mu.Unlock()
		return d
	}
	p.limit = d.Limit
	p.wakeForClimb(now)
	p.mu.Unlock()
	p.report(LimitChanged{Old: old, New: d.Limit, Reason: "refused", Detail: detail})
	return d
}

// acceptedNow counts the rsyncs running that the far side has accepted; the caller
// holds p.mu.
func (p *Pool) acceptedNow(now time.Time) int {
	n := 0
	for _, pr := range p.procs {
		if p.far.Admitted(pr.started, pr.spoke(), now) {
			n++
		}
	}
	return n
}

// peakAccepted returns the most sessions that ran together, accepted, in the last
// minute, counting those running now; the caller holds p.mu.
func (p *Pool) peakAccepted(now time.Time) int {
	return p.far.Peak(p.acceptedNow(now), now)
}

// FreeAfter returns the slots free now, when sent chunks have been handed to Run in all:
// the limit less the slots taken, the chunks taken that wait for one, those Run has taken
// from its channel but not counted yet (a goroutine switch away), and the refused ones that
// wait to queue again; 0 while the throttle, job control or live control hold new rsyncs.
// Without the refused ones, the tail split could cut the last chunks for slots that the
// refused chunks took back a moment later: against a daemon with max connections = 3 (bench
// scenario 6, issue 23) the defaults' median went from 1.34 to 1.16 s with this, side by
// side with the build before.
func (p *Pool) FreeAfter(sent int64) int {
	p.init()
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.gate || p.held || p.ctlHeld {
		return 0
	}
	inFlight := int(max(0, sent-p.took))
	return max(0, p.limit-p.active-p.queued-p.backoff-inFlight)
}

// backingOff counts a refused chunk that gave its slot up and waits to queue again (d 1),
// and then stops counting it (d -1).
func (p *Pool) backingOff(d int) {
	p.mu.Lock()
	p.backoff += d
	p.mu.Unlock()
}

// Running reports, for chunk id's rsync while it runs, when it started, when it logged
// its first line (zero before) and how many lines it has logged; ok is false when none
// runs for it.
func (p *Pool) Running(id int) (started, first time.Time, lines int64, ok bool) {
	p.init()
	p.mu.Lock()
	defer p.mu.Unlock()
	pr := p.procs[id]
	if pr == nil {
		return time.Time{}, time.Time{}, 0, false
	}
	if pr.first != nil {
		if n := pr.first.Load(); n != 0 {
			first = time.Unix(0, n)
		}
	}
	if pr.lines != nil {
		lines = pr.lines.Load()
	}
	return pr.started, first, lines, true
}
