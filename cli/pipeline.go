package cli

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/prsync/prsync/books"
	"github.com/prsync/prsync/bw"
	"github.com/prsync/prsync/exec"
	"github.com/prsync/prsync/internal/cmdline"
	"github.com/prsync/prsync/plan"
	"github.com/prsync/prsync/rsync"
	"github.com/prsync/prsync/splitter"
	"github.com/prsync/prsync/throttle"
	"github.com/prsync/prsync/tune"
)

// pipeline is the wiring of one run: input → splitter → pool, with the throttle beside
// it, and every report flowing one way into the reporter, which owns the books; the books
// tell their printers (the events, the terminal, the metrics file).
type pipeline struct {
	r        *runner
	t0       time.Time
	sep      byte
	json     books.JSON // the events, on stdout
	rep      *reporter
	pool     *exec.Pool
	sampler  *throttle.SystemSampler
	throttle *throttle.Controller
	control  *ctlHandler
	bw       bwControl // the total bandwidth limit; nil where it cannot be measured
	last     sampleBox
	quick    *splitter.QuickCheck // the quick check of a local DEST, or nil
	list     *splitter.Lister     // DEST's directories listed ahead: DEST on a network filesystem

	controlSocket string
	dirs          *splitter.Dirs // the directories the paths touched, with --delete
	chunks        int            // the chunks the splitter made, once the copy has ended
	plan          *plan.Planner  // how big, when, which next and how many: the splitter's and the pool's policy
	sp            *splitter.Splitter

	inputErr      error // set before the input goroutine ends
	inputComplete bool  // the input was read to its end

	windowEnded <-chan struct{} // closed when the --max-duration window ends; nil without one
	listsMode   string          // --remote-lists in force for a push to a remote DEST, or ""
}

func (r *runner) newPipeline() *pipeline {
	f := &r.f
	p := &pipeline{r: r, t0: time.Now(), sep: '\n', quick: r.quickCheck(), list: r.destLister()}
	if f.Null {
		p.sep = 0
	}
	p.json = books.NewJSON(r.stdout, func(err error) {
		if errors.Is(err, syscall.EPIPE) {
			cmdline.Warnf(r.stderr, "stdout closed; no more events are written")
			return
		}
		cmdline.Warnf(r.stderr, "cannot write events (%v); no more events are written", err)
	})
	var failed io.WriteCloser
	if r.failed != nil {
		failed = r.failed
	}
	// the sampler's CPUs (a cgroup's quota) are what the planner's copy may use; the pool,
	// which the sampler measures, is made with the planner
	p.sampler = throttle.NewSystemSampler(r.policy, cmdline.Warner(r.stderr), func() []int {
		if p.pool == nil {
			return nil // priming, before the pool exists: no rsync runs yet
		}
		return throttle.GroupsOf(p.pool)()
	})
	for _, port := range r.localDaemonPorts() {
		p.sampler.CountDaemon(port)
	}
	p.plan = r.planner(usableCPUs(runtime.NumCPU(), p.sampler.Source().CPUs))
	p.pool = &exec.Pool{
		Plan: p.plan, Rsync: r.rsync, Args: r.args, Dest: f.Dest, Jobs: r.jobs, MaxJobs: r.maxJobs,
		Retries: f.Retries, RetryDelay: f.RetryDelay, Grace: 10 * time.Second,
		Confirm: r.confirmMode(), LeftOut: rsync.SkipOption(r.f.RsyncArgs), Verify: r.verifyMode(), Env: r.rsyncEnv(), Transport: r.transport, Helper: r.helper, TrustSender: r.rsyncVersion.AtLeast(3, 2, 5), Anchors: r.anchors(), SourceRemote: r.srcRemote != "", Reports: func(m exec.Report) { p.rep.in <- report{m} },
	}
	p.pool.DestWatch, p.pool.SrcWatch = r.watches()
	countFUSE(p.sampler, p.pool.DestWatch, p.pool.SrcWatch)
	p.pool.Lists, p.listsMode = r.remoteLists()
	p.throttle = &throttle.Controller{
		Policy: r.policy, Interval: f.ThrottleInterval, Sampler: p.sampler, Target: p.pool,
		OnSample: p.last.set, OnEvent: func(e throttle.Event) { p.rep.in <- throttled{e} },
		OnNotice: func(n throttle.Notice) { p.rep.in <- throttleNotice{n} },
	}
	if f.Delete {
		p.dirs = &splitter.Dirs{}
	}
	p.control = &ctlHandler{p: p}
	if b, err := newBWLimit(f.BWLimit, p.pool); err == nil { // checked in prepare
		p.bw = b
	}
	p.rep = &reporter{
		pool: p.pool, throttle: p.throttle, bw: p.bw, last: &p.last, t0: p.t0, every: f.ThrottleInterval,
		jobsAuto: r.tuner != nil, in: make(chan message, 16),
		windowCause: windowEnded{d: f.MaxDuration, grace: f.MaxDurationGrace}.Error(), grace: f.MaxDurationGrace,
	}
	// the printers of the books, in the order they are told each piece of news
	printers := []books.Printer{p.json, &books.Text{W: r.stderr, On: r.showProgress()}}
	if r.metrics != nil {
		printers = append(printers, r.metrics)
	}
	var paths *books.PathLog
	if r.pathsLog != nil {
		paths = books.NewPathLog(r.pathsLog, nil)
	}
	p.rep.books = books.New(books.Config{
		Jobs: r.jobs, Failed: failed, Sep: p.sep, PathLog: paths, Printers: printers, Live: p.rep.live,
		DryRun: f.DryRun, Lines: p.sep == '\n', InsideDestHint: r.insideDestHint(),
	})
	return p
}

// Run copies, reports and returns the exit code, once Open has passed. It calls Close
// once the rsyncs are done, before the reporter stops.
func (r *runner) Run() int {
	sig, kill := r.sig.contexts()
	p := r.p
	p.start()

	// ctx is what SIGINT ends, and --max-duration when its time window ends (window.go):
	// then nothing starts, and the rsyncs running are cancelled when drain ends
	ctx, drain, windowEnded, stopWindow := p.window(sig)
	defer stopWindow()
	p.windowEnded = windowEnded
	p.pool.Drain = drain
	p.rep.windowEnded = windowEnded

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
			b.run(bg, func(c bw.Change) { p.rep.in <- bwChanged{c} })
		}()
	}

	// while every slot is busy, up to -j chunks wait, and the planner says which starts next;
	// once the input has ended, a chunk waiting while slots are free is cut for them
	chunks = p.pool.Lists.Tee(chunks) // each chunk's list staged as it is cut, for the next upload
	p.pool.Run(ctx, kill, chunks)
	<-inputEnded
	p.pool.CheckStorage()
	p.chunks = p.sp.Chunks() // the tail's cuts included
	del := p.deletePass(ctx, kill)
	p.closeLists(kill)
	bgStop()
	bgDone.Wait()
	r.Close()
	close(p.rep.in)
	<-repDone
	if p.pool.Killed() {
		if n := p.pool.SweepTemp(); n > 0 {
			cmdline.Printf(r.stderr, "removed %d rsync temp file(s) left by killed rsyncs", n)
		}
	}
	return p.finish(sig.Err() != nil, del)
}

// start tells the books what the run starts with (the start event).
func (p *pipeline) start() {
	r, f := p.r, &p.r.f
	p.rep.books.Start(books.Run{
		Version: version(), PID: os.Getpid(), Jobs: r.jobs, JobsAuto: r.tuner != nil, MaxJobs: r.maxJobs,
		Dest: f.Dest, Root: r.rootShown(),
		Rsync: r.rsync, RsyncVersion: r.rsyncVersion.String(), RsyncArgs: r.args, Null: f.Null, DryRun: f.DryRun,
		ChunkFiles: f.ChunkFiles, ChunkBytes: int64(f.ChunkBytes), ChunkTime: r.chunkTarget(), Shard: f.shard, Shards: f.shards,
		QuickCheck: p.quick != nil, ListDest: p.list != nil, Transport: string(r.transport), SourceRemote: r.srcRemote != "", Sizes: f.Sizes,
		Cgroup: p.sampler.Source(), ControlSocket: p.controlSocket, BWLimit: p.bwShown(), Delete: f.Delete, Verify: f.Verify,
		Policy: r.policy, ThrottleInterval: f.ThrottleInterval, NoThrottle: f.NoThrottle,
		MaxDuration: f.MaxDuration, MaxDurationGrace: f.MaxDurationGrace, RemoteLists: p.listsMode,
	})
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
	b    *books.Input
	out  chan<- message
	stop context.Context // the input's context, whose end leaves paths unsent
	// keepFresh passes the paths found up to date on, not only their count (--paths-log)
	keepFresh bool
}

// hooks returns the splitter's hooks; examined, if not nil, is called once every path was
// examined.
func (h *splitHooks) hooks(examined func()) splitter.Hooks {
	h.b = &books.Input{}
	return splitter.Hooks{
		Examined: examined,
		Fresh:    h.fresh,
		Accepted: func(size int64) { h.b.Queued++; h.b.QueuedBytes += size },
		Empty:    func() { h.b.Empty++ },
		Settled: func(in []byte, status rsync.Status, reason string) {
			h.b.Settled = append(h.b.Settled, books.Settled{Input: bytes.Clone(in), Status: status, Reason: reason})
			if len(h.b.Settled) >= 256 {
				h.flush() // bound what waits for the reporter
			}
		},
		Unsent: func(inputs [][]byte) {
			h.flush()
			h.out <- report{exec.ChunkDropped{Chunk: &splitter.Chunk{Inputs: inputs}, Status: rsync.NotDone, Reason: exec.Stopped(h.stop) + " before rsync started"}}
		},
		Flush: h.flush,
	}
}

// fresh counts a path the quick check found up to date, and keeps it for a --paths-log.
func (h *splitHooks) fresh(in []byte, size int64) {
	h.b.Fresh++
	h.b.FreshBytes += size
	if h.keepFresh {
		h.b.FreshInputs = append(h.b.FreshInputs, bytes.Clone(in))
		if len(h.b.FreshInputs) >= 256 {
			h.flush() // bound what waits for the reporter
		}
	}
}

func (h *splitHooks) flush() {
	b := h.b
	if b.Queued+b.Fresh+b.Empty == 0 && len(b.Settled) == 0 {
		return
	}
	h.out <- inputRead{b}
	h.b = &books.Input{}
}

// startInput runs the splitter over the input. The chunk channel and the returned done
// channel are closed when the input has ended (or ctx has).
func (p *pipeline) startInput(ctx context.Context) (<-chan *splitter.Chunk, <-chan struct{}) {
	r, f := p.r, &p.r.f
	h := &splitHooks{out: p.rep.in, stop: ctx, keepFresh: r.pathsLog != nil}
	sp := splitter.New(splitter.Config{
		Sep: p.sep, Root: r.root, Cwd: r.cwd, Dest: r.destPaths, Sizes: f.Sizes, RemoteSrc: r.srcRemote,
		Plan: p.plan, ChunkWait: f.ChunkWait, ListBytes: r.listBytes(),
		Shard: f.shard, Shards: f.shards, HardLinks: rsync.HardLinks(r.args), Quick: p.quick, List: p.list, Dirs: p.dirs,
		SourceLost: p.sourceLost(),
	}, h.hooks(r.examined))
	p.sp = sp
	p.pool.Split = sp.Split // before Run
	chunks := make(chan *splitter.Chunk)
	done := make(chan struct{})
	go func() {
		defer p.pool.RecoverPanic()
		defer close(done)
		defer close(chunks)
		err := sp.Run(ctx, r.input, chunks)
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

// startTuner runs -j auto until bg ends or the first signal: every tick it tells the
// planner what the pool has moved and the CPU the copy used, and the planner's tuner sets
// the limit once a window.
func (p *pipeline) startTuner(ctx, bg context.Context, wg *sync.WaitGroup, inputEnded <-chan struct{}) {
	tctx, stop := context.WithCancel(ctx)
	after := context.AfterFunc(bg, stop)
	a := &autoSampler{pool: p.pool, inputEnded: inputEnded, last: &p.last, machine: throttle.MachineCPUs()}
	wg.Add(1)
	go func() {
		defer p.pool.RecoverPanic()
		defer wg.Done()
		defer after()
		t := time.NewTicker(tune.Window / 4)
		defer t.Stop()
		for {
			// the pinned limit is live control's (prsync ctl jobs): the tuner only watches
			p.pool.Sampled(time.Now(), a.sample(), !p.control.pinned.Load())
			select {
			case <-tctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// autoSampler measures the pool as -j auto's tuner sees it.
type autoSampler struct {
	pool       *exec.Pool
	inputEnded <-chan struct{}
	last       *sampleBox // the newest CPU sample, the throttle's or startSampling's
	machine    int        // the machine's CPUs, which a sample's percentages are of
}

// sample measures the pool now: the groups running and paused, what it has moved, whether
// work still waits, and the CPUs' use at the newest sample: of a cgroup's CPU quota where
// one limits prsync, else of the machine. The CPU is not known where prsync's own use
// cannot be told (no /proc).
func (a *autoSampler) sample() plan.Sample {
	a.pool.MeasureIO()
	var s plan.Sample
	s.Running, s.Paused = a.pool.Counts()
	pr := a.pool.Progress()
	s.Bytes, s.Files = float64(pr.LoggedBytes), float64(pr.LoggedFiles)
	if pr.IOMeasured {
		s.Bytes = float64(pr.IOBytes) // grows while a big file is still on its way
	}
	s.Drained = isClosed(a.inputEnded) && a.pool.Waiting() == 0
	switch c, ok := a.last.get(); {
	case !ok || !c.HasOwn:
	case c.HasCgroup && c.CgroupCPUs > 0:
		s.CPUs, s.Busy, s.Own = c.CgroupCPUs, c.CgroupCPU/100*c.CgroupCPUs, c.CgroupOwn/100*c.CgroupCPUs
	default:
		m := float64(a.machine)
		s.CPUs, s.Busy, s.Own = m, c.CPU/100*m, c.Own/100*m
	}
	return s
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
	ferr := p.rep.books.CloseList()
	c := p.rep.books.Counts()
	ab := p.pool.Aborted()
	var delErr error
	if del.missed() {
		delErr = errors.New("the deletion pass " + del.String())
	}
	reached := isClosed(p.windowEnded)
	timeUp := reached && (c.NotDone > 0 || !p.inputComplete || del.cut) // the window left work undone
	code := exitStatus(interrupted, timeUp, p.inputErr, ab, c, errors.Join(ferr, delErr))
	own, hasOwn := p.sampler.OwnCPUSeconds()
	s := p.rep.books.Finish(books.End{
		ExitCode: code, InputComplete: p.inputComplete, DeletePass: del.String(), DeleteSeconds: del.stats.Seconds, MaxDurationReached: reached,
		CPUSeconds: cpuSeconds(syscall.RUSAGE_SELF), RsyncCPUSeconds: cpuSeconds(syscall.RUSAGE_CHILDREN),
		Shard: f.shard, Shards: f.shards, OwnCPUSeconds: own, HasOwnCPU: hasOwn, RemoteLists: p.remoteListStats(),
	})
	if s.Refusals > 0 {
		cmdline.Warnf(r.stderr, "the far side's refusals lowered the limit %s: the run ended running at most %d rsyncs at once", times(s.Refusals), s.Jobs)
	}
	switch {
	case p.inputErr != nil:
		cmdline.Errorf(r.stderr, "%v", p.inputErr)
	case ab != nil && !interrupted:
		cmdline.Errorf(r.stderr, "%v", ab)
		if ab.Hint != "" {
			cmdline.Hintf(r.stderr, "%s", ab.Hint)
		}
	case code == ExitMaxDuration:
		cmdline.Errorf(r.stderr, "%s: %d not done, %d failed, %d vanished of %d paths%s",
			p.rep.windowCause, c.NotDone, c.Failed, c.Vanished, c.Files, failedListNote(f.Failed))
		if p.inputComplete && f.Failed != "" {
			cmdline.Hintf(r.stderr, "the next run can take them from the list: prsync --from %s … (or run the same command again: the quick check skips what is done)", f.Failed)
		}
	case (code == ExitPartial || code == ExitVanished) && c.Failed+c.Vanished+c.NotDone+c.ChunkErrors > 0:
		cmdline.Errorf(r.stderr, "%d failed, %d vanished, %d not done of %d paths%s",
			c.Failed, c.Vanished, c.NotDone, c.Files, failedListNote(f.Failed))
		if c.ChunkErrors > 0 {
			cmdline.Errorf(r.stderr, "rsync reported %d error(s) that name no listed path; see the chunk_end events' unexplained field", c.ChunkErrors)
		}
		if h := s.Hint; h != "" {
			cmdline.Hintf(r.stderr, "%s", h)
		}
	}
	if !p.inputComplete && p.inputErr == nil {
		cmdline.Errorf(r.stderr, "stopped before the end of the input: the paths never read are not in any list; re-run the same command to finish the job")
	}
	if ferr != nil {
		cmdline.Errorf(r.stderr, "%v", ferr)
	}
	if del.failed() { // a skipped pass was said when it was skipped
		cmdline.Errorf(r.stderr, "%v", delErr)
		if h := del.stats.Hint; h != "" {
			cmdline.Hintf(r.stderr, "%s", h)
		}
	}
	return code
}

// times says how many times: "once", "2 times".
func times(n int) string {
	if n == 1 {
		return "once"
	}
	return strconv.Itoa(n) + " times"
}

func failedListNote(path string) string {
	if path == "" {
		return " (list them with --failed FILE)"
	}
	return "; they are listed in " + path
}

// exitStatus picks the exit code of a run that started: an interrupt first, then an
// unreadable input, then a run stopped early (rsync's own code), then a time window that
// left work undone (timeUp), then failed paths (or an error no path carries), then
// vanished ones.
func exitStatus(interrupted, timeUp bool, inputErr error, ab *exec.AbortError, c books.Counts, ferr error) int {
	switch {
	case interrupted:
		return ExitInterrupted
	case inputErr != nil:
		return ExitInput
	case ab != nil && ab.Code > 0:
		return ab.ExitCode()
	case timeUp:
		return ExitMaxDuration
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
