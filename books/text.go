package books

import (
	"fmt"
	"io"

	"github.com/prsync/prsync/internal/human"
)

// Text prints the books for a person on a terminal: one status line, redrawn in place
// every interval, and one summary line at the end, as parasync does. When On is false
// it prints nothing.
type Text struct {
	W     io.Writer
	On    bool
	drawn bool
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

// Line is the status line of a run: its files, bytes and rate, or during the deletion
// pass its directories, then what is paused and failed, the time, and once the input
// has ended the time left.
func Line(s Snapshot) string {
	rate := s.Rate()
	line := fmt.Sprintf("prsync: %d/%d files  %s  %s/s  running %d  queued %d",
		s.Done(), s.Files, human.Bytes(s.BytesDone()), human.Bytes(int64(rate/8)), s.Running, s.Queued)
	if s.Phase == "delete" {
		line = fmt.Sprintf("prsync: deleting: %d/%d dirs checked  %d deleted  running %d", s.DirsChecked, s.DeleteDirs, s.Deleted, s.Running)
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
	if s.InputDone && rate > 0 {
		left := float64(s.Bytes-s.BytesTransferred) * 8 / rate
		if left < 0 {
			left = 0
		}
		line += "  ETA " + human.Clock(left)
	}
	return line
}

// SummaryLine is the one line that sums up a run that has ended.
func SummaryLine(s Snapshot) string {
	line := fmt.Sprintf("prsync: %d files, %s, %s, %.1f s", s.Files, human.Bytes(s.BytesTransferred),
		humanBits(s.AverageRate()), s.Elapsed)
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
	return fmt.Sprintf("prsync: status: %d files done (%d not ok), %s, %s/s, running %d, paused %d, queued %d, jobs %d, bwlimit %s, %s",
		s.Done(), s.NotOK(), human.Bytes(s.BytesDone()), human.Bytes(int64(s.Rate()/8)), s.Running, s.Suspended,
		s.Queued, s.Jobs, s.BWLimitNow, human.Clock(round3(s.Elapsed)))
}

func humanBits(bps float64) string {
	switch {
	case bps >= 1e9:
		return fmt.Sprintf("%.2f Gbps", bps/1e9)
	case bps >= 1e6:
		return fmt.Sprintf("%.1f Mbps", bps/1e6)
	}
	return fmt.Sprintf("%.0f kbps", bps/1e3)
}
