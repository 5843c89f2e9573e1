package cli

import (
	"context"
	"time"

	"github.com/prsync/prsync/exec"
	"github.com/prsync/prsync/internal/cmdline"
	"github.com/prsync/prsync/rsync"
)

// The lists of a push held on the far side (--remote-lists; exec.RemoteLists).

// daemonListMin is what the lists waiting must come to for an upload to a daemon to pay
// for its session with --remote-lists auto (README "How lists travel in a push",
// bench/RESULTS.md "Remote lists"). The client of a push reads its list at about 0.4 µs of
// CPU and as much wall time a byte (one read and one poll each); the far side sends it in
// blocks. An upload to a daemon on this machine took 6 ms with TCP_NODELAY and a few ms of
// CPU, which 32 KiB (about 400 paths) pays back. Over ssh an upload is a login of its own
// (0.3 s and 0.1 CPU-s here, over 1 s under load): pushes of 5,000 to 50,000 files were no
// faster with the lists there, and slower with every chunk's, so auto leaves ssh alone.
const daemonListMin = 32 << 10

// listReadRate is how fast the client of a push reads its list on stdin, in bytes a
// second (0.4 µs a byte, above): with --remote-lists auto, the lists waiting must also
// come to what it reads in the time the run's uploads take, which beside the copy's own
// rsyncs on 2 CPUs was 50 to 100 ms, not 6 (exec.RemoteLists.ReadRate).
const listReadRate = 2.5e6

// remoteLists returns the lists of a push held on the far side, and the mode in force
// for the start event; nil and "" where there is no push to a remote DEST, nil and "off"
// where they are off (asked, a dry run, which must write nothing to DEST, or an rsync
// option in the way).
func (r *runner) remoteLists() (*exec.RemoteLists, string) {
	f := &r.f
	if !rsync.IsRemote(f.Dest) || r.srcRemote != "" {
		return nil, ""
	}
	mode := f.RemoteLists
	switch {
	case mode == "off" || f.DryRun:
		return nil, "off"
	case mode == "auto" && !rsync.IsDaemon(f.Dest):
		return nil, mode // over ssh only when asked (on)
	}
	if ok, opt := rsync.RemoteListUsable(r.args); !ok {
		if mode == "on" {
			cmdline.Warnf(r.stderr, "--remote-lists on cannot be used with rsync's %s; each rsync reads its list from prsync", opt)
		}
		return nil, "off"
	}
	l := &exec.RemoteLists{
		Rsync: r.rsync, Dest: f.Dest, Args: rsync.ReachOptions(r.args), Env: r.rsyncEnv(), Grace: 10 * time.Second,
		MinBytes: daemonListMin, ReadRate: listReadRate,
	}
	if mode == "on" {
		l.MinBytes, l.ReadRate = 1, 0
		l.OnOff = func(why string) {
			cmdline.Warnf(r.stderr, "--remote-lists on: %s; the rsyncs read their lists from prsync from now on", why)
		}
	}
	return l, mode
}

// closeLists removes this run's lists from the far side, and says so when it cannot:
// they are swept by the next run that puts lists there.
func (p *pipeline) closeLists(kill context.Context) {
	if p.pool.Lists == nil {
		return
	}
	ctx, cancel := context.WithTimeout(kill, 30*time.Second)
	defer cancel()
	if err := p.pool.Lists.Close(ctx); err != nil {
		cmdline.Warnf(p.r.stderr, "%v; the next run that puts lists there removes them", err)
	}
}

// remoteListStats is the summary's account of the remote lists: nil unless an upload ran
// or they were turned off.
func (p *pipeline) remoteListStats() *exec.ListStats {
	s := p.pool.Lists.Stats()
	if s.Uploads == 0 && s.Off == "" {
		return nil
	}
	return &s
}
