package exec

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/prsync/prsync/refusal"
	"github.com/prsync/prsync/rsync"
	"github.com/prsync/prsync/splitter"
)

// One chunk's life in the pool: its attempts, their retries, and how it is settled.

// chunkState is what is known about each path of a chunk across attempts.
type chunkState struct {
	c *splitter.Chunk
	// logged keeps what earlier attempts logged, so that a path copied by the first
	// attempt counts as transferred when the retry finds it up to date
	logged []rsync.PathState
	// out is each path's outcome, set by the run that settled it (a path an isolating
	// re-run takes up is set again by that run)
	out     []rsync.Outcome
	attempt int // rsyncs started on the chunk: the last one's attempt number
	budget  int // extra rsync starts the chunk may still spend isolating (isolationBudget)
	// pending is the last run, whose chunk_end waits: an "isolating" one when another run
	// follows, else the chunk's last, with every outcome
	pending *ran
	// fatal: a run of the chunk stopped the whole run (Pool.abort)
	fatal       bool
	unexplained string
}

// ran is one run over paths of a chunk (with its retries), settled.
type ran struct {
	set        []int // the chunk's indexes it ran over, in order
	sub        *splitter.Chunk
	attempt    int
	res        result
	class      rsync.Class
	step       step
	unfinished []int  // the chunk's indexes neither proven nor settled by rsync's word
	line       string // what rsync failed with (LastLine)
	conf       *Confirmation
}

func (p *Pool) runChunk(ctx context.Context, c *splitter.Chunk) {
	if ctx.Err() != nil { // ended while the chunk took its slot: it does not start
		p.release()
		p.drop(ctx, c, false)
		return
	}
	defer func() {
		p.Lists.Done(c) // its list, if the far side holds it, is needed no more
		p.clearListsEarly(ctx)
	}()
	if c.Root {
		// the run's last chunk (plan.Pick): the lists go first, since removing their
		// directory changes the mtime of DEST's root, which this rsync sets
		p.Lists.Clear(ctx) // its error is Close's, which the run reports
	}
	st := &chunkState{c: c, logged: make([]rsync.PathState, c.Len()), out: make([]rsync.Outcome, c.Len()), budget: isolationBudget(c.Len())}
	all := make([]int, c.Len())
	for i := range all {
		all[i] = i
	}
	first, ok := p.runOnce(ctx, st, all, false)
	if !ok {
		p.drop(ctx, c, true)
		return
	}
	held := p.follow(ctx, st, first, 0)
	if p.finish(ctx, st, held) {
		p.release()
	}
}

// runOnce runs rsync over the paths set of the chunk, retries it as retryAfter says, and
// settles its paths (runSettle). rerun says that it is an isolating re-run. It reports
// false when the chunk gave its slot up while it waited to retry (interrupted, or the run
// stopped): then set is settled as not run.
func (p *Pool) runOnce(ctx context.Context, st *chunkState, set []int, rerun bool) (*ran, bool) {
	sub := st.c
	if len(set) != st.c.Len() {
		sub = &splitter.Chunk{ID: st.c.ID, Src: st.c.Src, Inputs: make([][]byte, len(set)), Entries: make([][]byte, len(set))}
		for k, i := range set {
			sub.Inputs[k], sub.Entries[k] = st.c.Inputs[i], st.c.Entries[i]
		}
	}
	free := 0 // see retryAfter
	for try := 1; ; try++ {
		p.flushPending(st)
		st.attempt++
		res := p.attempt(ctx, sub, sub.Entries, st.attempt, nil)
		if res.listUnread && ctx.Err() == nil {
			// the far side could not read the chunk's list: again at once, the list on
			// stdin (as every later rsync's), and no retry used up
			p.Lists.Unread(st.c, res.r.LastLine(res.stderr))
			ev := p.endReport(sub, st.attempt, res, ChunkRetrying)
			ev.Hint = listUnreadHint
			p.report(ev)
			try--
			continue
		}
		st.remember(set, res.r)
		class := rsync.Classify(res.code, res.cancelled, res.r)
		retry, delay := p.retryAfter(class, try, &free, res)
		if retry && ctx.Err() == nil && res.lost == nil {
			p.report(p.endReport(sub, st.attempt, res, ChunkRetrying))
			if !p.wait(ctx, class, delay) {
				if rerun {
					// the chunk's last chunk_end, with every outcome, is this attempt's
					p.notRun(ctx, st, set, " while waiting to retry")
					if ctx.Err() != nil {
						class = rsync.Cancelled
					}
					st.pending = &ran{set: set, sub: sub, attempt: st.attempt, res: res, class: class}
				}
				return nil, false
			}
			continue
		}
		if class == rsync.Transient || class == rsync.Refused {
			class = rsync.Fatal
		}
		rn := p.settleRun(ctx, st, &ran{set: set, sub: sub, attempt: st.attempt, res: res, class: class}, rerun)
		st.pending = rn
		return rn, true
	}
}

// listUnreadHint is the advice of a chunk_end whose rsync could not read its list on the
// far side.
const listUnreadHint = "the far side could not read the chunk's list (--remote-lists): the chunk runs again at once with its list on stdin, and so does every later rsync"

// follow runs what the policy (nextStep) said after rn: the unfinished paths again without
// the culprit, or each half of them, and so on down. depth is how many halvings led to
// rn. It reports whether the chunk still holds its slot.
func (p *Pool) follow(ctx context.Context, st *chunkState, rn *ran, depth int) bool {
	switch {
	case rn == nil:
		return true
	case rn.step == stepDrop:
		if len(rn.unfinished) == 0 {
			return true
		}
		st.budget--
		next, held := p.rerun(ctx, st, rn.unfinished)
		return held && p.follow(ctx, st, next, depth)
	case rn.step == stepHalve:
		st.budget -= 2
		a, b := halves(rn.unfinished)
		ra, held := p.rerun(ctx, st, a)
		if !held {
			p.notRun(ctx, st, b, " while waiting to retry")
			return false
		}
		rb, held := p.rerun(ctx, st, b)
		if !held {
			return false
		}
		if depth == 0 && ra != nil && rb != nil && ra.step == stepHalve && rb.step == stepHalve && ra.line == rn.line && rb.line == rn.line {
			// both halves fail as the whole chunk did: the cause is the chunk's (a setup
			// every chunk shares), not a path's; the unfinished paths fail with it
			return true
		}
		if !p.follow(ctx, st, ra, depth+1) {
			if rb != nil {
				p.notRun(ctx, st, rb.unfinished, " while waiting to retry")
			}
			return false
		}
		return p.follow(ctx, st, rb, depth+1)
	}
	return true
}

// rerun is runOnce of an isolating re-run, unless the run is over (interrupted, or
// stopped by another chunk): then set is settled as not run and the result is nil.
func (p *Pool) rerun(ctx context.Context, st *chunkState, set []int) (*ran, bool) {
	if ctx.Err() != nil || p.Aborted() != nil {
		p.notRun(ctx, st, set, " before its re-run")
		return nil, true
	}
	return p.runOnce(ctx, st, set, true)
}

// notRun settles paths whose re-run will not happen: not done after an interrupt (their
// reason why ctx ended, then when), failed when the run stopped early. They were not
// proven by the run before.
func (p *Pool) notRun(ctx context.Context, st *chunkState, set []int, when string) {
	o := rsync.Outcome{Status: rsync.NotDone, Reason: Stopped(ctx) + when}
	if ab := p.Aborted(); ab != nil && ctx.Err() == nil {
		o = rsync.Outcome{Status: rsync.Failed, Reason: "not retried: " + ab.Error(), Hint: ab.Hint}
	}
	for _, i := range set {
		st.out[i] = o
	}
}

// flushPending reports the chunk_end of the last run, as "isolating", before another
// run of the chunk starts.
func (p *Pool) flushPending(st *chunkState) {
	rn := st.pending
	if rn == nil {
		return
	}
	st.pending = nil
	ev := p.endReport(rn.sub, rn.attempt, rn.res, ChunkIsolating)
	ev.Confirm = rn.conf
	p.report(ev)
}

// retryAfter says whether an attempt that ended as class is to be tried again, and
// after how long. free counts the chunk's failures that prsync brought on itself: refusals
// (refusal.Decision.Retry), and races of its own rsyncs in DEST (ownRace). They do not use
// up --retries, up to refusal.MaxFree of them.
func (p *Pool) retryAfter(class rsync.Class, attempt int, free *int, res result) (bool, time.Duration) {
	if class != rsync.Refused {
		p.sessionAccepted()
		if class == rsync.Transient && ownRace(res) && *free < refusal.MaxFree {
			*free++
			return true, min(ownRaceDelay, p.RetryDelay)
		}
		return class == rsync.Transient && attempt-*free <= p.Retries, backoff(p.RetryDelay, attempt-*free)
	}
	took := time.Duration(res.seconds * float64(time.Second))
	if res.paused {
		took = 0 // a session stopped a while (throttle, Ctrl-Z) says nothing of how long a refusal takes
	}
	if d, ok := p.lowerForRefusal(res.r.SessionLine, took, res.started).Retry(*free, p.RetryDelay); ok {
		*free++
		return true, d
	}
	return attempt-*free <= p.Retries, backoff(p.RetryDelay, attempt-*free)
}

// ownRaceDelay is how long a chunk waits before it tries again after a race of prsync's own
// rsyncs in DEST: the other rsync has made the directory by then.
const ownRaceDelay = 100 * time.Millisecond

// ownRace reports whether an attempt failed only because another rsync, most likely one of
// prsync's own for another chunk, got to a directory of DEST first: both created it at once
// ("mkdir ... failed: File exists (17)", exit 11, which --mkpath to a daemon meets when the
// first sessions of a copy into a new directory start together), or it replaced a symlink
// there with a directory ("unlink ... Is a directory (21)"). The chunk's next attempt finds
// the directory made, so such a failure is prsync's doing and uses up no retry: with
// --retries 0, two sessions of one copy started together into a new remote directory failed
// a chunk (make test: TestNeighboursShareDaemon, 1 run in many).
func ownRace(res result) bool {
	return res.r != nil && (res.r.MkdirRace || res.r.ReplaceRace)
}

// wait sleeps before a retry and reports whether to go on (holding a slot). A chunk
// the far side refused gives its slot up meanwhile and queues for one again, under the
// lowered limit; any other keeps its slot, so that an unreachable destination is not
// tried by new chunks while this one waits.
func (p *Pool) wait(ctx context.Context, class rsync.Class, d time.Duration) bool {
	if class == rsync.Refused {
		p.release()
		p.slots.backingOff(1)
		slept := sleepCtx(ctx, d)
		p.slots.backingOff(-1)
		if !slept || !p.slots.acquire(ctx, true) {
			return false
		}
	} else if !sleepCtx(ctx, d) {
		p.release()
		return false
	}
	if p.Aborted() != nil {
		p.release()
		return false
	}
	return true
}

// remember keeps what an attempt over the paths set logged for each path, and what it
// named unchanged.
func (s *chunkState) remember(set []int, r *rsync.Result) {
	for k, ps := range r.Paths {
		i := set[k]
		if ps.Logged || (ps.Seen && !s.logged[i].Logged) {
			s.logged[i] = ps
		}
	}
}

// settleRun settles the paths of one run of a chunk after its last attempt, and says what
// follows (nextStep). rerun says that it is an isolating re-run.
func (p *Pool) settleRun(ctx context.Context, st *chunkState, rn *ran, rerun bool) *ran {
	res, class := rn.res, rn.class
	r := res.r
	if res.lost != nil {
		return p.lostRun(st, rn, res.lost)
	}
	for k := range r.Paths {
		i := rn.set[k]
		if !r.Paths[k].Logged && !r.Paths[k].Seen && (st.logged[i].Logged || st.logged[i].Seen) {
			kind, reason, advice := r.Paths[k].Kind, r.Paths[k].Reason, r.Paths[k].Advice
			r.Paths[k] = st.logged[i]
			r.Paths[k].Kind, r.Paths[k].Reason, r.Paths[k].Advice = kind, reason, advice
		}
	}
	pinned := len(r.Stop) > 0
	if class == rsync.Fatal && !pinned {
		p.stop(st, res)
	}
	p.proveVanished(ctx, rn.sub, r, class) // see vanished.go; r.Paths follow rn.sub, the run's paths
	s := rsync.Settle(r, res.code, class == rsync.Cancelled, p.LeftOut != "")
	s.Interrupted = Stopped(p.procCtx(ctx))
	var vs []rsync.Verdict
	landed := 0
	if len(s.Unproven) > 0 {
		t0 := time.Now()
		var method string
		vs, method = p.confirm(ctx, rn.sub, s.Unproven, res, class)
		rn.conf = &Confirmation{Method: method, Paths: len(s.Unproven), Seconds: round3(time.Since(t0).Seconds())}
		for k, v := range vs {
			if v.Landed {
				landed++
			} else {
				rn.unfinished = append(rn.unfinished, rn.set[s.Unproven[k]])
			}
		}
		rn.conf.Landed = landed
	}
	if res.code != 0 || len(s.Unproven) > 0 {
		// what lstat found of the source (vanished) and of DEST (landed) holds only if
		// both are still the storage they were
		if lost := p.storageLost(rn.sub, rn.sub.Entries, pass{}); lost != nil {
			return p.lostRun(st, rn, lost)
		}
	}
	outcomes, unexplained := s.Fold(vs)
	for k, o := range outcomes {
		st.out[rn.set[k]] = o
	}
	if st.unexplained == "" {
		st.unexplained = unexplained
	}
	rn.line = r.LastLine(res.stderr)
	rn.step = nextStep(runEnd{
		class: class, code: res.code, pinned: pinned, full: r.Full(), pathless: halvable(class, res.code, r),
		rerun: rerun, landed: landed, unfinished: len(rn.unfinished), budget: st.budget,
	})
	if pinned && (rn.step == stepFull || rn.step == stepSettle && class == rsync.Fatal) {
		p.stop(st, res)
	}
	return rn
}

// stop stops the whole run for a chunk's rsync that failed in a way every later chunk
// would share.
func (p *Pool) stop(st *chunkState, res result) {
	st.fatal = true
	p.mu.Lock()
	if p.abort == nil {
		p.abort = abortFor(st.c.ID, res, p.Dest)
		p.slots.stop()
	}
	p.mu.Unlock()
}

// finish reports a settled chunk, every path's outcome in one chunk_end after its last
// run, verifies it first when asked, and reports whether it still holds the chunk's slot.
func (p *Pool) finish(ctx context.Context, st *chunkState, held bool) bool {
	last := st.pending
	st.pending = nil
	outcomes := st.out
	var ver *Verification
	// a chunk that ended in --max-duration's grace is still verified (procCtx)
	if held && p.Verify != VerifyOff && p.Confirm != ConfirmNothing && last.class != rsync.Cancelled && !st.fatal && p.procCtx(ctx).Err() == nil {
		ver, held = p.verify(ctx, st.c, outcomes)
	}
	status := chunkStatus(last.class, outcomes, st.unexplained)
	ev := p.endReport(st.c, last.attempt, last.res, status)
	ev.Outcomes, ev.Unexplained, ev.Confirm, ev.Verify = outcomes, st.unexplained, last.conf, ver
	p.report(ev)
	return held
}

// chunkStatus names how a settled chunk ended.
func chunkStatus(class rsync.Class, outcomes []rsync.Outcome, unexplained string) ChunkStatus {
	if class == rsync.Cancelled {
		return ChunkCancelled
	}
	var proven, failed, vanished int
	for _, o := range outcomes {
		switch o.Status {
		case rsync.Transferred, rsync.UpToDate:
			proven++
		case rsync.Failed:
			failed++
		case rsync.Vanished:
			vanished++
		}
	}
	switch {
	case failed > 0 && proven == 0 && vanished == 0:
		return ChunkFailed
	case failed > 0 || unexplained != "":
		return ChunkPartial
	case vanished > 0:
		return ChunkVanished
	}
	return ChunkOK
}

func (p *Pool) endReport(c *splitter.Chunk, attempt int, res result, status ChunkStatus) ChunkEnded {
	ev := ChunkEnded{
		Chunk: c, Attempt: attempt, Status: status, ExitCode: res.code, Seconds: res.seconds, FirstLine: res.firstLine, CPUSeconds: res.cpu, Paused: res.paused,
		BytesLogged: res.logged, Error: res.stderr,
	}
	if rsync.ExitFailed(res.code) || status == ChunkPartial {
		ev.Hint = rsync.Hint(res.code, res.r, p.Dest)
	}
	return ev
}

func backoff(base time.Duration, attempt int) time.Duration {
	if base <= 0 {
		return 0 // --retry-delay 0
	}
	d := base << max(attempt-1, 0)
	if d > time.Minute || d <= 0 {
		d = time.Minute
	}
	return d/2 + rand.N(d) // jitter: 0.5x to 1.5x
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func round3(v float64) float64 { return float64(int64(v*1000+0.5)) / 1000 }
