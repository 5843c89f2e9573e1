package doctor

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/prsync/prsync/rsync"
)

// minRsync is the oldest rsync prsync works with (cli.MinRsync), and minMkpath the oldest
// that creates a missing remote DEST (cli.MinRsyncMkpath).
var (
	minRsync  = rsync.MinVersion
	minMkpath = rsync.Version{Major: 3, Minor: 2, Patch: 3}
)

// Check names, stable for scripts that read --json.
const (
	NameLocalRsync  = "rsync-local"
	NameRemoteRsync = "rsync-remote"
	NameConnections = "remote-connections"
)

// LocalRsync checks the rsync prsync would run: path, what path --version printed, and
// the error of running it. args are rsync's options (prsync's and the ones after --), and
// remoteDest says whether DEST is on another host (which wants --mkpath).
func LocalRsync(path string, out []byte, runErr error, args []string, remoteDest bool) Check {
	if runErr != nil {
		return fail(NameLocalRsync, "install rsync 3.1 or newer (apt-get install rsync, brew install rsync), or pass --rsync PATH",
			"cannot run %s --version: %v%s", path, runErr, firstLineOf(out))
	}
	b, found := rsync.ParseBanner(out)
	if !found {
		return fail(NameLocalRsync, "pass --rsync with the path of GNU rsync", "%s does not look like rsync:%s", path, firstLineOf(out))
	}
	what := fmt.Sprintf("%s is %s", path, describe(b))
	return banner(NameLocalRsync, what, b, args, remoteDest)
}

// RemoteRsync checks the far side's rsync, from what `rsync --version` printed over the
// remote shell (cmd, as it was run) and the error of running it.
func RemoteRsync(host, cmd string, out []byte, runErr error, args []string, mkpath bool) Check {
	if runErr != nil {
		return fail(NameRemoteRsync, "check that `"+cmd+"` works from this shell (keys, host name, --rsync-path after --); prsync's rsyncs connect the same way",
			"cannot run rsync --version on %s: %v%s", host, runErr, firstLineOf(out))
	}
	b, found := rsync.ParseBanner(out)
	if !found {
		return fail(NameRemoteRsync, "install rsync 3.1 or newer on "+host+", or name it with --rsync-path after --",
			"rsync --version on %s does not look like rsync:%s", host, firstLineOf(out))
	}
	return banner(NameRemoteRsync, fmt.Sprintf("%s runs %s", host, describe(b)), b, args, mkpath)
}

func describe(b rsync.Banner) string { return b.String() }

// banner judges one end's rsync by the run's own rule (rsync.Judge: a fatal problem is an
// error, another a warning), and --mkpath for a remote DEST.
func banner(name, what string, b rsync.Banner, args []string, mkpath bool) Check {
	c := ok(name, "%s", what)
	var msgs, fixes []string
	worst := OK
	add := func(s Status, msg, fix string) {
		worst = max(worst, s)
		msgs = append(msgs, msg)
		if fix != "" && !slices.Contains(fixes, fix) {
			fixes = append(fixes, fix)
		}
	}
	for _, p := range rsync.Judge(b, args) {
		if p.Fatal {
			add(Error, p.What, p.Fix)
		} else {
			add(Warning, p.What, p.Fix)
		}
	}
	if mkpath && !b.OpenRsync && b.Version.AtLeast(minRsync.Major, minRsync.Minor, minRsync.Patch) &&
		!b.Version.AtLeast(minMkpath.Major, minMkpath.Minor, minMkpath.Patch) {
		add(Warning, "older than "+minMkpath.String()+": a missing remote DEST is not created (no --mkpath)", "create DEST on the far side first, or use rsync "+minMkpath.String()+" or newer")
	}
	if worst == OK {
		return c
	}
	c.Status = worst
	c.Message = what + ": " + strings.Join(msgs, "; ")
	c.Fix = strings.Join(fixes, "; ")
	return c
}

// daemonVersions are the rsync releases behind a daemon's protocol number: a daemon's
// greeting tells the protocol, not the version.
func daemonVersions(proto int) string {
	switch {
	case proto >= 32:
		return "rsync 3.4.0 or newer"
	case proto == 31:
		return "rsync 3.1.0 to 3.3.x"
	case proto == 30:
		return "rsync 3.0.x"
	}
	return "rsync older than 3.0"
}

// RemoteDaemon checks an rsync daemon from its greeting: the protocol it speaks (proto),
// or the error of connecting and reading it. args are the rsync options, to name the
// known-bad 3.4.x problems they would meet if the daemon is one of those.
func RemoteDaemon(addr string, proto int, err error, args []string) Check {
	if err != nil {
		return fail(NameRemoteRsync, "check the host and port (rsync://HOST:PORT/, or --port after --) and that rsync --daemon runs there",
			"no rsync daemon greeting from %s: %v", addr, err)
	}
	what := fmt.Sprintf("the rsync daemon at %s speaks protocol %d (%s; a daemon does not tell its version)", addr, proto, daemonVersions(proto))
	if proto < 31 {
		return fail(NameRemoteRsync, "upgrade rsync on the daemon's host to 3.1 or newer", "%s: prsync needs rsync %s or newer", what, minRsync)
	}
	if proto >= 32 {
		var bugs []string
		seen := map[string]bool{}
		for _, v := range []rsync.Version{{Major: 3, Minor: 4}, {Major: 3, Minor: 4, Patch: 2}, {Major: 3, Minor: 4, Patch: 3}} {
			for _, k := range rsync.KnownBadFor(rsync.Banner{Version: v}) {
				if k.Triggered(args) && !seen[k.Source] {
					seen[k.Source] = true
					bugs = append(bugs, fmt.Sprintf("%s (%s)", k.What, k.Source))
				}
			}
		}
		if len(bugs) > 0 {
			return warn(NameRemoteRsync, "run rsync --version on the daemon's host; upgrade it to 3.4.4 or newer if it is one of those",
				"%s: if it is one of the known-bad 3.4 releases, this run's options meet: %s", what, strings.Join(bugs, "; "))
		}
	}
	return ok(NameRemoteRsync, "%s", what)
}

// ConnProbe is what a few concurrent connections to a daemon's module found.
type ConnProbe struct {
	Tried    int // connections opened at once
	Admitted int // admitted by the daemon: a slot each
	Refused  int // got @ERROR: max connections (N) reached
	Limit    int // N of that message; 0 when none came
	Other    string
	Err      error // the first connection or read error
	// Runs are the process IDs of the user's prsyncs running now (their control
	// sockets), looked up when a connection was refused: their rsyncs may hold slots.
	Runs []int
}

// Connections checks a daemon module's connection limit against the rsyncs the run
// starts at once (jobs; for -j auto, the number it starts at).
func Connections(addr, module string, jobs int, p ConnProbe) Check {
	switch {
	case p.Other != "":
		fix := "check the module name: rsync rsync://" + addr + "/ lists the modules"
		if strings.Contains(p.Other, "auth failed") {
			fix = "give the module's password as the run will: RSYNC_PASSWORD, or --password-file after --"
		}
		return fail(NameConnections, fix, "the daemon at %s refused module %q: %s", addr, module, p.Other)
	case p.Refused > 0:
		limit := p.Limit
		if limit == 0 {
			limit = p.Admitted
		}
		raise := fmt.Sprintf("raise \"max connections\" of [%s] in rsyncd.conf on the daemon's host", module)
		msg := fmt.Sprintf("module %s at %s admitted %d of %d connections at once (max connections = %d, other clients' included), below -j %d: prsync retries the refused rsyncs with fewer at once, and the copy runs at %d",
			module, addr, p.Admitted, p.Tried, limit, jobs, max(p.Admitted, 1))
		fix := fmt.Sprintf("use -j %d, or %s", p.Admitted, raise)
		if p.Admitted == 0 {
			// -j 1 would not help: every slot is taken, by someone
			msg = fmt.Sprintf("module %s at %s admitted none of %d connections at once: its max connections = %d are all held now, by other clients' rsyncs", module, addr, p.Tried, limit)
			fix = "run doctor again when the module's other clients are done, or " + raise
		}
		if len(p.Runs) > 0 {
			pids := make([]string, len(p.Runs))
			for i, pid := range p.Runs {
				pids[i] = strconv.Itoa(pid)
			}
			msg += fmt.Sprintf("; prsync %s of yours is running now, and if it copies to or from this module its rsyncs hold some of the slots", strings.Join(pids, ", "))
			fix = fmt.Sprintf("if prsync %s copies to or from this module (prsync ctl --pid %d status), the slots are its own: run doctor again once it has ended; else %s", pids[0], p.Runs[0], fix)
		}
		return warn(NameConnections, fix, "%s", msg)
	case p.Err != nil && p.Admitted == 0:
		return fail(NameConnections, "check that the daemon runs and is reachable", "could not open a connection to module %s at %s: %v", module, addr, p.Err)
	case p.Err != nil:
		return warn(NameConnections, "check the daemon's log and the network between the two hosts",
			"module %s at %s admitted %d of %d connections at once; the others failed: %v", module, addr, p.Admitted, p.Tried, p.Err)
	case p.Tried < jobs:
		return ok(NameConnections, "module %s at %s admitted all %d connections opened at once (of -j %d; doctor opens at most %d)", module, addr, p.Admitted, jobs, p.Tried)
	}
	return ok(NameConnections, "module %s at %s admitted all %d connections opened at once (-j %d)", module, addr, p.Admitted, jobs)
}

// SSHConnections is the connection check for a host reached over ssh, which doctor does
// not probe: sshd's MaxStartups (10:30:100 by default) refuses some of the logins beyond
// 10 that are in progress at once.
func SSHConnections(host string, jobs int) Check {
	if jobs > 10 {
		return warn(NameConnections, "keep -j at 10 or below, raise MaxStartups in sshd_config on "+host+", or share one ssh connection (ControlMaster; README, Pulling from a remote host)",
			"-j %d logs in to %s %d times at once; sshd's default MaxStartups 10:30:100 refuses some logins beyond 10 (prsync retries those with fewer rsyncs); not probed over ssh", jobs, host, jobs)
	}
	return ok(NameConnections, "-j %d logs in to %s at most %d times at once, within sshd's default MaxStartups (10); not probed over ssh", jobs, host, jobs)
}

func firstLineOf(out []byte) string {
	s := strings.TrimSpace(string(out))
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if s == "" {
		return ""
	}
	return " " + s
}

// errTimeout is a probe that took longer than its bound.
var errTimeout = errors.New("timed out")
