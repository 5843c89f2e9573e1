package tune

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The simulator drives a Tuner window by window against a workload: a
// function from concurrency (and time) to the bytes and files finished per
// second, with seeded multiplicative noise, uniform in ±20 % per window, as
// on a noisy 2-CPU VM.
//
// It also models what the pool does when the limit moves. After a rise the
// new rsyncs spend about half of the first window connecting; after a fall
// the old ones take about half of the first window to finish, so Running is
// above the limit. A far side with max connections M refuses every session
// above M, and the pool then runs M. The throttle, a shortage of work and
// the end of the input show as Paused, a low Running and Drained.

const (
	mbit   = 1e6 / 8 // bytes/s
	mbyte  = 1 << 20
	window = float64(Window / time.Second)
	noise  = 0.2 // one window's rate is the true rate × U(1-noise, 1+noise)
)

// rateFunc is a workload: the bytes and files finished per second with n
// rsyncs running (n is fractional in a transient) at time t.
type rateFunc func(n, t float64) (bytes, files float64)

type scenario struct {
	name     string
	rate     rateFunc
	p        Policy    // zero: DefaultPolicy(2)
	duration float64   // seconds
	changes  []float64 // times at which the workload changes; each starts a segment
	maxConn  func(t float64) int
	avail    func(t float64) float64 // rsyncs the queued work can keep busy; nil: no limit
	paused   func(t float64) float64 // groups the throttle holds paused; nil: none
	drainAt  float64                 // the input is drained from then on; 0: never
	// cpu, if set, gives the CPUs busy and the part of them prsync's rsyncs
	// use with n rsyncs running, on a machine of cpus CPUs.
	cpu  func(n float64) (busy, own float64)
	cpus float64

	// pass is the share of runs that must converge within 30 s of each
	// segment's start and then keep 90 % of the best fixed rate; 0 means
	// 95 % for a steady workload and 90 % for one that changes.
	pass float64
	// hard marks scenarios that are reported, not asserted: their utility
	// is flat over a wide range of limits, or their change leaves the
	// rate at the current limit as it was, so that on 2 s windows with
	// ±20 % noise no test tells the limits apart within 30 s.
	hard bool
}

func (s scenario) policy() Policy {
	if s.p.Max == 0 {
		return DefaultPolicy(2)
	}
	return s.p
}

// step is one simulated window.
type step struct {
	t        float64 // start of the window
	obs      Observation
	rate     float64 // measured rate, files counted at FileCost
	achieved float64 // the same without the noise
	d        Decision
}

// run simulates s with seed and returns every window.
func (s scenario) run(tb testing.TB, seed uint64) []step {
	tb.Helper()
	p := s.policy()
	tn, err := New(p)
	if err != nil {
		tb.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	var steps []step
	prev := 0.0 // rsyncs that ran in the previous window; 0 at the start
	for t := 0.0; t < s.duration-1e-9; t += window {
		limit := tn.Limit()
		o := Observation{Limit: limit}
		n := float64(limit)
		if s.maxConn != nil {
			if m := s.maxConn(t); limit > m {
				o.Refused, o.Accepted = limit-m, m
				n = float64(m)
			}
		}
		if s.avail != nil {
			n = min(n, s.avail(t))
		}
		if s.drainAt > 0 && t >= s.drainAt {
			o.Drained = true
			n = max(1, n*(1-(t-s.drainAt)/60))
		}
		eff, running := n, n
		switch {
		case prev == 0:
			eff = n / 2 // every rsync is starting
		case n > prev:
			eff = prev + (n-prev)/2 // the new ones are connecting
		case n < prev:
			eff = n + (prev-n)/2 // the old ones are finishing
			running = eff
		}
		o.Running = running
		b, f := s.rate(eff, t)
		if s.paused != nil {
			if g := s.paused(t); g > 0 {
				o.Paused = g
				k := max(0, 1-g/eff)
				b, f = b*k, f*k
			}
		}
		u := 1 + noise*(2*rng.Float64()-1)
		o.Bytes, o.Files = b*u, f*u
		if s.cpu != nil {
			busy, own := s.cpu(eff)
			v := 1 + 0.05*(2*rng.Float64()-1) // the samples are steadier than the rate
			o.CPUs, o.Busy, o.Own = s.cpus, min(busy*v, s.cpus), min(own*v, s.cpus)
		}
		d := tn.Observe(o)
		steps = append(steps, step{t: t, obs: o, rate: o.Bytes + p.FileCost*o.Files, achieved: b + p.FileCost*f, d: d})
		prev = n
	}
	return steps
}

// truth is the noise-free rate of s at fixed concurrency n at time t,
// capped by the far side's connections and the work available.
func (s scenario) truth(n int, t float64) float64 {
	m := float64(n)
	if s.maxConn != nil {
		m = min(m, float64(s.maxConn(t)))
	}
	if s.avail != nil {
		m = min(m, s.avail(t))
	}
	b, f := s.rate(m, t)
	return b + s.policy().FileCost*f
}

// segment is a stretch of a scenario with a steady workload.
type segment struct {
	from, to float64
	bestN    int     // the fixed n with the highest rate
	bestRate float64 // its rate
	utilN    int     // the fixed n with the highest utility
}

func (s scenario) segments() []segment {
	p := s.policy()
	bounds := append(append([]float64{0}, s.changes...), s.duration)
	var segs []segment
	for i := 0; i+1 < len(bounds); i++ {
		g := segment{from: bounds[i], to: bounds[i+1]}
		mid := (g.from + g.to) / 2
		bestU := 0.0
		for n := p.Min; n <= p.Max; n++ {
			r := s.truth(n, mid)
			if r > g.bestRate*(1+1e-9) {
				g.bestN, g.bestRate = n, r
			}
			if u := r / math.Pow(p.K, float64(n)); u > bestU {
				g.utilN, bestU = n, u
			}
		}
		segs = append(segs, g)
	}
	return segs
}

// good reports whether n is a converged limit for segment g: within one step
// of the best utility, or within 10 % of the best rate.
func (s scenario) good(g segment, n int) bool {
	if abs(n-g.utilN) <= s.policy().StepAt(g.utilN) {
		return true
	}
	return s.truth(n, (g.from+g.to)/2) >= 0.9*g.bestRate
}

// result is how one run did in one segment.
type result struct {
	converge float64 // seconds from the segment's start until Best stays good; +Inf if never
	ratio    float64 // achieved rate from 30 s into the segment to its end, over the best fixed rate
	whole    float64 // the same over the whole segment
}

func (r result) ok() bool { return r.converge <= 30 && r.ratio >= 0.9 }

func (s scenario) score(steps []step) []result {
	var out []result
	for _, g := range s.segments() {
		r := result{converge: math.Inf(1)}
		var late, nLate, all, nAll float64
		for _, st := range steps {
			if st.t < g.from || st.t >= g.to {
				continue
			}
			switch good := s.good(g, st.d.Best); {
			case !good:
				r.converge = math.Inf(1)
			case math.IsInf(r.converge, 1):
				r.converge = st.t + window - g.from
			}
			all += st.achieved
			nAll++
			if st.t >= g.from+30 {
				late += st.achieved
				nLate++
			}
		}
		r.ratio = late / nLate / g.bestRate
		r.whole = all / nAll / g.bestRate
		out = append(out, r)
	}
	return out
}

// Workloads.

// concave is C·n/(n+h) − c·n bytes/s: each stream helps less than the one
// before, and in the end they contend.
func concave(C, h, c float64) rateFunc {
	return func(n, _ float64) (float64, float64) {
		return max(0, C*n/(n+h)-c*n), 0
	}
}

// capped is min(n·r, R): r per stream, R in all; the best n is R/r.
func capped(r, R float64) rateFunc {
	return func(n, _ float64) (float64, float64) { return min(n*r, R), 0 }
}

// parasync is the curve parasync measured, 3.0, 4.0, 4.5, 5.1 and 3.5
// Gbit/s at 6 to 10 processes: linear below 6 and falling after 10.
func parasync(n, _ float64) (float64, float64) {
	pts := []float64{0, 0.5, 1, 1.5, 2, 2.5, 3.0, 4.0, 4.5, 5.1, 3.5, 3.0, 2.7, 2.5, 2.3, 2.1, 1.9, 1.7}
	i := int(n)
	if i >= len(pts)-1 {
		return pts[len(pts)-1] * 1e9 / 8, 0
	}
	return (pts[i] + (n-float64(i))*(pts[i+1]-pts[i])) * 1e9 / 8, 0
}

// switchAt runs a until time at, then b.
func switchAt(at float64, a, b rateFunc) rateFunc {
	return func(n, t float64) (float64, float64) {
		if t < at {
			return a(n, t)
		}
		return b(n, t)
	}
}

// bigFiles is a copy of 64 MiB files bound by the disks of a 2-CPU
// machine: best at 6 rsyncs, within 10 % of that from 4 to 9.
func bigFiles(n, t float64) (float64, float64) {
	b, _ := concave(1000*mbyte, 6, 1000*mbyte/24)(n, t)
	return b, b / (64 * mbyte)
}

// smallFiles is a latency-bound copy of 32 KiB files: each stream finishes
// 250 files/s until the machine tops out at 5000 files/s, and contention
// costs 1 % per stream beyond that.
func smallFiles(n, _ float64) (float64, float64) {
	f := min(250*n, 5000) * (1 - 0.01*max(0, n-20))
	return f * (32 << 10), f
}

const changeAt = 150.0

func scenarios() []scenario {
	changed := []float64{changeAt}
	return []scenario{
		// Steady workloads.
		{name: "concave", rate: concave(1000*mbyte, 12, 20*mbyte), duration: 300},
		{name: "parasync-peak", rate: parasync, duration: 300},
		{name: "cap-20", rate: capped(100*mbit, 2000*mbit), duration: 300},
		{name: "cap-4", rate: capped(100*mbit, 400*mbit), duration: 300},
		{name: "best-2", rate: concave(400*mbyte, 1, 30*mbyte), duration: 300},
		{name: "concave-flat", rate: concave(1000*mbyte, 4, 20*mbyte), duration: 300, hard: true},
		{name: "concave-wide", rate: concave(2000*mbyte, 20, 10*mbyte), duration: 300, hard: true},

		// Step changes at 150 s.
		{name: "per-stream-halves", rate: switchAt(changeAt, capped(100*mbit, 2000*mbit), capped(50*mbit, 2000*mbit)),
			duration: 300, changes: changed},
		{name: "link-halves", rate: switchAt(changeAt, capped(100*mbit, 2000*mbit), capped(100*mbit, 1000*mbit)),
			duration: 300, changes: changed},
		{name: "big-to-small-files", rate: switchAt(changeAt, bigFiles, smallFiles), duration: 300, changes: changed},
		// Twice the far side (twice the disks): twice the rate at twice
		// the concurrency, T'(n) = 2·T(n/2). The utility is within 4 % of
		// its best from 12 to 20 streams, where the rate is 82 % to 98 %
		// of its top: a run that stops at 12 or 13 misses the 90 % and
		// cannot tell in 30 s. About 60 % of the runs make it.
		{name: "capacity-doubles", rate: switchAt(changeAt, concave(1000*mbyte, 12, 20*mbyte), concave(2000*mbyte, 24, 20*mbyte)),
			duration: 300, changes: changed, pass: 0.5},
		// Only C doubles: the optimum barely moves and the utility is flat
		// from 10 to 18 streams.
		{name: "capacity-doubles-c", rate: switchAt(changeAt, concave(1000*mbyte, 12, 20*mbyte), concave(2000*mbyte, 12, 20*mbyte)),
			duration: 300, changes: changed, hard: true},
		{name: "capacity-doubles-flat", rate: switchAt(changeAt, concave(1000*mbyte, 4, 20*mbyte), concave(2000*mbyte, 4, 20*mbyte)),
			duration: 300, changes: changed, hard: true},
		// The link doubles above a per-stream cap: at the knee (10) the
		// rate does not change, and only periodic probes of one step can
		// find that 11 is now better.
		{name: "link-doubles", rate: switchAt(changeAt, capped(100*mbit, 1000*mbit), capped(100*mbit, 2000*mbit)),
			duration: 300, changes: changed, hard: true},
		// A knee at 12, then at 24: if the search overshot the first knee,
		// the rate at the limit falls by only 20 %, within the noise.
		{name: "per-stream-halves-1200", rate: switchAt(changeAt, capped(100*mbit, 1200*mbit), capped(50*mbit, 1200*mbit)),
			duration: 300, changes: changed, hard: true},

		// A copy the CPUs bound, as bench scenarios 3 (a local copy, cold) and 10 (a pull of
		// tiny files from a daemon on the same machine) measured on 2 CPUs: 2 rsyncs saturate
		// them, yet 4 and 8 move more (0.62 to 0.70 and 0.89 to 0.94 × what 8 move). The
		// search starts at 8, as -j auto does in the CLI.
		{name: "cpu-pipeline-2", rate: cpuPipeline(2, 200*mbyte), duration: 120, cpu: cpuPipelineUse(2), cpus: 2,
			p: startAt(DefaultPolicy(2), 8)},
		// The same copy under a quota of 1 CPU: the CPU rule caps it at 4.
		{name: "cpu-pipeline-quota-1", rate: cpuPipeline(1, 100*mbyte), duration: 120, cpu: cpuPipelineUse(1), cpus: 1,
			p: startAt(DefaultPolicy(2), 8)},
		// A copy each of whose rsyncs fills a CPU (one that compresses or checksums big
		// files): 2 do all the CPUs can, and each one more costs 3 % in switches and caches.
		// The default cap (8 on 2 CPUs) leaves it to the search below 8, whose probes down
		// must gain 2 standard errors to win: reported, not asserted. With one rsync a CPU
		// (PerCPU 1) the CPU rule takes it to 2 at once.
		{name: "cpu-bound-2", rate: cpuBound(2, 200*mbyte), duration: 120, cpu: cpuUse(2), cpus: 2,
			p: startAt(DefaultPolicy(2), 8), hard: true},
		{name: "cpu-bound-2-one-a-cpu", rate: cpuBound(2, 200*mbyte), duration: 120, cpu: cpuUse(2), cpus: 2,
			p: oneACPU(startAt(DefaultPolicy(2), 8))},

		// The far side.
		{name: "max-connections-12", rate: capped(100*mbit, 2000*mbit), duration: 300,
			maxConn: func(float64) int { return 12 }},
		{name: "max-connections-12-then-8", rate: capped(100*mbit, 2000*mbit), duration: 300, changes: changed,
			maxConn: func(t float64) int {
				if t < changeAt {
					return 12
				}
				return 8
			}},
		// another client holds two of the three slots from 60 s to 70 s
		{name: "max-connections-3-other-client", rate: capped(100*mbit, 2000*mbit), duration: 150,
			maxConn: func(t float64) int {
				if t >= 60 && t < 70 {
					return 1
				}
				return 3
			}},
	}
}

// cpuBound is a copy whose every rsync keeps one of cpus CPUs busy, moving
// perCPU bytes/s on it; each rsync beyond the CPUs costs 3 % of the rate.
func cpuBound(cpus, perCPU float64) rateFunc {
	return func(n, _ float64) (float64, float64) {
		return perCPU * min(n, cpus) * math.Pow(0.97, max(0, n-cpus)), 0
	}
}

// cpuUse is what the CPUs show for cpuBound: each rsync keeps one busy, 95 %
// of it its own, the rest the kernel's writeback.
func cpuUse(cpus float64) func(n float64) (float64, float64) {
	return func(n float64) (float64, float64) {
		busy := min(n, cpus)
		return busy, 0.95 * busy
	}
}

// cpuPipeline is a copy the CPUs bound whose rsyncs are pipelines of processes that wait on
// each other (the sender, the generator, the receiver, and a daemon's process serving them
// on the same machine): cpus of them saturate the CPUs, yet more move more, as each keeps
// the CPUs busy with more work in flight, up to 4 and more a CPU. rate(n) = perCPU × cpus ×
// (1 − e^(−n/cpus)): 0.64 and 0.88 × rate(8) at 2 and 4 rsyncs on 2 CPUs.
func cpuPipeline(cpus, perCPU float64) rateFunc {
	return func(n, _ float64) (float64, float64) {
		return perCPU * cpus * -math.Expm1(-n/cpus), 0
	}
}

// cpuPipelineUse is what the CPUs show for cpuPipeline: each rsync keeps 0.95 of one busy
// until they are saturated, 95 % of that the copy's own.
func cpuPipelineUse(cpus float64) func(n float64) (float64, float64) {
	return func(n float64) (float64, float64) {
		busy := min(0.95*n, cpus)
		return busy, 0.95 * busy
	}
}

// startAt returns p starting at start.
func startAt(p Policy, start int) Policy {
	p.Start = start
	return p
}

func scenarioNamed(tb testing.TB, name string) scenario {
	for _, s := range scenarios() {
		if s.name == name {
			return s
		}
	}
	tb.Fatalf("no scenario %q", name)
	return scenario{}
}

// seeds are the seeds of the asserted runs: 100 runs of each scenario, so
// that the share of good runs is measured, not drawn. TUNE_SEEDS=n makes
// TestReport use seeds 1001 to 1000+n instead.
var seeds = func() []uint64 {
	s := make([]uint64, 100)
	for i := range s {
		s[i] = uint64(i + 1)
	}
	return s
}()

// checkScenario runs s over the seeds and checks that each segment converges
// within 30 s of its start and keeps 90 % of the best fixed rate after
// that, in the share s.pass of the runs at least.
func checkScenario(t *testing.T, s scenario) {
	t.Helper()
	need := s.pass
	switch {
	case need == 0 && len(s.changes) == 0:
		need = 0.95
	case need == 0:
		need = 0.9
	}
	for i := range s.segments() {
		passed := 0
		var failed []string
		for _, seed := range seeds {
			r := s.score(s.run(t, seed))[i]
			if r.ok() {
				passed++
			} else {
				failed = append(failed, fmt.Sprintf("seed %d: converged after %.0f s, rate %.3f", seed, r.converge, r.ratio))
			}
		}
		if float64(passed) < need*float64(len(seeds)) {
			t.Errorf("%s segment %d: %d of %d runs converge within 30 s with 90 %% of the best rate, want %.0f %%:\n\t%s",
				s.name, i, passed, len(seeds), 100*need, strings.Join(failed, "\n\t"))
		}
	}
}

// Requirement 1: converges within 30 s on steady workloads, with noise.
func TestConverges(t *testing.T) {
	for _, name := range []string{"concave", "parasync-peak", "cap-4", "best-2"} {
		t.Run(name, func(t *testing.T) { checkScenario(t, scenarioNamed(t, name)) })
	}
}

// Requirement 2: finds the new optimum within 30 s of a step change.
func TestStepChange(t *testing.T) {
	for _, name := range []string{"per-stream-halves", "link-halves", "big-to-small-files", "capacity-doubles"} {
		t.Run(name, func(t *testing.T) { checkScenario(t, scenarioNamed(t, name)) })
	}
}

// Issue 23 and 45: a copy the CPUs bound runs no more rsyncs than PerCPU (4) a CPU. Under a
// quota of 1 CPU, starting at the fixed default (8), it drops to 4 or fewer within 10 s and
// stays there, and keeps 90 % of the best fixed rate; on 2 CPUs, where 8 move the most, it
// keeps 90 % of that too. Each rsync filling a CPU with PerCPU 1 (cpu-bound-2-one-a-cpu),
// it drops to 2 within 10 s and stays there.
func TestCPUBoundConverges(t *testing.T) {
	for _, c := range []struct {
		name string
		cap  int
	}{{"cpu-pipeline-quota-1", 4}, {"cpu-bound-2-one-a-cpu", 2}, {"cpu-pipeline-2", 8}} {
		t.Run(c.name, func(t *testing.T) {
			s := scenarioNamed(t, c.name)
			checkScenario(t, s)
			for _, seed := range seeds {
				at := -1.0 // when the limit first reached the cap or less
				for _, st := range s.run(t, seed) {
					switch {
					case at < 0 && st.d.Limit <= c.cap:
						at = st.t + window // the decision takes effect after the window
					case at >= 0 && st.d.Limit > c.cap:
						t.Fatalf("seed %d at %.0f s: limit %d after dropping to %d at %.0f s (%s)", seed, st.t, st.d.Limit, c.cap, at, st.d.Reason)
					}
				}
				if at < 0 || at > 10 {
					t.Errorf("seed %d: limit reached %d or less after %.0f s, want within 10 s", seed, c.cap, at)
				}
			}
		})
	}
}

// Requirement 3: backs off at once on refusals, to the accepted number, and
// stays there; the ceiling then rises by one step per p.Ceiling windows, or
// per p.Recover windows at the soonest while it is below the most an earlier
// refusal accepted (top).
func TestRefusals(t *testing.T) {
	for _, name := range []string{"max-connections-12", "max-connections-12-then-8"} {
		t.Run(name, func(t *testing.T) {
			s := scenarioNamed(t, name)
			p := s.policy()
			checkScenario(t, s)
			for _, seed := range seeds {
				ceiling, top, since := 0, 0, 0 // last accepted count, the most accepted, windows since
				for _, st := range s.run(t, seed) {
					since++
					if st.obs.Refused > 0 {
						ceiling, top, since = st.obs.Accepted, max(top, st.obs.Accepted), 0
						if st.d.Limit > st.obs.Accepted || st.d.Reason != ReasonRefused {
							t.Fatalf("seed %d at %.0f s: refused with %d accepted, decided %+v", seed, st.t, st.obs.Accepted, st.d)
						}
					}
					if ceiling == 0 {
						continue
					}
					allowed, age := ceiling, 0
					for range since {
						switch age++; {
						case allowed < top && age >= p.Recover:
							allowed, age = min(top, allowed+p.StepAt(allowed)), 0
						case allowed >= top && age >= p.Ceiling:
							allowed, age = allowed+p.StepAt(allowed), 0
						}
					}
					if st.d.Limit > allowed {
						t.Fatalf("seed %d at %.0f s: limit %d, %d windows after %d were accepted (at most %d before); want at most %d",
							seed, st.t, st.d.Limit, since, ceiling, top, allowed)
					}
				}
			}
		})
	}
}

// Requirement 3b: a far side that takes fewer for a while (another client
// holds two of a daemon's three slots from 60 s to 70 s) brings the limit
// down to what it accepts, and the limit climbs back to 3 within 16 s of the
// slots' return (a step after p.Recover windows, 4 s; the step the far side
// refused while the slots were held doubled the wait), and no further for
// p.Ceiling windows. It waited p.Ceiling windows per step before (30 s), and
// a copy shorter than a minute ended at 1.
func TestRefusalsClimbBack(t *testing.T) {
	s := scenarioNamed(t, "max-connections-3-other-client")
	for _, seed := range seeds {
		down, back := -1.0, -1.0
		for _, st := range s.run(t, seed) {
			switch {
			case st.t >= 60 && st.t < 70 && st.obs.Refused > 0 && down < 0:
				down = st.t
			case st.t >= 70 && st.d.Limit == 3 && back < 0:
				back = st.t + window // the decision takes effect after the window
			}
			// above top only Ceiling windows (30 s) after the step that reached it
			if st.t >= 60 && st.t < 100 && st.d.Limit > 3 {
				t.Fatalf("seed %d at %.0f s: limit %d above the 3 the far side took (%s)", seed, st.t, st.d.Limit, st.d.Reason)
			}
		}
		if down < 0 {
			t.Fatalf("seed %d: no refusal while the other client held the slots", seed)
		}
		if back < 0 || back > 86 {
			t.Errorf("seed %d: the limit came back to 3 at %.0f s, want by 86 s (the slots free at 70 s)", seed, back)
		}
	}
}

// holds reports whether, over the 50 windows from 120 s on, the best limit
// stays within one step of where it was at 120 s, and the limit within one
// step of the best; if not, it says where that failed.
func (s scenario) holds(steps []step) (bool, string) {
	p := s.policy()
	var v int
	n := 0
	for _, st := range steps {
		if st.t < 120 {
			v = st.d.Best
			continue
		}
		if n++; n > 50 {
			break
		}
		if abs(st.d.Best-v) > p.StepAt(v) || abs(st.d.Limit-st.d.Best) > p.StepAt(st.d.Best) {
			return false, fmt.Sprintf("at %.0f s: limit %d, best %d; want best within %d of %d and the limit within %d of best",
				st.t, st.d.Limit, st.d.Best, p.StepAt(v), v, p.StepAt(st.d.Best))
		}
	}
	return true, ""
}

// Requirement 4: after convergence the limit holds on a plateau. Over 50
// windows from 120 s on (30 s to converge, and time for the search to end
// with its second look), the best limit moves by one step at most, so it
// does not trend, and the limit only visits one step around it. A run of
// lucky windows at one limit can still fool the test of a periodic probe
// twice in a row; 95 % of the runs must hold.
func TestPlateau(t *testing.T) {
	for _, name := range plateaus {
		t.Run(name, func(t *testing.T) {
			s := scenarioNamed(t, name)
			var failed []string
			for _, seed := range seeds {
				if ok, why := s.holds(s.run(t, seed)); !ok {
					failed = append(failed, fmt.Sprintf("seed %d %s", seed, why))
				}
			}
			if len(failed) > len(seeds)/20 {
				t.Errorf("%d of %d runs did not hold, want at most 5 %%:\n\t%s", len(failed), len(seeds), strings.Join(failed, "\n\t"))
			}
		})
	}
}

// plateaus are the steady scenarios TestPlateau checks.
var plateaus = []string{"cap-20", "concave", "parasync-peak", "cap-4", "best-2", "max-connections-12"}

// Requirement 5: windows where the pool was not full, the throttle paused
// groups, or the input was drained do not move the limit.
func TestSkippedWindowsInSim(t *testing.T) {
	s := scenarioNamed(t, "cap-20")
	s.paused = func(t float64) float64 {
		if t >= 80 && t < 110 {
			return 2
		}
		return 0
	}
	s.avail = func(t float64) float64 {
		if t >= 150 && t < 190 {
			return 6
		}
		return math.Inf(1)
	}
	s.drainAt = 270
	for _, seed := range seeds {
		steps := s.run(t, seed)
		for i, st := range steps {
			slack := max(0.5, 0.05*float64(st.obs.Limit))
			skipped := st.obs.Paused > 0 || st.obs.Running < float64(st.obs.Limit)-slack || st.obs.Drained
			if !skipped || i == 0 {
				continue
			}
			prev := steps[i-1].d
			if st.d.Limit != st.obs.Limit || st.d.Best != prev.Best {
				t.Fatalf("seed %d at %.0f s: skipped window (%+v) moved the limit: %+v after %+v", seed, st.t, st.obs, st.d, prev)
			}
			if r := st.d.Reason; r != ReasonThrottled && r != ReasonIdle && r != ReasonSettle {
				t.Fatalf("seed %d at %.0f s: skipped window decided %q", seed, st.t, r)
			}
		}
		// Back at the optimum between the pause and the shortage, and
		// after it.
		g := s.segments()[0]
		for _, at := range []float64{148, 268} {
			for _, st := range steps {
				if st.t == at && !s.good(g, st.d.Best) {
					t.Errorf("seed %d at %.0f s: best %d, want about %d", seed, at, st.d.Best, g.utilN)
				}
			}
		}
	}
}

// Requirement 6: the 20-stream case (100 Mbit/s per stream, 2 Gbit/s in
// all) reaches 90 % of the total within 30 s of the start, and stays there.
func TestTwentyStreams(t *testing.T) {
	s := scenarioNamed(t, "cap-20")
	for _, seed := range seeds {
		steps := s.run(t, seed)
		reached := math.Inf(1)
		for _, st := range steps {
			ok := s.truth(st.d.Best, st.t) >= 0.9*2000*mbit
			if ok && math.IsInf(reached, 1) {
				reached = st.t + window
			} else if !ok {
				reached = math.Inf(1)
			}
		}
		if reached > 30 {
			t.Errorf("seed %d: 90 %% of 2 Gbit/s held from %.0f s, want ≤ 30 s\n%s", seed, reached, trace(steps[:30]))
		}
	}
	checkScenario(t, s)
}

// Requirement 7: the limit stays within Min and Max, in every scenario and
// with narrow bounds.
func TestMinMax(t *testing.T) {
	narrow := DefaultPolicy(2)
	narrow.Min, narrow.Max, narrow.Start = 3, 6, 4
	all := scenarios()
	for _, s := range scenarios() {
		s.name += "/min-3-max-6"
		s.p = narrow
		all = append(all, s)
	}
	for _, s := range all {
		p := s.policy()
		for _, seed := range seeds[:5] {
			for _, st := range s.run(t, seed) {
				if st.d.Limit < p.Min || st.d.Limit > p.Max || st.d.Best < p.Min || st.d.Best > p.Max {
					t.Fatalf("%s seed %d at %.0f s: %+v outside [%d, %d]", s.name, seed, st.t, st.d, p.Min, p.Max)
				}
			}
		}
	}
	// The bounds are reached when the workload wants more or fewer.
	for _, c := range []struct {
		name string
		want int
	}{{"cap-20", 6}, {"best-2", 3}} {
		s := scenarioNamed(t, c.name)
		s.p = narrow
		steps := s.run(t, 1)
		if got := steps[len(steps)-1].d.Best; got != c.want {
			t.Errorf("%s within [3, 6]: best %d, want %d", c.name, got, c.want)
		}
	}
}

// TestReport prints, for each scenario and segment, how long the Tuner took
// to converge (median and worst), the share of runs that converged within
// 30 s and kept 90 % of the best fixed rate, that rate ratio after 30 s
// (median and worst) and over the whole segment (median), and for steady
// scenarios the share of runs that held on the plateau. With
// TUNE_SEEDS=n it uses seeds 1001 to 1000+n instead of the test seeds:
//
//	go test -run TestReport -v ./tune/
func TestReport(t *testing.T) {
	ss := seeds
	if n, err := strconv.Atoi(os.Getenv("TUNE_SEEDS")); err == nil && n > 0 {
		ss = nil
		for i := range n {
			ss = append(ss, uint64(1001+i))
		}
	}
	t.Logf("%-29s %3s  %5s %5s  %8s %8s %7s  %8s %8s %8s  %6s", "scenario", "seg", "bestN", "utilN",
		"conv-med", "conv-max", "ok", "rate-med", "rate-min", "whole", "holds")
	for _, s := range scenarios() {
		for i, g := range s.segments() {
			var conv, ratio, whole []float64
			ok, held := 0, 0
			for _, seed := range ss {
				steps := s.run(t, seed)
				if h, _ := s.holds(steps); h {
					held++
				}
				r := s.score(steps)[i]
				conv = append(conv, r.converge)
				ratio = append(ratio, r.ratio)
				whole = append(whole, r.whole)
				if r.ok() {
					ok++
				}
			}
			slices.Sort(conv)
			slices.Sort(ratio)
			slices.Sort(whole)
			hold := "-"
			if len(s.changes) == 0 {
				hold = fmt.Sprintf("%d%%", 100*held/len(ss))
			}
			name := s.name
			if s.hard {
				name += " (hard)"
			}
			t.Logf("%-29s %3d  %5d %5d  %7.0fs %7.0fs %6.0f%%  %8.3f %8.3f %8.3f  %6s", name, i, g.bestN, g.utilN,
				conv[len(conv)/2], conv[len(conv)-1], 100*float64(ok)/float64(len(ss)), ratio[len(ratio)/2], ratio[0], whole[len(whole)/2], hold)
		}
	}
}

// TestTrace prints the limit over time for each scenario, seed 1, as CSV
// for plotting; -run TestTrace/cap-20 picks one:
//
//	go test -run TestTrace -v ./tune/
func TestTrace(t *testing.T) {
	for _, s := range scenarios() {
		t.Run(s.name, func(t *testing.T) { t.Logf("scenario %s\n%s", s.name, trace(s.run(t, 1))) })
	}
}

func trace(steps []step) string {
	var b strings.Builder
	b.WriteString("t,limit,running,rate,true_rate,refused,best,reason,gain,noise,ceiling\n")
	for _, st := range steps {
		fmt.Fprintf(&b, "%.0f,%d,%.1f,%.4g,%.4g,%d,%d,%s,%.3f,%.3f,%d\n",
			st.t, st.obs.Limit, st.obs.Running, st.rate, st.achieved, st.obs.Refused,
			st.d.Best, st.d.Reason, st.d.Gain, st.d.Noise, st.d.Ceiling)
	}
	return b.String()
}
