package cli

import (
	"testing"
	"time"
)

// --chunk-files or --chunk-bytes given alone (flag or environment) keep their exact
// meaning: chunks are not sized by time; --chunk-time given as well sizes within them.
func TestChunkTarget(t *testing.T) {
	tests := []struct {
		name string
		argv []string
		env  map[string]string
		want time.Duration
	}{
		{"defaults: by time", []string{"dst"}, nil, 2 * time.Second},
		{"--chunk-files alone: exact", []string{"--chunk-files", "250", "dst"}, nil, 0},
		{"--chunk-bytes=1M alone: exact", []string{"--chunk-bytes=1M", "dst"}, nil, 0},
		{"PRSYNC_CHUNK_FILES: exact", []string{"dst"}, map[string]string{"PRSYNC_CHUNK_FILES": "250"}, 0},
		{"with --chunk-time: by time within them", []string{"--chunk-files", "250", "--chunk-time", "5s", "dst"}, nil, 5 * time.Second},
		{"--chunk-time 0", []string{"--chunk-time=0", "dst"}, nil, 0},
		{"rsync's options after -- do not count", []string{"dst", "--", "--chunk-files"}, nil, 2 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := testRunner(t, tc.argv, tc.env)
			if got := r.chunkTarget(); got != tc.want {
				t.Errorf("chunkTarget() = %v, want %v", got, tc.want)
			}
			if r.planner(2).Timed() != (tc.want != 0) {
				t.Errorf("planner timed %v with target %v", r.planner(2).Timed(), tc.want)
			}
		})
	}
}

// The planner's CPUs are the machine's, or a cgroup's CPU quota when lower.
func TestUsableCPUs(t *testing.T) {
	tests := []struct {
		cpus  int
		quota float64
		want  float64
	}{
		{8, 0, 8},     // no quota
		{8, 1, 1},     // a 1-CPU container
		{8, 1.5, 1.5}, // as it is: the CPU rules count 4 rsyncs a CPU
		{8, 0.2, 0.2}, // a fifth of a CPU
		{2, 4, 2},     // a quota above the machine's CPUs
		{2, 2, 2},
	}
	for _, tc := range tests {
		if got := usableCPUs(tc.cpus, tc.quota); got != tc.want {
			t.Errorf("usableCPUs(%d, %v) = %v, want %v", tc.cpus, tc.quota, got, tc.want)
		}
	}
}

// --chunk-files defaults to 10,000, also in a pull whose lists carry anchors
// (rsync.AnchorsApply), and to PullChunkFiles in a pull whose rsync options rule them out,
// where the check of every name the sender lists against each path of its chunk grows
// with the square of its paths; a value given (flag or environment) and -- --trust-sender
// keep theirs.
func TestPullChunkFiles(t *testing.T) {
	tests := []struct {
		name string
		argv []string
		env  map[string]string
		want int
	}{
		{"a local copy", []string{"dst"}, nil, 10000},
		{"a push", []string{"rsync://127.0.0.1/mod/"}, nil, 10000},
		{"a pull from a daemon", []string{"--root", "rsync://nas/data", "dst"}, nil, 10000},
		{"a pull over ssh", []string{"--root", "nas:/data", "dst"}, nil, 10000},
		{"a pull with -- -r", []string{"--root", "nas:/data", "dst", "--", "-r"}, nil, PullChunkFiles},
		{"a pull with -- -avr", []string{"--root", "rsync://nas/data", "dst", "--", "-avr"}, nil, PullChunkFiles},
		{"a pull with -- --no-implied-dirs", []string{"--root", "nas:/data", "dst", "--", "--no-implied-dirs"}, nil, PullChunkFiles},
		{"a pull with -- --no-dirs", []string{"--root", "nas:/data", "dst", "--", "--no-dirs"}, nil, PullChunkFiles},
		{"a pull, --chunk-files given", []string{"--root", "nas:/data", "--chunk-files", "8000", "dst", "--", "-r"}, nil, 8000},
		{"a pull, PRSYNC_CHUNK_FILES", []string{"--root", "nas:/data", "dst", "--", "-r"}, map[string]string{"PRSYNC_CHUNK_FILES": "5000"}, 5000},
		{"a pull, a smaller value given", []string{"--root", "nas:/data", "--chunk-files=500", "dst"}, nil, 500},
		{"a pull with -- --trust-sender", []string{"--root", "nas:/data", "dst", "--", "--trust-sender"}, nil, 10000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := testRunner(t, tc.argv, tc.env)
			r.derive()
			if r.f.ChunkFiles != tc.want {
				t.Errorf("--chunk-files %d, want %d", r.f.ChunkFiles, tc.want)
			}
		})
	}
}

// testRunner returns a runner for argv parsed with the environment env set.
func testRunner(t *testing.T, argv []string, env map[string]string) *runner {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	f, _, _, _, err := parseArgs(t, argv...)
	if err != nil {
		t.Fatal(err)
	}
	return &runner{f: f, argv: argv}
}
