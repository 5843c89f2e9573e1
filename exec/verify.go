package exec

import (
	"context"
	"time"

	"github.com/prsync/prsync/rsync"
	"github.com/prsync/prsync/splitter"
)

// VerifyMode says which paths of a chunk the verification pass checks.
type VerifyMode int

const (
	// VerifyOff: no verification pass.
	VerifyOff VerifyMode = iota
	// VerifyTransferred checks the paths this run transferred.
	VerifyTransferred
	// VerifyAll checks every path proven transferred or up to date.
	VerifyAll
)

// Verification is what the verification pass of a chunk checked and found.
type Verification struct {
	Paths   int     // paths checked
	Failed  int     // of them, found to differ or not checkable
	Seconds float64 // time it took
}

// verifyArgs make rsync compare each file's content by checksum and change nothing.
var verifyArgs = []string{"--checksum", "--dry-run"}

// verify checks, after a chunk has settled, that DEST holds what the source has for the
// paths the mode selects, by rsync's checksum comparison in a dry run: a path rsync would
// still transfer or create differs. It changes those outcomes to failed (or not done,
// when interrupted) and reports whether it still holds the chunk's slot.
func (p *Pool) verify(ctx context.Context, c *splitter.Chunk, outcomes []rsync.Outcome) (*Verification, bool) {
	var idx []int
	for i, o := range outcomes {
		if o.Status == rsync.Transferred || (p.Verify == VerifyAll && o.Status == rsync.UpToDate) {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return nil, true
	}
	t0 := time.Now()
	entries := make([][]byte, len(idx))
	for k, i := range idx {
		entries[k] = c.Entries[i]
	}
	res, held := p.runRetried(ctx, c, entries, pass{extra: verifyArgs})
	v := &Verification{Paths: len(idx)}
	vs := verdicts(res)
	for k, i := range idx {
		if vs[k].ok {
			continue
		}
		v.Failed++
		bytes := outcomes[i].Bytes
		outcomes[i] = rsync.Outcome{Status: vs[k].status, Reason: vs[k].reason, Bytes: bytes}
	}
	v.Seconds = round3(time.Since(t0).Seconds())
	return v, held
}

type verdict struct {
	ok     bool
	status rsync.Status
	reason string
}

// verdicts reads the checksum dry run's output, path by path.
func verdicts(res result) []verdict {
	r := res.r
	out := make([]verdict, len(r.Paths))
	// an error that names no path leaves every path not named unchecked
	unchecked := ""
	switch {
	case res.cancelled:
		unchecked = "interrupted"
	case res.code != 0 && (len(r.Unattributed) > 0 || r.Session != rsync.NoSession || (res.code != 23 && res.code != 24)):
		unchecked = lastLine(res)
	}
	for i, ps := range r.Paths {
		switch {
		case res.cancelled:
			out[i] = verdict{status: rsync.NotDone, reason: "verify: interrupted"}
		case ps.Kind == rsync.KindVanished:
			out[i] = verdict{status: rsync.Vanished, reason: "verify: " + ps.Reason}
		case ps.Kind == rsync.KindFailed:
			out[i] = verdict{status: rsync.Failed, reason: "verify: not checked: " + ps.Reason}
		case ps.Logged && differs(ps.Change):
			reason := "verify: content differs (" + ps.Change + ")"
			if len(ps.Change) >= 3 && ps.Change[2] == '+' {
				reason = "verify: missing from DEST (" + ps.Change + ")"
			}
			out[i] = verdict{status: rsync.Failed, reason: reason}
		case unchecked != "":
			out[i] = verdict{status: rsync.Failed, reason: "verify: not checked: " + unchecked}
		default:
			out[i] = verdict{ok: true}
		}
	}
	return out
}

// differs reports whether an itemized change of a checksum dry run means DEST's copy is
// not the source's: rsync would transfer it, create it or link it (an attribute alone,
// such as a directory's mtime, is no difference of content).
func differs(change string) bool {
	return change != "" && (change[0] == '<' || change[0] == '>' || change[0] == 'c' || change[0] == 'h')
}
