package cli

import (
	"cmp"

	"github.com/prsync/prsync/internal/cmdline"
	"github.com/prsync/prsync/internal/storage"
	"github.com/prsync/prsync/rsync"
	"github.com/prsync/prsync/throttle"
)

// watches returns what DEST and the source are at the start (storage.Watch), for a local
// DEST and a local source: DEST with the top-level directories and the mount points
// below it, the source root (--root, else "/", under which every path lies) with the
// mount points below it as the paths meet them. Either is nil where there is nothing to
// watch (a remote side, a dry run's DEST not made).
func (r *runner) watches() (dest, src *storage.Watch) {
	f := &r.f
	if f.Dest != "" && !rsync.IsRemote(f.Dest) && !f.DryRun {
		w, err := storage.New("DEST", f.Dest, storage.Options{Tops: true, MountsNow: true})
		if err != nil {
			cmdline.Warnf(r.stderr, "DEST: %v; a mount there that goes away mid-run will not be noticed", err)
		} else {
			dest = w
		}
	}
	if r.srcRemote == "" {
		if w, err := storage.New("the source", cmp.Or(r.root, "/"), storage.Options{}); err == nil {
			src = w
		}
	}
	return dest, src
}

// countFUSE has the throttle count the servers of the FUSE filesystems that DEST and the
// source root lie on (an sshfs and its ssh) as the copy's own CPU, as it does a daemon on
// this machine: their work is the copy's. ws may be nil.
func countFUSE(s *throttle.SystemSampler, ws ...*storage.Watch) {
	for _, w := range ws {
		if w == nil {
			continue
		}
		for _, m := range w.FUSE() {
			s.CountFUSE(m.Dev, m.Point)
		}
	}
}

// sourceLost is the splitter's check of the source before it calls a missing path
// vanished (splitter.Config.SourceLost), or nil.
func (p *pipeline) sourceLost() func(string) error {
	w := p.pool.SrcWatch
	if w == nil {
		return nil
	}
	return func(abs string) error { return w.Check([]string{abs}) }
}
