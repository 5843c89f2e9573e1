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
// still transfer or create differs, and the stamp each was copied with (from rsync's
// out-format line) tells whether the source or DEST changed since. It changes those outcomes to failed (or not done,
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
	listed := make([]rsync.Stamp, len(idx))
	for k, i := range idx {
		entries[k], listed[k] = c.Entries[i], outcomes[i].Listed
	}
	res, held := p.runRetried(ctx, c, entries, pass{extra: verifyArgs})
	v := &Verification{Paths: len(idx)}
	cs := rsync.Checks(res.r, res.code, res.cancelled, res.stderr, listed)
	if res.cancelled {
		for k := range cs {
			if cs[k].Status == rsync.NotDone {
				cs[k].Reason = "verify: " + Stopped(p.procCtx(ctx))
			}
		}
	}
	if res.lost != nil {
		p.abortLost(c.ID, res.lost)
	}
	for k, i := range idx {
		if res.lost != nil {
			cs[k] = rsync.Check{Status: rsync.Failed, Reason: "verify: not checked: " + res.lost.Error(), Hint: lostHint}
		}
		if cs[k].OK {
			continue
		}
		v.Failed++
		bytes := outcomes[i].Bytes
		outcomes[i] = rsync.Outcome{Status: cs[k].Status, Reason: cs[k].Reason, Bytes: bytes, Hint: cs[k].Hint}
	}
	v.Seconds = round3(time.Since(t0).Seconds())
	return v, held
}
