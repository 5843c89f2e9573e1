package cli

import (
	"os"
	"time"

	"github.com/prsync/prsync/books"
	"github.com/prsync/prsync/bw"
	"github.com/prsync/prsync/exec"
	"github.com/prsync/prsync/throttle"
)

// reporter is the one goroutine that owns the books during a run: it applies the messages
// the pipeline's other goroutines send it on in, and has the books print a snapshot every
// interval. The books count and tell their printers; the reporter writes nothing itself.
// Before the loop starts and after it has ended, the pipeline's own goroutine calls the
// books.
type reporter struct {
	books    *books.Books
	pool     *exec.Pool
	throttle *throttle.Controller
	bw       bwControl // the total bandwidth limit, or nil
	last     *sampleBox
	t0       time.Time
	every    time.Duration
	inDone   func() bool // the input has ended
	jobsAuto bool
	// windowEnded is closed when the --max-duration window ends (nil without one): the
	// books tell it, with windowCause, and what the rsyncs running get (grace)
	windowEnded <-chan struct{}
	windowCause string
	grace       time.Duration

	in chan message
}

// A message is news for the reporter from another goroutine of the run. apply hands it to
// the books, in the reporter's goroutine: every kind of message says how it is applied, so
// that none can be sent that the reporter does not take.
type message interface{ apply(*reporter) }

// loop applies messages until in is closed, and prints the books every interval.
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
			r.books.Update()
		case <-windowEnded:
			windowEnded = nil // said once
			r.books.WindowEnded(r.windowCause, r.grace)
		}
	}
}

// report is a report of the pool: a chunk started, ended or dropped, a change of the
// limit, a part of the deletion pass.
type report struct{ exec.Report }

func (m report) apply(r *reporter) { m.Tell(r.books) }

// inputRead is what the splitter read.
type inputRead struct{ *books.Input }

func (m inputRead) apply(r *reporter) { r.books.Read(m.Input) }

// throttled is a pause or resume of the throttle.
type throttled struct{ throttle.Event }

func (m throttled) apply(r *reporter) { r.books.Throttled(m.Event) }

// throttleNotice is the throttle's notice: it holds every rsync, or lets them run again.
type throttleNotice struct{ throttle.Notice }

func (m throttleNotice) apply(r *reporter) { r.books.ThrottleNotice(m.Notice) }

// bwChanged is a change of the bandwidth limit in force.
type bwChanged struct{ bw.Change }

func (m bwChanged) apply(r *reporter) { r.books.BWLimitChanged(m.Change) }

// inputError ends the input early.
type inputError struct{ err error }

func (m inputError) apply(r *reporter) { r.books.InputFailed(m.err) }

// live returns what the pool, the throttle, the bandwidth limit and the clock say now: the
// part of a snapshot the books do not count.
func (r *reporter) live() books.Live {
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
	return l
}
