package chunksize

import (
	"math"
	"slices"
	"testing"
	"time"
)

// world is a workload: what a chunk of f files and b bytes costs.
type world func(files int, bytes int64) float64

// cut fills chunks from an endless stream of files of size size(i) as the splitter does
// with the budget of the moment, runs them in w, and returns the paths of each chunk.
func cut(e *Estimator, w world, size func(i int) int64, chunks int) []int {
	out, _ := cutTimed(e, w, size, chunks)
	return out
}

// cutTimed is cut, and returns the seconds each chunk took in w too.
func cutTimed(e *Estimator, w world, size func(i int) int64, chunks int) (out []int, secs []float64) {
	i := 0
	for range chunks {
		b := e.Budget()
		files, bytes := 0, int64(0)
		for {
			s := size(i)
			if files > 0 && b.Over(files+1, bytes+s) {
				break
			}
			files, bytes, i = files+1, bytes+s, i+1
			if b.Reached(files, bytes) {
				break
			}
		}
		out, secs = append(out, files), append(secs, w(files, bytes))
		e.Observe(Sample{Files: files, Bytes: bytes, Seconds: secs[len(secs)-1]})
	}
	return out, secs
}

func TestEstimator(t *testing.T) {
	const kib, mib = 1 << 10, 1 << 20
	p := DefaultPolicy(2*time.Second, 2000, 128*mib)
	tests := []struct {
		name   string
		p      Policy
		w      world
		size   func(i int) int64
		chunks int
		// the paths of the first chunk, and of the last ones (within 15 %)
		first, last int
		// the most chunks before one is within 15 % of last
		steps int
		// the workload changes: a chunk cut by the old costs may overrun the target
		changes bool
	}{
		{
			// 40 ms to start, 1 ms a file: 2 s hold 1960 files; 32 paths took 72 ms, so
			// 888 fill 2 s at that rate, and the next is near the target
			name: "start cost and per-file cost: chunks grow to the target",
			p:    p, w: func(f int, _ int64) float64 { return 0.04 + 0.001*float64(f) },
			size: func(int) int64 { return 4 * kib }, chunks: 12, first: 32, last: 1960, steps: 3,
		},
		{
			// a daemon or ssh: 200 ms to start, 0.2 ms a file; the target is 20 × 0.2 s
			// = 4 s, 19,000 files, bounded at 2,000. Doubling would take 7 chunks.
			name: "the start dominates: the target in two steps",
			p:    p, w: func(f int, _ int64) float64 { return 0.2 + 0.0002*float64(f) },
			size: func(int) int64 { return 4 * kib }, chunks: 8, first: 32, last: 2000, steps: 2,
		},
		{
			// 5 ms a file: 2 s hold 392
			name: "slow files stop short of --chunk-files",
			p:    p, w: func(f int, _ int64) float64 { return 0.02 + 0.005*float64(f) },
			size: func(int) int64 { return 4 * kib }, chunks: 12, first: 32, last: 396,
		},
		{
			// so cheap that 2 s would be 200,000 files: --chunk-files bounds it
			name: "the count bound stays the upper limit",
			p:    p, w: func(f int, _ int64) float64 { return 0.01 + 0.00001*float64(f) },
			size: func(int) int64 { return 1 * kib }, chunks: 12, first: 32, last: 2000,
		},
		{
			// 10 MiB/s per stream, 1 MiB files: 20 files a chunk
			name: "bytes cost: a slow link",
			p:    p, w: func(f int, b int64) float64 { return 0.05 + 0.0005*float64(f) + float64(b)/(10*mib) },
			size: func(int) int64 { return mib }, chunks: 10, first: 32, last: 19,
		},
		{
			// a start cost of 500 ms: the target becomes 20 × 0.5 = 10 s, 950 files
			name: "a high start cost lengthens the target",
			p:    p, w: func(f int, _ int64) float64 { return 0.5 + 0.01*float64(f) },
			size: func(int) int64 { return kib }, chunks: 14, first: 32, last: 950,
		},
		{
			// small files for 10 chunks, then 4 MiB ones: from 1,000 files a chunk to
			// about 100 (2 s at 40 MiB/s)
			name: "small files then big ones",
			p:    p, w: func(f int, b int64) float64 { return 0.03 + 0.002*float64(f) + float64(b)/(40*mib) },
			size: func(i int) int64 {
				if i < 3000 {
					return 100
				}
				return 4 * mib
			},
			chunks: 24, first: 32, last: 19, changes: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := New(tc.p)
			got, secs := cutTimed(e, tc.w, tc.size, tc.chunks)
			if got[0] != tc.first {
				t.Errorf("first chunk %d paths, want %d (all %v)", got[0], tc.first, got)
			}
			last := got[len(got)-1]
			if math.Abs(float64(last-tc.last)) > 0.15*float64(tc.last)+1 {
				t.Errorf("last chunk %d paths, want about %d (all %v, fit %+v)", last, tc.last, got, e.Fit())
			}
			for i, s := range secs {
				if i > 0 && !tc.changes && s > 1.1*e.Target() { // the first is cut before anything is known
					t.Errorf("chunk %d of %d paths took %.2f s, over the target %.2f s (all %v)", i, got[i], s, e.Target(), got)
				}
			}
			if tc.steps > 0 {
				i := slices.IndexFunc(got, func(n int) bool { return math.Abs(float64(n-tc.last)) <= 0.15*float64(tc.last)+1 })
				if i < 0 || i > tc.steps {
					t.Errorf("the chunks reached about %d paths at chunk %d, want by chunk %d (all %v)", tc.last, i, tc.steps, got)
				}
			}
		})
	}
}

// A workload that turns from small files to big ones is followed: the chunks of big
// files stay near the target, not at the thousand small files of before.
func TestEstimatorFollowsChange(t *testing.T) {
	const mib = 1 << 20
	e := New(DefaultPolicy(2*time.Second, 2000, 128*mib))
	small := func(f int, _ int64) float64 { return 0.03 + 0.001*float64(f) }
	cut(e, small, func(int) int64 { return 0 }, 12)
	big := func(f int, b int64) float64 { return 0.03 + 0.001*float64(f) + float64(b)/(20*mib) }
	got := cut(e, big, func(int) int64 { return 2 * mib }, 8)
	// 2 s at 20 MiB/s is 20 files of 2 MiB: the first big chunk is cut by the small
	// files' fit (which ignores bytes), the later ones by the new fit
	for _, n := range got[3:] {
		if n > 30 {
			t.Fatalf("big files: chunks of %v paths, want about 20 after the first few (fit %+v)", got, e.Fit())
		}
	}
	if s := big(got[len(got)-1], int64(got[len(got)-1])*2*mib); s < 1.4 || s > 2.6 {
		t.Errorf("the last chunk takes %.2f s, want about 2", s)
	}
}

func TestFit(t *testing.T) {
	tests := []struct {
		name             string
		samples          []Sample
		start, file, per float64
	}{
		{"exact", []Sample{{10, 0, 0.05 + 0.01, 0}, {100, 0, 0.05 + 0.1, 0}, {1000, 0, 0.05 + 1, 0}}, 0.05, 0.001, 0},
		{"bytes", []Sample{{10, 1e6, 0.1 + 0.01 + 0.1, 0}, {20, 5e6, 0.1 + 0.02 + 0.5, 0}, {5, 9e6, 0.1 + 0.005 + 0.9, 0}, {40, 1e5, 0.1 + 0.04 + 0.01, 0}}, 0.1, 0.001, 1e-7},
		// a fit with a negative start would extrapolate wrong: the start is dropped
		{"no negative term", []Sample{{10, 0, 0.001, 0}, {100, 0, 0.2, 0}, {200, 0, 0.4, 0}}, 0, 0.002, 0},
		{"one sample", []Sample{{32, 0, 0.5, 0}}, 0, 0.5 / 32, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := fit(tc.samples, 1)
			near := func(got, want float64) bool { return math.Abs(got-want) <= 0.02*math.Abs(want)+1e-9 }
			if !near(f.Start, tc.start) || !near(f.PerFile, tc.file) || !near(f.PerByte, tc.per) {
				t.Errorf("fit %+v, want start %g, per file %g, per byte %g", f, tc.start, tc.file, tc.per)
			}
			if f.Start < 0 || f.PerFile < 0 || f.PerByte < 0 {
				t.Errorf("negative term: %+v", f)
			}
		})
	}
}

func TestCuts(t *testing.T) {
	e := New(DefaultPolicy(2*time.Second, 2000, 1<<30))
	e.fit = Fit{Start: 0.02, PerFile: 0.001, PerByte: 0.001 / (1 << 20), N: 4} // a 1 MiB file costs two empty ones
	ones := func(n int, s int64) []int64 {
		x := make([]int64, n)
		for i := range x {
			x[i] = s
		}
		return x
	}
	tests := []struct {
		name  string
		sizes []int64
		parts int
		want  []int
	}{
		{"equal files", ones(8, 0), 4, []int{2, 4, 6}},
		{"one part", ones(8, 0), 1, nil},
		{"more parts than paths", ones(3, 0), 4, nil},
		{"as many parts as paths", ones(3, 0), 3, []int{1, 2}},
		// a 7 MiB file weighs as much as four of 1 MiB
		{"a big file first", append([]int64{7 << 20}, ones(7, 1<<20)...), 2, []int{3}},
		{"a big file last", append(ones(7, 1<<20), 7<<20), 2, []int{6}},
		{"equal big files: by count", ones(6, 1<<30), 3, []int{2, 4}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := e.Cuts(tc.sizes, tc.parts)
			if len(got) != len(tc.want) {
				t.Fatalf("Cuts = %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("Cuts = %v, want %v", got, tc.want)
				}
			}
		})
	}
}

// Fixed budgets are --chunk-files and --chunk-bytes exactly: full at the count or the bytes,
// never by time.
func TestFixedBudget(t *testing.T) {
	b := Fixed(250, 1<<20)
	tests := []struct {
		files         int
		bytes         int64
		over, reached bool
	}{
		{249, 0, false, false},
		{250, 0, false, true},
		{251, 0, true, true},
		{10, 1 << 20, false, true},
		{10, 1<<20 + 1, true, true},
	}
	for _, tc := range tests {
		if o, r := b.Over(tc.files, tc.bytes), b.Reached(tc.files, tc.bytes); o != tc.over || r != tc.reached {
			t.Errorf("%d files, %d bytes: over %v reached %v, want %v %v", tc.files, tc.bytes, o, r, tc.over, tc.reached)
		}
	}
}

// TestFirstSample checks the split of a lone sample at its first logged line: the probe of an
// opening (16 paths) gives the start and the per-path cost at once, so the next chunk fills
// the target instead of being cut at the probe's whole time charged to its paths.
func TestFirstSample(t *testing.T) {
	p := DefaultPolicy(2*time.Second, 2000, 128<<20)
	tests := []struct {
		name         string
		samples      []Sample
		start, file  float64 // the fit
		budgetFiles  int     // the next chunk's bound of paths
		predictFiles int     // the paths at which the fit reaches the target; 0: not checked
	}{
		// 60 ms to start, 2.5 ms a path: the first line after 62.5 ms, the end after 100 ms
		{"the probe", []Sample{{16, 0, 0.1, 0.0625}}, 0.06, 0.0025, 773, 776},
		{"no first line: all charged to the paths", []Sample{{16, 0, 0.1, 0}}, 0, 0.1 / 16, 320, 320},
		{"a first line at the end says nothing", []Sample{{16, 0, 0.1, 0.1}}, 0, 0.1 / 16, 320, 320},
		{"one path", []Sample{{1, 0, 0.1, 0.05}}, 0, 0.1, 32, 0}, // StartFiles at least
		// a second sample: least squares, whatever the first lines say
		{"two samples", []Sample{{16, 0, 0.06 + 0.04, 0.0625}, {100, 0, 0.06 + 0.25, 0.0625}}, 0.06 * 1.05, 0.0025 * 0.97, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := New(p)
			for _, s := range tc.samples {
				e.Observe(s)
			}
			f := e.Fit()
			near := func(got, want float64) bool { return math.Abs(got-want) <= 0.06*math.Abs(want)+1e-9 }
			if !near(f.Start, tc.start) || !near(f.PerFile, tc.file) {
				t.Errorf("fit %+v, want start %g, per file %g", f, tc.start, tc.file)
			}
			b := e.Budget()
			if tc.budgetFiles > 0 && (b.Files < tc.budgetFiles-2 || b.Files > tc.budgetFiles+2) {
				t.Errorf("budget %d paths, want %d", b.Files, tc.budgetFiles)
			}
			if tc.predictFiles > 0 {
				n := 0
				for !b.Reached(n, 0) {
					n++
				}
				if n < tc.predictFiles-3 || n > tc.predictFiles+3 {
					t.Errorf("the budget is reached at %d paths, want about %d", n, tc.predictFiles)
				}
			}
		})
	}
}

// TestLoneSampleBytes: while the fit rests on one sample, which charges its time to its
// paths, a chunk's bytes are bounded by that sample's (Growth × them, or the bytes its rate
// moves in the target, the larger, and 1 MiB at least); from the second sample the bytes
// are left to the fit and --chunk-bytes.
func TestLoneSampleBytes(t *testing.T) {
	p := DefaultPolicy(2*time.Second, 10000, 128<<20)
	const mib = 1 << 20
	tests := []struct {
		name    string
		samples []Sample
		lo, hi  int64 // the bound of the next chunk's bytes
	}{
		// bench scenario 8's probe: 16 paths, 19.7 kB, 42 ms, the first line at 30 ms
		{"the probe", []Sample{{16, 19694, 0.042, 0.030}}, 2 * mib, 4 * mib},
		{"a tiny probe: 1 MiB at least", []Sample{{16, 1600, 0.1, 0.0625}}, mib, mib},
		{"no first line: the whole duration", []Sample{{16, 4 * mib, 0.5, 0}}, 16 * mib, 16 * mib},
		{"growth over rate", []Sample{{16, 40 * mib, 2.5, 0}}, 80 * mib, 80 * mib},
		{"no bytes known", []Sample{{16, 0, 0.1, 0.0625}}, 128 * mib, 128 * mib},
		{"two samples", []Sample{{16, 19694, 0.042, 0.030}, {1814, 18582949, 1.61, 0.2}}, 128 * mib, 128 * mib},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := New(p)
			for _, s := range tc.samples {
				e.Observe(s)
			}
			if b := e.Budget(); b.Bytes < tc.lo || b.Bytes > tc.hi {
				t.Errorf("budget %d bytes (%.1f MiB), want %d to %d", b.Bytes, float64(b.Bytes)/mib, tc.lo, tc.hi)
			}
		})
	}
}

// TestTargetAlone: the start cost that lengthens the target is at most what the first
// sample's start cost alone; the fit's start, grown with the wait for a CPU beside other
// rsyncs, does not lengthen it further (bench H88).
func TestTargetAlone(t *testing.T) {
	p := DefaultPolicy(2*time.Second, 10000, 128<<20)
	tests := []struct {
		name  string
		first Sample
		// the later chunks: this many seconds beyond their paths' work, 1 ms a path
		start  float64
		target float64
	}{
		// 60 ms to start alone, 0.5 s beside the others: 20 × 0.06 s is under 2 s
		{"a probe that started fast", Sample{16, 0, 0.1, 0.0625}, 0.5, 2},
		// 0.5 s to start alone (ssh's handshake): 20 × 0.497 s
		{"a probe that started slowly", Sample{16, 0, 0.54, 0.5}, 0.5, 9.95},
		// nothing says what a start cost alone: the fit's 0.5 s, as before
		{"a probe without a first line", Sample{16, 0, 0.1, 0}, 0.5, 10},
		// 0.3 s alone, 50 ms later: the fit's, the lower
		{"the fit's start the lower", Sample{16, 0, 0.33, 0.3}, 0.05, 2},
		// 0.2 s alone, 0.5 s beside the others: 20 × 0.2 s
		{"between", Sample{16, 0, 0.23, 0.2}, 0.5, 3.96},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := New(p)
			e.Observe(tc.first)
			for i := range 20 { // enough that the first's weight in the fit is small
				f := 500 * (1 + i%5)
				e.Observe(Sample{Files: f, Seconds: tc.start + 0.001*float64(f)})
			}
			if st := e.Fit().Start; math.Abs(st-tc.start) > max(0.1*tc.start, 0.015) {
				t.Fatalf("the fit's start is %.3f s, want about %.3f", st, tc.start)
			}
			if got := e.Target(); math.Abs(got-tc.target) > 0.05*tc.target {
				t.Errorf("target %.2f s, want %.2f (fit %+v)", got, tc.target, e.Fit())
			}
		})
	}
}
