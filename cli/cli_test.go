package cli

import (
	"bytes"
	"errors"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/prsync/prsync/books"
	"github.com/prsync/prsync/exec"
)

func TestSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1000", 1000, true}, {"64K", 64 << 10, true}, {"512M", 512 << 20, true}, {"1G", 1 << 30, true},
		{"1.5G", 3 << 29, true}, {"2T", 2 << 40, true}, {"1gb", 1 << 30, true}, {"0", 0, false},
		{"-1M", 0, false}, {"lots", 0, false}, {"", 0, false},
	}
	for _, tt := range tests {
		var s Size
		err := s.UnmarshalText([]byte(tt.in))
		if (err == nil) != tt.ok || (tt.ok && int64(s) != tt.want) {
			t.Errorf("Size(%q) = %d, %v", tt.in, s, err)
		}
	}
}

func TestParseShard(t *testing.T) {
	tests := []struct {
		in   string
		k, n int
		ok   bool
	}{
		{"", 0, 1, true}, {"0/1", 0, 1, true}, {"2/3", 2, 3, true}, {"3/3", 0, 0, false},
		{"a/b", 0, 0, false}, {"0/0", 0, 0, false}, {"-1/2", 0, 0, false}, {"1", 0, 0, false},
	}
	for _, tt := range tests {
		k, n, err := parseShard(tt.in)
		if (err == nil) != tt.ok || (tt.ok && (k != tt.k || n != tt.n)) {
			t.Errorf("parseShard(%q) = %d, %d, %v", tt.in, k, n, err)
		}
	}
}

func TestUsageExitCodes(t *testing.T) {
	tests := []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"--bogus", "dst"}, ExitUsage, "unknown flag --bogus"},
		{[]string{}, ExitUsage, `expected "<DEST>"`},
		{[]string{"--rsync", "/nonexistent/rsync", "dst"}, ExitNoRsync, "rsync not found"},
		{[]string{"--shard", "1/1", "dst"}, ExitUsage, "bad --shard"},
		{[]string{"--jobs=-1", "dst"}, ExitUsage, "-j -1: want a number of rsyncs at least 1, or auto (0: the CPUs, at least 8)"},
		{[]string{"-j", "-1", "dst"}, ExitUsage, "-j -1: want a number of rsyncs at least 1, or auto (0: the CPUs, at least 8)"},
		{[]string{"--jobs=lots", "dst"}, ExitUsage, "-j lots: want"},
		{[]string{"--max-jobs=-3", "dst"}, ExitUsage, "--max-jobs -3"},
		{[]string{"--shard", "", "dst"}, ExitUsage, "empty --shard"},
		{[]string{"--shard=", "dst"}, ExitUsage, "empty --shard"},
	}
	for _, tt := range tests {
		var out, errb bytes.Buffer
		code := Run(tt.args, strings.NewReader(""), &out, &errb)
		if code != tt.code || !strings.Contains(errb.String(), "prsync: error: ") || !strings.Contains(errb.String(), tt.err) {
			t.Errorf("%v: exit %d, stderr %q", tt.args, code, errb.String())
		}
		if out.Len() != 0 {
			t.Errorf("%v: stdout %q", tt.args, out.String())
		}
	}
	var out, errb bytes.Buffer
	if code := Run([]string{"--version"}, strings.NewReader(""), &out, &errb); code != 0 || !strings.HasPrefix(out.String(), "prsync ") {
		t.Errorf("--version: exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
}

func TestExitStatus(t *testing.T) {
	ab := &exec.AbortError{Code: 10}
	killed := &exec.AbortError{Code: -1}
	tests := []struct {
		name                string
		interrupted, timeUp bool
		inputErr            error
		ab                  *exec.AbortError
		c                   books.Counts
		want                int
	}{
		{"clean", false, false, nil, nil, books.Counts{Transferred: 3}, ExitOK},
		{"vanished", false, false, nil, nil, books.Counts{Vanished: 1}, ExitVanished},
		{"failed beats vanished", false, false, nil, nil, books.Counts{Vanished: 1, Failed: 1}, ExitPartial},
		{"not done", false, false, nil, nil, books.Counts{NotDone: 1}, ExitPartial},
		{"stopped early", false, false, nil, ab, books.Counts{Failed: 5}, 10},
		{"stopped by a signal death", false, false, nil, killed, books.Counts{Failed: 5}, ExitPartial},
		{"input", false, false, errors.New("x"), ab, books.Counts{}, ExitInput},
		{"interrupt beats all", true, true, errors.New("x"), ab, books.Counts{Failed: 1}, ExitInterrupted},
		{"time up", false, true, nil, nil, books.Counts{NotDone: 1}, ExitMaxDuration},
		{"time up beats failed", false, true, nil, nil, books.Counts{NotDone: 1, Failed: 1, Vanished: 1}, ExitMaxDuration},
		{"stopped early beats time up", false, true, nil, ab, books.Counts{NotDone: 1}, 10},
		{"input beats time up", false, true, errors.New("x"), nil, books.Counts{NotDone: 1}, ExitInput},
	}
	for _, tt := range tests {
		if got := exitStatus(tt.interrupted, tt.timeUp, tt.inputErr, tt.ab, tt.c, nil); got != tt.want {
			t.Errorf("%s: exit %d, want %d", tt.name, got, tt.want)
		}
	}
}

// epipeWriter is a stdout whose reader has gone, as in prsync --help | head.
type epipeWriter struct{}

func (epipeWriter) Write([]byte) (int, error) {
	return 0, &os.PathError{Op: "write", Path: "/dev/stdout", Err: syscall.EPIPE}
}

// TestHelpIntoClosedPipe: help and version cut short by their reader end quietly with 0.
func TestHelpIntoClosedPipe(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"--version"}} {
		var stderr bytes.Buffer
		if code := Run(args, strings.NewReader(""), epipeWriter{}, &stderr); code != 0 || stderr.Len() > 0 {
			t.Errorf("%v: exit %d, stderr %q; want 0 and nothing", args, code, stderr.String())
		}
	}
}

func TestGoProcs(t *testing.T) {
	for _, tt := range []struct {
		n, cpus int
		stats   bool
		want    int
	}{
		// prsync lstats: at least one P per stat worker, never fewer than the CPUs
		{1, 1, true, 8}, {2, 2, true, 8}, {8, 8, true, 8}, {16, 16, true, 16}, {64, 64, true, 64},
		// under a CPU quota below the machine's CPUs: the quota
		{1, 2, true, 1}, {2, 64, true, 2}, {12, 64, true, 12},
		// it does not: a quarter, at least one
		{1, 1, false, 1}, {2, 2, false, 1}, {4, 4, false, 1}, {7, 7, false, 1}, {8, 8, false, 2}, {16, 16, false, 4}, {64, 64, false, 16},
		{2, 64, false, 1},
	} {
		if got := goProcs(tt.n, tt.cpus, tt.stats); got != tt.want {
			t.Errorf("goProcs(%d, %d, %v) = %d, want %d", tt.n, tt.cpus, tt.stats, got, tt.want)
		}
	}
}

// TestTuneRuntime: with GOMAXPROCS unset, a run that lstats gets goProcs' Ps for its stat
// workers, and a run without them's once every path was examined; a run that does not lstat
// gets the latter from the start. Set in the environment, GOMAXPROCS is never touched.
func TestTuneRuntime(t *testing.T) {
	t.Setenv("GOGC", "100") // tuneRuntime leaves the collector alone
	before := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(before)
	n, cpus := before, runtime.NumCPU()
	for _, tt := range []struct {
		name        string
		env         bool
		stats       bool
		start, rest int
	}{
		{"lstats", false, true, goProcs(n, cpus, true), goProcs(n, cpus, false)},
		{"no lstats", false, false, goProcs(n, cpus, false), goProcs(n, cpus, false)},
		{"GOMAXPROCS set", true, true, n, n},
	} {
		t.Run(tt.name, func(t *testing.T) {
			runtime.GOMAXPROCS(n)
			if tt.env {
				t.Setenv("GOMAXPROCS", strconv.Itoa(n))
			} else {
				old, had := os.LookupEnv("GOMAXPROCS")
				os.Unsetenv("GOMAXPROCS")
				if had {
					defer os.Setenv("GOMAXPROCS", old)
				}
			}
			examined := tuneRuntime(tt.stats)
			if got := runtime.GOMAXPROCS(0); got != tt.start {
				t.Errorf("GOMAXPROCS %d at the start, want %d", got, tt.start)
			}
			examined()
			examined()
			if got := runtime.GOMAXPROCS(0); got != tt.rest {
				t.Errorf("GOMAXPROCS %d once the paths were examined, want %d", got, tt.rest)
			}
		})
	}
}

// TestDefaultJobs: the default -j is the CPUs, at least 8; at least 16 with DEST on a
// network filesystem, where each rsync waits on round trips.
func TestDefaultJobs(t *testing.T) {
	for _, tc := range []struct {
		netDest bool
		floor   int
	}{{false, 8}, {true, 16}} {
		if got, want := defaultJobs(tc.netDest), max(runtime.NumCPU(), tc.floor); got != want {
			t.Errorf("defaultJobs(%v) = %d, want %d", tc.netDest, got, want)
		}
	}
}
