package exec

import (
	"bytes"
	"context"
	"errors"
	"io"
	osexec "os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prsync/prsync/rsync"
	"github.com/prsync/prsync/splitter"
)

// result is how one rsync run ended and what its output said.
type result struct {
	code      int // rsync's exit code; -1 when killed by a signal, rsync.NotStarted when it did not start
	cancelled bool
	stderr    string // the first few KiB
	seconds   float64
	started   time.Time // when it started; zero when it did not
	firstLine float64   // seconds from its start to its first logged line; 0: none
	cpu       float64   // CPU seconds of its process tree (rusage of the waited ones)
	paused    bool      // the group was stopped a while (throttle, bandwidth limit, Ctrl-Z)
	pid       int
	r         *rsync.Result
	logged    int64 // file bytes its output said it transferred
	// lost: DEST or the source was no longer the storage it was at the start, before the
	// run (then no rsync started) or once it ended (storageLost)
	lost error
	// listUnread: the rsync was to read its list on the far side (RemoteLists.For), and
	// could not (rsync.Result.ListUnread)
	listUnread bool
}

// sink takes both output streams of one rsync. One lock serialises them: the
// attribution of a path must not depend on which stream's goroutine ran first.
type sink struct {
	mu     sync.Mutex
	a      *rsync.Attributor
	logged int64
	pool   *Pool
	onItem func(rsync.Item) // sees every out-format line, when set
	onLine func([]byte)     // sees every line of standard output, when set
	// first is when rsync logged its first line (Unix nanoseconds), 0 before
	first atomic.Int64
	// lines counts the lines rsync logged; one means the far side accepted the session
	// (a refusal comes on stderr, before any)
	lines atomic.Int64
	// watch, when set, is told the count after each line: the planner watches its probe
	watch func(lines int64)
	// read, when set, is called once, at the first path rsync logs
	read func()
}

func (s *sink) stdout(line []byte) {
	if s.first.Load() == 0 {
		s.first.CompareAndSwap(0, time.Now().UnixNano())
	}
	if n := s.lines.Add(1); s.watch != nil {
		s.watch(n)
	}
	s.mu.Lock()
	n, file := s.a.Stdout(line)
	s.logged += n
	if s.onLine != nil {
		s.onLine(line) // the line's buffer is reused
	}
	if s.onItem != nil {
		if it, ok := rsync.ParseItem(line); ok {
			it.Name = bytes.Clone(it.Name) // the line's buffer is reused
			s.onItem(it)
		}
	}
	var read func()
	if file {
		read, s.read = s.read, nil
	}
	s.mu.Unlock()
	if read != nil {
		read()
	}
	if s.pool != nil && file {
		s.pool.inflight.Add(n)
		s.pool.loggedBytes.Add(n)
		s.pool.loggedFiles.Add(1)
	}
}

func (s *sink) stderr(line []byte) {
	s.mu.Lock()
	s.a.Stderr(line)
	s.mu.Unlock()
}

// srcArg is rsync's source argument for a chunk's directory.
func srcArg(src string) string {
	if strings.HasSuffix(src, "/") {
		return src
	}
	return src + "/"
}

// pass says what an rsync run other than a chunk's copy does: a confirmation, the
// verification or the deletion pass.
type pass struct {
	extra []string // options before prsync's own, such as --dry-run
	// src and dest replace the chunk's Src and the pool's Dest, when set; a pass whose
	// source is remote runs direct
	src, dest string
	onItem    func(rsync.Item) // sees every out-format line, when set
	onLine    func([]byte)     // sees every line of standard output, when set
}

// copies reports whether the pass is a chunk's copy: no options of its own, the chunk's
// source and the pool's DEST.
func (ps pass) copies() bool { return ps.extra == nil && ps.src == "" && ps.dest == "" }

// anchored reports whether a pass over a chunk's paths may list their directories too
// (Pool.Anchors): a copy, and its dry runs that confirm or verify it; never a deletion pass
// (its directories are what it deletes in) nor a listing (every name it lists is read).
func (ps pass) anchored() bool {
	return ps.src == "" && ps.dest == "" && !slices.ContainsFunc(ps.extra, func(a string) bool {
		return strings.HasPrefix(a, "--del") || a == "--list-only"
	})
}

// attempt runs one rsync over entries of chunk c, extra options first (such as
// --dry-run for a verification pass). Only a first pass (extra == nil) reports its start.
func (p *Pool) attempt(ctx context.Context, c *splitter.Chunk, entries [][]byte, attempt int, extra []string) result {
	return p.run(ctx, c, entries, attempt, pass{extra: extra})
}

// run runs one rsync over entries of chunk c, as ps says.
func (p *Pool) run(ctx context.Context, c *splitter.Chunk, entries [][]byte, attempt int, ps pass) result {
	extra := ps.extra
	src, dest := srcArg(c.Src), p.Dest
	if ps.src != "" {
		src = srcArg(ps.src)
	}
	if ps.dest != "" {
		dest = ps.dest
	}
	from, env, tr := src, p.Env, []string(nil)
	if p.Transport == Pipe && !rsync.IsRemote(src) {
		tr, from, env = p.pipeArgs(src)
	}
	var bwCap float64
	var pre []string
	if p.BWArg != nil {
		// before the options after --: a --bwlimit there, per rsync, wins
		var arg string
		if arg, bwCap = p.BWArg(); arg != "" {
			pre = []string{"--bwlimit=" + arg}
		}
	}
	if c.Root {
		pre = append([]string{rsync.RootAlone}, pre...)
	}
	if p.LeftOut != "" && extra == nil {
		tr = append(tr[:len(tr):len(tr)], "-ii") // name unchanged paths too: one not named was left out
	}
	filesFrom := "--files-from=-"
	if ps.copies() {
		if arg := p.Lists.For(ctx, c, entries); arg != "" {
			filesFrom = arg // the far side reads it: see RemoteLists
		}
	}
	remote := filesFrom != "--files-from=-"
	args := append(append(append(append(pre, p.Args...), extra...), tr...),
		filesFrom, "--from0", "--out-format="+rsync.OutFormat, "--", from, dest)
	cmd := osexec.CommandContext(p.procCtx(ctx), p.Rsync, args...)
	list, anchors := entries, [][]byte(nil)
	if p.Anchors && !remote && rsync.IsRemote(src) && ps.anchored() {
		list, anchors = rsync.Anchor(entries) // the pulling client checks the sender's names
	}
	if !remote {
		cmd.Stdin = &entryReader{entries: list}
	}
	cmd.Env = env
	localDest := p.localDest
	if ps.dest != "" {
		localDest = ""
		if !rsync.IsRemote(dest) {
			localDest = dest
		}
	}
	sk := &sink{a: rsync.NewAttributor(entries, src, dest, localDest), onItem: ps.onItem, onLine: ps.onLine}
	sk.a.Anchors(anchors)
	if extra == nil {
		sk.pool = p
		if p.Plan.Watch(c.ID) {
			sk.watch = func(n int64) { p.Plan.Logged(time.Now(), c.ID, int(n)) }
		}
	}
	if remote {
		sk.read = func() { // its list is read: the lists may go from the far side
			p.Lists.Read(c)
			p.clearListsEarly(ctx)
		}
	}
	if lost := p.storageLost(c, entries, ps); lost != nil {
		return result{code: LostExitCode, stderr: lost.Error(), r: sk.a.Result(), lost: lost} // no rsync starts
	}
	out := &lineWriter{fn: sk.stdout}
	errBuf := &capWriter{max: 4 << 10}
	errLines := &lineWriter{fn: sk.stderr}
	pipes, err := newOutPipes(out, io.MultiWriter(errBuf, errLines))
	if err != nil {
		sk.stderr([]byte(err.Error()))
		return result{code: rsync.NotStarted, stderr: err.Error(), r: sk.a.Result()}
	}
	cmd.Stdout, cmd.Stderr = pipes.out.w, pipes.err.w
	var cancelled atomic.Bool
	setProcAttr(cmd)
	cmd.Cancel = func() error {
		cancelled.Store(true)
		return terminateGroup(cmd.Process.Pid)
	}
	cmd.WaitDelay = p.Grace
	p.slots.settled(ctx) // a session may have ended in its slot since it was taken
	t0 := time.Now()
	err = cmd.Start()
	pipes.started()
	if err != nil {
		pipes.wait(p.Grace)
		sk.stderr([]byte(err.Error()))
		return result{code: rsync.NotStarted, stderr: err.Error(), r: sk.a.Result()}
	}
	pid := cmd.Process.Pid
	p.mu.Lock()
	pr := &proc{chunk: c.ID, pid: pid, files: len(entries), bytes: c.Bytes, started: t0, bwCap: bwCap, first: &sk.first, lines: &sk.lines}
	p.procs[c.ID] = pr
	if p.slots.holding() {
		stopGroup(pid) // Ctrl-Z or a pause came while it started
		pr.wasStopped = true
	}
	p.mu.Unlock()
	if p.killed.Load() {
		killGroup(pid)
	}
	if extra == nil {
		p.report(ChunkStarted{Chunk: c, Attempt: attempt, PID: pid, RemoteList: remote})
	}
	err = cmd.Wait()
	drained := pipes.wait(p.Grace)
	sk.mu.Lock()
	logged := sk.logged
	sk.mu.Unlock()
	p.mu.Lock()
	now := time.Now()
	p.peakAccepted(now) // a sample of how many ran together, this one included
	paused := pr.wasStopped
	delete(p.procs, c.ID)
	// a session the far side took held a slot there: it logged a line, ran past a
	// refusal's time, or ended as only a transfer does
	held := p.Plan.Admitted(pr.started, pr.spoke(), now) ||
		(cmd.ProcessState != nil && rsync.SessionRan(cmd.ProcessState.ExitCode()))
	p.sessionEnded(now, held)
	p.mu.Unlock()
	if ioMeasured && extra == nil {
		p.meter.finish(BWGroup{Chunk: c.ID, Started: t0, Cap: bwCap, Held: true}, pid, logged)
	}
	if cancelled.Load() || p.killed.Load() || errors.Is(err, osexec.ErrWaitDelay) || !drained {
		// the leader is gone; make sure no child of it lingers
		killGroup(pid)
		waitGroupGone(pid, 5*time.Second)
		p.markKilled(c) // a receiver killed before its TERM cleanup leaves its temp file
	}
	out.flush()
	errLines.flush()
	code := cmd.ProcessState.ExitCode()
	if err != nil && code == 0 {
		code = -1
	}
	if code < 0 {
		killGroup(pid)
		waitGroupGone(pid, 5*time.Second)
		p.markKilled(c)
	}
	if sk.pool != nil {
		p.inflight.Add(-logged)
	}
	lost := p.storageLost(c, entries, ps) // what the run wrote or read may not be there
	r := sk.a.Result()
	return result{
		listUnread: remote && !cancelled.Load() && r.ListUnread(code, sk.lines.Load() > 0, errBuf.String()),
		lost:       lost,
		code:       code,
		cancelled:  cancelled.Load() || p.killed.Load(),
		stderr:     errBuf.String(),
		seconds:    round3(time.Since(t0).Seconds()),
		started:    t0,
		firstLine:  sinceFirst(t0, sk.first.Load()),
		cpu:        (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds(),
		paused:     paused,
		pid:        pid,
		r:          r,
		logged:     logged,
	}
}

// sinceFirst returns the seconds from t0 to first (Unix nanoseconds), or 0 when first is 0.
func sinceFirst(t0 time.Time, first int64) float64 {
	if first == 0 {
		return 0
	}
	return max(time.Unix(0, first).Sub(t0).Seconds(), 1e-6)
}
