package cli

import (
	"testing"
	"time"

	"github.com/prsync/prsync/chunksize"
	"github.com/prsync/prsync/exec"
	"github.com/prsync/prsync/rsync"
	"github.com/prsync/prsync/splitter"
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
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			f, _, _, _, err := parseArgs(t, tc.argv...)
			if err != nil {
				t.Fatal(err)
			}
			r := &runner{f: f, argv: tc.argv}
			if got := r.chunkTarget(); got != tc.want {
				t.Errorf("chunkTarget() = %v, want %v", got, tc.want)
			}
			if (r.sizer() == nil) != (tc.want == 0) {
				t.Errorf("sizer %v with target %v", r.sizer(), tc.want)
			}
		})
	}
}

// The opening's CPUs are the machine's, or a cgroup's CPU quota rounded up when lower.
func TestUsableCPUs(t *testing.T) {
	tests := []struct {
		cpus  int
		quota float64
		want  int
	}{
		{8, 0, 8},   // no quota
		{8, 1, 1},   // a 1-CPU container
		{8, 1.5, 2}, // rounded up
		{8, 0.2, 1}, // a fifth of a CPU is still one rsync at a time
		{2, 4, 2},   // a quota above the machine's CPUs
		{2, 2, 2},
	}
	for _, tc := range tests {
		if got := usableCPUs(tc.cpus, tc.quota); got != tc.want {
			t.Errorf("usableCPUs(%d, %v) = %d, want %d", tc.cpus, tc.quota, got, tc.want)
		}
	}
}

// The probe's end reaches the sizer before Opening can see it, so that the chunks cut once
// Opening has answered are sized from its sample; a failed probe is kept as failed, and
// only the first chunk's first attempt is the probe's.
func TestObserveProbe(t *testing.T) {
	chunk := func(id, n int) *splitter.Chunk {
		return &splitter.Chunk{ID: id, Inputs: make([][]byte, n)}
	}
	tests := []struct {
		name       string
		end        exec.ChunkEnded
		wantProbe  *chunksize.Probe
		wantBudget int // the sizer's budget after it: 32 before any sample
	}{
		{"the probe ended", exec.ChunkEnded{Chunk: chunk(1, 16), Attempt: 1, Status: exec.ChunkOK, Seconds: 0.1, FirstLine: 0.06, CPUSeconds: 0.05, Outcomes: []rsync.Outcome{}},
			// split at its first line: a start of 0.057 s, 2.7 ms a path, so 728 paths fill 2 s
			&chunksize.Probe{Files: 16, First: 0.06, Elapsed: 0.1, CPU: 0.05, Ended: true}, 728},
		{"the probe failed", exec.ChunkEnded{Chunk: chunk(1, 16), Attempt: 1, Status: exec.ChunkFailed, Seconds: 0.1, Outcomes: []rsync.Outcome{}},
			&chunksize.Probe{Files: 16, Elapsed: 0.1, Ended: true, Failed: true}, 32},
		{"another chunk", exec.ChunkEnded{Chunk: chunk(2, 16), Attempt: 1, Status: exec.ChunkOK, Seconds: 0.1, Outcomes: []rsync.Outcome{}},
			nil, 320},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := &pipeline{sizer: chunksize.NewSizer(chunksize.DefaultPolicy(2*time.Second, 2000, 128<<20))}
			p.observe(tc.end)
			got := p.probe.end
			if (got == nil) != (tc.wantProbe == nil) || got != nil && *got != *tc.wantProbe {
				t.Errorf("probe %+v, want %+v", got, tc.wantProbe)
			}
			if b := p.sizer.Budget(); b.Files != tc.wantBudget {
				t.Errorf("budget %d paths, want %d", b.Files, tc.wantBudget)
			}
		})
	}
}

// Opening answers once the probe has ended, even when it ended before the first question;
// until then it says it does not know, for at most the chunk target from the first question,
// and then answers for every slot but the probe's.
func TestOpeningFunc(t *testing.T) {
	newPipeline := func() *pipeline {
		return &pipeline{sizer: chunksize.NewSizer(chunksize.DefaultPolicy(200*time.Millisecond, 2000, 128<<20)),
			pool: &exec.Pool{Jobs: 4, MaxJobs: 4}}
	}
	probe := &splitter.Chunk{ID: 1, Inputs: make([][]byte, 16)}
	// nothing logged, all its time CPU: the CPUs run 1 part per CPU
	ended := exec.ChunkEnded{Chunk: probe, Attempt: 1, Status: exec.ChunkOK, Seconds: 0.1, CPUSeconds: 0.1, Outcomes: []rsync.Outcome{}}

	p := newPipeline()
	opening := p.openingFunc()
	if n, known := opening(probe, 500); known {
		t.Fatalf("answered %d before the probe showed anything", n)
	}
	p.observe(ended)
	if n, known := opening(probe, 500); !known || n < 1 || n > 4 {
		t.Errorf("after the probe's end: %d, %v; want from 1 to 4 parts, known", n, known)
	}

	p = newPipeline()
	p.observe(ended) // before the first question
	if _, known := newPipeline().openingFunc()(probe, 500); known {
		t.Error("another run's Opening knew of this probe")
	}
	if _, known := p.openingFunc()(probe, 500); !known {
		t.Error("a probe that ended before the first question was not seen")
	}

	p = newPipeline()
	opening = p.openingFunc()
	start := time.Now()
	for {
		n, known := opening(probe, 500)
		if known {
			if n != 3 || time.Since(start) < 200*time.Millisecond {
				t.Errorf("answered %d after %v; want every slot but the probe's (3) after the 200 ms target", n, time.Since(start))
			}
			break
		}
		if time.Since(start) > 5*time.Second {
			t.Fatal("no answer within 5 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
