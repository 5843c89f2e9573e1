package rsync

import (
	"strings"
	"testing"
)

func TestNoTransfer(t *testing.T) {
	tests := []struct {
		code   int
		stderr string
		want   bool
	}{
		{0, "", false},
		{23, `rsync: [sender] link_stat "/s/x" failed: Permission denied (13)`, false},
		{24, "", false},
		{11, "", false},
		{20, "", false},
		{1, "", true},
		{2, "", true},
		{3, "", true},
		{4, "", true},
		{5, "", true},
		{10, "", true},
		{12, "", true},
		{14, "", true},
		{30, "", true},
		{35, "", true},
		{127, "", true},
		{255, "", true},
		{-1, "", true},
		{23, "@ERROR: max connections (2) reached -- try again later", true},
	}
	for _, tt := range tests {
		a := NewAttributor([][]byte{[]byte("x")}, "/s/", "/d/", "/d")
		if tt.stderr != "" {
			a.Stderr([]byte(tt.stderr))
		}
		if got := NoTransfer(tt.code, a.Result()); got != tt.want {
			t.Errorf("NoTransfer(%d, %q) = %v, want %v", tt.code, tt.stderr, got, tt.want)
		}
	}
}

// TestHintDest: a DEST that rsync took for a host because its name holds a colon gets a
// word on how to write it as a local directory, when ssh failed.
func TestHintDest(t *testing.T) {
	const unresolved = "ssh: Could not resolve hostname back: Name or service not known"
	tests := []struct {
		dest   string
		code   int
		stderr string
		want   string
	}{
		{"back:up/", 255, unresolved, "the host name does not resolve; if back:up/ is a local directory, write ./back:up/"},
		{"back:up", 255, "", "ssh failed: check that `ssh HOST true` works without a prompt; if back:up is a local directory, write ./back:up"},
		{"back:up/", 12, "", "the connection to the destination broke or timed out: re-run with the --failed list"},
		{"host:/abs/dir", 255, unresolved, "the host name does not resolve"},
		{"host::mod/dir", 255, unresolved, "the host name does not resolve"},
		{"./back:up/", 255, "", "ssh failed: check that `ssh HOST true` works without a prompt"},
		{"back:up/", 10, "rsync: failed to connect to back (1.2.3.4): Connection refused (111)",
			"rsync could not reach the destination: check that the host or daemon is up, then re-run with the --failed list; if back:up/ is a local directory, write ./back:up/"},
		{"back:up/", 23, `rsync: [sender] link_stat "/s/x" failed: Permission denied (13)`, "the source is not readable for the user prsync runs as"},
	}
	for _, tt := range tests {
		a := NewAttributor([][]byte{[]byte("x")}, "/s/", tt.dest, "")
		if tt.stderr != "" {
			a.Stderr([]byte(tt.stderr))
		}
		if got := Hint(tt.code, a.Result(), tt.dest); got != tt.want {
			t.Errorf("Hint(%d, %q, %q) = %q, want %q", tt.code, tt.stderr, tt.dest, got, tt.want)
		}
	}
}

// TestSessionRan: only the exit codes of a session that ran to its transfer.
func TestSessionRan(t *testing.T) {
	for code, want := range map[int]bool{0: true, 23: true, 24: true, 5: false, 10: false, 255: false, 1: false, -1: false, 12: false} {
		if got := SessionRan(code); got != want {
			t.Errorf("SessionRan(%d) = %v, want %v", code, got, want)
		}
	}
}

// TestExitFailed: rsync's own words for each exit of the recorded runs, "rsync error" for a
// failure and "rsync warning" for code 24, agree with ExitFailed.
func TestExitFailed(t *testing.T) {
	for code, want := range map[int]bool{0: false, 24: false, 23: true, 1: true, 11: true, 20: true, 255: true, -1: true, NotStarted: true} {
		if got := ExitFailed(code); got != want {
			t.Errorf("ExitFailed(%d) = %v, want %v", code, got, want)
		}
	}
	cases := recorded(t)
	seen := map[bool]int{}
	for _, c := range cases {
		if c.Exit == 0 {
			continue
		}
		failed := strings.Contains(c.Stderr, "rsync error: ")
		warned := strings.Contains(c.Stderr, "rsync warning: ")
		if ExitFailed(c.Exit) != failed || failed == warned {
			t.Errorf("%s: exit %d, ExitFailed %v; rsync error %v, warning %v", c.Name, c.Exit, ExitFailed(c.Exit), failed, warned)
		}
		seen[failed]++
	}
	if seen[true] == 0 || seen[false] == 0 {
		t.Errorf("the recorded runs hold failures and warnings both: %v", seen)
	}
}

func TestPathless(t *testing.T) {
	plain := &Result{}
	for _, tt := range []struct {
		code int
		r    *Result
		want bool
	}{
		{11, plain, true},
		{2, plain, true},
		{13, plain, true},
		{19, plain, true},
		{22, plain, true},
		{0, plain, false},
		{4, plain, false},
		{5, plain, false},
		{23, plain, false},
		{25, plain, false},
		{11, &Result{Stop: []int{3}}, false},
		{11, &Result{Session: PreXfer}, false},
		{11, &Result{NoSpace: true}, false},
	} {
		if got := tt.r.Pathless(tt.code); got != tt.want {
			t.Errorf("%+v.Pathless(%d) = %v, want %v", tt.r, tt.code, got, tt.want)
		}
	}
}

// TestStopCode: a run stopped by a full destination ends with 11 whichever of rsync's
// processes reported first (CI saw 19, "received SIGUSR1", after ENOSPC on a 4 KB tmpfs);
// any other stop keeps rsync's code, and so does a run rsync did not end with a code.
func TestStopCode(t *testing.T) {
	full := func(line string) *Result {
		a := NewAttributor([][]byte{[]byte("s002")}, "/src/", "/dst/", "/dst")
		a.Stderr([]byte(line))
		return a.Result()
	}
	for _, tt := range []struct {
		name string
		code int
		r    *Result
		want int
	}{
		{"ENOSPC, exit 11", 11, full(`rsync: [receiver] write failed on "/dst/s002": No space left on device (28)`), 11},
		{"ENOSPC, exit 19", 19, full(`rsync: [receiver] write failed on "/dst/s002": No space left on device (28)`), 11},
		{"ENOSPC, exit 20", 20, full(`rsync: [receiver] write failed on "/dst/s002": No space left on device (28)`), 11},
		{"EDQUOT, exit 19", 19, full(`rsync: [receiver] write failed on "/dst/s002": Disk quota exceeded (122)`), 11},
		{"unreachable", 10, &Result{}, 10},
		{"a signal, nothing full", 19, &Result{}, 19},
		{"killed, ENOSPC seen", -1, &Result{NoSpace: true}, -1},
	} {
		if got := StopCode(tt.code, tt.r); got != tt.want {
			t.Errorf("%s: StopCode(%d) = %d, want %d", tt.name, tt.code, got, tt.want)
		}
	}
}
