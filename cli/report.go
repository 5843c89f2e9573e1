package cli

import (
	"bufio"
	"fmt"
	"io"
	"time"

	"github.com/prsync/prsync/event"
	"github.com/prsync/prsync/exec"
	"github.com/prsync/prsync/rsync"
	"github.com/prsync/prsync/throttle"
)

// Counts are the books of a run: what became of every path read.
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
}

// Done returns the number of paths settled one way or another.
func (c Counts) Done() int64 { return c.Transferred + c.UpToDate + c.Failed + c.Vanished + c.NotDone }

// settled is a path the splitter settled without rsync.
type settled struct {
	input          []byte
	status, reason string
}

// splitBatch is what the splitter settled since its last batch.
type splitBatch struct {
	accepted, acceptedBytes int64
	fresh, freshBytes       int64
	empty                   int64
	settled                 []settled
}

// inputError ends the input early.
type inputError struct{ err error }

// reporter owns the books (the counts and the --failed list) and writes every event.
// During a run only its loop touches them; the pipeline's other goroutines send it
// messages on in. Before the loop starts and after it has ended, the pipeline's own
// goroutine calls its methods.
type reporter struct {
	enc    *event.Encoder
	stderr io.Writer
	prog   *progress
	pool   *exec.Pool
	last   *sampleBox
	t0     time.Time
	every  time.Duration
	inDone func() bool // the input has ended

	c        Counts
	sep      byte
	list     *bufio.Writer
	closer   io.Closer
	listErr  error
	jobsMin  int
	jobsMax  int
	refusals int
	hint     string // advice for the first path failure that has one
	jobsAuto bool
	bw       bwControl // the total bandwidth limit, or nil
	metrics  *metrics  // --metrics-file, or nil
	metErr   bool      // a metrics write failed (said once)
	dryRun   bool      // -n: deletions are what would be deleted
	crlfSaid bool      // the CRLF hint was given
	phase    string    // "copy", or "delete" once the deletion pass runs
	delDirs  int64     // directories the deletion pass checks

	in chan any
}

func newReporter(enc *event.Encoder, stderr io.Writer, sep byte, failed io.WriteCloser) *reporter {
	r := &reporter{enc: enc, stderr: stderr, sep: sep, in: make(chan any, 16), phase: "copy"}
	if failed != nil {
		r.list = bufio.NewWriter(failed)
		r.closer = failed
	}
	return r
}

// loop handles messages until in is closed, and writes a progress event every interval.
func (r *reporter) loop() {
	tick := time.NewTicker(r.every)
	defer tick.Stop()
	for {
		select {
		case m, ok := <-r.in:
			if !ok {
				return
			}
			r.handle(m)
		case <-tick.C:
			r.progress()
		}
	}
}

func (r *reporter) handle(m any) {
	switch m := m.(type) {
	case *splitBatch:
		r.c.Files += m.accepted + m.fresh + int64(len(m.settled))
		r.c.Bytes += m.acceptedBytes + m.freshBytes
		r.c.Queued += m.accepted
		r.c.QueuedBytes += m.acceptedBytes
		r.c.UpToDate += m.fresh
		r.c.Empty += m.empty
		for _, s := range m.settled {
			r.path(s.input, rsync.Status(s.status), s.reason, "", 0)
		}
		r.flushList()
	case exec.ChunkStarted:
		if m.Attempt == 1 {
			r.c.Queued -= int64(m.Chunk.Len())
			r.c.QueuedBytes -= m.Chunk.Bytes
		}
		r.enc.Emit(&event.ChunkStart{Chunk: m.Chunk.ID, Attempt: m.Attempt, Files: m.Chunk.Len(), Bytes: m.Chunk.Bytes, PID: m.PID})
	case exec.ChunkEnded:
		r.chunkEnded(m)
	case exec.ChunkDropped:
		if !m.Started {
			r.c.Queued -= int64(m.Chunk.Len())
			r.c.QueuedBytes -= m.Chunk.Bytes
		}
		for _, in := range m.Chunk.Inputs {
			r.path(in, m.Status, m.Reason, "", m.Chunk.ID)
		}
		r.flushList()
	case exec.LimitChanged:
		r.limitChanged(m)
	case throttle.Event:
		r.throttled(m)
	case inputError:
		r.enc.Emit(&event.Error{Error: m.err.Error()})
	case statusRequest:
		r.status(m)
	case controlChange:
		r.enc.Emit(&event.Control{What: m.what, Old: m.old, New: m.new})
	case bwChanged:
		r.enc.Emit(m.ev)
	case exec.DeleteEnded:
		r.deleteEnded(m)
	case phaseChange:
		r.phase, r.delDirs, r.prog.delDirs = m.phase, m.dirs, m.dirs
		r.progress()
	case countsRequest:
		m.reply <- r.c
	default:
		panic(fmt.Sprintf("reporter: unknown message %T", m))
	}
}

func (r *reporter) chunkEnded(m exec.ChunkEnded) {
	ev := &event.ChunkEnd{
		Chunk: m.Chunk.ID, Attempt: m.Attempt, Files: m.Chunk.Len(), Bytes: m.Chunk.Bytes,
		BytesTransferred: m.BytesLogged, Seconds: m.Seconds, ExitCode: m.ExitCode, Status: m.Status,
		Error: m.Error, Hint: m.Hint, Unexplained: m.Unexplained,
	}
	if v := m.Verify; v != nil {
		ev.VerifyPaths, ev.VerifyFailed, ev.VerifySeconds = v.Paths, v.Failed, v.Seconds
		r.c.Verified += int64(v.Paths - v.Failed)
		r.c.VerifyFailed += int64(v.Failed)
		r.c.VerifySeconds += v.Seconds
	}
	if m.Confirm != nil {
		ev.ConfirmedBy, ev.ConfirmPaths, ev.ConfirmLanded, ev.ConfirmSeconds = m.Confirm.Method, m.Confirm.Paths, m.Confirm.Landed, m.Confirm.Seconds
		r.c.ConfirmSeconds += m.Confirm.Seconds
	}
	if m.Outcomes != nil {
		ev.BytesTransferred = 0
		for i, o := range m.Outcomes {
			switch o.Status {
			case rsync.Transferred:
				ev.FilesTransferred++
				ev.BytesTransferred += o.Bytes
			case rsync.Failed:
				ev.FilesFailed++
			case rsync.Vanished:
				ev.FilesVanished++
			}
			r.path(m.Chunk.Inputs[i], o.Status, o.Reason, o.Hint, m.Chunk.ID)
			r.c.BytesTransferred += o.Bytes
		}
		if m.Unexplained != "" {
			r.c.ChunkErrors++
		}
	}
	r.enc.Emit(ev)
	r.flushList()
}

func (r *reporter) limitChanged(m exec.LimitChanged) {
	r.jobsMin, r.jobsMax = min(r.jobsMin, m.New), max(r.jobsMax, m.New)
	rate := round1(m.RateBps)
	if rate == 0 {
		rate = r.rate()
	}
	r.enc.Emit(&event.Jobs{Old: m.Old, New: m.New, Reason: m.Reason, Detail: m.Detail, RateBps: rate})
	if m.Reason == "refused" {
		r.refusals++
		if r.refusals == 1 {
			fmt.Fprintf(r.stderr, "prsync: warning: the far side refused a session (%s); running at most %d rsyncs at once\n", m.Detail, m.New)
		}
	}
}

func (r *reporter) throttled(e throttle.Event) {
	s := e.Sample
	r.enc.Emit(&event.Throttle{
		Action: e.Action, Reason: e.Reason, CPUPercent: round1(s.CPU),
		OwnCPUPercent:    optional(s.HasOwn, s.Own),
		KernelCPUPercent: optional(s.HasOwn, s.Kernel),
		Load:             optional(s.HasLoad, s.Load),
		IOPressure:       optional(s.HasIO, s.IOPressure),
		CPUPressure:      optional(s.HasCPUPressure, s.CPUPressure),
		CgroupCPUPercent: optional(s.HasCgroup, s.CgroupCPU), CgroupOwnCPUPercent: optional(s.HasCgroup && s.HasOwn, s.CgroupOwn),
		Chunk: e.Chunk, PID: e.PID, Running: e.Running, Suspended: e.Suspended,
	})
}

// path records the outcome of one path: it counts it, and a path not done is listed
// (--failed) and reported (path_failed). hint is advice for a failed path, or "".
func (r *reporter) path(input []byte, status rsync.Status, reason, hint string, chunk int) {
	switch status {
	case rsync.Transferred:
		r.c.Transferred++
		return
	case rsync.UpToDate:
		r.c.UpToDate++
		return
	case rsync.Vanished:
		r.c.Vanished++
		if !r.crlfSaid && len(input) > 1 && input[len(input)-1] == '\r' {
			// a list written on Windows: every name ends in CR, and none exists
			r.crlfSaid = true
			fmt.Fprintln(r.stderr, `prsync: hint: the input has CRLF line ends; convert it with tr -d '\r'`)
		}
	case rsync.Failed:
		r.c.Failed++
		if r.hint == "" {
			r.hint = hint
		}
	case rsync.NotDone:
		r.c.NotDone++
	default:
		panic("cli: unknown status " + string(status))
	}
	p, b64 := event.PathFields(input)
	r.enc.Emit(&event.PathFailed{Path: p, PathB64: b64, Status: string(status), Reason: reason, Chunk: chunk})
	if r.list == nil || r.listErr != nil {
		return
	}
	r.list.Write(input)
	if err := r.list.WriteByte(r.sep); err != nil {
		r.listErr = fmt.Errorf("write --failed list: %w", err)
	}
}

// flushList writes out the buffered part of the --failed list, so that a crash still
// leaves a usable list.
func (r *reporter) flushList() {
	if r.list != nil && r.listErr == nil {
		if err := r.list.Flush(); err != nil {
			r.listErr = fmt.Errorf("write --failed list: %w", err)
		}
	}
}

// closeList flushes and closes the --failed list.
func (r *reporter) closeList() error {
	r.flushList()
	if r.closer != nil {
		if err := r.closer.Close(); err != nil && r.listErr == nil {
			r.listErr = fmt.Errorf("close --failed list: %w", err)
		}
	}
	return r.listErr
}

func (r *reporter) rate() float64 {
	el := time.Since(r.t0).Seconds()
	if el <= 0 {
		return 0
	}
	return round1(float64(r.c.BytesTransferred+r.pool.InFlight()) * 8 / el)
}

// progress writes a progress event and updates the terminal line.
func (r *reporter) progress() {
	s, _ := r.last.get()
	running, paused := r.pool.Counts()
	c := r.c
	el := time.Since(r.t0).Seconds()
	ev := &event.Progress{
		FilesDone: c.Done(), BytesDone: c.BytesTransferred + r.pool.InFlight(), FilesQueued: c.Queued,
		InputDone: r.inDone(), RateBps: r.rate(), CPUPercent: round1(s.CPU),
		OwnCPUPercent: optional(s.HasOwn, s.Own), KernelCPUPercent: optional(s.HasOwn, s.Kernel), Running: running, Suspended: paused, Elapsed: round3(el),
		CgroupCPUPercent: optional(s.HasCgroup, s.CgroupCPU), CgroupOwnCPUPercent: optional(s.HasCgroup && s.HasOwn, s.CgroupOwn),
		Jobs: r.pool.Limit(), Phase: r.phase,
		FilesVerified: c.Verified, FilesVerifyFailed: c.VerifyFailed, DirsChecked: c.DirsChecked, FilesDeleted: c.Deleted,
	}
	r.enc.Emit(ev)
	r.prog.update(ev, c, s.CPU)
	r.writeMetrics(el)
}

// writeMetrics updates the --metrics-file, and says once when it cannot.
func (r *reporter) writeMetrics(elapsed float64) {
	if r.metrics == nil {
		return
	}
	if err := r.metrics.write(elapsed); err != nil && !r.metErr {
		r.metErr = true
		fmt.Fprintf(r.stderr, "prsync: warning: --metrics-file: %v\n", err)
	}
}

func timeSince(t time.Time) float64 { return time.Since(t).Seconds() }

// optional is v, rounded, for an event field that is there only when has is true.
func optional(has bool, v float64) *float64 {
	if !has {
		return nil
	}
	v = round1(v)
	return &v
}
