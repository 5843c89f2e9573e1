package tune

import (
	"math"
	"testing"
)

// knee20 is a noise-free link of 100 Mbit/s per stream and 2 Gbit/s in all.
func knee20(n int) float64 { return min(float64(n)*100*mbit, 2000*mbit) }

// clean is a full, undisturbed window at limit with the rate of workload.
func clean(limit int, workload func(int) float64) Observation {
	return Observation{Limit: limit, Running: float64(limit), Bytes: workload(limit)}
}

// drive feeds tn n clean windows of workload and returns its decisions.
func drive(tn *Tuner, workload func(int) float64, n int) []Decision {
	var ds []Decision
	for range n {
		ds = append(ds, tn.Observe(clean(tn.Limit(), workload)))
	}
	return ds
}

func newTuner(t *testing.T, p Policy) *Tuner {
	t.Helper()
	tn, err := New(p)
	if err != nil {
		t.Fatal(err)
	}
	return tn
}

func TestNew(t *testing.T) {
	if _, err := New(Policy{}); err == nil {
		t.Error("New(Policy{}) = nil error, want one")
	}
	tn := newTuner(t, DefaultPolicy(2))
	if got := tn.Limit(); got != 4 {
		t.Errorf("Limit() before Observe = %d, want Start 4", got)
	}
}

// TestSequence follows the search window by window on a noise-free link
// whose best limit is 20: the first probe doubles Start, the next ones grow
// by half, and the overshoot to 27 halves the step.
func TestSequence(t *testing.T) {
	tn := newTuner(t, DefaultPolicy(2))
	steps := []struct {
		limit  int // in force during the window
		want   int // the next limit
		reason string
		best   int
	}{
		{4, 4, ReasonSettle, 4},
		{4, 4, ReasonHold, 4}, // BaseWindows: one more window at Start
		{4, 8, ReasonProbeUp, 4},
		{8, 8, ReasonSettle, 4},
		{8, 12, ReasonProbeUp, 8}, // 8 won on one window; on to ×1.5
		{12, 12, ReasonSettle, 8},
		{12, 18, ReasonProbeUp, 12},
		{18, 18, ReasonSettle, 12},
		{18, 27, ReasonProbeUp, 18},
		{27, 27, ReasonSettle, 18},
		{27, 27, ReasonHold, 18}, // the same rate for 50 % more streams: not convincing
		{27, 27, ReasonHold, 18},
		{27, 27, ReasonHold, 18},
		{27, 22, ReasonProbeUp, 18}, // lost after MaxWindows: half the step
		{22, 22, ReasonSettle, 18},
		{22, 22, ReasonHold, 18},
		{22, 22, ReasonHold, 18},
		{22, 22, ReasonHold, 18},
		{22, 32, ReasonProbeUp, 22}, // 22 beats 18 by 2.7 %: won on the last window
	}
	for i, st := range steps {
		if got := tn.Limit(); got != st.limit {
			t.Fatalf("window %d: limit %d, want %d", i, got, st.limit)
		}
		d := tn.Observe(clean(st.limit, knee20))
		if d.Limit != st.want || d.Reason != st.reason || d.Best != st.best {
			t.Fatalf("window %d at %d: got limit %d %q best %d, want %d %q best %d",
				i, st.limit, d.Limit, d.Reason, d.Best, st.want, st.reason, st.best)
		}
	}
}

// TestSkippedWindows checks that a window that says nothing about the limit
// moves nothing: the Tuner at Start, about to probe, stays, and the next
// clean window does what the skipped one would have done.
func TestSkippedWindows(t *testing.T) {
	rate := knee20(4)
	tests := []struct {
		name   string
		o      Observation
		reason string // of the window; "" means measured, so it starts the probe
		next   string // of the next, clean window
	}{
		{"clean", Observation{Limit: 4, Running: 4, Bytes: rate}, "", ReasonSettle},
		{"files only count", Observation{Limit: 4, Running: 4, Files: 100}, "", ReasonSettle},
		{"full enough", Observation{Limit: 4, Running: 3.6, Bytes: rate}, "", ReasonSettle},
		{"another limit", Observation{Limit: 5, Running: 5, Bytes: rate}, ReasonSettle, ReasonSettle},
		{"still finishing", Observation{Limit: 4, Running: 6, Bytes: rate}, ReasonSettle, ReasonProbeUp},
		{"throttled", Observation{Limit: 4, Running: 4, Bytes: rate / 2, Paused: 2}, ReasonThrottled, ReasonProbeUp},
		{"throttled a little", Observation{Limit: 4, Running: 4, Bytes: rate, Paused: 0.01}, ReasonThrottled, ReasonProbeUp},
		{"not full", Observation{Limit: 4, Running: 3.4, Bytes: rate}, ReasonIdle, ReasonProbeUp},
		{"one rsync", Observation{Limit: 4, Running: 1, Bytes: rate / 4}, ReasonIdle, ReasonProbeUp},
		{"drained", Observation{Limit: 4, Running: 4, Bytes: rate, Drained: true}, ReasonIdle, ReasonProbeUp},
		{"nothing finished", Observation{Limit: 4, Running: 4}, ReasonIdle, ReasonProbeUp},
		{"NaN rate", Observation{Limit: 4, Running: 4, Bytes: math.NaN()}, ReasonIdle, ReasonProbeUp},
		{"infinite rate", Observation{Limit: 4, Running: 4, Bytes: math.Inf(1)}, ReasonIdle, ReasonProbeUp},
		{"negative rate", Observation{Limit: 4, Running: 4, Bytes: -1, Files: 10}, ReasonIdle, ReasonProbeUp},
		{"NaN running", Observation{Limit: 4, Running: math.NaN(), Bytes: rate}, ReasonIdle, ReasonProbeUp},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tn := newTuner(t, DefaultPolicy(2))
			drive(tn, knee20, 2) // settle, then one window at Start
			d := tn.Observe(tt.o)
			if tt.reason == "" {
				if d.Reason != ReasonProbeUp || d.Limit != 8 {
					t.Fatalf("measured window: %+v, want probe-up to 8", d)
				}
				if d = tn.Observe(clean(8, knee20)); d.Reason != tt.next {
					t.Fatalf("next window: %q, want %q", d.Reason, tt.next)
				}
				return
			}
			if d.Reason != tt.reason || d.Limit != 4 || d.Best != 4 {
				t.Fatalf("skipped window: %+v, want %q with limit and best 4", d, tt.reason)
			}
			if d = tn.Observe(clean(4, knee20)); d.Reason != tt.next {
				t.Fatalf("next window: %+v, want %q", d, tt.next)
			}
		})
	}
}

// TestRefused checks that a refusal acts at once, whatever state the Tuner
// is in, and sets the ceiling.
func TestRefused(t *testing.T) {
	tests := []struct {
		name     string
		before   int // clean windows before the refusal
		accepted int
		paused   float64
		limit    int // the next limit
		best     int
		ceiling  int
	}{
		{"at start", 1, 3, 0, 3, 3, 3},
		{"at start, all accepted", 1, 4, 0, 4, 4, 4},
		{"probing above what is accepted", 3, 6, 0, 6, 4, 6}, // the probe to 8 goes on at 6
		{"probing, below best", 3, 3, 0, 3, 3, 3},
		{"nothing accepted", 3, 0, 0, 1, 1, 1},
		{"more than max accepted", 3, 40, 0, 8, 4, 32},
		{"in a settle window", 5, 10, 0, 10, 8, 10}, // just moved to 12 after 8 won
		{"accepted more than the limit", 3, 8, 0, 8, 4, 8},
		{"throttled too", 3, 5, 2, 5, 4, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tn := newTuner(t, DefaultPolicy(2))
			drive(tn, knee20, tt.before)
			o := clean(tn.Limit(), knee20)
			o.Refused, o.Accepted, o.Paused = 1, tt.accepted, tt.paused
			d := tn.Observe(o)
			if d.Reason != ReasonRefused || d.Limit != tt.limit || d.Best != tt.best || d.Ceiling != tt.ceiling {
				t.Fatalf("refused at %d with %d accepted: %+v, want limit %d best %d ceiling %d",
					o.Limit, tt.accepted, d, tt.limit, tt.best, tt.ceiling)
			}
		})
	}
}

// TestCeilingRises checks that after a refusal the limit stays at or below
// what was accepted, and that the ceiling rises by one step per p.Ceiling
// windows, up to Max, where it goes.
func TestCeilingRises(t *testing.T) {
	p := DefaultPolicy(2)
	tn := newTuner(t, p)
	drive(tn, knee20, 3) // probing 8
	o := clean(8, knee20)
	o.Refused, o.Accepted = 1, 6
	tn.Observe(o)
	ceiling := 6
	reached := false
	for i := 1; i <= 30*p.Ceiling; i++ {
		d := tn.Observe(clean(tn.Limit(), knee20))
		if ceiling > 0 && i%p.Ceiling == 0 {
			ceiling += p.StepAt(ceiling)
		}
		if ceiling >= p.Max {
			ceiling = 0
		}
		if d.Ceiling != ceiling {
			t.Fatalf("window %d after the refusal: ceiling %d, want %d", i, d.Ceiling, ceiling)
		}
		if ceiling > 0 && d.Limit > ceiling {
			t.Fatalf("window %d after the refusal: limit %d above the ceiling %d", i, d.Limit, ceiling)
		}
		if ceiling > 0 && d.Limit == ceiling {
			reached = true
		}
	}
	if !reached {
		t.Error("the limit never reached the ceiling although the link wants 20")
	}
	if d := tn.Observe(clean(tn.Limit(), knee20)); d.Best < 18 || d.Best > 24 {
		t.Errorf("once the ceiling is gone, best %d, want about 20", d.Best)
	}
}

// TestCeilingRecovers checks the climb back of a ceiling that a refusal cut
// below what an earlier refusal accepted (another client held slots for a
// while, or a daemon freed a slot late): a step after p.Recover windows
// without a refusal, the limit with it up to the best before the cut; a
// refused step doubles the wait, and a step that held halves it again. Above
// what was accepted before, the ceiling waits p.Ceiling windows as ever.
func TestCeilingRecovers(t *testing.T) {
	p := DefaultPolicy(2)
	tn := newTuner(t, p)
	drive(tn, knee20, 3) // probing 8
	refuse := func(accepted int) Decision {
		t.Helper()
		o := clean(tn.Limit(), knee20)
		o.Refused, o.Accepted = 1, accepted
		d := tn.Observe(o)
		if d.Reason != ReasonRefused || d.Limit != accepted || d.Ceiling != accepted {
			t.Fatalf("refused with %d accepted: %+v, want limit and ceiling %d", accepted, d, accepted)
		}
		return d
	}
	// windows runs n clean windows and wants the limit unchanged but for a climb to
	// climb (0: none) in the last
	windows := func(what string, n, climb int) {
		t.Helper()
		before := tn.Limit()
		for i := 1; i <= n; i++ {
			d := tn.Observe(clean(tn.Limit(), knee20))
			switch {
			case i < n || climb == 0:
				if d.Limit != before || d.Reason == ReasonClimb {
					t.Fatalf("%s, window %d of %d: %+v, want the limit %d held", what, i, n, d, before)
				}
			case d.Limit != climb || d.Reason != ReasonClimb || d.Best != climb || d.Ceiling != climb:
				t.Fatalf("%s, window %d: %+v, want a climb to %d", what, i, d, climb)
			}
		}
	}
	refuse(4) // the far side takes 4: what it has shown it takes
	windows("at what the far side takes", 6, 0)
	refuse(1) // another client holds three slots
	windows("cut to 1", p.Recover, 2)
	refuse(1) // still held: the step is refused, and the wait doubles
	windows("the step refused", 2*p.Recover, 2)
	windows("the step held", 2*p.Recover, 3) // the wait in force; the next is halved
	windows("two steps held", p.Recover, 4)
	for i := 1; i <= p.Ceiling; i++ { // no higher than was accepted, for Ceiling windows
		d := tn.Observe(clean(tn.Limit(), knee20))
		ceil := 4 + p.StepAt(4)*(i/p.Ceiling)
		if d.Ceiling != ceil || d.Reason == ReasonClimb || i < p.Ceiling && d.Limit > 4 {
			t.Fatalf("back at 4, window %d: %+v, want the limit at most 4, the ceiling %d", i, d, ceil)
		}
	}

	// a cut from a best below top comes back to that best, not to top
	tn = newTuner(t, p)
	drive(tn, knee20, 3)
	refuse(6)
	tn.best = 4 // as if a search had settled below what the far side takes
	refuse(2)
	windows("cut from 4 of 6", p.Recover, 3)
	windows("half way", p.Recover, 4)
	if d := tn.Observe(clean(tn.Limit(), knee20)); d.Reason == ReasonClimb {
		t.Fatalf("at the best before the cut: %+v, want no climb above 4", d)
	}
}

// TestBounds checks Min and Max with a workload that wants more than Max and
// one that wants fewer than Min.
func TestBounds(t *testing.T) {
	p := DefaultPolicy(2)
	p.Min, p.Max, p.Start = 3, 6, 4
	more := newTuner(t, p)
	for i, d := range drive(more, knee20, 100) {
		if d.Limit < 3 || d.Limit > 6 {
			t.Fatalf("window %d: limit %d outside [3, 6]", i, d.Limit)
		}
	}
	if got := more.Limit(); got != 6 {
		t.Errorf("a link that wants 20 within [3, 6]: limit %d, want 6", got)
	}
	// Each stream costs: the rate falls as 1/n.
	fewer := newTuner(t, p)
	for i, d := range drive(fewer, func(n int) float64 { return 1e9 / float64(n) }, 100) {
		if d.Limit < 3 || d.Limit > 6 {
			t.Fatalf("window %d: limit %d outside [3, 6]", i, d.Limit)
		}
	}
	if got := fewer.Limit(); got != 3 {
		t.Errorf("a workload that wants 1 within [3, 6]: limit %d, want 3", got)
	}
}

// TestWorkloadChanged checks that a step of the rate at the best limit
// starts a new search, upwards when the rate rose and downwards when it
// fell, and that the mix of files does too.
func TestWorkloadChanged(t *testing.T) {
	tests := []struct {
		name   string
		after  func(int) float64 // bytes/s after the change
		files  float64           // files/s after the change
		reason string
		up     bool
	}{
		{"rate doubles", func(n int) float64 { return 2 * knee20(n) }, 0, ReasonWorkloadChanged, true},
		{"rate halves", func(n int) float64 { return knee20(n) / 2 }, 0, ReasonWorkloadChanged, false},
		{"small files", func(n int) float64 { return knee20(n) / 8 }, 2000, ReasonWorkloadChanged, true},
		{"rate 10 % up", func(n int) float64 { return 1.1 * knee20(n) }, 0, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tn := newTuner(t, DefaultPolicy(2))
			drive(tn, knee20, 80) // settled near 20
			best := tn.Limit()
			if best < 18 || best > 24 {
				t.Fatalf("not settled: limit %d", best)
			}
			changed := false
			for range 20 {
				o := Observation{Limit: tn.Limit(), Running: float64(tn.Limit()), Bytes: tt.after(tn.Limit()), Files: tt.files}
				d := tn.Observe(o)
				if d.Reason == ReasonWorkloadChanged {
					changed = true
				}
				if !changed || d.Limit == d.Best {
					continue
				}
				// The first probe of the new search.
				if up := d.Limit > d.Best; up != tt.up {
					t.Errorf("the search after the change probes %d from %d, want upwards %v", d.Limit, d.Best, tt.up)
				}
				break
			}
			if want := tt.reason != ""; changed != want {
				t.Fatalf("change detected %v, want %v", changed, want)
			}
		})
	}
}

// TestRefusedBelowBest checks a refusal while probing below best: best
// comes down to the ceiling too, so that the probe cannot return above it.
func TestRefusedBelowBest(t *testing.T) {
	tn := newTuner(t, DefaultPolicy(2))
	fewer := func(n int) float64 { return 1e9 / float64(n) } // each stream costs
	ds := drive(tn, fewer, 5)
	if d := ds[4]; d.Reason != ReasonProbeDown || d.Limit != 3 || d.Best != 4 {
		t.Fatalf("after 8 lost: %+v, want a probe down to 3 from 4", d)
	}
	o := clean(3, fewer)
	o.Refused, o.Accepted = 1, 3
	d := tn.Observe(o)
	if d.Limit != 3 || d.Best != 3 || d.Ceiling != 3 {
		t.Fatalf("refused at 3 with 3 accepted, best 4: %+v, want limit, best and ceiling 3", d)
	}
	for i, d := range drive(tn, fewer, 10) {
		if d.Limit > 3 || d.Best > 3 {
			t.Fatalf("window %d after the refusal: %+v above the ceiling 3", i, d)
		}
	}
}

// TestCPUBound checks the CPU rule: a measured window in which the CPUs are
// saturated, mostly by prsync's rsyncs, drops the limit to the CPUs' worth (PerCPU
// rsyncs per CPU, 4 by default) at once; any other window is judged as before.
func TestCPUBound(t *testing.T) {
	rate := knee20(8)
	tests := []struct {
		name   string
		start  int         // the limit of the first windows
		perCPU float64     // Policy.PerCPU; 0: the default
		o      Observation // the second window, after the settle window
		reason string
		limit  int
		cap    int
	}{
		{"2 CPUs, 16 rsyncs: down to 4 a CPU", 16, 0, Observation{CPUs: 2, Busy: 1.95, Own: 1.8}, ReasonCPUBound, 8, 8},
		{"2 CPUs, 8 rsyncs: nothing above the cap", 8, 0, Observation{CPUs: 2, Busy: 1.95, Own: 1.8}, ReasonHold, 8, 8},
		{"a quota of half a CPU", 8, 0, Observation{CPUs: 0.5, Busy: 0.5, Own: 0.5}, ReasonCPUBound, 2, 2},
		{"a quota of 1.5 CPUs", 8, 0, Observation{CPUs: 1.5, Busy: 1.5, Own: 1.4}, ReasonCPUBound, 6, 6},
		{"a quota of 1 CPU, saturated, half the rsyncs'", 8, 0, Observation{CPUs: 1, Busy: 0.95, Own: 0.5}, ReasonCPUBound, 4, 4},
		{"one rsync a CPU: saturated by the rsyncs", 8, 1, Observation{CPUs: 2, Busy: 1.95, Own: 1.8}, ReasonCPUBound, 2, 2},
		{"one rsync a CPU: saturated, half the rsyncs'", 8, 1, Observation{CPUs: 2, Busy: 1.8, Own: 1}, ReasonCPUBound, 2, 2},
		{"saturated by others", 16, 0, Observation{CPUs: 2, Busy: 2, Own: 0.4}, ReasonHold, 16, 0},
		{"room", 16, 0, Observation{CPUs: 2, Busy: 1.7, Own: 1.6}, ReasonHold, 16, 0},
		{"not measured", 16, 0, Observation{Busy: 2, Own: 2}, ReasonHold, 16, 0},
		{"16 CPUs: the cap at Max", 16, 0, Observation{CPUs: 16, Busy: 16, Own: 15}, ReasonHold, 16, 32},
		{"throttled", 16, 0, Observation{CPUs: 2, Busy: 2, Own: 2, Paused: 1}, ReasonThrottled, 16, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := startAt(DefaultPolicy(2), tt.start)
			if tt.perCPU > 0 {
				p.PerCPU = tt.perCPU
			}
			tn := newTuner(t, p)
			first := Observation{Limit: tt.start, Running: float64(tt.start), Bytes: rate, CPUs: 2, Busy: 2, Own: 2}
			if d := tn.Observe(first); d.Reason != ReasonSettle || d.Limit != tt.start {
				t.Fatalf("first window: %+v, want settle at %d (the starts fill the CPUs too)", d, tt.start)
			}
			o := tt.o
			o.Limit, o.Running, o.Bytes = tt.start, float64(tt.start), rate
			d := tn.Observe(o)
			if d.Reason != tt.reason || d.Limit != tt.limit || d.CPUCap != tt.cap {
				t.Fatalf("window: %+v, want %q to %d with CPU cap %d", d, tt.reason, tt.limit, tt.cap)
			}
			if tt.reason == ReasonCPUBound && d.Best != tt.limit {
				t.Fatalf("best %d, want %d", d.Best, tt.limit)
			}
		})
	}
}

// TestCPUCap follows the search after the CPU rule dropped the limit to 2: it
// probes down, never above the cap while the CPUs stay saturated, and may go
// above it again once a window at the cap shows the CPUs with room.
func TestCPUCap(t *testing.T) {
	tn := newTuner(t, oneACPU(startAt(DefaultPolicy(2), 8)))
	perRsync := 100 * mbit
	window := func(busy float64) Observation {
		n := tn.Limit()
		return Observation{Limit: n, Running: float64(n), Bytes: perRsync * min(float64(n), 2), CPUs: 2, Busy: min(busy*float64(n), 2), Own: min(busy*float64(n), 2)}
	}
	tn.Observe(window(1)) // settle
	if d := tn.Observe(window(1)); d.Reason != ReasonCPUBound || d.Limit != 2 {
		t.Fatalf("saturated window: %+v, want cpu-bound to 2", d)
	}
	sawDown := false
	for i := range 40 {
		d := tn.Observe(window(1))
		if d.Limit > 2 {
			t.Fatalf("window %d: limit %d above the CPU cap (%s)", i, d.Limit, d.Reason)
		}
		sawDown = sawDown || d.Limit == 1
	}
	if !sawDown {
		t.Error("the search never probed 1 below the cap")
	}
	// each rsync now waits on the network half of its time: two leave room
	for range 2 * DefaultPolicy(2).MaxHold * 3 {
		if d := tn.Observe(window(0.5)); d.Limit > 2 {
			return // a probe passed the old cap
		}
	}
	t.Error("the limit never went above 2 after the CPUs had room")
}

// TestCPURoom: after the CPU rule dropped the limit from 8 to 2, the first window at 2
// with the CPUs 80 % busy (not saturated, but not the quarter idle that lifts the cap)
// raises the cap, best and the limit to 3 (cpu-room); 3 saturates them, so nothing goes
// above it, the rule does not cut it back to 2, and best stays 3, where the copy moves 25 %
// more than at 2.
func TestCPURoom(t *testing.T) {
	tn := newTuner(t, oneACPU(startAt(DefaultPolicy(2), 8)))
	perRsync := 100 * mbit
	window := func() Observation { // each rsync uses 0.8 CPU while the CPUs have room
		n := float64(tn.Limit())
		busy := min(0.8*n, 2)
		return Observation{Limit: tn.Limit(), Running: n, Bytes: perRsync * busy / 0.8, CPUs: 2, Busy: busy, Own: busy}
	}
	tn.Observe(window()) // settle
	if d := tn.Observe(window()); d.Reason != ReasonCPUBound || d.Limit != 2 || d.CPUCap != 2 {
		t.Fatalf("saturated window at 8: %+v, want cpu-bound to 2", d)
	}
	tn.Observe(window()) // settle at 2
	if d := tn.Observe(window()); d.Reason != ReasonCPURoom || d.Limit != 3 || d.Best != 3 || d.CPUCap != 3 {
		t.Fatalf("window at 2 with the CPUs 80 %% busy: %+v, want cpu-room to 3", d)
	}
	for i := range 60 {
		d := tn.Observe(window())
		if d.Limit > 3 || d.CPUCap > 3 {
			t.Fatalf("window %d: limit %d, cap %d: above 3, which saturates the CPUs (%s)", i, d.Limit, d.CPUCap, d.Reason)
		}
		if d.Reason == ReasonCPUBound {
			t.Fatalf("window %d: %+v, want 3 judged on its rate, not cut by the CPU rule", i, d)
		}
	}
	if d := tn.Observe(window()); d.Best != 3 {
		t.Errorf("at the end: %+v, want best 3", d)
	}
}

// TestCeilingNeighbour: a far side that states its limit (6) leaves prsync a fair share of
// it (3) as a ceiling, whatever it accepted when it refused; when another client's sessions
// caused the refusal (Shared), the ceiling climbs no higher than that share for a few
// windows, and then on towards what the far side states, as a cut from what it took climbs
// back. Before, the copy that came second
// stayed at what the far side had accepted (1) for 30 s.
func TestCeilingNeighbour(t *testing.T) {
	p := DefaultPolicy(2)
	tn := newTuner(t, p)
	drive(tn, knee20, 3) // probing 8
	o := clean(tn.Limit(), knee20)
	o.Refused, o.Accepted, o.Stated, o.Shared = 1, 1, 6, true
	if d := tn.Observe(o); d.Limit != 3 || d.Ceiling != 3 {
		t.Fatalf("refused with 1 of 6 accepted, another client's: %+v, want limit and ceiling 3, a fair share", d)
	}
	for i := 1; i <= neighbourWindows; i++ {
		if d := tn.Observe(clean(tn.Limit(), knee20)); d.Limit != 3 || d.Reason == ReasonClimb {
			t.Fatalf("window %d with the neighbour: %+v, want 3 held", i, d)
		}
	}
	climbs := 0
	for range 3 * p.Recover {
		if d := tn.Observe(clean(tn.Limit(), knee20)); d.Reason == ReasonClimb {
			climbs++
		}
	}
	if climbs == 0 || tn.Limit() <= 3 {
		t.Errorf("the neighbour gone: %d climbs, limit %d; want above the fair share, towards 6", climbs, tn.Limit())
	}

}

// TestCPUBoundAtOnce: CPUBound caps the limit at the CPUs' worth (4 rsyncs a CPU) before
// any window showed them saturated, and the cap holds against probes upwards as the window
// rule's does.
func TestCPUBoundAtOnce(t *testing.T) {
	tn := newTuner(t, DefaultPolicy(2)) // at 4
	d, ok := tn.CPUBound(0.5)
	if !ok || d.Limit != 2 || d.Reason != ReasonCPUBound || d.CPUCap != 2 {
		t.Fatalf("CPUBound(0.5) = %+v, %v; want the limit down to 2, cpu-bound", d, ok)
	}
	for _, d := range drive(tn, knee20, 12) {
		if d.Limit > 2 {
			t.Fatalf("a limit of %d after the cap: %+v", d.Limit, d)
		}
	}
	if _, ok := newTuner(t, DefaultPolicy(2)).CPUBound(2); ok {
		t.Error("CPUBound(2) at a limit of 4 moved it: 2 CPUs run 8")
	}
}

// oneACPU returns p for a copy each of whose rsyncs fills a CPU (PerCPU 1), as a copy
// that compresses or checksums big files does: the CPU rule's mechanics with a cap of one
// rsync a CPU.
func oneACPU(p Policy) Policy {
	p.PerCPU = 1
	return p
}
