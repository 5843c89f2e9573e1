package plan

// # Which chunk next
//
// The pool holds up to -j chunks cut and not started while every slot is busy, and asks Pick
// which to start when one frees. The one with the most bytes goes first (among equals the
// older): chunks flow straight through when the pool keeps up, so streaming is not delayed,
// and when it does not, big chunks start early and the small ones fill the tail, which
// balances the last minutes of a copy.
//
// A root's chunk (the root of a source, "." in the list, copied alone by rsync.RootAlone)
// goes last: its rsync sets the root's mode and mtime, which the paths landing below it
// change. It starts only once the input has ended, no other chunk waits and none runs.

// Waiting is a chunk cut and not started, as Pick sees it.
type Waiting struct {
	ID    int
	Bytes int64
	Root  bool
}

// Pick returns the index in waiting of the chunk to start next, or -1 when none may start
// yet. busy is how many chunks run (retries and confirmations included); ended says the
// input has ended (no chunk will come).
func Pick(waiting []Waiting, busy int, ended bool) int {
	best := -1
	roots := false
	for i, w := range waiting {
		if w.Root {
			roots = true
			continue
		}
		if best < 0 || w.Bytes > waiting[best].Bytes || w.Bytes == waiting[best].Bytes && w.ID < waiting[best].ID {
			best = i
		}
	}
	if best >= 0 || !roots || !ended || busy > 0 {
		return best
	}
	for i, w := range waiting {
		if w.Root && (best < 0 || w.ID < waiting[best].ID) {
			best = i
		}
	}
	return best
}
