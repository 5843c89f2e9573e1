// Package exec runs one rsync per chunk, up to a limit at once, and accounts for every path.
package exec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	osexec "os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/prsync/prsync/event"
	"github.com/prsync/prsync/splitter"
	"github.com/prsync/prsync/throttle"
)

// Pool runs rsyncs on chunks.
type Pool struct {
	Rsync      string   // rsync binary
	Args       []string // options for every rsync, before the ones prsync manages
	Dest       string
	Jobs       int
	Retries    int
	RetryDelay time.Duration // first backoff; doubled each retry, with jitter
	Grace      time.Duration // how long a cancelled rsync has between TERM and KILL
	Events     *event.Encoder
	Tally      *Tally

	mu      sync.Mutex
	cond    *sync.Cond
	gate    bool
	procs   map[int]*proc
	queued  int
	closing bool // ctx ended: nothing may be paused any more
	abort   *AbortError
	killed  atomic.Bool
	// killedChunks are chunks whose rsync was killed: their temp files may be left in DEST
	killedChunks []*splitter.Chunk
	chunks       atomic.Int64
	failedC      atomic.Int64
	retries      atomic.Int64
}

type proc struct {
	chunk    int
	pid      int
	started  time.Time
	paused   bool
	pausedAt time.Time
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

// Stats are the pool's chunk counts.
type Stats struct{ Chunks, ChunksFailed, Retries int64 }

// Stats returns a snapshot.
func (p *Pool) Stats() Stats {
	return Stats{p.chunks.Load(), p.failedC.Load(), p.retries.Load()}
}

// Aborted returns the error that stopped the run early, or nil.
func (p *Pool) Aborted() *AbortError {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.abort
}

func (p *Pool) init() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cond == nil {
		p.cond = sync.NewCond(&p.mu)
		p.gate = true
		p.procs = make(map[int]*proc)
	}
}

// Run starts an rsync for each chunk from chunks, up to Jobs at once, until chunks is
// closed and every rsync has ended. When ctx ends, running rsyncs are cancelled (TERM,
// then CONT, to the group), and queued paths are counted as not done. When kill ends,
// running rsyncs get KILL at once.
func (p *Pool) Run(ctx, kill context.Context, chunks <-chan *splitter.Chunk) error {
	p.init()
	stop := context.AfterFunc(kill, p.KillAll)
	defer stop()
	wake := context.AfterFunc(ctx, func() {
		p.mu.Lock()
		p.closing = true
		p.cond.Broadcast()
		p.mu.Unlock()
	})
	defer wake()
	var g errgroup.Group
	g.SetLimit(max(p.Jobs, 1))
	for c := range chunks {
		p.mu.Lock()
		p.queued++
		p.mu.Unlock()
		g.Go(func() error {
			defer p.RecoverPanic()
			p.runChunk(ctx, c)
			return nil
		})
	}
	return g.Wait()
}

// RecoverPanic ends every rsync group (TERM, then CONT) before a panic takes prsync down,
// so no rsync is left stopped or orphaned. Defer it at the top of every goroutine.
func (p *Pool) RecoverPanic() {
	if r := recover(); r != nil {
		p.TerminateAll()
		panic(r)
	}
}

// waitGate blocks until a new rsync may start. It returns false when ctx ended or the
// run was aborted.
func (p *Pool) waitGate(ctx context.Context) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for !p.gate && ctx.Err() == nil && p.abort == nil {
		p.cond.Wait()
	}
	return ctx.Err() == nil && p.abort == nil
}

// chunkState is what is known about each path of a chunk across attempts.
type chunkState struct {
	c        *splitter.Chunk
	status   []string // "" while unknown
	reason   []string
	byName   map[string]int // rsync's relative name -> index
	byPath   map[string]int // absolute source path -> index
	dstRoot  string         // local DEST, to match receiver-side names
	anyError bool           // a stderr line that named no path of the chunk
	noSpace  bool
	// mkdirRace: rsync lost a race with a sibling creating DEST's parents; a retry succeeds
	mkdirRace bool
	fileB     int64
}

func newChunkState(c *splitter.Chunk, dest string) *chunkState {
	s := &chunkState{c: c, status: make([]string, c.Len()), reason: make([]string, c.Len())}
	s.byName = make(map[string]int, c.Len())
	s.byPath = make(map[string]int, c.Len())
	for i, e := range c.Entries {
		abs, rel := splitEntry(c.Src, e)
		s.byName[rel] = i
		s.byPath[abs] = i
	}
	if !isRemote(dest) {
		if d, err := filepath.Abs(dest); err == nil {
			s.dstRoot = d
		}
	}
	return s
}

// splitEntry returns the absolute source path and the name rsync reports for an entry.
func splitEntry(src string, e []byte) (abs, rel string) {
	return filepath.Join(src, string(e)), splitter.RelOf(e)
}

// srcArg is rsync's source argument for a chunk's directory.
func srcArg(src string) string {
	if strings.HasSuffix(src, "/") {
		return src
	}
	return src + "/"
}

// confirmTransferred is for a chunk cut short: rsync may report a file done just before
// its receiver, interrupted, drops it. A transferred path stands only when the local DEST
// holds it with the source's size and mtime; otherwise (and always with a remote DEST) it
// becomes not done, so that --failed lists it again.
func (s *chunkState) confirmTransferred() {
	for i, e := range s.c.Entries {
		if s.status[i] != Transferred {
			continue
		}
		if s.dstRoot != "" {
			abs, rel := splitEntry(s.c.Src, e)
			d, derr := os.Lstat(filepath.Join(s.dstRoot, rel))
			src, serr := os.Lstat(abs)
			if derr == nil && serr == nil && d.Size() == src.Size() && d.ModTime().Equal(src.ModTime()) {
				continue
			}
		}
		s.status[i], s.reason[i] = "", ""
	}
}

// reset forgets what the previous attempt said went wrong; what it copied stays copied.
func (s *chunkState) reset() {
	s.noSpace, s.mkdirRace, s.anyError = false, false, false
	for i, st := range s.status {
		if st != Transferred {
			s.status[i], s.reason[i] = "", ""
		}
	}
}

func (s *chunkState) item(it Item) (int64, bool) {
	i, ok := s.byName[string(it.Name)]
	if !ok {
		return 0, false
	}
	s.status[i] = Transferred
	s.reason[i] = ""
	if it.IsFile() {
		return it.Size, true
	}
	return 0, true
}

func (s *chunkState) problem(line []byte) {
	pr, ok := ParseProblem(line)
	if !ok {
		if !IsSummaryLine(line) && bytes.HasPrefix(line, []byte("rsync")) {
			s.anyError = true
		}
		return
	}
	if pr.NoSpace {
		s.noSpace = true
	}
	if pr.MkdirRace {
		s.mkdirRace = true
	}
	name := filepath.Clean(string(pr.Name))
	i, ok := s.byPath[name]
	if !ok {
		i, ok = s.byName[name]
	}
	if !ok && s.dstRoot != "" {
		if rel, under := strings.CutPrefix(name, s.dstRoot+"/"); under {
			i, ok = s.byName[rel]
		}
	}
	if !ok {
		s.anyError = true
		return
	}
	if pr.Vanished {
		s.status[i], s.reason[i] = Vanished, string(line)
	} else {
		s.status[i], s.reason[i] = Failed, string(line)
	}
}

func (p *Pool) runChunk(ctx context.Context, c *splitter.Chunk) {
	st := newChunkState(c, p.Dest)
	started := false
	defer func() {
		if !started {
			p.Tally.Started(c.Len(), c.Bytes)
			p.mu.Lock()
			p.queued--
			p.mu.Unlock()
		}
	}()
	for attempt := 1; ; attempt++ {
		if !p.waitGate(ctx) {
			reason, status := "interrupted before rsync started", NotDone
			if ab := p.Aborted(); ab != nil && ctx.Err() == nil {
				reason, status = "not attempted: "+ab.Error(), Failed
			}
			p.settle(st, status, reason)
			return
		}
		if !started {
			started = true
			p.Tally.Started(c.Len(), c.Bytes)
			p.mu.Lock()
			p.queued--
			p.mu.Unlock()
			p.chunks.Add(1)
		}
		st.reset()
		res := p.attempt(ctx, st, attempt)
		class := Classify(res.code, res.cancelled, st.noSpace)
		if res.code == 11 && st.mkdirRace {
			class = Transient
		}
		if class == Transient && attempt <= p.Retries && ctx.Err() == nil {
			p.retries.Add(1)
			p.endEvent(st, attempt, res, "retrying")
			if !sleepCtx(ctx, backoff(p.RetryDelay, attempt)) {
				p.settle(st, NotDone, "interrupted while waiting to retry")
				return
			}
			continue
		}
		if class == Transient {
			class = Fatal
		}
		status := p.finish(st, class, res)
		p.endEvent(st, attempt, res, status)
		return
	}
}

type result struct {
	code      int
	cancelled bool
	err       error // a start error
	stderr    string
	seconds   float64
	pid       int
}

func (p *Pool) attempt(ctx context.Context, st *chunkState, attempt int) result {
	c := st.c
	args := append(append([]string(nil), p.Args...),
		"--files-from=-", "--from0", "--out-format="+OutFormat, "--", srcArg(c.Src), p.Dest)
	cmd := osexec.CommandContext(ctx, p.Rsync, args...)
	cmd.Stdin = &entryReader{entries: c.Entries}
	out := &lineWriter{fn: func(line []byte) {
		if it, ok := ParseItem(line); ok {
			if n, ok := st.item(it); ok && n > 0 {
				st.fileB += n
				p.Tally.BytesTransferred(n)
			}
		}
	}}
	errBuf := &capWriter{max: 4 << 10}
	errLines := &lineWriter{fn: st.problem}
	cmd.Stdout = out
	cmd.Stderr = io.MultiWriter(errBuf, errLines)
	cancelled := atomic.Bool{}
	setProcAttr(cmd)
	cmd.Cancel = func() error {
		cancelled.Store(true)
		return terminateGroup(cmd.Process.Pid)
	}
	cmd.WaitDelay = p.Grace
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return result{code: 127, err: err, stderr: err.Error()}
	}
	pid := cmd.Process.Pid
	p.mu.Lock()
	p.procs[c.ID] = &proc{chunk: c.ID, pid: pid, started: t0}
	p.mu.Unlock()
	if p.killed.Load() {
		killGroup(pid)
	}
	p.Events.Emit(&event.ChunkStart{Chunk: c.ID, Attempt: attempt, Files: c.Len(), Bytes: c.Bytes, PID: pid})
	err := cmd.Wait()
	p.mu.Lock()
	delete(p.procs, c.ID)
	p.mu.Unlock()
	if cancelled.Load() || p.killed.Load() || errors.Is(err, osexec.ErrWaitDelay) {
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
	return result{
		code:      code,
		cancelled: cancelled.Load() || p.killed.Load(),
		stderr:    errBuf.String(),
		seconds:   time.Since(t0).Seconds(),
		pid:       pid,
	}
}

// finish settles every path of a chunk after its last attempt and returns its status.
func (p *Pool) finish(st *chunkState, class Class, res result) string {
	msg := lastLine(res.stderr)
	switch class {
	case OK:
		p.settle(st, UpToDate, "")
		return "ok"
	case Partial:
		if st.anyError && res.code == 23 {
			p.settle(st, Failed, "rsync exit 23: "+msg)
		} else {
			p.settle(st, UpToDate, "")
		}
		for _, s := range st.status {
			if s == Failed {
				p.failedC.Add(1)
				return "partial"
			}
		}
		return "vanished"
	case Cancelled:
		st.confirmTransferred()
		p.settle(st, NotDone, "interrupted")
		return "cancelled"
	case Fatal:
		p.mu.Lock()
		if p.abort == nil {
			p.abort = &AbortError{Chunk: st.c.ID, ExitCode: res.code, Msg: msg, Hint: Hint(res.code, st.noSpace)}
			p.cond.Broadcast()
		}
		p.mu.Unlock()
	}
	p.failedC.Add(1)
	p.settle(st, Failed, fmt.Sprintf("rsync exit %d: %s", res.code, msg))
	return "failed"
}

// settle gives every path without an outcome the given one, and reports them all.
func (p *Pool) settle(st *chunkState, status, reason string) {
	for i, in := range st.c.Inputs {
		if st.status[i] == "" {
			st.status[i], st.reason[i] = status, reason
		}
		p.Tally.Path(in, st.status[i], st.reason[i], st.c.ID)
	}
	p.Tally.Flush()
}

func (p *Pool) endEvent(st *chunkState, attempt int, res result, status string) {
	ev := &event.ChunkEnd{
		Chunk: st.c.ID, Attempt: attempt, Files: st.c.Len(), Bytes: st.c.Bytes,
		BytesTransferred: st.fileB, Seconds: res.seconds, ExitCode: res.code, Status: status,
		Error: res.stderr,
	}
	for _, s := range st.status {
		switch s {
		case Transferred:
			ev.FilesTransferred++
		case Failed:
			ev.FilesFailed++
		case Vanished:
			ev.FilesVanished++
		}
	}
	if res.code != 0 && res.code != 24 {
		ev.Hint = Hint(res.code, st.noSpace)
	}
	p.Events.Emit(ev)
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	lines := strings.Split(s, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if l != "" && !IsSummaryLine([]byte(l)) {
			return l
		}
	}
	if s == "" {
		return "no error output"
	}
	return lines[len(lines)-1]
}

func backoff(base time.Duration, attempt int) time.Duration {
	d := base << (attempt - 1)
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

// Procs returns the running rsync groups, for the throttle.
func (p *Pool) Procs() []throttle.Proc {
	p.init()
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]throttle.Proc, 0, len(p.procs))
	for _, pr := range p.procs {
		out = append(out, throttle.Proc{Chunk: pr.chunk, PID: pr.pid, Started: pr.started, Paused: pr.paused, PausedAt: pr.pausedAt})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Started.Before(out[j].Started) })
	return out
}

// Queued returns the number of chunks waiting to start.
func (p *Pool) Queued() int {
	p.init()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.queued
}

// Counts returns the number of running and of paused rsync groups.
func (p *Pool) Counts() (running, paused int) {
	p.init()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pr := range p.procs {
		if pr.paused {
			paused++
		} else {
			running++
		}
	}
	return running, paused
}

// Pause stops a chunk's rsync group with SIGSTOP.
func (p *Pool) Pause(chunk int) error {
	p.init()
	p.mu.Lock()
	defer p.mu.Unlock()
	pr, ok := p.procs[chunk]
	if !ok || pr.paused || p.closing {
		// a group being cancelled must run to act on its TERM
		return nil
	}
	if err := stopGroup(pr.pid); err != nil {
		return err
	}
	pr.paused, pr.pausedAt = true, time.Now()
	return nil
}

// Resume continues a chunk's rsync group with SIGCONT.
func (p *Pool) Resume(chunk int) error {
	p.init()
	p.mu.Lock()
	defer p.mu.Unlock()
	pr, ok := p.procs[chunk]
	if !ok {
		return nil
	}
	pr.paused = false
	return continueGroup(pr.pid)
}

// SetGate allows or forbids starting new rsyncs.
func (p *Pool) SetGate(open bool) {
	p.init()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gate = open
	p.cond.Broadcast()
}

// ContinueAll sends SIGCONT to every group, paused or not.
func (p *Pool) ContinueAll() {
	p.init()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pr := range p.procs {
		pr.paused = false
		continueGroup(pr.pid)
	}
}

// TerminateAll sends TERM then CONT to every group.
func (p *Pool) TerminateAll() {
	p.init()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pr := range p.procs {
		pr.paused = false
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

// entryReader yields the entries NUL-terminated, without building one big buffer.
type entryReader struct {
	entries [][]byte
	off     int
}

func (r *entryReader) Read(b []byte) (int, error) {
	n := 0
	for n < len(b) {
		if len(r.entries) == 0 {
			if n == 0 {
				return 0, io.EOF
			}
			return n, nil
		}
		e := r.entries[0]
		if r.off < len(e) {
			k := copy(b[n:], e[r.off:])
			r.off += k
			n += k
			continue
		}
		b[n] = 0
		n++
		r.entries = r.entries[1:]
		r.off = 0
	}
	return n, nil
}

// capWriter keeps the first max bytes written to it.
type capWriter struct {
	max  int
	buf  []byte
	more bool
}

func (w *capWriter) Write(b []byte) (int, error) {
	room := w.max - len(w.buf)
	if room >= len(b) {
		w.buf = append(w.buf, b...)
	} else {
		if room > 0 {
			w.buf = append(w.buf, b[:room]...)
		}
		w.more = true
	}
	return len(b), nil
}

func (w *capWriter) String() string {
	if w.more {
		return string(w.buf) + "…(cut)"
	}
	return string(w.buf)
}

// isRemote reports whether an rsync destination is on another host.
func isRemote(dest string) bool {
	if strings.HasPrefix(dest, "rsync://") {
		return true
	}
	i := strings.IndexByte(dest, ':')
	if i < 0 {
		return false
	}
	slash := strings.IndexByte(dest, '/')
	return slash < 0 || i < slash
}

// IsRemote reports whether an rsync destination is on another host (host:path,
// host::module or rsync://).
func IsRemote(dest string) bool { return isRemote(dest) }
