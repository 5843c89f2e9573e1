package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/prsync/prsync/books"
	"github.com/prsync/prsync/exec"
	"github.com/prsync/prsync/internal/cmdline"
)

// probeDelete asks a remote DEST whether it takes the deletion pass's options before
// anything is copied: a daemon module that refuses --delete says so at once.
func (r *runner) probeDelete() error {
	pool := &exec.Pool{Rsync: r.rsync, Args: r.args, Dest: r.f.Dest, Env: r.rsyncEnv(), Transport: exec.Direct, Grace: 10 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ab := pool.Probe(ctx, exec.DeleteProbeArgs())
	if ab == nil {
		return nil
	}
	hint := ab.Hint
	if strings.Contains(ab.Msg, "refuse") && strings.Contains(ab.Msg, "--delete") {
		hint = "the rsync daemon refuses --delete for this module (refuse options in rsyncd.conf): allow it there, or run without --delete"
	}
	return &cmdline.Error{Code: max(ab.Code, 1), Msg: "DEST cannot take the deletion pass: " + ab.Msg, Hint: hint}
}

// passState is how the deletion pass ended, as the summary's delete_pass says it.
type passState string

// The states of the deletion pass.
const (
	passNotRequested passState = "not requested"
	passRan          passState = "ran"
	passSkipped      passState = "skipped" // it did not run, and why says why
	passFailed       passState = "failed"  // it ran and did not complete, and why says why
	passInterrupted  passState = "interrupted"
)

// deletion is what became of the deletion pass, for the summary.
type deletion struct {
	state passState
	why   string // why it was skipped or failed
	stats exec.DeleteStats
	cut   bool // an interrupt or the time window kept it from running or cut it short
}

// String is the summary's delete_pass: the state, and why it was skipped or failed
// ("skipped: …", "failed: …").
func (d deletion) String() string {
	if d.why == "" {
		return string(d.state)
	}
	return string(d.state) + ": " + d.why
}

// failed reports a pass that ran and did not complete.
func (d deletion) failed() bool { return d.state == passFailed }

// missed reports a pass that was asked for and did not complete, or did not run: the run
// must not exit 0.
func (d deletion) missed() bool { return d.state == passFailed || d.state == passSkipped }

// deletePass decides whether the deletion pass may run, and runs it.
func (p *pipeline) deletePass(ctx, kill context.Context) deletion {
	f := &p.r.f
	if !f.Delete {
		return deletion{state: passNotRequested}
	}
	// a progress event first: a stdout that is gone fails its write, and stops the pass
	p.rep.in <- phaseChange{phase: "delete", dirs: int64(p.dirs.Len())}
	c := p.rep.counts()
	if why, hint := p.deleteBlocked(ctx, c); why != "" {
		cmdline.Warnf(p.r.stderr, "the deletion pass did not run: %s", why)
		if hint != "" {
			cmdline.Hintf(p.r.stderr, "%s", hint)
		}
		return deletion{state: passSkipped, why: why, cut: ctx.Err() != nil}
	}
	lists := p.dirs.Lists()
	st := p.pool.Delete(ctx, kill, lists, exec.DeleteOptions{
		FirstID: p.chunks + 1, DryRun: f.DryRun, Shared: f.shards > 1, LocalSource: p.r.srcRemote == "",
	})
	d := deletion{state: passRan, stats: st}
	switch {
	case st.Interrupted:
		d.state, d.cut = passInterrupted, true
	case st.Err != "":
		d.state, d.why = passFailed, st.Err
	}
	return d
}

// deleteBlocked says why the deletion pass must not run, with a hint, or "". It never
// runs after an interrupt, after a run that stopped early, or when its deletions could
// not be reported; failed or unfinished paths stop it unless --delete-after-errors.
func (p *pipeline) deleteBlocked(ctx context.Context, c books.Counts) (why, hint string) {
	after := p.r.f.DeleteAfterErrors
	const again = "fix what failed and run again, or pass --delete-after-errors to delete anyway"
	switch {
	case ctx.Err() != nil:
		if why := exec.Stopped(ctx); why != "interrupted" {
			return why, "" // the time window
		}
		return "the run was interrupted", ""
	case p.pool.Aborted() != nil:
		return "the run stopped early: " + p.pool.Aborted().Error(), ""
	case p.json.Err() != nil:
		return "stdout is closed, so no deletion could be reported", "keep the reader of prsync's output running to the end"
	case after:
		return "", ""
	case p.inputErr != nil:
		return "the input could not be read to its end", again
	case c.Failed > 0:
		return fmt.Sprintf("%d path(s) failed", c.Failed), again
	case c.NotDone > 0:
		return fmt.Sprintf("%d path(s) were not done", c.NotDone), again
	case c.ChunkErrors > 0:
		return fmt.Sprintf("rsync reported %d error(s) that name no path", c.ChunkErrors), again
	}
	return "", ""
}

// phaseChange tells the reporter the run has moved on to another pass.
type phaseChange struct {
	phase string
	dirs  int64 // directories the deletion pass will check
}

func (m phaseChange) apply(r *reporter) {
	r.books.SetPhase(m.phase, m.dirs)
	r.books.Update()
}

// countsRequest asks the reporter for its books, once it has handled every report sent
// before.
type countsRequest struct{ reply chan books.Counts }

func (m countsRequest) apply(r *reporter) { m.reply <- r.books.Counts() }

// counts returns the books' counts as they stand after every report sent so far.
func (r *reporter) counts() books.Counts {
	req := countsRequest{reply: make(chan books.Counts, 1)}
	r.in <- req
	return <-req.reply
}
