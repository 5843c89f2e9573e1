// Package exec runs one rsync per chunk, up to a limit at once that can change while it runs.
package exec

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/prsync/prsync/internal/storage"
	"github.com/prsync/prsync/plan"
	"github.com/prsync/prsync/refusal"
	"github.com/prsync/prsync/rsync"
	"github.com/prsync/prsync/splitter"
	"github.com/prsync/prsync/throttle"
)

// ConfirmMode says how the paths of a chunk are proven after rsync exits non-zero.
type ConfirmMode int

const (
	// ConfirmStat compares an lstat of where each path lands in a local DEST with the source.
	ConfirmStat ConfirmMode = iota
	// ConfirmDryRun runs the same rsync again with --dry-run over the unproven paths: what
	// it would still change did not land.
	ConfirmDryRun
	// ConfirmNothing: a dry run, where nothing is meant to land.
	ConfirmNothing
)

// Pool runs rsyncs on chunks.
type Pool struct {
	Rsync string   // rsync binary
	Args  []string // options for every rsync, before the ones prsync manages
	Dest  string
	// Plan is the copy's planner: how many rsyncs run at once, which chunk starts next, how
	// the last ones are cut; the pool tells it what happens (chunks started and ended,
	// sessions refused). Nil: a planner of Jobs rsyncs at once, at most MaxJobs.
	Plan *plan.Planner
	// Jobs is the number of rsyncs allowed at once when Run starts, and the chunks cut and
	// not started that Run holds while every slot is busy; SetLimit changes the first.
	Jobs int
	// MaxJobs bounds SetLimit; 0 means Jobs (without Plan).
	MaxJobs int
	// Split, when set, cuts a chunk that waits once the input has ended, where the planner
	// says (plan.Planner.TailCuts), into parts with new IDs (splitter.Splitter.Split).
	Split      func(c *splitter.Chunk, cuts []int) []*splitter.Chunk
	Retries    int
	RetryDelay time.Duration // first backoff; doubled each retry, with jitter
	Grace      time.Duration // how long a cancelled rsync has between TERM and KILL
	Confirm    ConfirmMode
	// LeftOut is the first option in Args with which rsync may leave a listed path out and
	// still exit 0 (rsync.SkipOption), or "". Then each copy runs with -ii, so that rsync
	// names every path it considers, and a path it does not name is not proven by its exit:
	// it counts only if confirmed (a local DEST's lstat), else it fails.
	LeftOut string
	// Verify says which paths of each chunk a checksum pass checks once it has settled.
	Verify VerifyMode
	// Env is the environment of every rsync; nil means prsync's own.
	Env []string
	// SourceRemote: the chunks' Src is a remote source (pull mode), which no lstat can read.
	SourceRemote bool
	// BWArg, if set, gives the rsync --bwlimit value for a new rsync ("" for none) and
	// the same rate in bytes per second: the total bandwidth limit's share.
	BWArg func() (arg string, rate float64)
	// Transport is how a local copy runs (Direct or Pipe); Helper is the -e value of Pipe.
	Transport Transport
	Helper    string
	// TrustSender adds --trust-sender in the pipe form (rsync 3.2.5 and later): the
	// sender is the local rsync server the helper started on SRC, not a remote to check.
	TrustSender bool
	// Anchors: a pulling rsync reads its list with the chunk's directories among the paths
	// (rsync.Anchor), which keeps its check of the sender's names linear. Set it only where
	// rsync.AnchorsApply holds for the options.
	Anchors bool
	// Lists, when set, hands the chunks' lists of a push to their rsyncs through the far
	// side (RemoteLists).
	Lists *RemoteLists
	// DestWatch and SrcWatch, when set, say whether a local DEST and a local source are
	// still the storage they were at the start (storage.Watch): a run over a chunk starts
	// only while they are, and proves its paths only if they still are once it ended.
	DestWatch, SrcWatch *storage.Watch
	// Reports receives what happens, in order per chunk, from the pool's goroutines. It
	// may block (it hands the report to the one goroutine that owns the books).
	Reports func(Report)
	// Drain, when set, is what cancels the rsyncs that Run's ctx leaves running: once ctx
	// has ended no chunk starts, nor a retry or an isolating re-run; the rsyncs running, and
	// the passes that settle their chunks (confirming, verifying), go on until Drain ends
	// too (--max-duration and its grace). It must end whenever ctx ends for another reason
	// (prsync derives both from its signals' context).
	Drain context.Context

	once      sync.Once
	localDest string // absolute local DEST, or "" when it is remote

	slots *Slots

	mu      sync.Mutex
	procs   map[int]*proc
	closing bool // ctx ended: nothing may be paused any more
	abort   *AbortError
	killed  atomic.Bool
	// killedChunks are chunks whose rsync was killed: their temp files may be left in DEST
	killedChunks []*splitter.Chunk
	inflight     atomic.Int64 // bytes rsync logged in attempts still running
	loggedBytes  atomic.Int64 // file bytes rsync logged, every attempt, cumulative
	loggedFiles  atomic.Int64 // files rsync logged, every attempt, cumulative
	meter        ioMeter
	runQueue     atomic.Int64 // chunks Run holds that have not started, as of its last turn
	// lastStarted: the input has ended and every chunk but a root's has started
	lastStarted atomic.Bool
}

type proc struct {
	chunk    int
	pid      int
	files    int   // the paths of its run
	bytes    int64 // their bytes
	started  time.Time
	pausedBy reason        // who paused this group: the throttle, the bandwidth limit
	pausedAt time.Time     // when the throttle paused it
	bwCap    float64       // the --bwlimit it was started with, bytes per second; 0: none
	first    *atomic.Int64 // when its rsync logged its first line (Unix nanoseconds), 0 before
	lines    *atomic.Int64 // the out-format lines its rsync has logged
	// wasStopped: the group was stopped (SIGSTOP) at some time; its duration is not its work
	wasStopped bool
}

// spoke reports whether its rsync has logged a line: the far side accepted the session.
func (pr *proc) spoke() bool { return pr.lines != nil && pr.lines.Load() > 0 }

// AbortError says the run stopped early because rsync failed in a way that every
// later chunk would share (the destination is unreachable, full or refused).
type AbortError struct {
	Chunk int
	// Code is the exit code of the run: rsync's code that stopped it (rsync.StopCode), or
	// prsync's own (LostExitCode); 0 when none is known
	Code int
	// Exited is what rsync exited with, where that differs from Code
	Exited int
	Msg    string
	Hint   string
	// Lost: DEST or the source stopped being the storage it was at the start (storage.go);
	// Msg says which, and no rsync's exit is to blame
	Lost bool
}

// abortFor is the AbortError for an rsync of chunk id that ended as res and stopped the
// run.
func abortFor(id int, res result, dest string) *AbortError {
	e := &AbortError{Chunk: id, Code: rsync.StopCode(res.code, res.r), Msg: res.r.LastLine(res.stderr), Hint: rsync.Hint(res.code, res.r, dest)}
	if e.Code != res.code {
		e.Exited = res.code
	}
	return e
}

// ExitCode is the code a run that stopped for e ends with: its Code, or rsync's 23 (some
// paths were not transferred) when it has none.
func (e *AbortError) ExitCode() int {
	if e.Code > 0 {
		return e.Code
	}
	return 23
}

func (e *AbortError) Error() string {
	if e.Lost && e.Chunk == 0 {
		return e.Msg // seen once the chunks had run (CheckStorage)
	}
	if e.Lost {
		return fmt.Sprintf("chunk %d: %s", e.Chunk, e.Msg)
	}
	code := e.Code
	if e.Exited != 0 {
		code = e.Exited
	}
	return fmt.Sprintf("chunk %d: rsync exited with code %d: %s", e.Chunk, code, e.Msg)
}

// Aborted returns the error that stopped the run early, or nil.
func (p *Pool) Aborted() *AbortError {
	p.init()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.abort
}

func (p *Pool) init() {
	p.once.Do(func() {
		p.procs = make(map[int]*proc)
		if p.Plan == nil {
			p.Plan = plan.New(plan.Config{Jobs: p.Jobs, MaxJobs: p.MaxJobs})
		}
		p.MaxJobs = p.Plan.MaxJobs()
		p.slots = newSlots(p.Plan, p.report)
		if !rsync.IsRemote(p.Dest) {
			if d, err := filepath.Abs(p.Dest); err == nil {
				p.localDest = d
			}
		}
		if p.Lists != nil {
			p.Lists.ended = func(t time.Time, held bool) { // an upload's session, as the copy's
				p.mu.Lock()
				p.sessionEnded(t, held)
				p.mu.Unlock()
			}
		}
	})
}

// report hands a report on, and tells the planner of chunks started and ended.
func (p *Pool) report(r Report) {
	switch m := r.(type) {
	case ChunkStarted:
		p.Plan.Started(time.Now(), m.Chunk.ID, m.Attempt)
	case ChunkEnded:
		c, ok := p.Plan.Ended(time.Now(), plan.End{ID: m.Chunk.ID, Attempt: m.Attempt, Files: m.Chunk.Len(), Bytes: m.Chunk.Bytes,
			Seconds: m.Seconds, First: m.FirstLine, CPU: m.CPUSeconds, Paused: m.Paused,
			OK: m.Status == ChunkOK || m.Status == ChunkVanished, Settled: m.Outcomes != nil})
		defer func() {
			if ok { // after the chunk_end that taught it
				p.slots.wake()
				p.report(LimitChanged{Old: c.Old, New: c.New, Reason: c.Reason, Detail: c.Detail})
			}
		}()
	}
	if p.Reports != nil {
		p.Reports(r)
	}
}

// Run starts an rsync for each chunk from chunks as slots free, in the order the planner
// says (plan.Pick: the biggest first, a root's chunk last), until chunks is closed and every
// rsync has ended. While every slot is busy it holds up to Jobs chunks, so that the order can
// still rearrange them, and once the input has ended it cuts a waiting chunk for slots that
// would idle, as the planner says (cutTail). When ctx ends, running rsyncs are cancelled
// (TERM, then CONT, to the group; with Drain, once it ends too), and the chunks not started
// are dropped as not done, their reason saying why ctx ended (Stopped). When kill ends,
// running rsyncs get KILL at once.
func (p *Pool) Run(ctx, kill context.Context, chunks <-chan *splitter.Chunk) error {
	p.init()
	defer p.watch(ctx, kill)()
	// errgroup bounds the goroutines; the slots bound the rsyncs, because their limit
	// changes while goroutines run, which SetLimit cannot do.
	var g errgroup.Group
	g.SetLimit(2 * p.MaxJobs)
	var q waitingChunks
	var busy atomic.Int64 // chunks started whose goroutine has not ended
	window := max(p.Jobs, 1)
	in := chunks
	defer p.runQueue.Store(0)
	for in != nil || q.len() > 0 {
		if ctx.Err() != nil || p.Aborted() != nil {
			for _, c := range q.chunks {
				p.drop(ctx, c, false)
			}
			q.chunks = nil
			if in != nil {
				for c := range in {
					p.drop(ctx, c, false)
				}
			}
			break
		}
		if q.len() > 0 {
			p.slots.climb(time.Now())
		}
		if in == nil {
			p.cutTail(&q)
			if q.copies() == 0 {
				p.lastStarted.Store(true)
				p.clearListsEarly(ctx)
			}
		}
		if i := plan.Pick(q.views(), int(busy.Load()), in == nil); i >= 0 && p.slots.take() {
			p.start(ctx, &g, q.remove(i), &busy)
			continue
		}
		recv := in
		if q.copies() >= window {
			recv = nil // a root's chunk waits for the input's end: it holds no place
		}
		p.runQueue.Store(int64(q.len())) // before Run waits: Waiting reads it meanwhile
		p.slots.setWaiting(true)
		select {
		case c, ok := <-recv:
			if !ok {
				in = nil
			} else {
				q.add(c)
			}
		case <-p.slots.changed:
		case <-ctx.Done():
		}
		p.slots.setWaiting(false)
	}
	return g.Wait()
}

// clearListsEarly removes the run's lists from the far side (RemoteLists.BeginClear) in a
// slot of its own, beside the copy's last chunks, once every chunk but a root's has
// started and a slot is free; called at each chance: the last chunk started, one read
// its list, one ended. Otherwise they go before the root's chunk, or at the run's end.
func (p *Pool) clearListsEarly(ctx context.Context) {
	if p.Lists != nil && p.lastStarted.Load() && ctx.Err() == nil {
		p.Lists.BeginClear(ctx, p.slots.take, p.release)
	}
}

// start runs chunk c, its slot taken, in g.
func (p *Pool) start(ctx context.Context, g *errgroup.Group, c *splitter.Chunk, busy *atomic.Int64) {
	busy.Add(1)
	g.Go(func() error {
		defer p.slots.wake() // Run may pick a root's chunk once none runs
		defer busy.Add(-1)
		defer p.RecoverPanic()
		p.runChunk(ctx, c)
		return nil
	})
}

// cutTail cuts the biggest waiting chunk, once the input has ended, as the planner says
// (plan.Planner.TailCuts): for slots that would idle, or into parts of the share of each
// slot in the work left. The last chunks end together.
func (p *Pool) cutTail(q *waitingChunks) {
	if p.Split == nil {
		return
	}
	for {
		i := q.biggest()
		if i < 0 {
			return
		}
		c := q.chunks[i]
		parts := p.Split(c, p.Plan.TailCuts(c.Sizes, c.Bytes, q.copies(), p.slots.free(), p.work(q, i)))
		if len(parts) < 2 {
			return
		}
		q.chunks = append(q.chunks[:i], append(parts, q.chunks[i+1:]...)...)
	}
}

// work returns the rest of the work as the tail sees it: the chunks waiting but the one at
// skip, and the rsyncs running.
func (p *Pool) work(q *waitingChunks, skip int) []plan.Work {
	var out []plan.Work
	for i, c := range q.chunks {
		if i != skip && !c.Root {
			out = append(out, plan.Work{Files: c.Len(), Bytes: c.Bytes})
		}
	}
	now := time.Now()
	p.mu.Lock()
	for _, pr := range p.procs {
		out = append(out, plan.Work{Files: pr.files, Bytes: pr.bytes, Ran: now.Sub(pr.started).Seconds()})
	}
	p.mu.Unlock()
	return out
}

// watch arranges that running rsyncs get KILL when kill ends, and that waiters wake to
// close down when ctx ends; call the func it returns when the run is over.
func (p *Pool) watch(ctx, kill context.Context) (stop func()) {
	stopKill := context.AfterFunc(kill, p.KillAll)
	stopWake := context.AfterFunc(ctx, func() {
		p.mu.Lock()
		p.closing = true
		p.mu.Unlock()
		p.slots.wake()
	})
	return func() {
		stopKill()
		stopWake()
	}
}

// RecoverPanic ends every rsync group (TERM, then CONT) before a panic takes prsync down,
// so no rsync is left stopped or orphaned. Defer it at the top of every goroutine.
func (p *Pool) RecoverPanic() {
	if r := recover(); r != nil {
		p.TerminateAll()
		panic(r)
	}
}

// drop settles a chunk that will not run (again, when started).
func (p *Pool) drop(ctx context.Context, c *splitter.Chunk, started bool) {
	p.mu.Lock()
	ab := p.abort
	p.mu.Unlock()
	status, reason := rsync.NotDone, Stopped(ctx)+" before rsync started"
	switch {
	case ab != nil && ctx.Err() == nil && started:
		status, reason = rsync.Failed, "not retried: "+ab.Error()
	case ab != nil && ctx.Err() == nil:
		status, reason = rsync.Failed, "not attempted: "+ab.Error()
	case started:
		reason = Stopped(ctx) + " while waiting to retry"
	}
	p.report(ChunkDropped{Chunk: c, Status: status, Reason: reason, Started: started})
}

// Stopped says why ctx ended, as the reason of the paths it leaves not done: the text of
// the cause it was ended with (context.WithCancelCause), such as prsync's time window, or
// "interrupted" (a signal).
func Stopped(ctx context.Context) string {
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return err.Error()
	}
	return "interrupted"
}

// procCtx is the context that cancels an rsync started under ctx: Drain, when set.
func (p *Pool) procCtx(ctx context.Context) context.Context {
	if p.Drain != nil {
		return p.Drain
	}
	return ctx
}

// Procs returns the running rsync groups, for the throttle.
func (p *Pool) Procs() []throttle.Proc {
	p.init()
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]throttle.Proc, 0, len(p.procs))
	for _, pr := range p.procs {
		out = append(out, throttle.Proc{Chunk: pr.chunk, PID: pr.pid, Started: pr.started, Paused: pr.pausedBy&byThrottle != 0, PausedAt: pr.pausedAt})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Started.Before(out[j].Started) })
	return out
}

// Queued returns the number of rsyncs waiting for a slot (refused chunks queueing again,
// the deletion pass's), plus one while the throttle's closed gate keeps Run from starting
// the next chunk. Without that one, a gate closed just as the last running rsync ended
// looked to the throttle like a run with nothing waiting, and stayed closed for as long as
// the machine was busy (TestOpsCgroupThrottle, a busy loop in the cgroup, hung).
func (p *Pool) Queued() int {
	p.init()
	return p.slots.queuedNow()
}

// Waiting returns the number of chunks cut that have not started: those Run holds (the
// input read ahead of the slots, a root's chunk kept for last) and those waiting for a
// slot. -j auto's tuner reads 0, once the input has ended, as a pool that can no longer
// fill its limit. Queued, the throttle's view, counts Run's chunks only as one, while its
// gate keeps them waiting.
func (p *Pool) Waiting() int {
	p.init()
	return int(p.runQueue.Load()) + p.slots.queuedNow()
}

// Limit returns the number of rsyncs allowed at once.
func (p *Pool) Limit() int {
	p.init()
	return p.Plan.Limit()
}

// SetLimit changes the number of rsyncs allowed at once, within 1 and MaxJobs. Lowering
// it lets running rsyncs finish; it never stops one. It reports the change, with the rate
// measured behind it (bits per second; 0 when there is none).
func (p *Pool) SetLimit(n int, reason, detail string, rateBps float64) {
	p.init()
	p.slots.setLimit(n, reason, detail, rateBps)
}

// Sampled hands -j auto's measurements at one tick to the planner, which sets the limit once
// a window (plan.Planner.Sampled); apply false only measures (live control pinned the
// limit). It reports the change.
func (p *Pool) Sampled(now time.Time, s plan.Sample, apply bool) {
	p.init()
	if c, ok := p.Plan.Sampled(now, s, apply); ok {
		p.slots.wake()
		p.report(LimitChanged{Old: c.Old, New: c.New, Reason: c.Reason, Detail: c.Detail, RateBps: c.RateBps})
	}
}

// acquire takes a slot for a run that is not a chunk's first (the deletion pass); false
// when ctx ended or the run was aborted.
func (p *Pool) acquire(ctx context.Context) bool { return p.slots.acquire(ctx, false) }

func (p *Pool) release() { p.slots.release() }

// lowerForRefusal tells the far side's refusal of one more session, started at started
// (zero: now) and refused after took, to the planner, which holds new sessions back as it
// decides and brings the limit down to what the far side accepts.
func (p *Pool) lowerForRefusal(detail string, took time.Duration, started time.Time) refusal.Decision {
	now := time.Now()
	p.mu.Lock()
	accepted := p.acceptedNow(now)
	p.mu.Unlock()
	return p.slots.refused(now, detail, took, started, accepted)
}

// acceptedNow counts the rsyncs running that the far side has accepted; the caller
// holds p.mu.
func (p *Pool) acceptedNow(now time.Time) int {
	n := 0
	for _, pr := range p.procs {
		if p.Plan.Admitted(pr.started, pr.spoke(), now) {
			n++
		}
	}
	return n
}

// peakAccepted returns the most sessions that ran together, accepted, in the last
// minute, counting those running now; the caller holds p.mu.
func (p *Pool) peakAccepted(now time.Time) int {
	return p.Plan.Peak(p.acceptedNow(now), now)
}

// sessionEnded notes that an rsync ended, the far side having accepted its session (held)
// or not, and wakes the waiters once its slot has settled; the caller holds p.mu, and has
// taken the rsync out of p.procs.
func (p *Pool) sessionEnded(now time.Time, held bool) {
	if d := p.Plan.SessionEnded(now, held, p.acceptedNow(now)); d > 0 {
		p.slots.wakeAfter(d)
	}
}

// sessionAccepted notes that the far side took a session.
func (p *Pool) sessionAccepted() { p.Plan.Accepted() }

// TerminateAll sends TERM then CONT to every group.
func (p *Pool) TerminateAll() {
	p.init()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pr := range p.procs {
		pr.pausedBy = 0
		terminateGroup(pr.pid)
	}
}

// KillAll sends KILL to every group, and to any started from now on.
func (p *Pool) KillAll() {
	p.init()
	p.killed.Store(true)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pr := range p.procs {
		killGroup(pr.pid)
	}
}

// Killed reports whether KillAll ran or an rsync died of a signal, such as a KILL from
// outside (rsync temp files may be left behind).
func (p *Pool) Killed() bool {
	p.init()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.killed.Load() || len(p.killedChunks) > 0
}

func (p *Pool) markKilled(c *splitter.Chunk) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.killedChunks); n == 0 || p.killedChunks[n-1] != c {
		p.killedChunks = append(p.killedChunks, c)
	}
}
