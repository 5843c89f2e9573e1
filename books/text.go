package books

import (
	"cmp"
	"fmt"
	"io"
	"time"

	"github.com/prsync/prsync/exec"
	"github.com/prsync/prsync/internal/cmdline"
	"github.com/prsync/prsync/internal/human"
	"github.com/prsync/prsync/rsync"
	"github.com/prsync/prsync/throttle"
)

// Text prints the news of a run for a person, on stderr: every line prsync writes there
// while it runs. When On (stderr is a terminal), that is one status line, redrawn in place
// every interval, and one summary line at the end, as parasync does, and in a dry run each
// path rsync would transfer; terminal or not, the hints, the throttle's notices, the far
// side's first refusal, the end of the time window and the status a signal asks for.
type Text struct {
	Quiet
	W     io.Writer
	On    bool
	drawn bool
}

// Hint writes the advice.
func (t *Text) Hint(h string) { cmdline.Hintf(t.W, "%s", h) }

// WouldTransfer writes, where the progress line is shown, a line as rsync -n -i prints it
// (">f+++++++++ path", the name escaped as rsync escapes it).
func (t *Text) WouldTransfer(input []byte, o rsync.Outcome, _ int) {
	if !t.On {
		return
	}
	t.clearLine()
	fmt.Fprintf(t.W, "%s %s\n", cmp.Or(o.Change, "?"), rsync.Escape(input))
}

// JobsChanged says, at the far side's first refusal, that fewer rsyncs run at once (the
// limit may come down further: the end of the run says where it ended).
func (t *Text) JobsChanged(m exec.LimitChanged, s Snapshot) {
	if m.Reason == "refused" && s.Refusals == 1 {
		cmdline.Warnf(t.W, "the far side refused a session (%s); prsync runs fewer rsyncs at once, and says at the end how many", m.Detail)
	}
}

// ThrottleNotice writes the throttle's notice, terminal or not: every rsync has been
// paused a while, why, and the flags that change it; or they run again.
func (t *Text) ThrottleNotice(n throttle.Notice) {
	msg, warning := n.Message()
	t.clearLine()
	if warning {
		cmdline.Warnf(t.W, "%s", msg)
	} else {
		cmdline.Printf(t.W, "%s", msg)
	}
}

// WindowEnded says that the window ended, and what the rsyncs running (or paused: they
// are continued) get.
func (t *Text) WindowEnded(cause string, grace time.Duration, s Snapshot) {
	if n := s.Running + s.Suspended; n > 0 {
		cmdline.Printf(t.W, "%s: no rsync starts any more; the %d running have until %s to finish", cause,
			n, time.Now().Add(grace).Format("15:04:05"))
		return
	}
	cmdline.Printf(t.W, "%s: no rsync starts any more", cause)
}

// Status writes the status line a signal asks for (SIGUSR1, SIGINFO).
func (t *Text) Status(s Snapshot, by string) {
	if by == "signal" {
		fmt.Fprintln(t.W, StatusLine(s))
	}
}

// clearLine clears the progress line, when one is drawn, before a line of stderr.
func (t *Text) clearLine() {
	if t.On {
		io.WriteString(t.W, "\r\033[K")
	}
}

// Update redraws the status line.
func (t *Text) Update(s Snapshot) {
	if !t.On {
		return
	}
	fmt.Fprintf(t.W, "\r\033[K%s", Line(s))
	t.drawn = true
}

// Finish clears the status line and prints the summary line.
func (t *Text) Finish(s Snapshot) {
	if !t.On {
		return
	}
	if t.drawn {
		fmt.Fprint(t.W, "\r\033[K")
	}
	fmt.Fprintln(t.W, SummaryLine(s))
}

// Line is the status line of a run: its files (and once the input has ended, the
// percentage done), bytes and rate, or during the deletion pass its directories, then
// what is paused and failed, the time, and the time left once it means something
// (showETA).
func Line(s Snapshot) string {
	rate := s.Rate()
	files := fmt.Sprintf("%d/%d files", s.Done(), s.Files)
	if f, ok := s.Fraction(); ok {
		files += fmt.Sprintf("  %d%%", int(f*100)) // rounded down: 100% once done, not before
	}
	line := cmdline.Sprintf("%s  %s  %s/s  running %d  queued %d",
		files, human.Bytes(s.BytesDone()), human.Bytes(int64(rate/8)), s.Running, s.Queued)
	if s.Phase == "delete" {
		line = cmdline.Sprintf("deleting: %d/%d dirs checked  %d deleted  running %d", s.DirsChecked, s.DeleteDirs, s.Deleted, s.Running)
	} else if s.Verified+s.VerifyFailed > 0 {
		line += fmt.Sprintf("  verified %d", s.Verified)
		if s.VerifyFailed > 0 {
			line += fmt.Sprintf(" (%d differ)", s.VerifyFailed)
		}
	}
	if s.Suspended > 0 {
		line += fmt.Sprintf("  paused %d (cpu %.0f%%)", s.Suspended, s.Sample.CPU)
	}
	if f := s.Failed + s.Vanished; f > 0 {
		line += fmt.Sprintf("  failed %d", f)
	}
	line += "  " + human.Clock(round3(s.Elapsed))
	if f, ok := s.Fraction(); ok && showETA(s.Elapsed, f) {
		line += "  ETA " + human.Clock(s.Elapsed*(1-f)/f)
	}
	return line
}

// The time left is shown once this many seconds have passed and this part of the copy is
// done: before, the rsyncs are still starting, and an estimate from the first second of a
// long copy said 59:25 for a minute's work.
const (
	etaMinSeconds  = 5
	etaMinFraction = 0.02
)

// showETA reports whether the time left, estimated from elapsed seconds and the fraction
// done, is worth showing.
func showETA(elapsed, f float64) bool {
	return elapsed >= etaMinSeconds && f >= etaMinFraction && f > 0
}

// Fraction returns the part of the copy done, once the input has ended (before, the
// total is not known) and until the deletion pass: of the bytes while every path settled
// so far was copied (a fresh copy, where the bytes tell the time better than the paths),
// else of the paths (a path found up to date is done with bytes no rsync moved).
func (s Snapshot) Fraction() (float64, bool) {
	if !s.InputDone || s.Phase == "delete" || s.Files == 0 {
		return 0, false
	}
	f := float64(s.Done()) / float64(s.Files)
	if s.UpToDate == 0 && s.Bytes > 0 {
		f = float64(s.BytesDone()) / float64(s.Bytes)
	}
	return min(max(f, 0), 1), true
}

// SummaryLine is the one line that sums up a run that has ended: its rate in bytes per
// second, as the status line gives it.
func SummaryLine(s Snapshot) string {
	line := cmdline.Sprintf("%d files, %s, %s/s, %.1f s", s.Files, human.Bytes(s.BytesTransferred),
		human.Bytes(int64(s.AverageRate()/8)), s.Elapsed)
	if s.Verified+s.VerifyFailed > 0 {
		line += fmt.Sprintf(", %d verified", s.Verified)
	}
	if s.DirsChecked > 0 {
		line += fmt.Sprintf(", %d deleted in %d dirs", s.Deleted, s.DirsChecked)
	}
	if s.NotOK() > 0 {
		line += fmt.Sprintf(" (%d failed, %d vanished, %d not done)", s.Failed, s.Vanished, s.NotDone)
	}
	return line
}

// StatusLine is the status a signal asks for (SIGUSR1, SIGINFO), for stderr.
func StatusLine(s Snapshot) string {
	return cmdline.Sprintf("status: %d files done (%d not ok), %s, %s/s, running %d, paused %d, queued %d, jobs %d, bwlimit %s, %s",
		s.Done(), s.NotOK(), human.Bytes(s.BytesDone()), human.Bytes(int64(s.Rate()/8)), s.Running, s.Suspended,
		s.Queued, s.Jobs, s.BWLimitNow, human.Clock(round3(s.Elapsed)))
}
