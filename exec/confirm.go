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

	"github.com/prsync/prsync/internal/beneath"
	"github.com/prsync/prsync/rsync"
	"github.com/prsync/prsync/splitter"
)

// confirm proves which of the paths idx of chunk c landed, after its rsync exited
// non-zero or was cancelled, or when it may have left them out (Pool.LeftOut), and says
// how: "lstat" of a local DEST, a "dry-run" pass of the same rsync, or "none" when nothing
// can be proven (a session that never started, an interrupt with a remote DEST, a path
// left out of a remote DEST) or nothing was meant to land (a dry run).
func (p *Pool) confirm(ctx context.Context, c *splitter.Chunk, idx []int, res result, class rsync.Class) ([]rsync.Verdict, string) {
	if p.LeftOut != "" && class != rsync.Cancelled {
		return p.confirmLeftOut(ctx, c, idx, res, class)
	}
	return p.confirmLanded(ctx, c, idx, res, class)
}

// confirmLanded is confirm of paths that rsync considered (or, without Pool.LeftOut,
// every path).
func (p *Pool) confirmLanded(ctx context.Context, c *splitter.Chunk, idx []int, res result, class rsync.Class) ([]rsync.Verdict, string) {
	vs := make([]rsync.Verdict, len(idx))
	switch {
	case p.Confirm == ConfirmNothing:
		for k := range vs {
			vs[k] = rsync.Verdict{Landed: class != rsync.Cancelled}
		}
		return vs, "none"
	case p.localDest != "" && !p.SourceRemote && (p.Confirm == ConfirmStat || class == rsync.Cancelled):
		dest := p.openDest()
		defer dest.close()
		for k, i := range idx {
			vs[k] = dest.landed(c.Src, c.Entries[i], res.r.Paths[i])
		}
		return vs, "lstat"
	case class == rsync.Cancelled || p.procCtx(ctx).Err() != nil || rsync.NoTransfer(res.code, res.r):
		// a chunk that ended in --max-duration's grace is still confirmed (procCtx)
		reason := "not confirmed: the rsync session failed"
		if class == rsync.Cancelled || p.procCtx(ctx).Err() != nil {
			reason = Stopped(p.procCtx(ctx))
		}
		for k := range vs {
			vs[k] = rsync.Verdict{Reason: reason}
		}
		return vs, "none"
	}
	entries := make([][]byte, len(idx))
	for k, i := range idx {
		entries[k] = c.Entries[i]
	}
	extra := []string{"--dry-run"}
	if !rsync.TimesKept(p.Args) {
		extra = append(extra, "--checksum") // DEST's mtimes are the copy's: only content proves it
	}
	pass := p.attempt(ctx, c, entries, 0, extra)
	if pass.cancelled {
		for k := range vs {
			vs[k] = rsync.Verdict{Reason: Stopped(p.procCtx(ctx))}
		}
		return vs, "dry-run"
	}
	vs = rsync.Differences(pass.r, pass.code)
	p.sourceGone(ctx, c, idx, res.r, pass.r, vs)
	return vs, "dry-run"
}

// sourceGone settles from DEST itself the paths idx of chunk c whose source the
// confirming pass (its output pr) found gone, in vs: such a path landed when DEST holds
// what the copy's line for it (in r) listed, and vanished before its copy when DEST
// lacks it too. A local DEST is looked at with lstat, a remote one with a listing of
// those paths (`rsync --list-only --no-h`, DEST as its source).
func (p *Pool) sourceGone(ctx context.Context, c *splitter.Chunk, idx []int, r, pr *rsync.Result, vs []rsync.Verdict) {
	var gone []int // positions in idx
	for k := range idx {
		if pr.Paths[k].Kind == rsync.KindVanished {
			gone = append(gone, k)
		}
	}
	if len(gone) == 0 || p.procCtx(ctx).Err() != nil {
		return
	}
	if p.localDest != "" {
		dest := p.openDest()
		defer dest.close()
		for _, k := range gone {
			vs[k] = dest.wrote(rsync.LandsAt(c.Entries[idx[k]]), r.Paths[idx[k]], true, pr.Paths[k].Reason)
		}
		return
	}
	rels := make([]string, len(gone))
	for j, k := range gone {
		rels[j] = rsync.LandsAt(c.Entries[idx[k]])
	}
	l, ok := p.destListing(ctx, c, rels)
	if !ok {
		return // the pass's verdicts stand: not proven
	}
	for j, k := range gone {
		vs[k] = listedWrote(l, rels[j], r.Paths[idx[k]], pr.Paths[k].Reason)
	}
}

// destListing lists the paths rels below a remote DEST, with their sizes in digits and
// their mtimes, by the same rsync with the same options, transport and environment as
// the copy. ok is false when the listing failed or was interrupted.
func (p *Pool) destListing(ctx context.Context, c *splitter.Chunk, rels []string) (*rsync.Listing, bool) {
	entries := make([][]byte, len(rels))
	for i, rel := range rels {
		entries[i] = []byte("./" + rel) // "./": a name that starts with # or ; is no comment
	}
	l := rsync.NewListing(rsync.ListTimeColumns(p.Args))
	lc := &splitter.Chunk{ID: c.ID, Src: p.Dest}
	res := p.run(ctx, lc, entries, 0, pass{extra: []string{"--list-only", "--no-h"}, src: p.Dest, dest: os.DevNull, onLine: func(line []byte) { l.Line(line) }})
	return l, !res.cancelled && rsync.SessionRan(res.code) && len(res.r.Unattributed) == 0
}

// listedWrote is wrote of a path whose source is gone (why), by a listing of a remote
// DEST: it landed when the listing shows the regular file rsync's line listed.
func listedWrote(l *rsync.Listing, rel string, ps rsync.PathState, why string) rsync.Verdict {
	st := ps.Stamp()
	have, ok := l.File(rel)
	switch {
	case st.Known() && ok && have == st:
		return rsync.Verdict{Landed: true}
	case !l.Has(rel):
		return rsync.Verdict{Gone: true, Reason: "source gone before its copy: " + why}
	case st.Known():
		return rsync.Verdict{Reason: fmt.Sprintf("source gone since (%s); DEST does not hold the file rsync listed (%d bytes, %s)", why, st.Size, st.MTime)}
	}
	return rsync.Verdict{Reason: fmt.Sprintf("source gone since (%s); rsync named no copy of it that DEST could be checked against", why)}
}

// confirmLeftOut is confirm when rsync may have left listed paths out (Pool.LeftOut). A
// path its -ii output did not name may be one: its filter rules, or a size or existence
// limit, kept it from the transfer list, and a dry-run pass under the same options would
// not see it either. Such a path landed only if a local DEST holds it as the source has
// it (an earlier copy); otherwise it fails, with the option named. The paths rsync did
// name go the usual way.
func (p *Pool) confirmLeftOut(ctx context.Context, c *splitter.Chunk, idx []int, res result, class rsync.Class) ([]rsync.Verdict, string) {
	vs := make([]rsync.Verdict, len(idx))
	reason := fmt.Sprintf("rsync left it out (%s after --)", p.LeftOut)
	switch {
	case res.code != 0: // it may have stopped before the path, or left it out
		reason = fmt.Sprintf("rsync did not name it (with %s after --, no dry run can prove it)", p.LeftOut)
	case p.Confirm == ConfirmNothing:
		reason = fmt.Sprintf("rsync would leave it out (%s after --)", p.LeftOut)
	}
	local := p.localDest != "" && !p.SourceRemote && p.Confirm != ConfirmNothing
	var dest destRoot
	if local {
		dest = p.openDest()
		defer dest.close()
	}
	var named []int // positions in idx of the paths rsync named
	for k, i := range idx {
		switch ps := res.r.Paths[i]; {
		case ps.Logged || ps.Seen:
			named = append(named, k)
		case local:
			v := dest.landed(c.Src, c.Entries[i], ps)
			if !v.Landed {
				v.Reason = reason + ": " + v.Reason
			}
			vs[k] = v
		default:
			vs[k] = rsync.Verdict{Reason: reason}
		}
	}
	method := "lstat"
	if !local {
		method = "none"
	}
	if len(named) > 0 {
		sub := make([]int, len(named))
		for j, k := range named {
			sub[j] = idx[k]
		}
		nv, m := p.confirmLanded(ctx, c, sub, res, class)
		for j, k := range named {
			vs[k] = nv[j]
		}
		method = m
	}
	return vs, method
}

// destRoot is a local DEST open to be looked at as rsync writes it: through no symlink
// below DEST (DEST's own path may hold some) unless rsync goes through it too (-K, by
// rsync.DestDirLinks). root is nil when DEST cannot be opened.
type destRoot struct {
	root   *beneath.Root
	follow beneath.Follow
}

// openDest opens the pool's local DEST for landed and kinds.
func (p *Pool) openDest() destRoot {
	follow := destFollow(rsync.DestDirLinks(p.Args))
	r, err := beneath.Open(p.localDest, follow)
	if err != nil {
		return destRoot{follow: follow}
	}
	return destRoot{root: r, follow: follow}
}

// destFollow is the look at DEST that goes through the symlinks rsync goes through.
func destFollow(l rsync.DirLinks) beneath.Follow {
	switch l {
	case rsync.DirLinksInTree:
		return beneath.InTree
	case rsync.DirLinksAny:
		return beneath.AnyLinks
	}
	return beneath.NoLinks
}

func (d destRoot) close() {
	if d.root != nil {
		d.root.Close()
	}
}

// lstat is an lstat of rel below DEST, through the symlinks rsync goes through.
func (d destRoot) lstat(rel string) (os.FileInfo, error) {
	if d.root == nil {
		return nil, os.ErrNotExist
	}
	return d.root.Lstat(rel)
}

// landed reports whether a local DEST holds an entry of a chunk as its source has it:
// the same type; for a regular file the same size and mtime (whole seconds); for a
// symlink the same target; a directory only has to exist. A path reached through a
// symlink below DEST that rsync does not go through is not in DEST: rsync replaces such
// a link with a directory. With -K, a symlink to a directory rsync keeps stands for the
// directory. ps is what rsync's output said of the path: when the source is gone, DEST
// holds it if it holds what rsync's own line listed (wrote).
func (d destRoot) landed(srcDir string, entry []byte, ps rsync.PathState) rsync.Verdict {
	return d.landedAt(filepath.Join(srcDir, strings.Replace(string(entry), "/./", "/", 1)), rsync.LandsAt(entry), ps)
}

// landedAt is landed of source path src, which lands at dst below DEST.
func (d destRoot) landedAt(src, dst string, ps rsync.PathState) rsync.Verdict {
	s, err := os.Lstat(src)
	if err != nil {
		return d.wrote(dst, ps, errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR), err.Error())
	}
	fi, err := d.lstat(dst)
	if err != nil {
		return notInDest(err)
	}
	kind := s.Mode().Type()
	dkind := fi.Mode().Type()
	if kind.IsDir() && d.dirAt(dst, fi) {
		dkind = os.ModeDir // kept by -K
	}
	switch {
	case dkind != kind:
		return rsync.Verdict{Reason: "DEST holds another type of file there"}
	case kind.IsRegular() && fi.Size() != s.Size():
		return rsync.Verdict{Reason: fmt.Sprintf("DEST has %d of %d bytes", fi.Size(), s.Size())}
	case kind.IsRegular() && fi.ModTime().Unix() != s.ModTime().Unix():
		return rsync.Verdict{Reason: "DEST has another modification time"}
	case kind&os.ModeSymlink != 0:
		a, err1 := os.Readlink(src)
		b, err2 := d.root.Readlink(dst)
		if err1 != nil || err2 != nil || a != b {
			return rsync.Verdict{Reason: "DEST's symlink has another target"}
		}
	}
	return rsync.Verdict{Landed: true}
}

// wrote is landed of a path whose source could not be read (why; gone: it no longer
// exists, ENOENT or ENOTDIR): DEST holds it when it holds what rsync's line for it
// listed, a regular file of that size and mtime or a directory rsync named as one (a
// source deleted after rsync copied it: a compaction, a log rotation). A path whose
// source is gone and that DEST lacks vanished before its copy.
func (d destRoot) wrote(dst string, ps rsync.PathState, gone bool, why string) rsync.Verdict {
	fi, err := d.lstat(dst)
	if err != nil {
		if gone && errors.Is(err, fs.ErrNotExist) {
			return rsync.Verdict{Gone: true, Reason: "source gone before its copy: " + why}
		}
		return rsync.Verdict{Reason: fmt.Sprintf("source gone (%s); %s", why, notInDest(err).Reason)}
	}
	switch st := ps.Stamp(); {
	case st.Known() && fi.Mode().IsRegular() && st.Matches(fi.Size(), fi.ModTime()):
		return rsync.Verdict{Landed: true}
	case ps.Logged && len(ps.Change) > 1 && ps.Change[1] == 'd' && d.dirAt(dst, fi):
		return rsync.Verdict{Landed: true}
	case st.Known():
		return rsync.Verdict{Reason: fmt.Sprintf("source gone since (%s); DEST does not hold the file rsync listed (%d bytes, %s)", why, st.Size, st.MTime)}
	}
	return rsync.Verdict{Reason: fmt.Sprintf("source gone (%s); rsync named no copy of it that DEST could be checked against", why)}
}

// notInDest is the verdict on a path DEST's lstat did not find (err).
func notInDest(err error) rsync.Verdict {
	if nd := (*beneath.NotDirError)(nil); errors.As(err, &nd) {
		if nd.Symlink {
			return rsync.Verdict{Reason: fmt.Sprintf("not in DEST: DEST holds a symlink at %s where the path needs a directory", nd.Path)}
		}
		return rsync.Verdict{Reason: fmt.Sprintf("not in DEST: DEST holds a file at %s where the path needs a directory", nd.Path)}
	}
	return rsync.Verdict{Reason: "not in DEST"}
}

// dirAt reports whether DEST holds a directory at dst (fi, its lstat): a symlink to a
// directory that rsync keeps (-K) stands for one.
func (d destRoot) dirAt(dst string, fi os.FileInfo) bool {
	return fi.IsDir() || fi.Mode().Type() == os.ModeSymlink && d.follow != beneath.NoLinks && d.root.IsDir(dst)
}
