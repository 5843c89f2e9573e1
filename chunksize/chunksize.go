// Package chunksize sizes chunks by time, from what the chunks that finished cost.
package chunksize

import (
	"math"
	"time"
)

// # The target
//
// A chunk should last about Target of rsync work. Shorter, and each rsync's start (its
// fork and exec, the connection, the file list; 20 ms of CPU locally, a few round trips
// over ssh or to a daemon) is a larger share of the copy. Longer, and the run's tail is a
// few long rsyncs while the other slots idle, and a lowered limit (-j auto, a refusal)
// waits that long to act, since lowering it stops no rsync. 2 s keeps a start of 100 ms
// at 5 % of the work and matches -j auto's 2 s windows (tune.Window): every window sees
// chunks end and start. When the start cost itself is high (a slow ssh handshake), the
// target grows to StartShare × the start cost, so that starts stay at most 5 %.
//
// That start cost is at most what a start cost alone: the first sample's, split at its first
// logged line (The first sample), which is the opening's probe, run before any other rsync
// of the copy. The fit's start is what a chunk's rsync takes beyond its paths' work at the
// concurrency of the moment, and where the rsyncs outnumber the CPUs it grows with the wait
// for a CPU: in bench scenario 8 (every stream capped, 2 CPUs, 16 rsyncs) from 0.06 s to 0.4
// to 0.8 s, a target of 8 to 15 s. Chunks cut that long just before the input's end ran on
// alone: two of 3,237 paths started at 5.7 s ended at 17.6 and 19.8 s, the last 8 s of the
// copy with at most 5 rsyncs running (H88). A start over ssh or to a slow daemon is slow
// alone too, and keeps its long target.
//
// # The estimator
//
// A finished chunk of f files and b bytes that took d seconds is a Sample. The estimator
// fits
//
//	d = start + perFile × f + perByte × b
//
// by least squares over the last Keep samples, the newer weighted more (each older
// sample by Decay): a workload that turns from small files to big ones is followed
// within a few chunks. No term may be negative: of the fits of every subset of the three
// terms with no negative coefficient, the one with the least squared error wins (a
// non-negative least squares over three terms, solved exactly). The durations are those
// of rsyncs running side by side, so the fit is what a chunk costs at the concurrency of
// the moment.
//
// # The first sample
//
// One sample cannot tell the start cost from the per-path cost by least squares: the fit of
// one point charges it all to the paths (the per-file term wins the tie). Where that sample
// is the probe of an opening (16 paths, 0.14 s, 0.1 s of it an rsync's start), the next
// chunks would be cut at 16 × 2 s / 0.14 s = 228 paths, each paying the start again. So a
// lone sample whose rsync logged its first line splits its time at that line: the first
// line comes after the start and one path, the other paths share the rest, so per path =
// (seconds − first) ÷ (paths − 1) and start = first − per path. A second sample brings the
// least squares back.
//
// # Sizes
//
// Until a chunk has finished, chunks are cut at StartFiles paths, so that a short list
// still gives every slot a chunk in the first seconds. Then a chunk closes when its
// predicted duration reaches the target, and never holds more paths than the larger of
//
//   - Growth × the paths of the largest chunk finished so far: the fit is not trusted far
//     beyond what it has seen, and the sizes it sees grow, which separates the start cost
//     from the per-file cost;
//   - as many paths as fill the target at the rate per path of the newest sample, with its
//     whole duration, its start included, charged to its paths. That needs no trust in the
//     fit: a path costs at most that much as long as the paths are alike, so such a chunk
//     lasts at most the target (and the newest sample follows a workload that changes). Where the start dominates
//     (a daemon, ssh: 32 paths in 0.2 s, nearly all of it the start), the chunks reach the
//     target in two or three steps instead of doubling from 32 through a dozen rsyncs.
//
// While the fit rests on a lone sample, which cannot see bytes, a chunk's bytes are bounded
// the same way: by the larger of Growth × the sample's bytes and the bytes its rate moves in
// the target (bytesByRate).
//
// MaxFiles and MaxBytes (--chunk-files, --chunk-bytes) stay upper bounds.

// Policy holds the constants of the sizing.
type Policy struct {
	Target     time.Duration // the duration a chunk aims at
	StartShare float64       // the target is at least this many times the start cost
	MaxFiles   int           // upper bound of a chunk's paths
	MaxBytes   int64         // upper bound of a chunk's bytes (a bigger file gets a chunk of its own)
	StartFiles int           // paths of a chunk cut before any has finished
	Growth     float64       // a chunk holds at most this many times the paths of the largest finished
	Keep       int           // samples the fit looks at
	Decay      float64       // weight of a sample against the next newer one
	// MinPart is the shortest predicted duration of a part that the tail cuts (package
	// plan).
	MinPart time.Duration
}

// DefaultTarget is the duration a chunk aims at by default (--chunk-time).
const DefaultTarget = 2 * time.Second

// DefaultPolicy returns the Policy with the target and the bounds given.
func DefaultPolicy(target time.Duration, maxFiles int, maxBytes int64) Policy {
	return Policy{
		Target:     target,
		StartShare: 20,
		MaxFiles:   max(maxFiles, 1),
		MaxBytes:   max(maxBytes, 1),
		StartFiles: min(32, max(maxFiles, 1)),
		Growth:     2,
		Keep:       24,
		Decay:      0.85,
		MinPart:    target / 8,
	}
}

// Sample is one finished chunk: its paths, its bytes, and how long its rsync ran. First is
// the seconds from its start to its first logged line (0: not known).
type Sample struct {
	Files   int
	Bytes   int64
	Seconds float64
	First   float64
}

// Fit is the cost model: Start seconds per rsync, PerFile seconds per path, PerByte
// seconds per byte. N is the samples it was fitted on; 0 means nothing is known yet.
type Fit struct {
	Start, PerFile, PerByte float64
	N                       int
}

// Predict returns the seconds a chunk of files paths and bytes bytes should take.
func (f Fit) Predict(files int, bytes int64) float64 {
	return f.Start + f.PerFile*float64(files) + f.PerByte*float64(bytes)
}

// Budget is what the next chunk may hold. A chunk is full once it holds Files paths or
// Bytes bytes, or once its predicted duration reaches Seconds (when Timed).
type Budget struct {
	Files   int
	Bytes   int64
	Timed   bool
	Fit     Fit
	Seconds float64
}

// Fixed is the budget of a chunk cut by count and bytes alone (--chunk-files,
// --chunk-bytes given, or --chunk-time 0).
func Fixed(files int, bytes int64) Budget { return Budget{Files: files, Bytes: bytes} }

// Over reports whether a chunk of files paths and bytes bytes is over the budget: the
// path that would make it so starts the next chunk.
func (b *Budget) Over(files int, bytes int64) bool {
	return files > b.Files || bytes > b.Bytes || b.Timed && b.Fit.Predict(files, bytes) > b.Seconds
}

// Reached reports whether a chunk of files paths and bytes bytes is full.
func (b *Budget) Reached(files int, bytes int64) bool {
	return files >= b.Files || bytes >= b.Bytes || b.Timed && b.Fit.Predict(files, bytes) >= b.Seconds
}

// Estimator learns the cost model from finished chunks and sizes the next ones. It is
// pure and not safe for concurrent use (package plan locks it).
type Estimator struct {
	p        Policy
	samples  []Sample // the newest last, at most p.Keep
	maxFiles int      // paths of the largest chunk finished
	maxBytes int64    // bytes of the largest chunk finished, by bytes
	fit      Fit
	// alone is the start cost of the first sample, split at its first line: what a start
	// costs with no other rsync of the copy beside it (see The target); known says it is
	alone struct {
		start float64
		known bool
	}
}

// New returns an Estimator that knows nothing yet.
func New(p Policy) *Estimator { return &Estimator{p: p} }

// Observe learns from a finished chunk. Samples of no path or no positive duration are
// ignored.
func (e *Estimator) Observe(s Sample) {
	if s.Files <= 0 || !(s.Seconds > 0) || math.IsInf(s.Seconds, 1) || s.Bytes < 0 {
		return
	}
	if len(e.samples) == e.p.Keep {
		copy(e.samples, e.samples[1:])
		e.samples = e.samples[:len(e.samples)-1]
	}
	e.samples = append(e.samples, s)
	e.maxFiles = max(e.maxFiles, s.Files)
	e.maxBytes = max(e.maxBytes, s.Bytes)
	e.fit = fit(e.samples, e.p.Decay)
	if f, ok := firstSplit(e.samples); ok {
		e.fit = f
		e.alone.start, e.alone.known = f.Start, true
	}
}

// firstSplit returns the fit of a lone sample split at its first logged line (see The first
// sample), and false when there is more than one sample or the line says nothing.
func firstSplit(samples []Sample) (Fit, bool) {
	if len(samples) != 1 {
		return Fit{}, false
	}
	s := samples[0]
	if s.Files < 2 || !(s.First > 0 && s.First < s.Seconds) {
		return Fit{}, false
	}
	perFile := (s.Seconds - s.First) / float64(s.Files-1)
	return Fit{Start: max(s.First-perFile, 0), PerFile: perFile, N: 1}, true
}

// Fit returns the cost model as fitted so far.
func (e *Estimator) Fit() Fit { return e.fit }

// Target returns the duration chunks aim at, in seconds: the policy's target, or more
// when the start cost is high (the fit's, at most what a start cost alone).
func (e *Estimator) Target() float64 {
	st := e.fit.Start
	if e.alone.known {
		st = min(st, e.alone.start)
	}
	return max(e.p.Target.Seconds(), e.p.StartShare*st)
}

// Budget returns what the next chunk may hold.
func (e *Estimator) Budget() Budget {
	if e.fit.N == 0 {
		return Budget{Files: e.p.StartFiles, Bytes: e.p.MaxBytes}
	}
	files := e.p.MaxFiles
	if g := max(e.p.Growth*float64(e.maxFiles), e.byRate()); g < float64(files) {
		files = max(int(g), e.p.StartFiles)
	}
	bytes := e.p.MaxBytes
	if g := max(e.p.Growth*float64(e.maxBytes), e.bytesByRate()); len(e.samples) == 1 && e.maxBytes > 0 && g < float64(bytes) {
		// a lone sample's fit cannot see bytes (bytesByRate)
		bytes = max(int64(g), minBoundBytes)
	}
	return Budget{Files: files, Bytes: bytes, Timed: true, Fit: e.fit, Seconds: e.Target()}
}

// minBoundBytes is the least a lone sample's bytes bound (bytesByRate) holds a chunk to.
const minBoundBytes = 1 << 20

// bytesByRate returns the bytes that fill the target at the newest sample's rate, its
// whole duration charged to its bytes, as byRate does with paths (0: no sample yet).
// Budget bounds a chunk's bytes by it (or Growth × the sample's bytes, the larger) while
// the fit rests on a lone sample, which cannot see bytes: split at its first line it
// charges everything after the start to the paths. The probe of 16 small files so
// predicted chunks of 5,000 to 6,700 paths of bigger files at 2 s; cut at --chunk-bytes
// (128 MiB) instead, they took 11 s each where every stream was capped at 100 Mbit/s
// (bench scenario 8), the run's last 9 s. Once two samples are in, the bound is off: held
// to every sample's bytes (Growth × the largest, or the newest's rate), a cold local copy
// of small files (scenario 3) cut 42 chunks instead of 37 and took 7 % longer.
func (e *Estimator) bytesByRate() float64 {
	s, k := e.fill()
	return float64(s.Bytes) * k
}

// byRate returns the paths that fill the target at the newest sample's rate, its whole
// duration charged to its paths (0: no sample yet); a lone sample split at its first line
// charges only the time after the start (see The first sample).
func (e *Estimator) byRate() float64 {
	s, k := e.fill()
	return float64(s.Files) * k
}

// fill returns the newest sample and how many times its work fills the target at its
// rate: the target over its duration, or, for a lone sample split at its first line, the
// target's time after the start over the sample's (0 with no sample).
func (e *Estimator) fill() (Sample, float64) {
	if len(e.samples) == 0 {
		return Sample{}, 0
	}
	s := e.samples[len(e.samples)-1]
	if _, ok := firstSplit(e.samples); ok {
		st := e.fit.Start
		return s, max(e.Target()-st, 0) / (s.Seconds - st)
	}
	return s, e.Target() / s.Seconds
}

// Cuts returns where to cut a chunk whose paths have the sizes given into parts runs of
// about equal predicted cost: the index where each part after the first starts. Runs
// keep the input's order, so a part holds neighbouring paths.
func (e *Estimator) Cuts(sizes []int64, parts int) []int {
	if parts < 2 || len(sizes) < parts {
		return nil
	}
	perFile, perByte := e.fit.PerFile, e.fit.PerByte
	if perFile <= 0 && perByte <= 0 {
		perFile = 1
	}
	if perFile <= 0 {
		perFile = perByte * 4096 // a path costs at least a block's worth
	}
	cost := func(s int64) float64 { return perFile + perByte*float64(s) }
	var total float64
	for _, s := range sizes {
		total += cost(s)
	}
	var cuts []int
	var acc float64
	for i, s := range sizes {
		k := len(cuts) + 1 // the part that starts next
		left := len(sizes) - i
		if k < parts && i > 0 && (acc >= total*float64(k)/float64(parts)*(1-1e-9) || left <= parts-k) {
			cuts = append(cuts, i)
		}
		acc += cost(s)
	}
	return cuts
}

// fit solves the weighted non-negative least squares of d = a + b·f + c·B over the
// samples, the newest weighted 1 and each older one decay times the next.
func fit(samples []Sample, decay float64) Fit {
	n := len(samples)
	if n == 0 {
		return Fit{}
	}
	// scale the columns to about 1, so that the normal equations are well conditioned
	var sf, sb float64
	for _, s := range samples {
		sf = max(sf, float64(s.Files))
		sb = max(sb, float64(s.Bytes))
	}
	if sb == 0 {
		sb = 1
	}
	type row struct {
		x    [3]float64
		y, w float64
	}
	rows := make([]row, n)
	w := 1.0
	for i := n - 1; i >= 0; i-- {
		s := samples[i]
		rows[i] = row{x: [3]float64{1, float64(s.Files) / sf, float64(s.Bytes) / sb}, y: s.Seconds, w: w}
		w *= decay
	}
	best, bestErr := [3]float64{}, math.Inf(1)
	// the subsets of the terms, fewer terms first; among one-term fits the per-file cost
	// first, so that one sample (or samples of one size) is not taken for a start cost
	for _, mask := range [...]int{2, 4, 1, 6, 3, 5, 7} {
		var idx []int
		for j := 0; j < 3; j++ {
			if mask&(1<<j) != 0 {
				idx = append(idx, j)
			}
		}
		if len(idx) > n {
			continue
		}
		k := len(idx)
		var a [3][4]float64 // the normal equations, augmented
		for _, r := range rows {
			for p := 0; p < k; p++ {
				for q := 0; q < k; q++ {
					a[p][q] += r.w * r.x[idx[p]] * r.x[idx[q]]
				}
				a[p][k] += r.w * r.x[idx[p]] * r.y
			}
		}
		for p := 0; p < k; p++ {
			a[p][p] += 1e-9 // a whisper of ridge: a column of zeros stays solvable
		}
		sol, ok := solve(a, k)
		if !ok {
			continue
		}
		var coef [3]float64
		neg := false
		for p, j := range idx {
			if sol[p] < 0 {
				neg = true
			}
			coef[j] = sol[p]
		}
		if neg {
			continue
		}
		var sse float64
		for _, r := range rows {
			d := r.y - (coef[0]*r.x[0] + coef[1]*r.x[1] + coef[2]*r.x[2])
			sse += r.w * d * d
		}
		// the fewer terms win a tie: they extrapolate less wildly
		if sse < bestErr*(1-1e-9) {
			best, bestErr = coef, sse
		}
	}
	return Fit{Start: best[0], PerFile: best[1] / sf, PerByte: best[2] / sb, N: n}
}

// solve solves the k×k system held in a (augmented with its right side in column k) by
// Gaussian elimination with partial pivoting.
func solve(a [3][4]float64, k int) ([3]float64, bool) {
	var x [3]float64
	for c := 0; c < k; c++ {
		p := c
		for r := c + 1; r < k; r++ {
			if math.Abs(a[r][c]) > math.Abs(a[p][c]) {
				p = r
			}
		}
		if math.Abs(a[p][c]) < 1e-12 {
			return x, false
		}
		a[c], a[p] = a[p], a[c]
		for r := c + 1; r < k; r++ {
			f := a[r][c] / a[c][c]
			for q := c; q <= k; q++ {
				a[r][q] -= f * a[c][q]
			}
		}
	}
	for r := k - 1; r >= 0; r-- {
		s := a[r][k]
		for q := r + 1; q < k; q++ {
			s -= a[r][q] * x[q]
		}
		x[r] = s / a[r][r]
	}
	return x, true
}
