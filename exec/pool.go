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
	// Jobs is the number of rsyncs allowed at once when Run starts; SetLimit changes it.
	Jobs int
	// MaxJobs bounds SetLimit; 0 means Jobs.
	MaxJobs int
	// ClimbBack: a limit the far side's refusals lowered climbs back towards the one asked
	// for (Jobs, or the last SetLimit) while sessions are accepted (refusal.FarSide.Climb).
	// -j auto leaves it off: its tuner has its own ceiling.
	ClimbBack  bool
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

	mu      sync.Mutex
	cond    *sync.Cond
	limit   int  // rsyncs allowed at once
	want    int  // the limit asked for (Jobs, SetLimit), which refusals may lower limit below
	active  int  // slots taken: rsyncs running or about to, and their confirmations
	gate    bool // the throttle allows new rsyncs
	held    bool // job control stopped the run (Ctrl-Z)
	ctlHeld bool // live control paused the run
	procs   map[int]*proc
	queued  int // rsyncs waiting in acquire for a slot
	// took is the chunks Run took from its channel and counted (in queued, then active),
	// for FreeAfter; one taken but not counted yet is in flight
	took int64
	// backoff are refused chunks that gave their slot up and wait to queue again (wait)
	backoff int
	// requeued are refused chunks waiting in acquire (counted in queued too): they go first
	requeued int
	wakeAt   time.Time // the latest wake-up waitSlot arranged
	waiting  bool      // Run waits for a free slot before it takes the next chunk
	closing  bool      // ctx ended: nothing may be paused any more
	abort    *AbortError
	killed   atomic.Bool
	// killedChunks are chunks whose rsync was killed: their temp files may be left in DEST
	killedChunks []*splitter.Chunk
	inflight     atomic.Int64 // bytes rsync logged in attempts still running
	loggedBytes  atomic.Int64 // file bytes rsync logged, every attempt, cumulative
	loggedFiles  atomic.Int64 // files rsync logged, every attempt, cumulative
	meter        ioMeter
	far          refusal.FarSide // what the far side's refusals taught; under mu
}

type proc struct {
	chunk    int
	pid      int
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
	// Code is rsync's exit code that stopped the run, or prsync's own (LostExitCode); 0
	// when none is known
	Code int
	Msg  string
	Hint string
	// Lost: DEST or the source stopped being the storage it was at the start (storage.go);
	// Msg says which, and no rsync's exit is to blame
	Lost bool
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
	return fmt.Sprintf("chunk %d: rsync exited with code %d: %s", e.Chunk, e.Code, e.Msg)
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
		p.cond = sync.NewCond(&p.mu)
		p.gate = true
		p.procs = make(map[int]*proc)
		p.limit = max(p.Jobs, 1)
		p.want = p.limit
		if p.MaxJobs < p.limit {
			p.MaxJobs = p.limit
		}
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

func (p *Pool) report(r Report) {
	if p.Reports != nil {
		p.Reports(r)
	}
}

// Run starts an rsync for each chunk from chunks, up to the limit at once, until chunks
// is closed and every rsync has ended. When ctx ends, running rsyncs are cancelled (TERM,
// then CONT, to the group; with Drain, once it ends too), and the chunks not started are
// dropped as not done, their reason saying why ctx ended (Stopped). When kill ends,
// running rsyncs get KILL at once.
func (p *Pool) Run(ctx, kill context.Context, chunks <-chan *splitter.Chunk) error {
	p.init()
	defer p.watch(ctx, kill)()
	// errgroup bounds the goroutines; the pool's own gate (acquire) bounds the rsyncs,
	// because its limit changes while goroutines run, which SetLimit cannot do.
	var g errgroup.Group
	g.SetLimit(2 * p.MaxJobs)
	var roots []*splitter.Chunk
	for {
		// wait for a free slot before taking a chunk, so that the chunks not yet taken
		// stay where the biggest-first order can still rearrange them
		p.waitFree(ctx)
		c, ok := <-chunks
		if !ok {
			break
		}
		if c.Root {
			roots = append(roots, c) // after every other chunk: see below
			continue
		}
		p.start(ctx, &g, c)
	}
	if err := g.Wait(); err != nil {
		for _, c := range roots {
			p.drop(ctx, c, false)
		}
		return err
	}
	// A root's rsync sets the root's mode and mtime, which the paths landing below it
	// change: it runs once the other chunks have ended.
	for _, c := range roots {
		p.start(ctx, &g, c)
	}
	return g.Wait()
}

// start runs chunk c in g once a slot is free, or settles it as not run.
func (p *Pool) start(ctx context.Context, g *errgroup.Group, c *splitter.Chunk) {
	if !p.acquireAs(ctx, false, true) {
		p.drop(ctx, c, false)
		return
	}
	g.Go(func() error {
		defer p.RecoverPanic()
		p.runChunk(ctx, c)
		return nil
	})
}

// watch arranges that running rsyncs get KILL when kill ends, and that waiters wake to
// close down when ctx ends; call the func it returns when the run is over.
func (p *Pool) watch(ctx, kill context.Context) (stop func()) {
	stopKill := context.AfterFunc(kill, p.KillAll)
	stopWake := context.AfterFunc(ctx, func() {
		p.mu.Lock()
		p.closing = true
		p.cond.Broadcast()
		p.mu.Unlock()
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

// Queued returns the number of rsyncs waiting for a slot (chunks taken from the input,
// refused ones queueing again, the deletion pass's), plus one while the throttle's closed
// gate keeps Run from taking the next. Run takes a chunk only once a slot is free, so that the input can still
// reorder it; without that one, a gate closed just as the last running rsync ended
// looked to the throttle like a run with nothing waiting, and stayed closed for as long
// as the machine was busy (TestOpsCgroupThrottle, a busy loop in the cgroup, hung).
func (p *Pool) Queued() int {
	p.init()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.waiting && !p.gate {
		return p.queued + 1
	}
	return p.queued
}

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
