package exec

import (
	"context"
	"math/rand/v2"
	"time"

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
}

func (p *Pool) runChunk(ctx context.Context, c *splitter.Chunk) {
	p.mu.Lock()
	p.queued--
	p.mu.Unlock()
	st := &chunkState{c: c, logged: make([]rsync.PathState, c.Len())}
	free := 0 // see retryAfter
	for attempt := 1; ; attempt++ {
		res := p.attempt(ctx, c, c.Entries, attempt, nil)
		st.remember(res.r)
		class := rsync.Classify(res.code, res.cancelled, res.r)
		retry, delay := p.retryAfter(class, attempt, &free, res.r.SessionLine)
		if retry && ctx.Err() == nil {
			p.report(p.endReport(c, attempt, res, "retrying"))
			if !p.wait(ctx, class, delay) {
				p.drop(ctx, c, true)
				return
			}
			continue
		}
		if class == rsync.Transient || class == rsync.Refused {
			class = rsync.Fatal
		}
		if p.finish(ctx, st, class, res, attempt) {
			p.release()
		}
		return
	}
}

// retryAfter says whether an attempt that ended as class is to be tried again, and
// after how long. free counts the chunk's refusals that prsync brought on itself
// (refusal.Decision.Retry): they do not use up --retries.
func (p *Pool) retryAfter(class rsync.Class, attempt int, free *int, session string) (bool, time.Duration) {
	if class != rsync.Refused {
		p.sessionAccepted()
		return class == rsync.Transient && attempt-*free <= p.Retries, backoff(p.RetryDelay, attempt-*free)
	}
	if d, ok := p.lowerForRefusal(session).Retry(*free, p.RetryDelay); ok {
		*free++
		return true, d
	}
	return attempt-*free <= p.Retries, backoff(p.RetryDelay, attempt-*free)
}

// wait sleeps before a retry and reports whether to go on (holding a slot). A chunk
// the far side refused gives its slot up meanwhile and queues for one again, under the
// lowered limit; any other keeps its slot, so that an unreachable destination is not
// tried by new chunks while this one waits.
func (p *Pool) wait(ctx context.Context, class rsync.Class, d time.Duration) bool {
	if class == rsync.Refused {
		p.release()
		if !sleepCtx(ctx, d) || !p.acquire(ctx) {
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

// remember keeps what an attempt logged for each path, and what it named unchanged.
func (s *chunkState) remember(r *rsync.Result) {
	for i, ps := range r.Paths {
		if ps.Logged || (ps.Seen && !s.logged[i].Logged) {
			s.logged[i] = ps
		}
	}
}

// finish settles every path of a chunk after its last attempt, verifies it when asked,
// and reports whether it still holds the chunk's slot.
func (p *Pool) finish(ctx context.Context, st *chunkState, class rsync.Class, res result, attempt int) bool {
	r := res.r
	for i := range r.Paths {
		if !r.Paths[i].Logged && !r.Paths[i].Seen && (st.logged[i].Logged || st.logged[i].Seen) {
			kind, reason, advice := r.Paths[i].Kind, r.Paths[i].Reason, r.Paths[i].Advice
			r.Paths[i] = st.logged[i]
			r.Paths[i].Kind, r.Paths[i].Reason, r.Paths[i].Advice = kind, reason, advice
		}
	}
	if class == rsync.Fatal {
		p.mu.Lock()
		if p.abort == nil {
			p.abort = &AbortError{Chunk: st.c.ID, ExitCode: res.code, Msg: res.r.LastLine(res.stderr), Hint: rsync.Hint(res.code, r, p.Dest)}
			p.cond.Broadcast()
		}
		p.mu.Unlock()
	}
	p.proveVanished(ctx, st.c, r, class) // see vanished.go
	s := rsync.Settle(r, res.code, class == rsync.Cancelled, p.LeftOut != "")
	var conf *Confirmation
	var vs []rsync.Verdict
	if len(s.Unproven) > 0 {
		t0 := time.Now()
		var method string
		vs, method = p.confirm(ctx, st.c, s.Unproven, res, class)
		conf = &Confirmation{Method: method, Paths: len(s.Unproven), Seconds: round3(time.Since(t0).Seconds())}
		for _, v := range vs {
			if v.Landed {
				conf.Landed++
			}
		}
	}
	outcomes, unexplained := s.Fold(vs)
	var ver *Verification
	held := true
	if p.Verify != VerifyOff && p.Confirm != ConfirmNothing && class != rsync.Cancelled && class != rsync.Fatal && ctx.Err() == nil {
		ver, held = p.verify(ctx, st.c, outcomes)
	}
	status := chunkStatus(class, outcomes, unexplained)
	ev := p.endReport(st.c, attempt, res, status)
	ev.Outcomes, ev.Unexplained, ev.Confirm, ev.Verify = outcomes, unexplained, conf, ver
	p.report(ev)
	return held
}

// chunkStatus names how a settled chunk ended.
func chunkStatus(class rsync.Class, outcomes []rsync.Outcome, unexplained string) string {
	if class == rsync.Cancelled {
		return "cancelled"
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
		return "failed"
	case failed > 0 || unexplained != "":
		return "partial"
	case vanished > 0:
		return "vanished"
	}
	return "ok"
}

func (p *Pool) endReport(c *splitter.Chunk, attempt int, res result, status string) ChunkEnded {
	ev := ChunkEnded{
		Chunk: c, Attempt: attempt, Status: status, ExitCode: res.code, Seconds: res.seconds,
		BytesLogged: res.logged, Error: res.stderr,
	}
	if res.code != 0 && res.code != 24 || status == "partial" {
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
