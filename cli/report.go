package cli

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/prsync/prsync/books"
	"github.com/prsync/prsync/event"
	"github.com/prsync/prsync/exec"
	"github.com/prsync/prsync/internal/cmdline"
	"github.com/prsync/prsync/rsync"
	"github.com/prsync/prsync/splitter"
	"github.com/prsync/prsync/throttle"
)

// reporter is the one goroutine that owns the books during a run: it counts what the
// pipeline's other goroutines send it on in, writes the events of each report, and hands
// a snapshot of the books to the printers every interval. Before the loop starts and
// after it has ended, the pipeline's own goroutine calls its methods.
type reporter struct {
	books    *books.Books
	json     books.JSON
	printers []books.Printer // the JSON events, the terminal line, the metrics file
	enc      *event.Encoder
	stderr   io.Writer
	pool     *exec.Pool
	throttle *throttle.Controller
	bw       bwControl // the total bandwidth limit, or nil
	last     *sampleBox
	t0       time.Time
	every    time.Duration
	inDone   func() bool // the input has ended
	jobsAuto bool
	dryRun   bool // -n: deletions are what would be deleted
	lines    bool // the records are lines, not NUL-separated
	crlfSaid bool // the CRLF hint was given
	// destHint is the hint for paths inside a local DEST (splitter.InsideDest), given once
	// and then cleared
	destHint string
	// tty says the progress line is drawn on stderr (books.Text): a line written there
	// clears it first, and the next interval draws it again
	tty bool
	// windowEnded is closed when the --max-duration window ends (nil without one):
	// windowNote says so, with windowCause, and what the rsyncs running get (grace)
	windowEnded <-chan struct{}
	windowCause string
	grace       time.Duration

	in chan message
}

// A message is news for the reporter from another goroutine of the run. apply hands it on,
// in the reporter's goroutine: every kind of message says how it is applied, so that none
// can be sent that the reporter does not take.
type message interface{ apply(*reporter) }

// loop handles messages until in is closed, and prints the books every interval.
func (r *reporter) loop() {
	tick := time.NewTicker(r.every)
	defer tick.Stop()
	windowEnded := r.windowEnded
	for {
		select {
		case m, ok := <-r.in:
			if !ok {
				return
			}
			m.apply(r)
		case <-tick.C:
			r.progress()
		case <-windowEnded:
			windowEnded = nil // said once
			r.windowNote()
		}
	}
}

// report is a report of the pool: a chunk started, ended or dropped, a change of the
// limit, a part of the deletion pass. The reporter is its exec.Listener.
type report struct{ exec.Report }

func (m report) apply(r *reporter) { m.Tell(r) }

// ChunkStarted counts an rsync that started, and writes its chunk_start.
func (r *reporter) ChunkStarted(m exec.ChunkStarted) {
	r.books.Started(m)
	r.enc.Emit(&event.ChunkStart{Chunk: m.Chunk.ID, Attempt: m.Attempt, Files: m.Chunk.Len(), Bytes: m.Chunk.Bytes, PID: m.PID})
}

// ChunkEnded counts an rsync that ended, and writes what it came to.
func (r *reporter) ChunkEnded(m exec.ChunkEnded) {
	t := r.books.Ended(m)
	r.wouldTransfer(m)
	r.chunkEnded(m, t)
}

// ChunkDropped counts a chunk that no rsync will run.
func (r *reporter) ChunkDropped(m exec.ChunkDropped) { r.books.Dropped(m) }

// LimitChanged counts a change of the limit, and writes its jobs event.
func (r *reporter) LimitChanged(m exec.LimitChanged) {
	r.books.LimitChanged(m)
	s := r.snapshot()
	r.json.Jobs(m, s)
	if m.Reason == "refused" && s.Refusals == 1 {
		// the limit may come down further: finish says where it ended
		cmdline.Warnf(r.stderr, "the far side refused a session (%s); prsync runs fewer rsyncs at once, and says at the end how many", m.Detail)
	}
}

// DeleteEnded reports one rsync of the deletion pass.
func (r *reporter) DeleteEnded(m exec.DeleteEnded) { r.deleteEnded(m) }

// inputRead is what the splitter read.
type inputRead struct{ *books.Input }

func (m inputRead) apply(r *reporter) { r.books.Read(m.Input) }

// throttled is a pause or resume of the throttle.
type throttled struct{ throttle.Event }

func (m throttled) apply(r *reporter) { r.json.Throttle(m.Event) }

// throttleNotice is the throttle's notice: it holds every rsync, or lets them run again.
type throttleNotice struct{ throttle.Notice }

func (m throttleNotice) apply(r *reporter) { r.throttleNotice(m.Notice) }

// inputError ends the input early.
type inputError struct{ err error }

func (m inputError) apply(r *reporter) { r.enc.Emit(&event.Error{Error: m.err.Error()}) }

// chunkEnded writes the chunk_end event of an rsync that ended; t is what its paths
// came to, once the chunk is settled.
func (r *reporter) chunkEnded(m exec.ChunkEnded, t books.ChunkTally) {
	ev := &event.ChunkEnd{
		Chunk: m.Chunk.ID, Attempt: m.Attempt, Files: m.Chunk.Len(), Bytes: m.Chunk.Bytes,
		BytesTransferred: m.BytesLogged, Seconds: m.Seconds, ExitCode: m.ExitCode, Status: string(m.Status),
		Error: m.Error, Hint: m.Hint, Unexplained: m.Unexplained,
	}
	if v := m.Verify; v != nil {
		ev.VerifyPaths, ev.VerifyFailed, ev.VerifySeconds = v.Paths, v.Failed, v.Seconds
	}
	if m.Confirm != nil {
		ev.ConfirmedBy, ev.ConfirmPaths, ev.ConfirmLanded, ev.ConfirmSeconds = m.Confirm.Method, m.Confirm.Paths, m.Confirm.Landed, m.Confirm.Seconds
	}
	if m.Outcomes != nil {
		ev.FilesTransferred, ev.FilesFailed, ev.FilesVanished = t.Transferred, t.Failed, t.Vanished
		ev.BytesTransferred = t.BytesTransferred
	}
	r.enc.Emit(ev)
}

// pathFailed reports a path that failed, vanished or was not done (path_failed), once
// the books have counted and listed it.
func (r *reporter) pathFailed(input []byte, status rsync.Status, reason string, chunk int) {
	if !r.crlfSaid && (reason == splitter.CRLF || r.lines && status == rsync.Vanished && len(input) > 1 && input[len(input)-1] == '\r') {
		// a list written on Windows: its names end in CR, and exist without it (a remote
		// source cannot be looked at: there every such name vanished)
		r.crlfSaid = true
		cmdline.Hintf(r.stderr, `the input has CRLF line ends; convert it with tr -d '\r'`)
	}
	if reason == splitter.InsideDest && r.destHint != "" {
		cmdline.Hintf(r.stderr, "%s", r.destHint)
		r.destHint = ""
	}
	p, b64 := event.PathFields(input)
	r.enc.Emit(&event.PathFailed{Path: p, PathB64: b64, Status: string(status), Reason: reason, Chunk: chunk})
}

// wouldTransfer names, in a dry run, each path of a settled chunk that rsync would
// transfer: a would_transfer event with rsync's itemized change, and, where the progress
// line is shown, a line on stderr as rsync -n -i prints it (">f+++++++++ path", the name
// escaped as rsync escapes it).
func (r *reporter) wouldTransfer(m exec.ChunkEnded) {
	if !r.dryRun {
		return
	}
	for i, o := range m.Outcomes {
		if o.Status != rsync.Transferred {
			continue
		}
		in := m.Chunk.Inputs[i]
		p, b64 := event.PathFields(in)
		r.enc.Emit(&event.WouldTransfer{Path: p, PathB64: b64, Itemize: o.Change, Bytes: o.Bytes, Chunk: m.Chunk.ID})
		if r.tty {
			r.clearLine()
			fmt.Fprintf(r.stderr, "%s %s\n", cmp.Or(o.Change, "?"), rsync.Escape(in))
		}
	}
}

// throttleNotice writes the throttle's notice on stderr, terminal or not: every rsync has
// been paused a while, why, and the flags that change it; or they run again.
func (r *reporter) throttleNotice(n throttle.Notice) {
	msg, warning := n.Message()
	r.clearLine()
	if warning {
		cmdline.Warnf(r.stderr, "%s", msg)
	} else {
		cmdline.Printf(r.stderr, "%s", msg)
	}
}

// clearLine clears the progress line, when one is drawn, before a line of stderr.
func (r *reporter) clearLine() {
	if r.tty {
		io.WriteString(r.stderr, "\r\033[K")
	}
}

// snapshot returns the books as they stand, with what the pool, the throttle, the
// bandwidth limit and the clock say now.
func (r *reporter) snapshot() books.Snapshot {
	sample, _ := r.last.get()
	running, paused := r.pool.Counts() // first: it readies the pool, and MaxJobs with it
	l := books.Live{
		PID: os.Getpid(), Elapsed: time.Since(r.t0).Seconds(), InFlight: r.pool.InFlight(),
		Running: running, Suspended: paused, Jobs: r.pool.Limit(), MaxJobs: r.pool.MaxJobs, JobsAuto: r.jobsAuto,
		Paused: r.pool.PausedAll(), InputDone: r.inDone(), BWLimit: "off", BWLimitNow: "off", Sample: sample,
		MaxDurationReached: isClosed(r.windowEnded),
	}
	if r.bw != nil {
		l.BWLimit, l.BWLimitNow = r.bw.describe()
		l.BWRate = r.bw.limit()
	}
	l.Suspensions, l.SecondsSuspended = r.throttle.Stats()
	return r.books.Snapshot(l)
}

// progress hands a snapshot of the books to every printer.
func (r *reporter) progress() {
	s := r.snapshot()
	for _, p := range r.printers {
		p.Update(s)
	}
}

// finish hands the last snapshot, with how the run ended, to every printer.
func (r *reporter) finish(end books.End) books.Snapshot {
	s := r.snapshot()
	s.End = &end
	for _, p := range r.printers {
		p.Finish(s)
	}
	return s
}
