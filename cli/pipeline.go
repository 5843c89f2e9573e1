package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/prsync/prsync/event"
	"github.com/prsync/prsync/exec"
	"github.com/prsync/prsync/splitter"
	"github.com/prsync/prsync/throttle"
)

// pipeline is the wiring of one run: input → splitter → pool, with the throttle, the
// progress reports and the accounting beside it.
type pipeline struct {
	r       *runner
	t0      time.Time
	sep     byte
	enc     *event.Encoder
	tally   *exec.Tally
	pool    *exec.Pool
	sampler throttle.Sampler
	ctl     *throttle.Controller
	last    sampleBox
	prog    *progress

	inputErr error // set before the input goroutine ends
}

func (r *runner) newPipeline() *pipeline {
	f := &r.f
	p := &pipeline{r: r, t0: time.Now(), sep: '\n', enc: event.NewEncoder(r.stdout)}
	if f.Null {
		p.sep = 0
	}
	p.tally = &exec.Tally{Events: p.enc, Sep: p.sep}
	if r.failed != nil {
		p.tally.SetFailedList(r.failed)
	}
	p.pool = &exec.Pool{
		Rsync: r.rsync, Args: r.args, Dest: f.Dest, Jobs: f.Jobs,
		Retries: f.Retries, RetryDelay: f.RetryDelay, Grace: 10 * time.Second,
		Events: p.enc, Tally: p.tally,
	}
	p.sampler = throttle.NewSystemSampler(r.policy, r.stderr, throttle.GroupsOf(p.pool))
	p.ctl = &throttle.Controller{
		Policy: r.policy, Interval: f.ThrottleInterval, Sampler: p.sampler, Target: p.pool,
		OnSample: p.last.set, OnEvent: p.emitThrottle,
	}
	p.prog = newProgress(r.stderr, r.showProgress(), p.t0)
	return p
}

func (p *pipeline) emitStart() {
	r, f := p.r, &p.r.f
	p.enc.Emit(&event.Start{
		Version: version(), Schema: event.Schema, PID: os.Getpid(), Jobs: f.Jobs, Dest: f.Dest, Root: r.root,
		Rsync: r.rsync, RsyncVersion: r.rsyncVersion, RsyncArgs: r.args, Null: f.Null, DryRun: f.DryRun,
		ChunkFiles: f.ChunkFiles, ChunkBytes: int64(f.ChunkBytes), Shard: f.shard, Shards: f.shards,
		QuickCheck: r.quick != nil,
	})
}

// notDone settles paths that never reached an rsync because the run was interrupted.
func (p *pipeline) notDone(inputs [][]byte, chunk int) {
	for _, in := range inputs {
		p.tally.Path(in, exec.NotDone, "interrupted before rsync started", chunk)
	}
}

// startInput runs the splitter over the input. The chunk channel and the returned done
// channel are closed when the input has ended (or ctx has).
func (p *pipeline) startInput(ctx context.Context) (<-chan *splitter.Chunk, <-chan struct{}) {
	r, f := p.r, &p.r.f
	sp := splitter.New(splitter.Config{
		Sep: p.sep, Root: r.root, Cwd: r.cwd,
		ChunkFiles: f.ChunkFiles, ChunkBytes: int64(f.ChunkBytes), ChunkWait: f.ChunkWait,
		Shard: f.shard, Shards: f.shards, HardLinks: hardLinks(r.args), Quick: r.quick,
	}, splitter.Hooks{
		Fresh:    p.tally.Fresh,
		Settled:  p.tally.Settled,
		Accepted: p.tally.Accepted,
		Empty:    p.tally.Empty,
		Unsent:   func(inputs [][]byte) { p.notDone(inputs, 0) },
	})
	chunks := make(chan *splitter.Chunk)
	done := make(chan struct{})
	go func() {
		defer p.pool.RecoverPanic()
		defer close(done)
		defer close(chunks)
		if err := sp.Run(ctx, r.input, chunks); err != nil && !errors.Is(err, context.Canceled) {
			p.inputErr = err
			p.enc.Emit(&event.Error{Error: err.Error()})
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
		p.ctl.Run(ctlCtx)
	}()
}

func (p *pipeline) emitThrottle(e throttle.Event) {
	pol := p.r.policy
	p.enc.Emit(&event.Throttle{
		Action: e.Action, Reason: e.Reason, CPUPercent: round1(e.Sample.CPU),
		OwnCPUPercent: optional(e.Sample.HasOwn, e.Sample.Own),
		Load:          optional(e.Sample.HasLoad && pol.MaxLoad > 0, e.Sample.Load),
		IOPressure:    optional(e.Sample.HasIO && pol.MaxIOPressure > 0, e.Sample.IOPressure),
		Chunk:         e.Chunk, PID: e.PID, Running: e.Running, Suspended: e.Suspended,
	})
}

// optional is v, rounded, for an event field that is there only when has is true.
func optional(has bool, v float64) *float64 {
	if !has {
		return nil
	}
	v = round1(v)
	return &v
}

// startProgress writes a progress event, and updates the terminal line, every interval.
func (p *pipeline) startProgress(bg context.Context, wg *sync.WaitGroup, inputEnded <-chan struct{}) {
	f := &p.r.f
	wg.Add(1)
	go func() {
		defer p.pool.RecoverPanic()
		defer wg.Done()
		tick := time.NewTicker(f.ThrottleInterval)
		defer tick.Stop()
		for {
			select {
			case <-bg.Done():
				return
			case <-tick.C:
			}
			s, ok := p.last.get()
			if f.NoThrottle || !ok {
				if smp, err := p.sampler.Sample(bg); err == nil {
					s = smp
				}
			}
			running, paused := p.pool.Counts()
			c := p.tally.Counts()
			el := time.Since(p.t0).Seconds()
			ev := &event.Progress{
				FilesDone: c.Done(), BytesDone: c.BytesTransferred, FilesQueued: c.Queued, InputDone: isClosed(inputEnded),
				RateBps: round1(float64(c.BytesTransferred) * 8 / el), CPUPercent: round1(s.CPU),
				OwnCPUPercent: optional(s.HasOwn, s.Own), Running: running, Suspended: paused, Elapsed: round3(el),
			}
			p.enc.Emit(ev)
			p.prog.update(ev, c, s.CPU)
		}
	}()
}

// finish writes the summary and the closing messages, and returns the exit code.
func (p *pipeline) finish(interrupted bool) int {
	r, f := p.r, &p.r.f
	ferr := p.tally.Close()
	c := p.tally.Counts()
	st := p.pool.Stats()
	susp, suspSec := p.ctl.Stats()
	ab := p.pool.Aborted()
	code := exitStatus(interrupted, p.inputErr, ab, c, ferr)
	el := time.Since(p.t0).Seconds()
	p.enc.Emit(&event.Summary{
		Files: c.Files, Bytes: c.Bytes, FilesTransferred: c.Transferred, BytesTransferred: c.BytesTransferred,
		FilesUpToDate: c.UpToDate, FilesFailed: c.Failed, FilesVanished: c.Vanished, FilesNotDone: c.NotDone,
		EmptyRecords: c.Empty, Chunks: st.Chunks, ChunksFailed: st.ChunksFailed, Retries: st.Retries,
		Suspensions: susp, SecondsSuspended: round3(suspSec), Seconds: round3(el),
		RateBps: round1(float64(c.BytesTransferred) * 8 / el), ExitCode: code, Shard: f.shard, Shards: f.shards,
		CPUSeconds: round3(cpuSeconds(syscall.RUSAGE_SELF)), RsyncCPUSeconds: round3(cpuSeconds(syscall.RUSAGE_CHILDREN)),
	})
	p.prog.finish(c, el)
	switch {
	case p.inputErr != nil:
		fmt.Fprintf(r.stderr, "prsync: error: %v\n", p.inputErr)
	case ab != nil && !interrupted:
		fmt.Fprintf(r.stderr, "prsync: error: %v\n", ab)
		if ab.Hint != "" {
			fmt.Fprintf(r.stderr, "prsync: hint: %s\n", ab.Hint)
		}
	case code == ExitPartial || code == ExitVanished:
		fmt.Fprintf(r.stderr, "prsync: error: %d failed, %d vanished, %d not done of %d paths%s\n",
			c.Failed, c.Vanished, c.NotDone, c.Files, failedListNote(f.Failed))
	}
	if ferr != nil {
		fmt.Fprintf(r.stderr, "prsync: error: %v\n", ferr)
	}
	return code
}

// exitStatus picks the exit code of a run that started: an interrupt first, then an
// unreadable input, then a run stopped early (rsync's own code), then failed paths,
// then vanished ones.
func exitStatus(interrupted bool, inputErr error, ab *exec.AbortError, c exec.Counts, ferr error) int {
	switch {
	case interrupted:
		return ExitInterrupted
	case inputErr != nil:
		return ExitInput
	case ab != nil && ab.ExitCode > 0:
		return ab.ExitCode
	case ab != nil || c.Failed > 0 || c.NotDone > 0 || ferr != nil:
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
