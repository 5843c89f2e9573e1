// Package books keeps the books of a run, what became of every path and chunk, and tells their printers every piece of news: the events, the lines on stderr and the snapshots that every status, the metrics and the summary print.
package books

import (
	"errors"
	"io"
	"time"

	"github.com/prsync/prsync/bw"
	"github.com/prsync/prsync/exec"
	"github.com/prsync/prsync/rsync"
	"github.com/prsync/prsync/splitter"
	"github.com/prsync/prsync/throttle"
)

// Counts are the tally of a run: what became of every path read, and of its chunks.
type Counts struct {
	Files, Bytes                  int64
	Transferred, BytesTransferred int64
	UpToDate, Failed, Vanished    int64
	NotDone, Empty                int64
	Queued, QueuedBytes           int64
	ChunkErrors                   int64
	ConfirmSeconds                float64
	// the verification pass: paths that matched, that did not, and its rsync time
	Verified, VerifyFailed int64
	VerifySeconds          float64
	// the deletion pass: directories checked and entries deleted
	DirsChecked, Deleted int64
	// Chunks are the chunks rsync ran, each once however often it was tried;
	// ChunksFailed those that settled partial or failed; Retries the attempts tried again.
	Chunks, ChunksFailed, Retries int64
}

// Done returns the number of paths settled one way or another.
func (c Counts) Done() int64 { return c.Transferred + c.UpToDate + c.Failed + c.Vanished + c.NotDone }

// NotOK returns the number of paths that failed, vanished or were not done.
func (c Counts) NotOK() int64 { return c.Failed + c.Vanished + c.NotDone }

// Books are the books of one run, and the one teller of its news: they count what
// happened and tell their printers. They are not safe for concurrent use: during a run
// one goroutine owns them and the others send it what happened.
type Books struct {
	c        Counts
	list     *List
	paths    *PathLog // --paths-log, or nil
	hint     string   // advice for the first path failure that has one
	jobsMin  int
	jobsMax  int
	refusals int
	phase    string // "copy", or "delete" once the deletion pass runs
	delDirs  int64  // directories the deletion pass checks

	printers []Printer
	live     func() Live
	dryRun   bool
	lines    bool
	crlfSaid bool   // the CRLF hint was given
	destHint string // the hint for a path inside a local DEST, until it is given
}

// Config is how the books of a run are kept and told.
type Config struct {
	// Jobs is the number of rsyncs allowed at once at the start.
	Jobs int
	// Failed, if not nil, lists the paths not done (--failed), each followed by Sep.
	Failed io.WriteCloser
	Sep    byte
	// PathLog, if not nil, records every path's outcome as it settles (--paths-log).
	PathLog *PathLog
	// Printers show the news, each in turn. Live says, whenever a snapshot is taken, what
	// the books do not count themselves (nil: nothing).
	Printers []Printer
	Live     func() Live
	// DryRun: rsync runs with --dry-run, so a path transferred is one it would transfer,
	// and an entry deleted one it would delete.
	DryRun bool
	// Lines: the records are lines, not NUL-separated, so a name that ends in CR and
	// vanished is a CRLF list's. InsideDestHint is the advice for a path inside a local
	// DEST (splitter.InsideDest), or "". Each hint is given once, before the first path
	// failure it explains.
	Lines          bool
	InsideDestHint string
}

// New returns the books of a run.
func New(c Config) *Books {
	b := &Books{jobsMin: c.Jobs, jobsMax: c.Jobs, phase: "copy", paths: c.PathLog, printers: c.Printers, live: c.Live,
		dryRun: c.DryRun, lines: c.Lines, destHint: c.InsideDestHint}
	if c.Failed != nil {
		b.list = NewList(c.Failed, c.Sep)
	}
	return b
}

// each tells every printer, in turn.
func (b *Books) each(tell func(Printer)) {
	for _, p := range b.printers {
		tell(p)
	}
}

// Start tells the printers the run starts.
func (b *Books) Start(r Run) { b.each(func(p Printer) { p.Started(r) }) }

// Input is what the splitter read since it last said: paths queued for rsync, paths it
// found up to date (fresh), empty records, and paths it settled itself.
type Input struct {
	Queued, QueuedBytes int64
	Fresh, FreshBytes   int64
	Empty               int64
	Settled             []Settled
	// FreshInputs are the fresh paths themselves, kept only for a --paths-log.
	FreshInputs [][]byte
}

// Settled is a path the splitter settled without rsync.
type Settled struct {
	Input  []byte
	Status rsync.Status
	Reason string
}

// Read counts what the splitter read.
func (b *Books) Read(in *Input) {
	b.c.Files += in.Queued + in.Fresh + int64(len(in.Settled))
	b.c.Bytes += in.QueuedBytes + in.FreshBytes
	b.c.Queued += in.Queued
	b.c.QueuedBytes += in.QueuedBytes
	b.c.UpToDate += in.Fresh
	b.c.Empty += in.Empty
	for _, f := range in.FreshInputs {
		b.paths.Add(f, rsync.UpToDate, "", 0, 0, "")
	}
	for _, s := range in.Settled {
		b.path(s.Input, rsync.Outcome{Status: s.Status, Reason: s.Reason}, 0)
	}
	b.flush()
}

// ChunkStarted counts an rsync that started on a chunk: at its first attempt the chunk's
// paths are no longer queued.
func (b *Books) ChunkStarted(m exec.ChunkStarted) {
	if m.Attempt == 1 {
		b.dequeue(m.Chunk.Len(), m.Chunk.Bytes)
	}
	b.each(func(p Printer) { p.ChunkStarted(m) })
}

// ChunkTally is what a settled chunk's paths came to.
type ChunkTally struct {
	Transferred, Failed, Vanished int
	BytesTransferred              int64
}

// ChunkEnded counts an rsync that ended on a chunk and, once the chunk is settled, each
// of its paths, and tells what they came to: in a dry run, each path rsync would transfer
// first. A chunk counts at the end of its first attempt, which every chunk the pool runs
// reports, whether or not its rsync could start.
func (b *Books) ChunkEnded(m exec.ChunkEnded) {
	t := b.ended(m)
	if b.dryRun {
		for i, o := range m.Outcomes {
			if o.Status == rsync.Transferred {
				b.each(func(p Printer) { p.WouldTransfer(m.Chunk.Inputs[i], o, m.Chunk.ID) })
			}
		}
	}
	b.each(func(p Printer) { p.ChunkEnded(m, t) })
}

// ended counts what ChunkEnded tells, and returns the chunk's tally.
func (b *Books) ended(m exec.ChunkEnded) ChunkTally {
	if m.Attempt == 1 {
		b.c.Chunks++
	}
	switch m.Status {
	case exec.ChunkRetrying:
		b.c.Retries++
	case exec.ChunkPartial, exec.ChunkFailed:
		b.c.ChunksFailed++
	}
	if v := m.Verify; v != nil {
		b.c.Verified += int64(v.Paths - v.Failed)
		b.c.VerifyFailed += int64(v.Failed)
		b.c.VerifySeconds += v.Seconds
	}
	if m.Confirm != nil {
		b.c.ConfirmSeconds += m.Confirm.Seconds
	}
	var t ChunkTally
	if m.Outcomes == nil {
		return t
	}
	for i, o := range m.Outcomes {
		switch o.Status {
		case rsync.Transferred:
			t.Transferred++
			t.BytesTransferred += o.Bytes
		case rsync.Failed:
			t.Failed++
		case rsync.Vanished:
			t.Vanished++
		}
		b.path(m.Chunk.Inputs[i], o, m.Chunk.ID)
		b.c.BytesTransferred += o.Bytes
	}
	if m.Unexplained != "" {
		b.c.ChunkErrors++
	}
	b.flush()
	return t
}

// ChunkDropped counts a chunk that no rsync will run: each of its paths has the same
// outcome.
func (b *Books) ChunkDropped(m exec.ChunkDropped) {
	if !m.Started {
		b.dequeue(m.Chunk.Len(), m.Chunk.Bytes)
	}
	for _, in := range m.Chunk.Inputs {
		b.path(in, rsync.Outcome{Status: m.Status, Reason: m.Reason}, m.Chunk.ID)
	}
	b.flush()
}

// flush writes out what the --failed list and the --paths-log hold.
func (b *Books) flush() {
	b.list.Flush()
	b.paths.Flush()
}

func (b *Books) dequeue(files int, bytes int64) {
	b.c.Queued -= int64(files)
	b.c.QueuedBytes -= bytes
}

// LimitChanged notes a new number of rsyncs allowed at once, and a refused session.
func (b *Books) LimitChanged(m exec.LimitChanged) {
	b.jobsMin, b.jobsMax = min(b.jobsMin, m.New), max(b.jobsMax, m.New)
	if m.Reason == "refused" {
		b.refusals++
	}
	s := b.snapshot()
	b.each(func(p Printer) { p.JobsChanged(m, s) })
}

// DeleteEnded counts one rsync of the deletion pass, and tells each entry it deleted and
// why it did not complete.
func (b *Books) DeleteEnded(m exec.DeleteEnded) {
	b.c.DirsChecked += int64(m.Dirs)
	b.c.Deleted += int64(len(m.Deleted))
	for _, d := range m.Deleted {
		b.each(func(p Printer) { p.Deleted(d, b.dryRun) })
	}
	if m.Err != "" && m.Err != "interrupted" {
		b.each(func(p Printer) { p.Error("deletion pass: " + m.Err) })
	}
}

// InputFailed tells that the input could not be read to its end.
func (b *Books) InputFailed(err error) { b.each(func(p Printer) { p.Error(err.Error()) }) }

// Throttled tells a pause or resume of the throttle.
func (b *Books) Throttled(e throttle.Event) { b.each(func(p Printer) { p.Throttled(e) }) }

// ThrottleNotice tells the throttle's notice.
func (b *Books) ThrottleNotice(n throttle.Notice) { b.each(func(p Printer) { p.ThrottleNotice(n) }) }

// BWLimitChanged tells a change of the bandwidth limit in force.
func (b *Books) BWLimitChanged(c bw.Change) { b.each(func(p Printer) { p.BWLimitChanged(c) }) }

// ControlChanged tells a change made by live control.
func (b *Books) ControlChanged(what, old, new string) {
	b.each(func(p Printer) { p.ControlChanged(what, old, new) })
}

// WindowEnded tells that the --max-duration window ended (cause), and the grace the rsyncs
// running have.
func (b *Books) WindowEnded(cause string, grace time.Duration) {
	s := b.snapshot()
	b.each(func(p Printer) { p.WindowEnded(cause, grace, s) })
}

// SetPhase notes that the run moved on to another pass: "delete", over dirs directories.
func (b *Books) SetPhase(phase string, dirs int64) { b.phase, b.delDirs = phase, dirs }

// Update hands a snapshot of the books to every printer.
func (b *Books) Update() {
	s := b.snapshot()
	b.each(func(p Printer) { p.Update(s) })
}

// Status tells a status asked for by "socket" or "signal", and returns its snapshot.
func (b *Books) Status(by string) Snapshot {
	s := b.snapshot()
	b.each(func(p Printer) { p.Status(s, by) })
	return s
}

// Finish hands the last snapshot, with how the run ended, to every printer, and returns it.
func (b *Books) Finish(end End) Snapshot {
	s := b.snapshot()
	s.End = &end
	b.each(func(p Printer) { p.Finish(s) })
	return s
}

// Counts returns the tally so far.
func (b *Books) Counts() Counts { return b.c }

// CloseList flushes and closes the --failed list and the --paths-log, and returns their
// first errors.
func (b *Books) CloseList() error { return errors.Join(b.list.Close(), b.paths.Close()) }

// path records the outcome o of one path of chunk (0: none): it counts it and records it
// (--paths-log), and a path not done is listed (--failed) and told. o.Hint is rsync's
// advice for a failed path, or "".
func (b *Books) path(input []byte, o rsync.Outcome, chunk int) {
	b.paths.Add(input, o.Status, o.Reason, o.Bytes, chunk, o.Change)
	status, reason := o.Status, o.Reason
	switch status {
	case rsync.Transferred:
		b.c.Transferred++
		return
	case rsync.UpToDate:
		b.c.UpToDate++
		return
	case rsync.Vanished:
		b.c.Vanished++
	case rsync.Failed:
		b.c.Failed++
		if b.hint == "" {
			b.hint = o.Hint
		}
	case rsync.NotDone:
		b.c.NotDone++
	default:
		panic("books: unknown status " + string(status))
	}
	b.list.Add(input)
	b.advise(input, status, reason)
	f := Failure{Input: input, Status: status, Reason: reason, Chunk: chunk}
	b.each(func(p Printer) { p.PathFailed(f) })
}

// advise gives the hint that a path failure calls for, each once: a list written on
// Windows, whose names end in CR and exist without it (a remote source cannot be looked
// at: there every such name vanished); a path inside a local DEST.
func (b *Books) advise(input []byte, status rsync.Status, reason string) {
	if !b.crlfSaid && (reason == splitter.CRLF || b.lines && status == rsync.Vanished && len(input) > 1 && input[len(input)-1] == '\r') {
		b.crlfSaid = true
		b.each(func(p Printer) { p.Hint(`the input has CRLF line ends; convert it with tr -d '\r'`) })
	}
	if reason == splitter.InsideDest && b.destHint != "" {
		h := b.destHint
		b.destHint = ""
		b.each(func(p Printer) { p.Hint(h) })
	}
}

// snapshot returns the books as they stand, with what Config.Live says now.
func (b *Books) snapshot() Snapshot {
	var l Live
	if b.live != nil {
		l = b.live()
	}
	return b.Snapshot(l)
}

// Snapshot returns the books as they stand, with what live says of the rest of the run.
func (b *Books) Snapshot(live Live) Snapshot {
	return Snapshot{
		Counts: b.c, Live: live, JobsMin: b.jobsMin, JobsMax: b.jobsMax,
		Refusals: b.refusals, Phase: b.phase, DeleteDirs: b.delDirs, Hint: b.hint,
	}
}
