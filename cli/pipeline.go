package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prsync/prsync/event"
	"github.com/prsync/prsync/exec"
	"github.com/prsync/prsync/rsync"
	"github.com/prsync/prsync/splitter"
	"github.com/prsync/prsync/throttle"
	"github.com/prsync/prsync/tune"
)

// pipeline is the wiring of one run: input → splitter → pool, with the throttle beside
// it, and every report flowing one way into the reporter, which owns the books and writes
// the events.
type pipeline struct {
	r        *runner
	t0       time.Time
	sep      byte
	enc      *event.Encoder
	rep      *reporter
	pool     *exec.Pool
	sampler  *throttle.SystemSampler
	throttle *throttle.Controller
	control  *ctlHandler
	bw       bwControl // the total bandwidth limit; nil where it cannot be measured
	last     sampleBox

	controlSocket string
	dirs          *splitter.Dirs // the directories the paths touched, with --delete
	chunks        int            // the chunks the splitter made, once the input has ended

	inputErr      error // set before the input goroutine ends
	inputComplete bool  // the input was read to its end
}

func (r *runner) newPipeline() *pipeline {
	f := &r.f
	p := &pipeline{r: r, t0: time.Now(), sep: '\n', enc: event.NewEncoder(r.stdout)}
	if f.Null {
		p.sep = 0
	}
	p.enc.OnError = func(err error) {
		if errors.Is(err, syscall.EPIPE) {
			fmt.Fprintln(r.stderr, "prsync: warning: stdout closed; no more events are written")
			return
		}
		fmt.Fprintf(r.stderr, "prsync: warning: cannot write events (%v); no more events are written\n", err)
	}
	var failed io.WriteCloser
	if r.failed != nil {
		failed = r.failed
	}
	p.rep = newReporter(p.enc, r.stderr, p.sep, failed)
	p.pool = &exec.Pool{
		Rsync: r.rsync, Args: r.args, Dest: f.Dest, Jobs: r.jobs, MaxJobs: r.maxJobs,
		Retries: f.Retries, RetryDelay: f.RetryDelay, Grace: 10 * time.Second,
		Confirm: r.confirm, LeftOut: rsync.SkipOption(r.f.RsyncArgs), Verify: r.verify, Env: r.env, Transport: r.transport, Helper: r.helper, TrustSender: r.rsyncVersion.AtLeast(3, 2, 5), SourceRemote: r.srcRemote != "", Reports: func(m exec.Report) { p.rep.in <- m },
	}
	p.sampler = throttle.NewSystemSampler(r.policy, r.stderr, throttle.GroupsOf(p.pool))
	p.throttle = &throttle.Controller{
		Policy: r.policy, Interval: f.ThrottleInterval, Sampler: p.sampler, Target: p.pool,
		OnSample: p.last.set, OnEvent: func(e throttle.Event) { p.rep.in <- e },
	}
	p.rep.prog = newProgress(r.stderr, r.showProgress(), p.t0)
	p.rep.pool, p.rep.last, p.rep.t0, p.rep.every = p.pool, &p.last, p.t0, f.ThrottleInterval
	p.rep.jobsMin, p.rep.jobsMax = r.jobs, r.jobs
	p.rep.jobsAuto = r.tuner != nil
	p.rep.dryRun = f.DryRun
	if f.Delete {
		p.dirs = &splitter.Dirs{}
	}
	p.control = &ctlHandler{p: p}
	if b, err := newBWLimit(f.BWLimit, p.pool); err == nil { // checked in prepare
		p.bw, p.rep.bw = b, b
	}
	if f.MetricsFile != "" {
		p.rep.metrics = newMetrics(f.MetricsFile, p.rep)
		p.rep.metrics.suspendedSecs = func() float64 { _, s := p.throttle.Stats(); return s }
		if p.bw != nil {
			p.rep.metrics.bwLimit = p.bw.limit
		}
	}
	return p
}

// run copies, reports and returns the exit code.
func (r *runner) run() int {
	ctx, kill := r.sig.contexts()
	p := r.newPipeline()
	defer r.input.Close()
	defer p.pool.ContinueAll() // never leave a group stopped, whatever happens below
	closeControl := p.startControl()
	defer closeControl()
	r.sig.attach(p.pool, func() { p.rep.in <- statusRequest{by: "signal"} })
	defer r.sig.detach()
	p.emitStart()

	chunks, inputEnded := p.startInput(ctx)
	p.rep.inDone = func() bool { return isClosed(inputEnded) }
	repDone := make(chan struct{})
	go func() {
		defer p.pool.RecoverPanic()
		defer close(repDone)
		p.rep.loop()
	}()
	bg, bgStop := context.WithCancel(context.Background())
	var bgDone sync.WaitGroup
	if !r.f.NoThrottle {
		p.startThrottle(ctx, bg, &bgDone)
	} else {
		p.startSampling(bg, &bgDone)
	}
	if r.tuner != nil {
		p.startTuner(ctx, bg, &bgDone, inputEnded)
	}
	if b, ok := p.bw.(*bwLimit); ok {
		bgDone.Add(1)
		go func() {
			defer p.pool.RecoverPanic()
			defer bgDone.Done()
			b.run(bg, func(m any) { p.rep.in <- m })
		}()
	}

	// while every worker is busy, up to -j finished chunks wait, and the biggest starts first
	ordered := splitter.BiggestFirst(ctx, chunks, r.jobs, func(c *splitter.Chunk) {
		p.rep.in <- exec.ChunkDropped{Chunk: c, Status: rsync.NotDone, Reason: "interrupted before rsync started"}
	})
	p.pool.Run(ctx, kill, ordered)
	<-inputEnded
	del := p.deletePass(ctx, kill)
	bgStop()
	bgDone.Wait()
	p.pool.ContinueAll()
	closeControl() // no control request may reach the reporter once it stops
	r.sig.detach()
	close(p.rep.in)
	<-repDone
	if p.pool.Killed() {
		if n := p.pool.SweepTemp(); n > 0 {
			fmt.Fprintf(r.stderr, "prsync: removed %d rsync temp file(s) left by killed rsyncs\n", n)
		}
	}
	return p.finish(ctx.Err() != nil, del)
}

func (p *pipeline) emitStart() {
	r, f := p.r, &p.r.f
	p.enc.Emit(&event.Start{
		Version: version(), Schema: event.Schema, PID: os.Getpid(), Jobs: r.jobs, JobsAuto: r.tuner != nil, MaxJobs: r.maxJobs,
		Dest: f.Dest, Root: r.rootShown(),
		Rsync: r.rsync, RsyncVersion: r.rsyncVersion.String(), RsyncArgs: r.args, Null: f.Null, DryRun: f.DryRun,
		ChunkFiles: f.ChunkFiles, ChunkBytes: int64(f.ChunkBytes), Shard: f.shard, Shards: f.shards,
		QuickCheck: r.quick != nil, Transport: string(r.transport), SourceRemote: r.srcRemote != "", Sizes: f.Sizes,
		Cgroup: cgroupEvent(p.sampler.Source()), MaxSuspend: f.MaxSuspend.Seconds(), ControlSocket: p.controlSocket,
		BWLimit: p.bwShown(), Delete: f.Delete, Verify: f.Verify,
	})
}

// cgroupEvent is what the start event says of the cgroup found.
func cgroupEvent(c throttle.CgroupInfo) *event.Cgroup {
	if c.Version == 0 && c.PSI == "" {
		return nil
	}
	return &event.Cgroup{Version: c.Version, Path: c.Path, CPUs: c.CPUs, Usage: c.Usage, PSI: c.PSI,
		CPUPressureFile: c.CPUPressureFile, IOPressureFile: c.IOPressureFile}
}

// bwShown is the total bandwidth limit for the start event.
func (p *pipeline) bwShown() string {
	if p.bw == nil {
		return "off"
	}
	set, _ := p.bw.describe()
	return set
}

// bwControl is the total bandwidth limit as live control and the reporter see it.
type bwControl interface {
	set(spec string) (old, new string, err error)
	describe() (set, now string)
	limit() float64 // bytes per second in force now; 0 when unlimited
}

// rootShown is the source root for the start event: absolute when local, as given when remote.
func (r *runner) rootShown() string {
	if r.srcRemote != "" {
		return r.srcRemote
	}
	return r.root
}

// splitHooks batch what the splitter settles and pass it to the reporter once per block
// and before each chunk, so that the per-path hot path costs no channel send.
type splitHooks struct {
	b   *splitBatch
	out chan<- any
}

func (h *splitHooks) hooks() splitter.Hooks {
	h.b = &splitBatch{}
	return splitter.Hooks{
		Fresh:    func(_ []byte, size int64) { h.b.fresh++; h.b.freshBytes += size },
		Accepted: func(size int64) { h.b.accepted++; h.b.acceptedBytes += size },
		Empty:    func() { h.b.empty++ },
		Settled: func(in []byte, status, reason string) {
			h.b.settled = append(h.b.settled, settled{bytes.Clone(in), status, reason})
			if len(h.b.settled) >= 256 {
				h.flush() // bound what waits for the reporter
			}
		},
		Unsent: func(inputs [][]byte) {
			h.flush()
			h.out <- exec.ChunkDropped{Chunk: &splitter.Chunk{Inputs: inputs}, Status: rsync.NotDone, Reason: "interrupted before rsync started"}
		},
		Flush: h.flush,
	}
}

func (h *splitHooks) flush() {
	b := h.b
	if b.accepted+b.fresh+b.empty == 0 && len(b.settled) == 0 {
		return
	}
	h.out <- b
	h.b = &splitBatch{}
}

// startInput runs the splitter over the input. The chunk channel and the returned done
// channel are closed when the input has ended (or ctx has).
func (p *pipeline) startInput(ctx context.Context) (<-chan *splitter.Chunk, <-chan struct{}) {
	r, f := p.r, &p.r.f
	h := &splitHooks{out: p.rep.in}
	sp := splitter.New(splitter.Config{
		Sep: p.sep, Root: r.root, Cwd: r.cwd, Sizes: f.Sizes, RemoteSrc: r.srcRemote,
		ChunkFiles: f.ChunkFiles, ChunkBytes: int64(f.ChunkBytes), ChunkWait: f.ChunkWait,
		Shard: f.shard, Shards: f.shards, HardLinks: rsync.HardLinks(r.args), Quick: r.quick, Dirs: p.dirs,
	}, h.hooks())
	chunks := make(chan *splitter.Chunk)
	done := make(chan struct{})
	go func() {
		defer p.pool.RecoverPanic()
		defer close(done)
		defer close(chunks)
		err := sp.Run(ctx, r.input, chunks)
		p.chunks = sp.Chunks()
		switch {
		case err == nil:
			p.inputComplete = true
		case !errors.Is(err, context.Canceled):
			p.inputErr = err
			p.rep.in <- inputError{err}
		}
	}()
	return chunks, done
}

// startThrottle runs the throttle until bg ends; it also stops at the first signal
// (ctx), and resumes what it paused either way.
func (p *pipeline) startThrottle(ctx, bg context.Context, wg *sync.WaitGroup) {
	ctlCtx, ctlStop := context.WithCancel(ctx)
	stop := context.AfterFunc(bg, ctlStop)
	wg.Add(1)
	go func() {
		defer p.pool.RecoverPanic()
		defer wg.Done()
		defer stop()
		p.throttle.Run(ctlCtx)
	}()
}

// startTuner runs -j auto until bg ends or the first signal.
func (p *pipeline) startTuner(ctx, bg context.Context, wg *sync.WaitGroup, inputEnded <-chan struct{}) {
	tctx, stop := context.WithCancel(ctx)
	after := context.AfterFunc(bg, stop)
	c := &tune.Controller{Tuner: p.r.tuner, Target: &tuneTarget{pinned: &p.control.pinned, pool: p.pool, inputEnded: inputEnded}}
	wg.Add(1)
	go func() {
		defer p.pool.RecoverPanic()
		defer wg.Done()
		defer after()
		c.Run(tctx)
	}()
}

// tuneTarget is the pool as -j auto sees it.
type tuneTarget struct {
	pinned     *atomic.Bool
	pool       *exec.Pool
	inputEnded <-chan struct{}
}

func (t *tuneTarget) Limit() int                    { return t.pool.Limit() }
func (t *tuneTarget) Counts() (running, paused int) { return t.pool.Counts() }
func (t *tuneTarget) Measure()                      { t.pool.MeasureIO() }
func (t *tuneTarget) Drained() bool                 { return isClosed(t.inputEnded) && t.pool.Queued() == 0 }

func (t *tuneTarget) SetLimit(n int, reason, detail string, rate float64) {
	if t.pinned.Load() {
		return // prsync ctl jobs set it by hand
	}
	t.pool.SetLimit(n, reason, detail, rate)
}

func (t *tuneTarget) Moved() tune.Moved {
	pr := t.pool.Progress()
	m := tune.Moved{Bytes: float64(pr.LoggedBytes), Files: float64(pr.LoggedFiles), Refused: pr.Refused, Accepted: pr.Accepted}
	if pr.IOMeasured {
		m.Bytes = float64(pr.IOBytes) // grows while a big file is still on its way
	}
	return m
}

// startSampling measures CPU for the progress events when the throttle does not.
func (p *pipeline) startSampling(bg context.Context, wg *sync.WaitGroup) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(p.r.f.ThrottleInterval)
		defer tick.Stop()
		for {
			select {
			case <-bg.Done():
				return
			case <-tick.C:
			}
			if s, err := p.sampler.Sample(bg); err == nil {
				p.last.set(s)
			}
		}
	}()
}

// finish writes the summary and the closing messages, and returns the exit code.
func (p *pipeline) finish(interrupted bool, del deletion) int {
	r, f := p.r, &p.r.f
	ferr := p.rep.closeList()
	c := p.rep.c
	st := p.pool.Stats()
	susp, suspSec := p.throttle.Stats()
	ab := p.pool.Aborted()
	var delErr error
	if del.missed() {
		delErr = errors.New("the deletion pass " + del.state)
	}
	code := exitStatus(interrupted, p.inputErr, ab, c, errors.Join(ferr, delErr))
	el := time.Since(p.t0).Seconds()
	p.enc.Emit(&event.Summary{
		Files: c.Files, Bytes: c.Bytes, FilesTransferred: c.Transferred, BytesTransferred: c.BytesTransferred,
		FilesUpToDate: c.UpToDate, FilesFailed: c.Failed, FilesVanished: c.Vanished, FilesNotDone: c.NotDone,
		EmptyRecords: c.Empty, Chunks: st.Chunks, ChunksFailed: st.ChunksFailed, Retries: st.Retries,
		Suspensions: susp, SecondsSuspended: round3(suspSec), Seconds: round3(el),
		RateBps: round1(float64(c.BytesTransferred) * 8 / el), ExitCode: code, Shard: f.shard, Shards: f.shards,
		CPUSeconds: round3(cpuSeconds(syscall.RUSAGE_SELF)), RsyncCPUSeconds: round3(cpuSeconds(syscall.RUSAGE_CHILDREN)),
		InputComplete: p.inputComplete, ChunkErrors: c.ChunkErrors, ConfirmSeconds: round3(c.ConfirmSeconds),
		JobsMin: p.rep.jobsMin, JobsMax: p.rep.jobsMax,
		FilesVerified: c.Verified, FilesVerifyFailed: c.VerifyFailed, VerifySeconds: round3(c.VerifySeconds),
		FilesDeleted: c.Deleted, DeletePass: del.state, DeleteDirs: c.DirsChecked, DeleteSeconds: round3(del.stats.Seconds),
	})
	p.rep.prog.finish(c, el)
	if m := p.rep.metrics; m != nil {
		m.up, m.exitCode = 0, float64(code)
		p.rep.writeMetrics(el)
	}
	switch {
	case p.inputErr != nil:
		fmt.Fprintf(r.stderr, "prsync: error: %v\n", p.inputErr)
	case ab != nil && !interrupted:
		fmt.Fprintf(r.stderr, "prsync: error: %v\n", ab)
		if ab.Hint != "" {
			fmt.Fprintf(r.stderr, "prsync: hint: %s\n", ab.Hint)
		}
	case (code == ExitPartial || code == ExitVanished) && c.Failed+c.Vanished+c.NotDone+c.ChunkErrors > 0:
		fmt.Fprintf(r.stderr, "prsync: error: %d failed, %d vanished, %d not done of %d paths%s\n",
			c.Failed, c.Vanished, c.NotDone, c.Files, failedListNote(f.Failed))
		if c.ChunkErrors > 0 {
			fmt.Fprintf(r.stderr, "prsync: error: rsync reported %d error(s) that name no listed path; see the chunk_end events' unexplained field\n", c.ChunkErrors)
		}
		if h := p.rep.hint; h != "" {
			fmt.Fprintf(r.stderr, "prsync: hint: %s\n", h)
		}
	}
	if !p.inputComplete && p.inputErr == nil {
		fmt.Fprintln(r.stderr, "prsync: error: stopped before the end of the input: the paths never read are not in any list; re-run the same command to finish the job")
	}
	if ferr != nil {
		fmt.Fprintf(r.stderr, "prsync: error: %v\n", ferr)
	}
	if del.failed() { // a skipped pass was said when it was skipped
		fmt.Fprintf(r.stderr, "prsync: error: %v\n", delErr)
		if h := del.stats.Hint; h != "" {
			fmt.Fprintf(r.stderr, "prsync: hint: %s\n", h)
		}
	}
	return code
}

func failedListNote(path string) string {
	if path == "" {
		return " (list them with --failed FILE)"
	}
	return "; they are listed in " + path
}

// exitStatus picks the exit code of a run that started: an interrupt first, then an
// unreadable input, then a run stopped early (rsync's own code), then failed paths (or an
// error no path carries), then vanished ones.
func exitStatus(interrupted bool, inputErr error, ab *exec.AbortError, c Counts, ferr error) int {
	switch {
	case interrupted:
		return ExitInterrupted
	case inputErr != nil:
		return ExitInput
	case ab != nil && ab.ExitCode > 0:
		return ab.ExitCode
	case ab != nil || c.Failed > 0 || c.NotDone > 0 || c.ChunkErrors > 0 || ferr != nil:
		return ExitPartial
	case c.Vanished > 0:
		return ExitVanished
	}
	return ExitOK
}

type sampleBox struct {
	mu sync.Mutex
	s  throttle.Sample
	ok bool
}

func (b *sampleBox) set(s throttle.Sample) {
	b.mu.Lock()
	b.s, b.ok = s, true
	b.mu.Unlock()
}

func (b *sampleBox) get() (throttle.Sample, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.s, b.ok
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
