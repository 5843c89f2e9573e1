package exec

import (
	"testing"

	"github.com/prsync/prsync/rsync"
)

// TestIsolationPolicy: which path is dropped, when a chunk is halved, when the
// destination counts as full, and the bound on extra rsync starts.
func TestIsolationPolicy(t *testing.T) {
	tests := []struct {
		name string
		e    runEnd
		want step
	}{
		{"ok", runEnd{class: rsync.OK}, stepSettle},
		{"partial", runEnd{class: rsync.Partial, code: 23, unfinished: 3, budget: 8}, stepSettle},
		{"enospc on one file, first run, nothing landed", runEnd{class: rsync.Fatal, code: 11, pinned: true, full: true, unfinished: 200, budget: 16}, stepDrop},
		{"enospc again on the re-run's first file", runEnd{class: rsync.Fatal, code: 11, pinned: true, full: true, rerun: true, unfinished: 199, budget: 15}, stepFull},
		{"enospc on the re-run after some landed", runEnd{class: rsync.Fatal, code: 11, pinned: true, full: true, rerun: true, landed: 3, unfinished: 9, budget: 15}, stepDrop},
		{"enospc on the last file: nothing left to run", runEnd{class: rsync.Fatal, code: 11, pinned: true, full: true, landed: 200}, stepDrop},
		{"enospc, budget spent: stop as before", runEnd{class: rsync.Fatal, code: 11, pinned: true, full: true, rerun: true, landed: 1, unfinished: 5}, stepSettle},
		{"efbig on the re-run's first file is no full disk", runEnd{class: rsync.ChunkFailed, code: 11, pinned: true, rerun: true, unfinished: 5, budget: 3}, stepDrop},
		{"efbig, budget spent", runEnd{class: rsync.ChunkFailed, code: 11, pinned: true, rerun: true, unfinished: 5}, stepSettle},
		{"pathless failure: halve", runEnd{class: rsync.ChunkFailed, code: 11, pathless: true, unfinished: 100, budget: 14}, stepHalve},
		{"pathless, one path left: it stands alone", runEnd{class: rsync.ChunkFailed, code: 11, pathless: true, unfinished: 1, budget: 14}, stepSettle},
		{"pathless, budget below two starts", runEnd{class: rsync.ChunkFailed, code: 22, pathless: true, unfinished: 10, budget: 1}, stepSettle},
		{"pathless but not halvable", runEnd{class: rsync.ChunkFailed, code: 4, unfinished: 10, budget: 14}, stepSettle},
		{"cancelled while isolating", runEnd{class: rsync.Cancelled, pinned: true, full: true, rerun: true, unfinished: 10, budget: 14}, stepSettle},
		{"fatal setup error", runEnd{class: rsync.Fatal, code: 5, unfinished: 10, budget: 14}, stepSettle},
	}
	for _, tt := range tests {
		if got := nextStep(tt.e); got != tt.want {
			t.Errorf("%s: nextStep = %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestIsolationBudget(t *testing.T) {
	for _, tt := range []struct{ n, want int }{{0, 0}, {1, 0}, {2, 2}, {3, 4}, {4, 4}, {5, 6}, {200, 16}, {201, 16}, {2000, 22}} {
		if got := isolationBudget(tt.n); got != tt.want {
			t.Errorf("isolationBudget(%d) = %d, want %d", tt.n, got, tt.want)
		}
	}
	// halving one bad path out of n takes at most the budget: two starts per level
	for _, n := range []int{2, 3, 7, 200, 2000} {
		starts, set := 0, n
		for set >= 2 {
			starts += 2
			set -= set / 2 // the bigger half
		}
		if starts > isolationBudget(n) {
			t.Errorf("n=%d: bisection takes %d starts, budget %d", n, starts, isolationBudget(n))
		}
	}
}

// TestHalvable: a chunk's failure that names no path is halved (which failures name none
// is rsync.Result.Pathless's, tested in rsync); a transient, fatal or partial one is not.
func TestHalvable(t *testing.T) {
	plain := &rsync.Result{}
	for _, tt := range []struct {
		class rsync.Class
		code  int
		r     *rsync.Result
		want  bool
	}{
		{rsync.ChunkFailed, 11, plain, true},
		{rsync.ChunkFailed, 4, plain, false},
		{rsync.Fatal, 11, plain, false},
		{rsync.Fatal, 11, &rsync.Result{NoSpace: true}, false},
		{rsync.Transient, 12, plain, false},
		{rsync.Partial, 23, plain, false},
	} {
		if got := halvable(tt.class, tt.code, tt.r); got != tt.want {
			t.Errorf("halvable(%v, %d, %+v) = %v, want %v", tt.class, tt.code, tt.r, got, tt.want)
		}
	}
	a, b := halves([]int{1, 2, 3, 4, 5})
	if len(a) != 2 || len(b) != 3 || a[1] != 2 || b[0] != 3 {
		t.Errorf("halves = %v %v", a, b)
	}
}
