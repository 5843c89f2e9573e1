package exec

import (
	"math/bits"

	"github.com/prsync/prsync/rsync"
)

// Isolation: what follows a run of a chunk that one path (or a few) may have sunk. It is
// pure: the loop in chunk.go runs what it says.

// step is what follows one run over some paths of a chunk.
type step int

const (
	// stepSettle: the run's paths are settled as its class says (a fatal class stops the run).
	stepSettle step = iota
	// stepDrop: rsync stopped on one path; that path fails alone, with rsync's line, and the
	// paths it left unfinished run again without it.
	stepDrop
	// stepHalve: rsync failed for a reason that names no path; each half of the paths it
	// left unfinished runs again on its own.
	stepHalve
	// stepFull: the destination is full: a re-run without the last culprit stopped on the
	// same error before it landed anything. Stop isolating, and stop the run as before.
	stepFull
)

// runEnd is what one run over paths of a chunk came to, as the policy needs it.
type runEnd struct {
	class rsync.Class
	code  int // rsync's exit code
	// pinned: rsync stopped on a message that names one path of the run (rsync.Result.Stop);
	// full: that message is ENOSPC or EDQUOT
	pinned, full bool
	// pathless: rsync failed for a reason that names no path, of a kind a path can cause
	// (halvable)
	pathless bool
	rerun    bool // the run was itself an isolating re-run
	// landed: paths of the run proven landed; unfinished: paths neither proven nor settled
	// by rsync's own word about them (the culprit aside)
	landed, unfinished int
	budget             int // extra rsync starts the chunk may still spend
}

// isolationBudget is the most extra rsync starts a chunk of n paths spends isolating the
// paths that sink it: 2·⌈log₂ n⌉ (16 for 200 paths, 22 for 2000), enough to halve down to
// one path that sinks it alone. Retries of transient failures are not counted.
func isolationBudget(n int) int {
	if n < 2 {
		return 0
	}
	return 2 * bits.Len(uint(n-1))
}

// halvable reports whether a failed run is worth halving: a chunk's failure (not a
// transient one, retried instead, nor a fatal one) that names no path and that one path
// can cause (rsync.Result.Pathless).
func halvable(class rsync.Class, code int, r *rsync.Result) bool {
	return class == rsync.ChunkFailed && r.Pathless(code)
}

// nextStep is the policy: what follows a run that ended as e says.
func nextStep(e runEnd) step {
	switch {
	case e.class == rsync.Cancelled:
		return stepSettle
	case e.pinned && (e.class == rsync.Fatal || e.class == rsync.ChunkFailed):
		switch {
		case e.full && e.rerun && e.landed == 0:
			return stepFull // the next file did not fit either: nothing fits
		case e.unfinished == 0:
			return stepDrop // the culprit alone failed; nothing left to run
		case e.budget < 1:
			return stepSettle
		}
		return stepDrop
	case e.pathless && e.unfinished >= 2 && e.budget >= 2:
		return stepHalve
	}
	return stepSettle
}

// halves splits paths (indexes in order) into two halves, the first the smaller.
func halves(paths []int) ([]int, []int) {
	m := len(paths) / 2
	return paths[:m:m], paths[m:]
}
