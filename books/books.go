// Package books keeps the books of a run, what became of every path and chunk, and hands them out as one Snapshot that every status, the metrics and the summary print.
package books

import (
	"errors"
	"io"

	"github.com/prsync/prsync/exec"
	"github.com/prsync/prsync/rsync"
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

// Books are the books of one run. They are not safe for concurrent use: during a run
// one goroutine owns them and the others send it what happened.
type Books struct {
	// Failed, if set, is called for each path that failed, vanished or was not done,
	// once it is counted and listed.
	Failed func(input []byte, status rsync.Status, reason string, chunk int)

	c        Counts
	list     *List
	paths    *PathLog // --paths-log, or nil
	hint     string   // advice for the first path failure that has one
	jobsMin  int
	jobsMax  int
	refusals int
	phase    string // "copy", or "delete" once the deletion pass runs
	delDirs  int64  // directories the deletion pass checks
}

// New returns the books of a run that starts with jobs rsyncs allowed at once. With a
// failed writer, the paths not done are listed there (--failed), each followed by sep.
func New(jobs int, failed io.WriteCloser, sep byte) *Books {
	b := &Books{jobsMin: jobs, jobsMax: jobs, phase: "copy"}
	if failed != nil {
		b.list = NewList(failed, sep)
	}
	return b
}

// LogPaths records every path's outcome in l as it settles (--paths-log).
func (b *Books) LogPaths(l *PathLog) { b.paths = l }

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

// Started counts an rsync that started on a chunk: at its first attempt the chunk's
// paths are no longer queued.
func (b *Books) Started(m exec.ChunkStarted) {
	if m.Attempt == 1 {
		b.dequeue(m.Chunk.Len(), m.Chunk.Bytes)
	}
}

// ChunkTally is what a settled chunk's paths came to.
type ChunkTally struct {
	Transferred, Failed, Vanished int
	BytesTransferred              int64
}

// Ended counts an rsync that ended on a chunk and, once the chunk is settled, each of
// its paths. A chunk counts at the end of its first attempt, which every chunk the pool
// runs reports, whether or not its rsync could start.
func (b *Books) Ended(m exec.ChunkEnded) ChunkTally {
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

// Dropped counts a chunk that no rsync will run: each of its paths has the same outcome.
func (b *Books) Dropped(m exec.ChunkDropped) {
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
}

// DeleteEnded counts one rsync of the deletion pass.
func (b *Books) DeleteEnded(m exec.DeleteEnded) {
	b.c.DirsChecked += int64(m.Dirs)
	b.c.Deleted += int64(len(m.Deleted))
}

// SetPhase notes that the run moved on to another pass: "delete", over dirs directories.
func (b *Books) SetPhase(phase string, dirs int64) { b.phase, b.delDirs = phase, dirs }

// Counts returns the tally so far.
func (b *Books) Counts() Counts { return b.c }

// CloseList flushes and closes the --failed list and the --paths-log, and returns their
// first errors.
func (b *Books) CloseList() error { return errors.Join(b.list.Close(), b.paths.Close()) }

// path records the outcome o of one path of chunk (0: none): it counts it and records it
// (--paths-log), and a path not done is listed (--failed) and passed to Failed. o.Hint is
// rsync's advice for a failed path, or "".
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
	if b.Failed != nil {
		b.Failed(input, status, reason, chunk)
	}
}

// Snapshot returns the books as they stand, with what live says of the rest of the run.
func (b *Books) Snapshot(live Live) Snapshot {
	return Snapshot{
		Counts: b.c, Live: live, JobsMin: b.jobsMin, JobsMax: b.jobsMax,
		Refusals: b.refusals, Phase: b.phase, DeleteDirs: b.delDirs, Hint: b.hint,
	}
}
