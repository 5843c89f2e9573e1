package exec

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/prsync/prsync/rsync"
	"github.com/prsync/prsync/splitter"
)

// DeleteOptions say how the deletion pass runs.
type DeleteOptions struct {
	// FirstID is the ID of the first directory chunk; the copy's chunks have lower ones.
	FirstID int
	// PerChunk bounds the directories of one rsync; 0 picks a number from the total.
	PerChunk int
	// DryRun: list what would be deleted and delete nothing (the pool's Args hold
	// --dry-run too).
	DryRun bool
	// Shared: other prsyncs (shards) may be copying into DEST now; their rsync temp files
	// are protected.
	Shared bool
	// LocalSource: the sources are local directories, so each deletion can be checked
	// against them before it happens.
	LocalSource bool
}

// Deleted is one entry the deletion pass removed from DEST (or would remove).
type Deleted struct {
	Path []byte // relative to DEST
	Kind string // file, dir, link, special or unknown
}

// DeleteEnded reports one rsync of the deletion pass.
type DeleteEnded struct {
	ID      int
	Dirs    int
	Deleted []Deleted
	Err     string // why this part of the pass did not complete, or ""
	Hint    string // advice for Err, or ""
	Seconds float64
}

// DeleteStats sum up a deletion pass.
type DeleteStats struct {
	Dirs, Deleted int64
	// Err is the first failure, or "", and Hint advice for it; Interrupted says ctx
	// ended first.
	Err, Hint   string
	Interrupted bool
	Seconds     float64
}

// Delete runs the deletion pass over the directories of lists, up to the pool's limit of
// rsyncs at once, and reports each rsync as a DeleteEnded. Every directory chunk runs
// rsync twice at most: first as a dry run, which lists what would go (the only run when
// opts.DryRun, and the last when nothing would); then, after each entry has been typed
// and, with a local source, checked to be absent from it, for real. When kill ends,
// running rsyncs get KILL.
func (p *Pool) Delete(ctx, kill context.Context, lists []splitter.DirList, opts DeleteOptions) DeleteStats {
	p.init()
	t0 := time.Now()
	defer p.watch(ctx, kill)()
	chunks := dirChunks(lists, opts.PerChunk, max(p.Limit(), 1), opts.FirstID)
	var (
		mu    sync.Mutex
		stats DeleteStats
	)
	var g errgroup.Group
	g.SetLimit(2 * p.MaxJobs)
	for _, c := range chunks {
		if !p.acquire(ctx) {
			break
		}
		g.Go(func() error {
			defer p.RecoverPanic()
			ev, held := p.deleteChunk(ctx, c, opts)
			if held {
				p.release()
			}
			mu.Lock()
			stats.Dirs += int64(c.Len())
			stats.Deleted += int64(len(ev.Deleted))
			if ev.Err != "" && stats.Err == "" && ctx.Err() == nil {
				stats.Err, stats.Hint = ev.Err, ev.Hint
			}
			mu.Unlock()
			p.report(ev)
			return nil
		})
	}
	g.Wait()
	stats.Interrupted = ctx.Err() != nil
	stats.Seconds = round3(time.Since(t0).Seconds())
	return stats
}

// dirChunks cuts the directory lists into chunks: at most per directories each (0: about
// two per rsync slot, from 16 to 500 directories).
func dirChunks(lists []splitter.DirList, per, jobs, firstID int) []*splitter.Chunk {
	if per <= 0 {
		total := 0
		for _, l := range lists {
			total += len(l.Entries)
		}
		per = min(500, max(16, (total+2*jobs-1)/(2*jobs)))
	}
	var out []*splitter.Chunk
	id := firstID
	for _, l := range lists {
		for lo := 0; lo < len(l.Entries); lo += per {
			e := l.Entries[lo:min(lo+per, len(l.Entries))]
			out = append(out, &splitter.Chunk{ID: id, Src: l.Root, Inputs: e, Entries: e})
			id++
		}
	}
	return out
}

// deleteChunk runs the deletion pass over one chunk of directories, holding a slot, and
// reports whether it still holds it (a refused session gives it up to queue again).
func (p *Pool) deleteChunk(ctx context.Context, c *splitter.Chunk, opts DeleteOptions) (DeleteEnded, bool) {
	t0 := time.Now()
	ev := DeleteEnded{ID: c.ID, Dirs: c.Len()}
	args := rsync.DeleteOnly()
	if opts.Shared {
		args = append(args, rsync.ProtectTemp) // other shards may be writing into these directories
	}
	if rsync.IsRemote(p.Dest) {
		args = append(args, rsync.ProtectLists) // the lists of a push (RemoteLists), this run's or another's
	}
	held := true
	done := func() (DeleteEnded, bool) {
		ev.Seconds = round3(time.Since(t0).Seconds())
		return ev, held
	}

	// the dry run: what would go
	var would []rsync.Item
	res, held := p.runRetried(ctx, c, c.Entries, pass{extra: append(args, "--dry-run"), onItem: func(it rsync.Item) {
		if it.IsDeletion() {
			would = append(would, it)
		}
	}})
	if err, hint := p.deleteFailure(res, c); err != "" || !held {
		ev.Err, ev.Hint = err, hint
		return done()
	}
	if len(would) == 0 {
		return done()
	}
	if opts.LocalSource {
		// rsync deletes only what the source lacks; prsync makes sure of it. The lstat
		// goes through the source's symlinked directories, as rsync's sender does: what
		// it copied through one must not be deleted
		for _, it := range would {
			if _, err := os.Lstat(filepath.Join(c.Src, string(it.Name))); err == nil {
				ev.Err = fmt.Sprintf("rsync would delete %q, which the source has: nothing in %d directories was deleted", it.Name, c.Len())
				return done()
			}
		}
	}
	kinds := p.kinds(ctx, c.ID, would)
	kindOf := func(it rsync.Item) string {
		if k, ok := kinds[string(it.Name)]; ok {
			return k
		}
		if it.Dir {
			return "dir"
		}
		return "unknown"
	}
	if opts.DryRun {
		for _, it := range would {
			ev.Deleted = append(ev.Deleted, Deleted{Path: it.Name, Kind: kindOf(it)})
		}
		return done()
	}

	// for real
	var mu sync.Mutex // onItem runs under the sink's lock, but ev is read after
	res, held = p.runRetried(ctx, c, c.Entries, pass{extra: args, onItem: func(it rsync.Item) {
		if it.IsDeletion() {
			mu.Lock()
			ev.Deleted = append(ev.Deleted, Deleted{Path: it.Name, Kind: kindOf(it)})
			mu.Unlock()
		}
	}})
	ev.Err, ev.Hint = p.deleteFailure(res, c)
	return done()
}

// deleteFailure says why a deletion rsync did not complete, or "", with advice
// (rsync.Result.DeleteFailed).
func (p *Pool) deleteFailure(res result, c *splitter.Chunk) (string, string) {
	if res.lost != nil {
		return res.lost.Error(), lostHint
	}
	if res.cancelled {
		return "interrupted", ""
	}
	if res.code == 0 {
		return "", ""
	}
	r := res.r
	for i, ps := range r.Paths {
		if ps.Kind == rsync.KindFailed {
			return fmt.Sprintf("directory %s: %s", c.Entries[i], ps.Reason), ps.Advice.String()
		}
	}
	if r.DeleteFailed(res.code) {
		line := res.r.LastLine(res.stderr)
		msg := line
		if h := rsync.Hint(res.code, r, p.Dest); h != "" {
			msg += " (" + h + ")"
		}
		return fmt.Sprintf("rsync exited with code %d: %s", res.code, msg), rsync.AdviceOf(line).String()
	}
	return "", ""
}

// kinds returns the type of each entry that would be deleted, as DEST holds it now: by
// lstat of a local DEST (through no symlink below DEST that rsync does not go through), or by a dry run of rsync from a remote one into an empty
// directory, whose itemized changes name each entry's type. A name it cannot type is
// left out.
func (p *Pool) kinds(ctx context.Context, id int, items []rsync.Item) map[string]string {
	out := make(map[string]string, len(items))
	if p.localDest != "" {
		// through the symlinks below DEST that rsync goes through, and no other
		dest := p.openDest()
		defer dest.close()
		for _, it := range items {
			fi, err := dest.lstat(path.Clean(string(it.Name)))
			if err != nil {
				continue
			}
			out[string(it.Name)] = kindOfMode(fi.Mode())
		}
		return out
	}
	var entries [][]byte
	for _, it := range items {
		if it.Dir {
			out[string(it.Name)] = "dir"
			continue
		}
		entries = append(entries, []byte(rsync.ListEntry(string(it.Name))))
	}
	if len(entries) == 0 {
		return out
	}
	tmp, err := os.MkdirTemp("", "prsync-kinds-")
	if err != nil {
		return out
	}
	defer os.RemoveAll(tmp)
	probe := &splitter.Chunk{ID: id, Inputs: entries, Entries: entries}
	p.run(ctx, probe, entries, 0, pass{extra: []string{"--dry-run"}, src: p.Dest, dest: filepath.Join(tmp, "d"),
		onItem: func(it rsync.Item) {
			if k := it.Type(); k != "" {
				out[string(it.Name)] = k
			}
		}})
	return out
}

// runRetried runs a pass over entries of chunk c, holding a slot, and again after a
// refusal or a transient failure, as a chunk's copy would be. It reports whether it
// still holds the slot: a refused session gives it up while it waits, to queue again
// under the lowered limit, and none is held when ctx ends or the run is aborted while
// it waits.
func (p *Pool) runRetried(ctx context.Context, c *splitter.Chunk, entries [][]byte, ps pass) (result, bool) {
	free := 0
	for attempt := 1; ; attempt++ {
		res := p.run(ctx, c, entries, 0, ps)
		class := rsync.Classify(res.code, res.cancelled, res.r)
		retry, delay := p.retryAfter(class, attempt, &free, res)
		if !retry || ctx.Err() != nil {
			return res, true
		}
		if !p.wait(ctx, class, delay) {
			res.cancelled = true
			return res, false
		}
	}
}

// Probe runs rsync once with extra options and an empty list, from an empty directory to
// DEST, and returns why it failed, or nil: a far side that refuses an option (a daemon's
// refuse options) says so before any copying.
func (p *Pool) Probe(ctx context.Context, extra []string) *AbortError {
	p.init()
	tmp, err := os.MkdirTemp("", "prsync-probe-")
	if err != nil {
		return &AbortError{Code: 3, Msg: fmt.Sprintf("probe: %v", err)}
	}
	defer os.RemoveAll(tmp)
	c := &splitter.Chunk{ID: 0, Src: tmp}
	res := p.run(ctx, c, nil, 0, pass{extra: extra})
	if res.code == 0 || res.cancelled {
		return nil
	}
	return abortFor(0, res, p.Dest)
}

func kindOfMode(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "dir"
	case m&os.ModeSymlink != 0:
		return "link"
	case m.IsRegular():
		return "file"
	}
	return "special"
}

// DeleteProbeArgs are the options of the deletion pass, in a dry run, for Probe.
func DeleteProbeArgs() []string { return append(rsync.DeleteOnly(), "--dry-run") }
