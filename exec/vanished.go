package exec

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/prsync/prsync/rsync"
	"github.com/prsync/prsync/splitter"
)

// A path is vanished only when it is shown to be gone. rsync's "file has vanished" says
// that its sender could not open the file, not that the file is gone: rsync 3.5.0's
// daemon in a module with `use chroot = no` opens every --files-from entry of a --root
// with a SUBDIR under the module's top instead of the SUBDIR, and calls every file
// vanished while every one exists (docs/rsync-messages.md). A run that exits 24 on that
// reads as success to most backup scripts.

// proveVanished checks each path of a settled attempt that rsync said vanished (r, the
// attempt's output, after its last attempt) and turns the ones not shown gone into failed
// paths, with the reason. A local source is checked with lstat; a remote one (host:path,
// an rsync daemon) with a listing of those paths on the far side, by the same rsync with
// the same options, transport and environment as the copy (vanishedListing).
func (p *Pool) proveVanished(ctx context.Context, c *splitter.Chunk, r *rsync.Result, class rsync.Class) {
	if class == rsync.Cancelled {
		return // every path is confirmed or not done
	}
	var idx []int
	for i, ps := range r.Paths {
		if ps.Kind == rsync.KindVanished {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return
	}
	var gs []rsync.Gone
	if p.SourceRemote || rsync.IsRemote(c.Src) {
		gs = p.vanishedListing(ctx, c, idx)
	} else {
		gs = make([]rsync.Gone, len(idx))
		for k, i := range idx {
			gs[k] = statGone(c.Src, c.Entries[i])
		}
	}
	for k, i := range idx {
		if g := gs[k]; !g.Gone {
			ps := &r.Paths[i]
			ps.Kind, ps.Reason, ps.Advice = rsync.KindFailed, g.Reason+" ("+ps.Reason+")", g.Advice
		}
	}
}

// vanishedListing lists the entries idx of chunk c on the far side with
// `rsync --list-only` (rsync.ProveGone). The listing writes nothing: with --list-only
// rsync's receiver never opens its destination (main.c get_local_name), which is
// /dev/null all the same.
func (p *Pool) vanishedListing(ctx context.Context, c *splitter.Chunk, idx []int) []rsync.Gone {
	entries := make([][]byte, len(idx))
	for k, i := range idx {
		entries[k] = c.Entries[i]
	}
	l := rsync.NewListing(rsync.ListTimeColumns(p.Args))
	res := p.run(ctx, c, entries, 0, pass{extra: []string{"--list-only"}, dest: os.DevNull, onLine: func(line []byte) { l.Line(line) }})
	return rsync.ProveGone(l, res.r, res.code, res.cancelled, entries, rsync.IgnoresMissing(p.Args))
}

// statGone checks a path of a local source that rsync said vanished: lstat must find it
// missing (ENOENT, or ENOTDIR: a component is no longer a directory).
func statGone(srcDir string, entry []byte) rsync.Gone {
	_, err := os.Lstat(filepath.Join(srcDir, strings.Replace(string(entry), "/./", "/", 1)))
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
		return rsync.Gone{Gone: true}
	case err == nil:
		return rsync.Gone{Reason: "rsync called it vanished, but the source has it (lstat): it was replaced or created again while rsync ran"}
	}
	return rsync.Gone{Reason: fmt.Sprintf("rsync called it vanished, and lstat cannot tell: %v", err)}
}
