package doctor

import (
	"context"
	"io"
	"os"

	"github.com/prsync/prsync/control"
	"github.com/prsync/prsync/exec"
	"github.com/prsync/prsync/rsync"
	"github.com/prsync/prsync/throttle"
)

// Plan is the run to check, as prsync's Validate filled it in from the same command line.
type Plan struct {
	Rsync    string   // the local rsync (a path); "" when it was not found
	RsyncErr error    // why it was not found
	Args     []string // every rsync's options: prsync's own (--archive …) and those after --
	Dest     string
	Root     string   // a remote --root (a pull), or ""
	Jobs     int      // rsyncs at once: -j, or the number -j auto starts at
	Env      []string // the rsyncs' environment (an empty RSYNC_PASSWORD for a daemon); nil: prsync's

	List       io.Reader // the list; nil when there is none to read (stdin is a terminal)
	ListSource string    // where the list comes from, for messages: "stdin" or the file
	Source     SourceConfig

	Policy     throttle.Policy
	NoThrottle bool
	NoControl  bool
}

// Run checks the plan and returns every check, in this order: the rsyncs on both ends,
// the far side's connection limit, the source, DEST, the throttle (and how busy the machine
// is now: a sample of NowSample) and the control socket.
// It creates, writes and copies nothing; the far side's probes are bounded by
// ProbeTimeout each.
func Run(ctx context.Context, p Plan) *Report {
	r := &Report{}
	remoteDest := rsync.IsRemote(p.Dest)
	if p.RsyncErr != nil || p.Rsync == "" {
		r.Add(fail(NameLocalRsync, "install rsync 3.1 or newer (apt-get install rsync, brew install rsync), or pass --rsync PATH",
			"rsync not found: %v", p.RsyncErr))
	} else {
		r.Add(localRsync(ctx, p.Rsync, p.Args, remoteDest))
	}

	far := ""
	switch {
	case remoteDest:
		far = p.Dest
	case p.Root != "":
		far = p.Root
	}
	if far == "" {
		r.Add(ok(NameRemoteRsync, "no far side: DEST and the source are local"))
	} else {
		r.Add(farSide(ctx, p, far, remoteDest)...)
	}

	var src SourceFacts
	if p.List == nil {
		src = SourceFacts{Remote: p.Source.Remote}
		r.Add(warn(NameSource, "pipe in the list as for the run (find DIR -type f -print0 | prsync doctor -0 …), or give --from FILE",
			"no list: %s is a terminal; the source, and DEST's room for it, are not checked", p.ListSource))
	} else {
		src = ReadSource(p.List, p.Source)
		r.Add(Source(src, rsync.Preserves(p.Args))...)
	}

	if remoteDest {
		r.Add(RemoteDest(p.Dest))
	} else if p.List == nil {
		r.Add(Dest(LookDest(p.Dest), SourceFacts{})[0])
	} else {
		r.Add(Dest(LookDest(p.Dest), src)...)
	}

	r.Add(Throttle(LookThrottle(p.Policy, p.NoThrottle))...)
	r.Add(Now(LookNow(ctx, p.Policy, p.NoThrottle, NowSample)))
	r.Add(Control(LookControl(p.NoControl, control.LookupDir)))
	return r
}

// localRsync runs the local rsync with the run's options and --version, as the run does
// before it starts (exec.Version): rsync rejects options it does not know, and says what it
// is.
func localRsync(ctx context.Context, path string, args []string, remoteDest bool) Check {
	ctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	v := exec.Version(ctx, path, args)
	if v.Rejected() {
		return fail(NameLocalRsync, "check the options after --", "%s rejected the options:%s", path, firstLineOf(v.Out))
	}
	return LocalRsync(path, v.Out, v.Err, args, remoteDest)
}

// farSide checks the rsync on the far side of a remote DEST or --root (far), and its
// connection limit; push says the run copies into far.
func farSide(ctx context.Context, p Plan, far string, push bool) []Check {
	args, jobs := p.Args, p.Jobs
	e := rsync.ParseEndpoint(far, args)
	if !e.Daemon {
		cmd, out, err := SSHVersion(ctx, e, args)
		return []Check{RemoteRsync(e.Host, cmd, out, err, args, push), SSHConnections(e.Host, jobs)}
	}
	if _, given := rsync.RemoteShell(args, os.Getenv("RSYNC_RSH")); given {
		return []Check{ok(NameRemoteRsync, "%s is a daemon reached through the remote shell given with -e: not probed", far)}
	}
	proto, err := Greeting(ctx, e.Addr())
	out := []Check{RemoteDaemon(e.Addr(), proto, err, args)}
	if err != nil {
		return out
	}
	if p.Rsync == "" {
		return append(out, warn(NameConnections, "install rsync, then run doctor again", "module %s at %s: not probed without a local rsync", e.Module, e.Addr()))
	}
	probe := ProbeConnections(ctx, ProbeSpec{Rsync: p.Rsync, Addr: e.Addr(), User: e.User, Module: e.Module, Push: push, Args: args, Env: p.Env}, jobs)
	if probe.Refused > 0 {
		// the user's own runs hold slots too: the fix must not blame -j alone
		if dir, err := control.LookupDir(); err == nil {
			probe.Runs = control.Running(dir)
		}
	}
	return append(out, Connections(e.Addr(), e.Module, jobs, probe))
}
