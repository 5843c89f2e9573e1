package rsync

import (
	"fmt"
	"strings"
)

// Class is what prsync does about an rsync exit.
type Class int

const (
	// OK: nothing went wrong.
	OK Class = iota
	// Partial: some paths failed or vanished (23, 24); the rest may have been copied.
	Partial
	// Transient: worth retrying (10, 12, 30, 35, 255, or killed by a signal prsync did not send;
	// 11 and 23 that another rsync of the run raced).
	Transient
	// Refused: the far side is up but takes no more sessions now ("max connections",
	// sshd's MaxStartups): retry, with fewer rsyncs at once.
	Refused
	// Fatal: the destination or the setup is wrong (1, 3, 5, 11 with ENOSPC, or Transient
	// after the retries); later chunks would fail the same way, so the run stops.
	Fatal
	// ChunkFailed: this chunk failed as a whole; the others go on.
	ChunkFailed
	// Cancelled: prsync stopped it.
	Cancelled
)

// String names the class.
func (c Class) String() string {
	return [...]string{"ok", "partial", "transient", "refused", "fatal", "chunk-failed", "cancelled"}[c]
}

// Classify maps an rsync exit to a Class. code is -1 when the process was killed by a
// signal; cancelled says prsync itself signalled it; r is what its output said.
func Classify(code int, cancelled bool, r *Result) Class {
	switch {
	case cancelled:
		return Cancelled
	case code == 0:
		return OK
	case r.Session.Refusal():
		return Refused
	case r.NoSpace:
		return Fatal
	case r.Session != NoSession && !r.Session.Transient():
		return Fatal
	case code == 23 && r.ReplaceRace:
		// two chunks' rsyncs replaced one symlink in DEST with a directory at once: the
		// second finds the directory, and a retry writes into it
		return Transient
	case code == 23 || code == 24:
		return Partial
	case code == 11 && r.MkdirRace:
		return Transient
	case code == 10 || code == 12 || code == 30 || code == 35 || code == 255 || code == 20 || code < 0:
		return Transient
	case code == 1 || code == 3 || code == 5:
		return Fatal
	}
	return ChunkFailed
}

// NotStarted is the exit code prsync gives an rsync that could not be started: rsync's own
// for a command that was not found (RERR_CMD_NOTFOUND).
const NotStarted = 127

// ExitFailed reports an exit code that says rsync failed at something: any but 0, and 24,
// which says only that some source files vanished ("rsync warning: some files vanished
// before they could be transferred").
func ExitFailed(code int) bool { return code != 0 && code != 24 }

// Pathless reports an rsync failure that names no path but that one path of the list can
// cause, so that each half of the list run apart may find that path: exit 2 (protocol data
// it could not use), 11 (a file I/O error, such as a read error, that names no path), 13
// (program diagnostics), 19 (SIGUSR1: a side died) or 22 (out of memory: too much at once).
// A refusal or another session failure, a message that names the path rsync stopped on
// (Stop), ENOSPC and a setup error that every list would meet (1, 3, 4, 5, 6, 14, 21, 25)
// are not.
func (r *Result) Pathless(code int) bool {
	if r.Session != NoSession || len(r.Stop) > 0 || r.NoSpace {
		return false
	}
	switch code {
	case 2, 11, 13, 19, 22:
		return true
	}
	return false
}

// SessionRan reports an exit code that only an rsync whose session ran to its transfer
// gives: 0, 23 (some files failed) or 24 (some vanished). A refused session exits 5 (a
// daemon) or 255 (ssh), and one that could not connect 10.
func SessionRan(code int) bool { return code == 0 || code == 23 || code == 24 }

// NoTransfer reports an rsync that failed before or outside any transfer, from its exit
// code and what its output said: nothing it could have copied is worth a verification pass.
func NoTransfer(code int, r *Result) bool {
	if r.Session != NoSession {
		return true
	}
	switch code {
	case 1, 2, 3, 4, 5, 10, 12, 14, 30, 35, NotStarted, 255:
		return true
	}
	return code < 0
}

// LastLine returns the line that says best why rsync failed: the session failure's, else
// its last stderr line that is not its closing summary, else stderr (its standard error as
// written, which then holds only that summary), else "no error output".
func (r *Result) LastLine(stderr string) string {
	if r.SessionLine != "" {
		return r.SessionLine
	}
	if r.Last != "" {
		return r.Last
	}
	if stderr != "" {
		return stderr
	}
	return "no error output"
}

// StopCode is the exit code for a run that this rsync stopped: rsync's own code, except
// that a full destination (ENOSPC, or EDQUOT for a quota) is always 11, rsync's "error in
// file IO". When a write fails, the receiver exits 11 and the other rsync process ends on
// the SIGUSR1 rsync sends it. Which process reports first is a race, so the client can
// also exit 19, "received SIGUSR1" (seen in CI with a 4 KB tmpfs).
func StopCode(code int, r *Result) int {
	if code > 0 && (r.NoSpace || r.Full()) {
		return 11
	}
	return code
}

// Hint returns advice for an rsync exit, from its code and what its output said, or "".
// dest is rsync's destination argument: a DEST that rsync took for a host because its name
// holds a colon may have been meant as a local directory, and the advice says so.
func Hint(code int, r *Result, dest string) string {
	h := exitHint(code, r)
	_, rest, _ := strings.Cut(dest, ":")
	hostLike := IsRemote(dest) && !IsDaemon(dest) && !strings.HasPrefix(rest, "/")
	sshFailed := code == 255 || r.Session == HostUnknown || r.Session == ConnectFailed || r.Session == SSHAuth
	if hostLike && sshFailed {
		local := fmt.Sprintf("if %s is a local directory, write ./%s", dest, dest)
		if h == "" {
			return local
		}
		return h + "; " + local
	}
	return h
}

// exitHint is Hint without the word on DEST.
func exitHint(code int, r *Result) string {
	switch r.Session {
	case MaxConnections:
		return "the rsync daemon limits its sessions (max connections in rsyncd.conf): prsync retries with fewer rsyncs at once; pin -j to that number to avoid the retries"
	case SSHRefused:
		return "sshd dropped new connections (its MaxStartups, default 10:30:100): prsync retries with fewer rsyncs at once; use a lower -j, or an ssh ControlMaster (see README)"
	case UnknownModule:
		return "the rsync daemon has no such module: list its modules with `rsync rsync://HOST/`"
	case AuthFailed:
		return "the rsync daemon refused the login: check the user in DEST, RSYNC_PASSWORD or --password-file, and the module's auth users and secrets file"
	case AccessDenied:
		return "the rsync daemon does not accept this host for the module: check its hosts allow and hosts deny"
	case ReadOnly:
		return "the rsync daemon's module is read only: set `read only = no` for it in rsyncd.conf, or copy into another module"
	case RefusedOption:
		return "the rsync daemon refuses an option (refuse options in rsyncd.conf): drop it after --"
	case HostUnknown:
		return "the host name does not resolve"
	case SSHAuth:
		return "ssh could not log in: check that `ssh HOST true` works without a prompt"
	case WriteOnly:
		return "the rsync daemon's module is write only: it cannot be a source"
	case ModulePath:
		return "the rsync daemon cannot enter the module's path: check path in rsyncd.conf, and that the daemon's uid may enter it"
	case PreXfer:
		return "the module's pre-xfer exec refused the transfer: see the daemon's log"
	case ConnectFailed:
		return "rsync could not reach the destination: check that the host or daemon is up, then re-run with the --failed list"
	}
	if r.NoSpace {
		return "the destination is full: free space, then re-run with the --failed list"
	}
	if h := failureHint(r); h != "" {
		return h
	}
	switch {
	case code == 1:
		return "rsync rejected its options or the far side refused them: check the options after --"
	case code == 3:
		return "rsync could not use the destination: check that it is a writable directory"
	case code == 5:
		return "the rsync daemon refused the session: check the module name and its access rules"
	case code == 10 || code == 35:
		return "rsync could not reach the destination: check that the host or daemon is up, then re-run with the --failed list"
	case code == 12 || code == 30:
		return "the connection to the destination broke or timed out: re-run with the --failed list"
	case code == 255:
		return "ssh failed: check that `ssh HOST true` works without a prompt"
	case code < 0:
		return "rsync was killed by a signal"
	}
	return ""
}

// failureHint returns advice for per-path failures that share a cause.
func failureHint(r *Result) string {
	for _, ps := range r.Paths {
		if ps.Kind != KindFailed {
			continue
		}
		if ps.Advice != NoAdvice {
			return ps.Advice.String()
		}
	}
	for _, l := range r.Unattributed {
		if a := AdviceOf(l); a != NoAdvice {
			return a.String()
		}
	}
	return ""
}
