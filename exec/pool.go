// Package exec runs one rsync per chunk, up to a limit at once that can change while it runs.
package exec

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

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
	MaxJobs    int
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
	// Reports receives what happens, in order per chunk, from the pool's goroutines. It
	// may block (it hands the report to the one goroutine that owns the books).
	Reports func(Report)

	once      sync.Once
	localDest string // absolute local DEST, or "" when it is remote

	mu      sync.Mutex
	cond    *sync.Cond
	limit   int  // rsyncs allowed at once
	active  int  // slots taken: rsyncs running or about to, and their confirmations
	gate    bool // the throttle allows new rsyncs
	held    bool // job control stopped the run (Ctrl-Z)
	ctlHeld bool // live control paused the run
	procs   map[int]*proc
	queued  int
	waiting bool // Run waits for a free slot before it takes the next chunk
	closing bool // ctx ended: nothing may be paused any more
	abort   *AbortError
	killed  atomic.Bool
	// killedChunks are chunks whose rsync was killed: their temp files may be left in DEST
	killedChunks []*splitter.Chunk
	inflight     atomic.Int64 // bytes rsync logged in attempts still running
	loggedBytes  atomic.Int64 // file bytes rsync logged, every attempt, cumulative
	loggedFiles  atomic.Int64 // files rsync logged, every attempt, cumulative
	meter        ioMeter
	far          refusal.FarSide // what the far side's refusals taught; under mu
}

// ioMeter accumulates what the running groups moved, from periodic readings of what
// their processes wrote. A byte is written more than once on its way (the sender into
// the pipe, the receiver into the file; rsync into ssh, ssh into the socket), so each
// reading counts, per group, the one process that wrote the most since the last one.
type ioMeter struct {
	mu    sync.Mutex
	last  map[int]uint64 // pid -> bytes written at the last reading
	moved map[int]int64  // pgid -> bytes moved, cumulative, while the group lives
	total uint64
	// ended are groups that ended since the last BWGroups, with what they moved in all:
	// the readings miss what a group wrote after the last one, and its rsync's log says
	ended []BWGroup
}

// finish closes the books of a group that ended: it moved at least the file bytes its
// rsync logged; it is reported once more, ended, so the bandwidth limit charges the rest.
func (m *ioMeter) finish(g BWGroup, pgid int, logged int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	moved := m.moved[pgid]
	if logged > moved {
		m.total += uint64(logged - moved)
		moved = logged
	}
	delete(m.moved, pgid)
	g.Moved = moved
	m.ended = append(m.ended, g)
}

type proc struct {
	chunk    int
	pid      int
	started  time.Time
	pausedBy reason       // who paused this group: the throttle, the bandwidth limit
	pausedAt time.Time    // when the throttle paused it
	bwCap    float64      // the --bwlimit it was started with, bytes per second; 0: none
	spoke    *atomic.Bool // its rsync has logged a line: the far side accepted it
}

// AbortError says the run stopped early because rsync failed in a way that every
// later chunk would share (the destination is unreachable, full or refused).
type AbortError struct {
	Chunk    int
	ExitCode int
	Msg      string
	Hint     string
}

func (e *AbortError) Error() string {
	return fmt.Sprintf("chunk %d: rsync exited with code %d: %s", e.Chunk, e.ExitCode, e.Msg)
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
		if p.MaxJobs < p.limit {
			p.MaxJobs = p.limit
		}
		if !rsync.IsRemote(p.Dest) {
			if d, err := filepath.Abs(p.Dest); err == nil {
				p.localDest = d
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
// then CONT, to the group), and the chunks not started are dropped as not done. When
// kill ends, running rsyncs get KILL at once.
func (p *Pool) Run(ctx, kill context.Context, chunks <-chan *splitter.Chunk) error {
	p.init()
	defer p.watch(ctx, kill)()
	// errgroup bounds the goroutines; the pool's own gate (acquire) bounds the rsyncs,
	// because its limit changes while goroutines run, which SetLimit cannot do.
	var g errgroup.Group
	g.SetLimit(2 * p.MaxJobs)
	for {
		// wait for a free slot before taking a chunk, so that the chunks not yet taken
		// stay where the biggest-first order can still rearrange them
		p.waitFree(ctx)
		c, ok := <-chunks
		if !ok {
			break
		}
		p.mu.Lock()
		p.queued++
		p.mu.Unlock()
		if !p.acquire(ctx) {
			p.mu.Lock()
			p.queued--
			p.mu.Unlock()
			p.drop(ctx, c, false)
			continue
		}
		g.Go(func() error {
			defer p.RecoverPanic()
			p.runChunk(ctx, c)
			return nil
		})
	}
	return g.Wait()
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

// open reports whether a new rsync may start now; the caller holds p.mu.
func (p *Pool) open() bool {
	return p.gate && !p.held && !p.ctlHeld && p.active < p.limit && !p.far.HeldBack(time.Now())
}

// wakeAfter wakes the goroutines waiting for a slot after d.
func (p *Pool) wakeAfter(d time.Duration) {
	time.AfterFunc(d, func() {
		p.mu.Lock()
		p.cond.Broadcast()
		p.mu.Unlock()
	})
}

// sessionEnded notes that an rsync ended, and wakes the waiters once its slot has
// settled; the caller holds p.mu.
func (p *Pool) sessionEnded(now time.Time) {
	if d := p.far.Ended(now); d > 0 {
		p.wakeAfter(d)
	}
}

// sessionAccepted notes that the far side took a session.
func (p *Pool) sessionAccepted() {
	p.mu.Lock()
	p.far.Accepted()
	p.mu.Unlock()
}

// waitFree blocks until a slot is free, ctx has ended or the run was aborted.
func (p *Pool) waitFree(ctx context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.waiting = true
	for !p.open() && ctx.Err() == nil && p.abort == nil {
		p.cond.Wait()
	}
	p.waiting = false
}

// acquire takes a slot. It returns false when ctx ended or the run was aborted.
func (p *Pool) acquire(ctx context.Context) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for !p.open() && ctx.Err() == nil && p.abort == nil {
		p.cond.Wait()
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

// drop settles a chunk that will not run (again, when started).
func (p *Pool) drop(ctx context.Context, c *splitter.Chunk, started bool) {
	p.mu.Lock()
	ab := p.abort
	p.mu.Unlock()
	status, reason := rsync.NotDone, "interrupted before rsync started"
	switch {
	case ab != nil && ctx.Err() == nil && started:
		status, reason = rsync.Failed, "not retried: "+ab.Error()
	case ab != nil && ctx.Err() == nil:
		status, reason = rsync.Failed, "not attempted: "+ab.Error()
	case started:
		reason = "interrupted while waiting to retry"
	}
	p.report(ChunkDropped{Chunk: c, Status: status, Reason: reason, Started: started})
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
	p.limit = n
	p.cond.Broadcast()
	p.mu.Unlock()
	if n != old {
		p.report(LimitChanged{Old: old, New: n, Reason: reason, Detail: detail, RateBps: rateBps})
	}
}

// lowerForRefusal tells the far side's refusal of one more session to p.far, holds new
// sessions back as it decides, and brings the limit down to what the far side accepts.
func (p *Pool) lowerForRefusal(detail string) refusal.Decision {
	p.mu.Lock()
	now := time.Now()
	d := p.far.Refused(now, p.limit, p.active, p.acceptedNow(now))
	p.wakeAfter(d.Hold)
	old := p.limit
	if d.Limit >= old {
		p.mu.Unlock()
		return d
	}
	p.limit = d.Limit
	p.mu.Unlock()
	p.report(LimitChanged{Old: old, New: d.Limit, Reason: "refused", Detail: detail})
	return d
}

// acceptedNow counts the rsyncs running that the far side has accepted; the caller
// holds p.mu.
func (p *Pool) acceptedNow(now time.Time) int {
	n := 0
	for _, pr := range p.procs {
		if refusal.Admitted(pr.started, pr.spoke != nil && pr.spoke.Load(), now) {
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

// Progress is how much the pool has moved so far, cumulative: what rsync logged (files
// and their bytes, at the end of each file) and, where the system shows it, the bytes its
// processes wrote (IOBytes, which grows while a big file is still on its way). Refused
// counts the sessions the far side refused, and Accepted is what it accepted at the last
// refusal (refusal.FarSide.Refusals).
type Progress struct {
	LoggedFiles, LoggedBytes int64
	IOBytes                  int64
	IOMeasured               bool
	Refused                  int64
	Accepted                 int
}

// MeasureIO reads what the running groups have written since the previous call; call it
// often (ten times a second) for the figures to be close.
func (p *Pool) MeasureIO() {
	if !ioMeasured {
		return
	}
	pg := map[int]bool{}
	for _, pr := range p.Procs() {
		pg[pr.PID] = true
	}
	now := groupWrites(pg)
	m := &p.meter
	m.mu.Lock()
	defer m.mu.Unlock()
	best := map[int]uint64{}
	last := make(map[int]uint64, len(now))
	for pid, w := range now {
		last[pid] = w.bytes
		d := w.bytes // a process seen for the first time: all it wrote is new
		if prev, ok := m.last[pid]; ok {
			d = 0
			if w.bytes >= prev {
				d = w.bytes - prev
			}
		}
		best[w.pgid] = max(best[w.pgid], d)
	}
	if m.moved == nil {
		m.moved = map[int]int64{}
	}
	for g, d := range best {
		m.moved[g] += int64(d)
		m.total += d
	}
	m.last = last
}

// Moved returns the bytes each running group has moved since it started (by the leader's
// PID), as MeasureIO last read them.
func (p *Pool) Moved() map[int]int64 {
	m := &p.meter
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[int]int64, len(m.moved))
	for g, b := range m.moved {
		out[g] = b
	}
	return out
}

// Progress returns a snapshot.
func (p *Pool) Progress() Progress {
	p.meter.mu.Lock()
	io := p.meter.total
	p.meter.mu.Unlock()
	p.mu.Lock()
	refused, accepted := p.far.Refusals()
	p.mu.Unlock()
	return Progress{
		LoggedFiles: p.loggedFiles.Load(), LoggedBytes: p.loggedBytes.Load(),
		IOBytes: int64(io), IOMeasured: ioMeasured,
		Refused: refused, Accepted: accepted,
	}
}

// InFlight returns the file bytes that running rsyncs have logged so far.
func (p *Pool) InFlight() int64 { return p.inflight.Load() }

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

// Queued returns the number of chunks taken from the input and not started (waiting for
// a slot, or for a retry), plus one while the throttle's closed gate keeps Run from taking
// the next. Run takes a chunk only once a slot is free, so that the input can still
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
