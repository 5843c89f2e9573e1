package cli

import (
	"fmt"
	"io"
	"time"

	"github.com/prsync/prsync/event"
	"github.com/prsync/prsync/internal/human"
)

// progress draws one human status line on a terminal, updated in place.
type progress struct {
	w       io.Writer
	on      bool
	t0      time.Time
	drawn   bool
	delDirs int64 // directories the deletion pass checks
}

func newProgress(w io.Writer, on bool, t0 time.Time) *progress {
	return &progress{w: w, on: on, t0: t0}
}

func (p *progress) update(ev *event.Progress, c Counts, cpu float64) {
	if !p.on {
		return
	}
	line := fmt.Sprintf("prsync: %d/%d files  %s  %s/s  running %d  queued %d",
		ev.FilesDone, c.Files, human.Bytes(ev.BytesDone), human.Bytes(int64(ev.RateBps/8)), ev.Running, ev.FilesQueued)
	if ev.Phase == "delete" {
		line = fmt.Sprintf("prsync: deleting: %d/%d dirs checked  %d deleted  running %d", ev.DirsChecked, p.delDirs, ev.FilesDeleted, ev.Running)
	} else if ev.FilesVerified+ev.FilesVerifyFailed > 0 {
		line += fmt.Sprintf("  verified %d", ev.FilesVerified)
		if ev.FilesVerifyFailed > 0 {
			line += fmt.Sprintf(" (%d differ)", ev.FilesVerifyFailed)
		}
	}
	if ev.Suspended > 0 {
		line += fmt.Sprintf("  paused %d (cpu %.0f%%)", ev.Suspended, cpu)
	}
	if f := c.Failed + c.Vanished; f > 0 {
		line += fmt.Sprintf("  failed %d", f)
	}
	line += "  " + human.Clock(ev.Elapsed)
	if ev.InputDone && ev.RateBps > 0 {
		left := float64(c.Bytes-c.BytesTransferred) * 8 / ev.RateBps
		if left < 0 {
			left = 0
		}
		line += "  ETA " + human.Clock(left)
	}
	fmt.Fprintf(p.w, "\r\033[K%s", line)
	p.drawn = true
}

// finish prints the one summary line, as parasync does.
func (p *progress) finish(c Counts, seconds float64) {
	if !p.on {
		return
	}
	if p.drawn {
		fmt.Fprint(p.w, "\r\033[K")
	}
	fmt.Fprintf(p.w, "prsync: %d files, %s, %s, %.1f s", c.Files, human.Bytes(c.BytesTransferred),
		humanBits(float64(c.BytesTransferred)*8/seconds), seconds)
	if c.Verified+c.VerifyFailed > 0 {
		fmt.Fprintf(p.w, ", %d verified", c.Verified)
	}
	if c.DirsChecked > 0 {
		fmt.Fprintf(p.w, ", %d deleted in %d dirs", c.Deleted, c.DirsChecked)
	}
	if c.Failed+c.Vanished+c.NotDone > 0 {
		fmt.Fprintf(p.w, " (%d failed, %d vanished, %d not done)", c.Failed, c.Vanished, c.NotDone)
	}
	fmt.Fprintln(p.w)
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
