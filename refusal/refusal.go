// Package refusal learns, from the sessions it refuses, how many the far side admits.
package refusal

import "time"

// FarSide is what the far side's refusals of new sessions (an rsync daemon's max
// connections, sshd's MaxStartups) have taught: how many sessions it admits, how long new
// ones wait after a refusal, and how long a slot waits after a session ends. It is pure:
// its caller passes the time, and serialises the calls (the pool holds its own lock). The
// zero value has seen no refusal.
type FarSide struct {
	refused int64 // sessions refused, cumulative
	accepts int   // what it accepted at the last refusal
	// peak is the most sessions seen running together, accepted, at peakAt
	peak   int
	peakAt time.Time
	// holdUntil keeps new sessions back after a refusal: the far side is full now, and
	// a slot freed by the refused session must not go to the next chunk at once, to be
	// refused in turn; run counts the refusals since a session was accepted
	holdUntil time.Time
	run       int
	// runAt is when the last refusal that counted in run came: a session started before
	// it was started without its lesson, and its refusal is of the same burst
	runAt time.Time
	// settle keeps a slot idle this long after a session ends, once the far side has
	// refused a session at a limit it accepted before: it frees its slot a moment late
	settle  time.Duration
	lastEnd time.Time
	// settleFrom is when settle was first set: a session started before it started
	// without a settled slot
	settleFrom time.Time
	// ends are when the last sessions the far side had accepted ended (at most maxEnds,
	// none older than keepEnds): a refusal soon after one may be its slot, not freed yet
	ends []time.Time
	// the climb back (Climb): when the limit may rise next, the wait between steps, and
	// whether the limit in force was reached by a climb (a refusal then lengthens the wait)
	nextClimb time.Time
	climbWait time.Duration
	climbed   bool
	// slowest is the longest a refused session ran before the refusal (a loaded machine,
	// a far side slow to answer): a silent session counts as accepted only after twice that
	slowest time.Duration
	// what the far side stated at the last refusal (0: nothing), and whether that refusal
	// was another client's doing; neighbourAt is when one last was
	stated      int
	shared      bool
	neighbourAt time.Time
	// the slot prsync gives way with while it holds every one the far side states
	// (Yield): when it last did, and until when new sessions wait for it
	yieldedAt  time.Time
	yieldUntil time.Time
}

// Decision is what one refusal decides.
type Decision struct {
	// Limit is the most sessions to run from now on: what the far side accepts, and no
	// more than the limit in force when it refused.
	Limit int
	// Hold is how long new sessions wait from now.
	Hold time.Duration
	// Free says that prsync brought the refusal on itself, by running more sessions than
	// the far side takes or before it freed a slot, or that another client's sessions
	// filled the far side (Shared): see Retry.
	Free   bool
	Shared bool
}

const (
	// acceptedAfter is how long a session that logged nothing must have run to count as
	// accepted: a far side refuses within the handshake.
	acceptedAfter = time.Second
	// peakFor is how long the peak of sessions accepted together is remembered.
	peakFor = time.Minute
	// firstHold is the hold after a first refusal; it doubles with each refusal in a
	// row, up to maxHold.
	firstHold = 100 * time.Millisecond
	maxHold   = 2 * time.Second
	// sharedHold bounds the hold after a refusal that another client's sessions caused
	sharedHold = firstHold
	// fairClimb is the wait between steps of a limit below a fair share of a far side
	// another client fills
	fairClimb = 500 * time.Millisecond
	// NeighbourFor is how long after another client's sessions last refused one of
	// prsync's the limit climbs no higher than a fair share of the far side: four steps
	// of the client below its share (fairClimb), so that it climbs into the slots first.
	// It was 6 s, and a copy whose neighbour had ended ran on at its fair share that long
	// with the far side's other slots free (bench/neighbours.sh: 2 of 3 slots for the last
	// 2.2 s of a 6.5 s copy)
	NeighbourFor = 4 * fairClimb
	// minSettle and maxSettle bound settle once it is set.
	minSettle = 50 * time.Millisecond
	maxSettle = time.Second
	// MaxFree bounds the refusals of one chunk that do not count as retries.
	MaxFree = 10
	// firstClimb is how long after a refusal a limit it lowered first climbs a step back
	// towards what was asked, and the wait between steps while none is refused; a refusal
	// of a climbed limit doubles the wait, up to maxClimb, and a step taken halves it.
	firstClimb = 3 * time.Second
	maxClimb   = time.Minute
	// releaseLag is how long after an rsync of prsync's ends its slot may still be held on
	// the far side: an rsync daemon frees it when its own process for the session exits,
	// after the client's. On the bench machine (2 CPUs, a daemon on 127.0.0.1 with max
	// connections = 1) a session started right after the last one ended was refused 28
	// times in 40, 5 ms after 21, 20 ms after 4 and 50 ms after none.
	releaseLag = 250 * time.Millisecond
	// keepEnds and maxEnds bound the session ends remembered.
	keepEnds = 10 * time.Second
	maxEnds  = 64
	// yieldFor is how long a slot freed while prsync held every one the far side states
	// stays free for another client (Yield), at most once every yieldEvery: longer than a
	// client with no slot takes between asks (a refused chunk's 100 ms, then its rsync's
	// start and handshake: 130 to 160 ms apart in bench/neighbours.sh), and a lone copy
	// loses at most a 25th of one slot's time
	yieldFor   = 200 * time.Millisecond
	yieldEvery = 5 * time.Second
	// firstYield is how long after the far side first said what it takes a slot may first
	// be left free: a short copy (bench scenario 6: 1.5 s against max connections = 3)
	// pays nothing
	firstYield = 2 * time.Second
)

// Admitted reports whether the far side accepted a session started at started: its rsync
// logged a line (spoke), or it ran longer than a refusal takes: a second, or twice the
// slowest refusal seen (RefusedAfter), where refusals come later than that.
func (f *FarSide) Admitted(started time.Time, spoke bool, now time.Time) bool {
	return spoke || now.Sub(started) >= f.acceptWait()
}

func (f *FarSide) acceptWait() time.Duration { return max(acceptedAfter, 2*f.slowest) }

// RefusedAfter notes that a refused session ran d before its refusal; it is called before
// Refused. A refusal that came after Admitted's wait means that refused sessions were
// counted as accepted (on a busy machine a handshake can take seconds): the peak they
// made is forgotten, and from now on a silent session counts as accepted only after twice
// d. Without this, a wave of sessions all refused late would teach that the far side takes
// them all, and the limit would not come down.
func (f *FarSide) RefusedAfter(d time.Duration) {
	if d >= f.acceptWait() {
		f.peak = 0
	}
	f.slowest = max(f.slowest, d)
}

// Limit is the most sessions to run after a refusal, by what the far side accepted
// then: accepted, within lo and hi. The pool's limit and -j auto's ceiling both follow it.
func Limit(accepted, lo, hi int) int {
	return max(lo, min(accepted, hi))
}

// Peak takes a sample of the sessions running now that the far side accepted, and returns
// the most that ran together in the last minute.
func (f *FarSide) Peak(accepted int, now time.Time) int {
	if accepted >= f.peak || now.Sub(f.peakAt) > peakFor {
		f.peak, f.peakAt = accepted, now
	}
	return f.peak
}

// Refused learns from a session the far side refused at now, while limit sessions were
// allowed, active held a slot (the refused one among them) and accepted of those running
// had been accepted. Two figures bound what it accepts: the sessions besides the refused
// one (an upper bound, right when many start at once and the surplus is refused), and the
// most that ran together recently (a lower bound: a daemon frees a slot a moment after a
// session ends, so a new one may be refused while fewer than its max connections run).
// The limit comes down to what it accepts, never below 1. New sessions wait 100 ms,
// doubling with each refusal since a session was last accepted, up to 2 s: without the
// hold every chunk queued would take the refused one's slot in turn and be refused too.
// Refused knows nothing of the far side's own word on its limit: see RefusedSession.
func (f *FarSide) Refused(now time.Time, limit, active, accepted int) Decision {
	return f.RefusedSession(now, Session{Started: now, Limit: limit, Active: active, Accepted: accepted})
}

// Session is a refused session, and what prsync ran when the far side refused it.
type Session struct {
	Started  time.Time // when its rsync started
	Limit    int       // the sessions allowed
	Active   int       // the slots held, the refused session's among them
	Accepted int       // of the sessions running, those the far side had accepted
	// Stated is the most sessions the far side says it admits (rsync.StatedLimit), 0
	// when it says nothing
	Stated int
}

// RefusedSession is Refused for the session s. A session started before the last refusal
// that doubled the hold was started without that refusal's lesson: its refusal is of the
// same burst (a first wave of sessions, more than the far side takes, refused one by one
// as their handshakes end), and lowers the limit as any does but does not double the hold
// again. Without this, the five refusals of a first wave of eight at
// max connections = 3 held every slot back 1.6 s after the three accepted sessions ended.
//
// The limit the far side states (s.Stated: an rsync daemon's "max connections (3)") is a
// third bound, an upper one: a first wave of eight comes down to three at the first
// refusal, not one step per refusal. It also tells a slot not freed yet from another
// client's. The daemon frees a session's slot when its own process for it exits, a moment
// after prsync's rsync ended, so prsync's sessions that ended within releaseLag before the
// refused one started (Ended) may still have held theirs. When prsync's other sessions and
// those make up the stated limit, the limit stays at them (within the stated one), and
// slots settle after each end from then on. That is judged only for sessions started
// before slots settled (two started together as two others ended are often both refused,
// and a chunk's retry takes a slot the moment it frees as any chunk does). A session
// started on a settled slot and refused is another client's slot, or a far side slower to
// free one than settle (which the peak tells, as before), and lowers the limit as before:
// with sessions ending every few milliseconds an end within releaseLag is always there to
// find, and judging every refusal so kept the limit above what another client left while
// settle grew. Without any of this, -j 3 against max connections = 3 (what prsync's own
// warning advises) came down to 2 at the first session started just after another ended,
// then to 1, and ran so until the limit climbed back 3 s later.
//
// What prsync held when the refused session asked is what it runs now and the sessions the
// far side had accepted that ended since the refused one started: they held their slots
// while it asked. Counting only the sessions still running, a chunk of the tail started
// beside two others and refused just as they ended was judged another client's refusal with
// nothing of prsync's held, and the limit fell from 3 to 1 for the rest of the copy (bench
// scenario 6, run H59: 4 chunks of the tail one at a time, 1.8 s against 1.0 s).
func (f *FarSide) RefusedSession(now time.Time, s Session) Decision {
	started, limit, active, stated := s.Started, s.Limit, s.Active, s.Stated
	f.refused++
	run, runAt := f.run, f.runAt
	if f.run == 0 || !started.Before(f.runAt) {
		f.run++
		f.runAt = now
	}
	hold := min(firstHold<<min(f.run-1, 5), maxHold)
	peak := f.Peak(s.Accepted, now)
	// prsync's other sessions on the far side when it asked: those running now, and those
	// the far side had accepted that ended after it started (their slots were taken then)
	others := active - 1
	held := others + f.endedSince(started)
	f.accepts = max(1, held, peak)
	ran := peak >= limit // it ran as many lately
	// the refusal is of prsync's own making; by a slot not freed yet; by another client
	ours, lagged, shared := false, false, false
	if stated > 0 {
		ours = held >= stated
		unsettled := f.settle == 0 || started.Before(f.settleFrom)
		if l := f.endedSince(started.Add(-releaseLag)); !ours && unsettled && l > 0 {
			// the far side was full: others, up to l of ours not freed yet, and other
			// clients' sessions; once ours are freed prsync may run others+l
			lagged = true
			f.accepts = max(f.accepts, min(others+l, stated, limit))
		}
		if shared = !ours && !lagged && f.refused > 1; shared {
			// the far side was full, and not with prsync's sessions, ended or running:
			// another client holds the rest. prsync keeps what it holds, not what it ran
			// lately, and above a fair share one less: a neighbour that came later gets
			// its share, a step at each of prsync's sessions it beats to a slot
			f.accepts = max(1, min(held, FairShare(stated)))
			f.neighbourAt = now
		}
		f.accepts = min(f.accepts, stated)
		// not when prsync's own sessions fill the far side, nor when it takes fewer now
		// than it did, nor when another client holds the slots: no slot of an ended
		// session is in the way
		ran = ran && !ours && !shared && limit <= stated
	}
	if shared || ours {
		// another client fills the far side: its next free slot goes to whoever asks
		// first, so new sessions ask again soon, not after the doubled hold, nor does the
		// refusal double the next. Nor does a session refused because prsync's own filled
		// the far side: the limit now keeps it from starting more, and the far side is not
		// slow to free a slot. A first wave of 8 against max connections = 3, its rsyncs
		// started one by one on a busy machine (each after the refusal before), doubled the
		// hold five times: no session started for 1.6 s, and both slots freed meanwhile
		// stood idle 0.8 s (bench/neighbours.sh).
		hold = min(hold, sharedHold)
		f.run, f.runAt = run, runAt
	}
	f.holdUntil = now.Add(hold)
	switch {
	case ran:
		// a limit it accepted: the slot of a session that just ended is not free yet
		f.settle = min(max(2*f.settle, minSettle), maxSettle)
	case lagged:
		f.settle = max(f.settle, minSettle) // a session that started without settle
	}
	if f.settle > 0 && f.settleFrom.IsZero() {
		f.settleFrom = now
	}
	n := Limit(f.accepts, 1, limit)
	switch {
	case f.climbWait == 0:
		f.climbWait = firstClimb
	case f.climbed && !shared && n < limit:
		// the step back was one too many; a step another client's sessions refused is
		// tried again as soon: when that client ends, the slots are prsync's
		f.climbWait = min(2*f.climbWait, maxClimb)
	}
	// a refusal that keeps the limit (a slot of prsync's not freed yet, a limit it ran
	// lately) leaves a step standing: it did not refuse the step. Judged a refused step,
	// such a refusal a second after -j 4 climbed from 2 to 3 against a daemon raised to 4
	// doubled the wait, and the next step came 7 s after the first, not 3 s
	// (tests/adaptive_test.go TestRefusedLimitClimbsBack ended before it on a busy machine)
	f.climbed = f.climbed && n >= limit
	f.nextClimb = now.Add(f.climbWait)
	f.stated, f.shared = stated, shared
	if stated > 0 && f.yieldedAt.IsZero() {
		f.yieldedAt = now.Add(firstYield - yieldEvery) // as if it gave way a while ago
	}
	if stated > 0 && n < FairShare(stated) {
		// below a fair share of a far side that says it takes more: ask for a slot again
		// soon, so that one freed goes to prsync as often as to a neighbour
		f.nextClimb = now.Add(fairClimb)
	}
	// the far side took this many lately: a slot not freed yet, soon free
	return Decision{Limit: n, Hold: hold, Free: n < limit || ran || ours || lagged || shared, Shared: shared}
}

// endedSince counts the accepted sessions that ended after t.
func (f *FarSide) endedSince(t time.Time) int {
	n := 0
	for _, e := range f.ends {
		if e.After(t) {
			n++
		}
	}
	return n
}

// Accepted notes that the far side took a session: it ends the hold's doubling, and
// shortens settle.
func (f *FarSide) Accepted() {
	f.run = 0
	if f.settle > minSettle {
		f.settle = max(f.settle*7/8, minSettle)
	}
}

// Ended notes that a session ended at now, and returns how long its slot waits before the
// next session may take it (settle), or 0. held says that the far side had accepted it (it
// held a slot there), as a refused session had not.
func (f *FarSide) Ended(now time.Time, held bool) time.Duration {
	f.lastEnd = now
	if held {
		keep := f.ends[:0]
		for _, e := range f.ends {
			if now.Sub(e) <= keepEnds {
				keep = append(keep, e)
			}
		}
		if len(keep) >= maxEnds {
			keep = append(keep[:0], keep[len(keep)-maxEnds+1:]...)
		}
		f.ends = append(keep, now)
	}
	return f.settle
}

// Yield notes that one of prsync's sessions the far side had accepted ended at now, with
// others of them still running, and returns how long the freed slot stays free for another
// client (0: it does not). A copy that holds every session the far side states sees no
// refusal when another client comes, so it cannot tell that one waits; it retakes each slot
// its own session frees within milliseconds, and the other, asking every tenth of a second,
// got in only when it won that race: in a simulation of two copies against max
// connections = 3, the second started a second after the first, one took up to 2.6 × as
// long as the other (TestPolicyFairNeighbours), and with a real daemon the second sat with
// no slot for up to 4.7 s (bench/neighbours.sh). So, while it holds them all, it leaves the
// slot free yieldFor, at most once every yieldEvery and not within firstYield of the far
// side's first word on what it takes. A client that takes it makes prsync's next session a
// refusal by another's (Shared): prsync keeps a fair share from then on. A far side that
// never refused, or never said what it takes, is never given way to, nor one that takes a
// single session: there a lone copy would lose a 25th of its time.
func (f *FarSide) Yield(now time.Time, others int) time.Duration {
	if f.stated < 2 || others+1 < f.stated || now.Sub(f.yieldedAt) < yieldEvery {
		return 0
	}
	f.yieldedAt, f.yieldUntil = now, now.Add(yieldFor)
	return yieldFor
}

// HeldBack reports whether a new session waits at now, with active of prsync's slots taken
// and limit allowed: after a refusal, for a slot the far side has not freed yet, or for a
// slot left free for another client (Yield).
func (f *FarSide) HeldBack(now time.Time, active, limit int) bool {
	return now.Before(f.HeldUntil(active, limit))
}

// HeldUntil returns when HeldBack ends for a new session beside active of prsync's, limit
// allowed, as it stands now: a refusal's hold, the settle of the slots of sessions that
// ended lately, or a slot left free, whichever ends last (zero or past: not held back).
func (f *FarSide) HeldUntil(active, limit int) time.Time {
	until := f.holdUntil
	if e := f.SettledAt(active, limit); e.After(until) {
		until = e
	}
	if f.yieldUntil.After(until) {
		until = f.yieldUntil
	}
	return until
}

// SettledAt returns when a new session beside active of prsync's finds a slot on the far side
// that is not one of prsync's ended sessions' not freed yet: a slot settles for settle after
// its session ended, and the new session waits only while the slots taken and those still
// settling leave none of the limit's free. Before, every end held every new session back
// settle: against max connections = 3 the chunks of the tail, one running and two slots
// free for 0.1 s, started one at a time 50 to 65 ms after each end (bench scenario 6, H63).
// With no room beside the slots taken, it is the settle after the last end, as before.
func (f *FarSide) SettledAt(active, limit int) time.Time {
	if f.settle <= 0 {
		return time.Time{}
	}
	room := limit - active - 1 // the ended sessions' slots a new one may start beside
	if room < 0 {
		return f.lastEnd.Add(f.settle)
	}
	k := len(f.ends) - 1 - room // the ends are in order: the (room+1)th latest must settle
	if k < 0 {
		return time.Time{}
	}
	return f.ends[k].Add(f.settle)
}

// Refusals returns the sessions refused so far, and what the far side accepted at the
// last refusal (0 before any).
func (f *FarSide) Refusals() (refused int64, accepted int) {
	return f.refused, f.accepts
}

// Last returns what the far side stated at the last refusal (0: nothing), and whether
// another client's sessions, not prsync's, filled it then.
func (f *FarSide) Last() (stated int, shared bool) { return f.stated, f.shared }

// Retry says whether a chunk's refused session, after free such refusals that did not
// count as retries, is retried without using up one (up to MaxFree of them), and after
// how long: 100 ms (firstHold), at most retryDelay. It does not grow with free: the hold
// after a refusal, which every new session waits out, already doubles while refusals go
// on. It was 100 ms more for each, and the third free refusal of a chunk, at a slot the
// daemon had not freed yet, kept it back 300 ms while slots stood free (bench scenario 6).
//
// A refusal because another client's sessions fill the far side (Shared) is always retried
// so: it says nothing of the chunk, only that the neighbour holds the slots for now, and
// counted against --retries it failed chunks of a copy that shared a daemon with another
// (the simulated neighbours of package plan lost up to 39 chunks each).
func (d Decision) Retry(free int, retryDelay time.Duration) (time.Duration, bool) {
	if !d.Free || free >= MaxFree && !d.Shared {
		return 0, false
	}
	return min(firstHold, retryDelay), true
}

// Climb says whether a limit that refusals lowered climbs a step back at now, and to what:
// limit rsyncs run, want were asked for (-j). Once no session has been refused for the
// wait since the last refusal or step, the limit rises by a quarter (at least one), up to
// want. A far side that refuses again lowers it at once (Refused), and doubles the wait; a
// daemon whose max connections was raised (rsync --daemon reads rsyncd.conf for each
// connection) gets its sessions back a step every few seconds.
func (f *FarSide) Climb(now time.Time, limit, want int) (int, bool) {
	if f.refused == 0 || limit >= want || now.Before(f.nextClimb) {
		return limit, false
	}
	if f.Neighbour(now) {
		// a neighbour shares the far side: no step above a fair share of it until it has
		// refused none of prsync's sessions for NeighbourFor (NextClimb says when)
		if want = min(want, max(FairShare(f.stated), limit)); limit >= want {
			f.nextClimb = f.neighbourAt.Add(NeighbourFor)
			return limit, false
		}
	}
	if f.climbed {
		f.climbWait = max(f.climbWait/2, firstClimb) // the last step held
	}
	f.climbed = true
	f.nextClimb = now.Add(f.climbWait)
	if f.stated > 0 && limit+1 < f.stated {
		// still below what the far side says it takes: the next step comes soon, as a
		// step that another client's sessions refuse costs one refused session and no
		// doubled wait. A copy whose neighbour had ended climbed from 2 to 3 of 3 only 3 s
		// after its last step (bench/neighbours.sh)
		f.nextClimb = now.Add(fairClimb)
	}
	return min(want, limit+max(1, limit/4)), true
}

// Neighbour reports whether another client's sessions refused one of prsync's lately
// (NeighbourFor before now).
func (f *FarSide) Neighbour(now time.Time) bool {
	return !f.neighbourAt.IsZero() && now.Sub(f.neighbourAt) < NeighbourFor
}

// FairShare is the sessions a client of a far side that takes stated of them leaves it
// room for another: half, rounded up (at least 1).
func FairShare(stated int) int { return max(1, (stated+1)/2) }

// NextClimb returns when Climb may raise a lowered limit next; zero before any refusal.
func (f *FarSide) NextClimb() time.Time { return f.nextClimb }
