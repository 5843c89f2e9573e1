package exec

// Class is what prsync does about an rsync exit.
type Class int

const (
	// OK: nothing went wrong.
	OK Class = iota
	// Partial: some paths failed or vanished (23, 24); the rest were copied.
	Partial
	// Transient: worth retrying (10, 12, 30, 35, 255, or killed by a signal prsync did not send).
	Transient
	// Fatal: the destination or the setup is wrong (1, 3, 5, 11 with ENOSPC, or Transient
	// after the retries); later chunks would fail the same way, so the run stops.
	Fatal
	// ChunkFailed: this chunk failed as a whole; the others go on.
	ChunkFailed
	// Cancelled: prsync stopped it.
	Cancelled
)

// Classify maps an rsync exit to a Class. code is -1 when the process was killed by a
// signal; cancelled says prsync itself signalled it; noSpace says stderr reported ENOSPC.
func Classify(code int, cancelled, noSpace bool) Class {
	switch {
	case cancelled:
		return Cancelled
	case code == 0:
		return OK
	case code == 23 || code == 24:
		if noSpace {
			return Fatal
		}
		return Partial
	case code == 10 || code == 12 || code == 30 || code == 35 || code == 255 || code == 20 || code < 0:
		return Transient
	case code == 1 || code == 3 || code == 5:
		return Fatal
	case code == 11 && noSpace:
		return Fatal
	}
	return ChunkFailed
}

// Hint returns advice for an rsync exit code, or "".
func Hint(code int, noSpace bool) string {
	switch {
	case noSpace:
		return "the destination is full: free space, then re-run with the --failed list"
	case code == 1:
		return "rsync rejected its options: check the options after --"
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
