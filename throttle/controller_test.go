package throttle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	testPolicy = Policy{Suspend: 80, Resume: 60}
	t0         = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	hot        = step{sample: Sample{CPU: 95}}
	warm       = step{sample: Sample{CPU: 70}}
	cool       = step{sample: Sample{CPU: 20}}
)

// step is one interval of a scripted run.
type step struct {
	sample Sample
	before func(h *harness) // changes the pool before the sample; h.mu is held
}

// harness is a fake Sampler and a fake Target driven by a script of steps.
// Each Sample call is one interval and advances the fake clock by a second.
// Target calls are recorded as "tick:call".
type harness struct {
	mu     sync.Mutex
	steps  []step
	tick   int
	clock  time.Time
	procs  []Proc
	queued int
	errs   map[string]error // error returned for a call such as "pause 3"
	calls  []string
	cancel context.CancelFunc
}

func newHarness(steps ...step) *harness {
	return &harness{steps: steps, clock: t0, errs: map[string]error{}}
}

// addProc adds a running group whose rsync started at t0 plus sec seconds.
func (h *harness) addProc(chunk, sec int) {
	h.procs = append(h.procs, Proc{Chunk: chunk, PID: 1000 + chunk, Started: t0.Add(time.Duration(sec) * time.Second)})
}

func (h *harness) removeProc(chunk int) {
	h.procs = slices.DeleteFunc(h.procs, func(p Proc) bool { return p.Chunk == chunk })
}

func (h *harness) now() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.clock
}

func (h *harness) Sample(ctx context.Context) (Sample, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.tick == len(h.steps) {
		h.cancel()
		return Sample{}, ctx.Err()
	}
	st := h.steps[h.tick]
	h.tick++
	h.clock = h.clock.Add(time.Second)
	if st.before != nil {
		st.before(h)
	}
	return st.sample, nil
}

func (h *harness) Procs() []Proc {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.procs)
}

func (h *harness) Queued() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.queued
}

func (h *harness) Pause(chunk int) error  { return h.signal("pause", chunk, true) }
func (h *harness) Resume(chunk int) error { return h.signal("resume", chunk, false) }

func (h *harness) signal(verb string, chunk int, pause bool) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	call := fmt.Sprintf("%s %d", verb, chunk)
	h.calls = append(h.calls, fmt.Sprintf("%d:%s", h.tick, call))
	if err := h.errs[call]; err != nil {
		if errors.Is(err, syscall.ESRCH) {
			h.removeProc(chunk) // the group has gone
		}
		return err
	}
	i := slices.IndexFunc(h.procs, func(p Proc) bool { return p.Chunk == chunk })
	if i < 0 {
		return fmt.Errorf("chunk %d: %w", chunk, syscall.ESRCH)
	}
	h.procs[i].Paused = pause
	h.procs[i].PausedAt = time.Time{}
	if pause {
		h.procs[i].PausedAt = h.clock
	}
	return nil
}

func (h *harness) SetGate(open bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, fmt.Sprintf("%d:gate %v", h.tick, open))
}

func (h *harness) recorded() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.calls)
}

// wire makes c use h, the test policy and a 1ms interval.
func (h *harness) wire(c *Controller) {
	if c.Policy == (Policy{}) {
		c.Policy = testPolicy
	}
	c.Interval = time.Millisecond
	c.Sampler, c.Target, c.now = h, h, h.now
}

// run runs c against h until the script ends, wiring c first unless it has a
// Target already.
func (h *harness) run(t *testing.T, c *Controller) error {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	h.mu.Lock()
	h.cancel = cancel
	h.mu.Unlock()
	if c.Target == nil {
		h.wire(c)
	}
	return c.Run(ctx)
}

// eventLog records events as short strings.
type eventLog struct{ lines []string }

func (l *eventLog) add(e Event) {
	l.lines = append(l.lines, fmt.Sprintf("%s %d pid=%d reason=%s cpu=%g running=%d suspended=%d",
		e.Action, e.Chunk, e.PID, e.Reason, e.Sample.CPU, e.Running, e.Suspended))
}

func checkLines(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n\t%s\nwant:\n\t%s", what, strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
}

func TestControllerSuspendsNewestFirst(t *testing.T) {
	h := newHarness(hot, hot, hot, hot, warm)
	h.addProc(2, 20) // newest
	h.addProc(1, 10)
	h.addProc(3, 0) // oldest
	var events eventLog
	c := &Controller{OnEvent: events.add}
	if err := h.run(t, c); err != nil {
		t.Fatal(err)
	}
	checkLines(t, "calls", h.recorded(), []string{
		"1:gate false", "1:pause 2",
		"2:pause 1",
		"3:pause 3",
		// tick 4: hot, nothing left to pause; tick 5: warm, hold.
		// Run returns: resume what it paused, oldest pause first, then open the gate.
		"5:resume 2", "5:resume 1", "5:resume 3", "5:gate true",
	})
	checkLines(t, "events", events.lines, []string{
		"suspend 2 pid=1002 reason=cpu cpu=95 running=2 suspended=1",
		"suspend 1 pid=1001 reason=cpu cpu=95 running=1 suspended=2",
		"suspend 3 pid=1003 reason=cpu cpu=95 running=0 suspended=3",
		"resume 2 pid=1002 reason=stop cpu=70 running=1 suspended=2",
		"resume 1 pid=1001 reason=stop cpu=70 running=2 suspended=1",
		"resume 3 pid=1003 reason=stop cpu=70 running=3 suspended=0",
	})
}

func TestControllerResumesOldestPauseFirst(t *testing.T) {
	h := newHarness(hot, hot, warm, cool, warm, cool, cool, cool, cool)
	h.addProc(1, 0)
	h.addProc(2, 1)
	h.addProc(3, 2)
	// Chunk 4 was paused by someone else long ago; it goes first.
	h.procs = append(h.procs, Proc{Chunk: 4, PID: 1004, Started: t0, Paused: true, PausedAt: t0.Add(-time.Hour)})
	h.queued = 2
	var events eventLog
	c := &Controller{OnEvent: events.add}
	if err := h.run(t, c); err != nil {
		t.Fatal(err)
	}
	checkLines(t, "calls", h.recorded(), []string{
		"1:gate false", "1:pause 3",
		"2:pause 2",
		"4:resume 4",
		"6:resume 3",
		"7:resume 2", "7:gate true", // the last paused group resumes, then new chunks may start
		// tick 8 and 9: cool, nothing paused: hold.
		"9:gate true", // Run returns
	})
	checkLines(t, "events", events.lines, []string{
		"suspend 3 pid=1003 reason=cpu cpu=95 running=2 suspended=2",
		"suspend 2 pid=1002 reason=cpu cpu=95 running=1 suspended=3",
		"resume 4 pid=1004 reason= cpu=20 running=2 suspended=2",
		"resume 3 pid=1003 reason= cpu=20 running=3 suspended=1",
		"resume 2 pid=1002 reason= cpu=20 running=4 suspended=0",
	})
}

func TestControllerGate(t *testing.T) {
	h := newHarness(
		warm, // gate starts open and stays open
		hot,  // nothing runs: no pause, but the gate closes
		hot,
		warm, // hold: stays closed
		cool, // nothing runs or is paused, chunks are queued: open
		cool,
		step{sample: Sample{CPU: 90}, before: func(h *harness) { h.addProc(1, 5) }},
		cool,
	)
	h.queued = 3
	if err := h.run(t, &Controller{}); err != nil {
		t.Fatal(err)
	}
	checkLines(t, "calls", h.recorded(), []string{
		"2:gate false",
		"5:gate true",
		"7:gate false", "7:pause 1",
		"8:resume 1", "8:gate true",
		"8:gate true", // Run returns
	})
}

func TestControllerLimitsAndReasons(t *testing.T) {
	h := newHarness(
		step{sample: Sample{CPU: 10, Load: 9, HasLoad: true}},
		step{sample: Sample{CPU: 10, IOPressure: 30, HasIO: true}},
		step{sample: Sample{CPU: 10, Load: 7, HasLoad: true}}, // between 6 and 8: hold
		step{sample: Sample{CPU: 10, Load: 5, HasLoad: true}},
		step{sample: Sample{CPU: 10, Load: 5, IOPressure: 1, HasLoad: true, HasIO: true}},
	)
	h.addProc(1, 0)
	h.addProc(2, 1)
	var events eventLog
	c := &Controller{Policy: Policy{Suspend: 80, Resume: 60, MaxLoad: 8, MaxIOPressure: 20}, OnEvent: events.add}
	if err := h.run(t, c); err != nil {
		t.Fatal(err)
	}
	checkLines(t, "events", events.lines, []string{
		"suspend 2 pid=1002 reason=load cpu=10 running=1 suspended=1",
		"suspend 1 pid=1001 reason=io cpu=10 running=0 suspended=2",
		"resume 2 pid=1002 reason= cpu=10 running=1 suspended=1",
		"resume 1 pid=1001 reason= cpu=10 running=2 suspended=0",
	})
}

func TestControllerOnSample(t *testing.T) {
	h := newHarness(cool, hot, warm)
	var got []float64
	c := &Controller{OnSample: func(s Sample) { got = append(got, s.CPU) }}
	if err := h.run(t, c); err != nil {
		t.Fatal(err)
	}
	if want := []float64{20, 95, 70}; !slices.Equal(got, want) {
		t.Errorf("OnSample got %v, want %v", got, want)
	}
}

func TestControllerResumesAllOnCancel(t *testing.T) {
	h := newHarness(hot, hot, hot, warm)
	for chunk := range 4 {
		h.addProc(chunk, chunk)
	}
	var events eventLog
	c := &Controller{OnEvent: events.add}
	if err := h.run(t, c); err != nil {
		t.Fatalf("Run() = %v, want nil after cancel", err)
	}
	checkLines(t, "calls", h.recorded(), []string{
		"1:gate false", "1:pause 3",
		"2:pause 2",
		"3:pause 1",
		"4:resume 3", "4:resume 2", "4:resume 1", "4:gate true",
	})
	for _, p := range h.Procs() {
		if p.Paused {
			t.Errorf("chunk %d still paused", p.Chunk)
		}
	}
	if n := len(events.lines); n != 6 {
		t.Errorf("%d events, want 3 suspends and 3 resumes", n)
	}
}

func TestControllerResumesAllOnPanic(t *testing.T) {
	for _, always := range []bool{false, true} {
		t.Run(fmt.Sprintf("always=%v", always), func(t *testing.T) {
			h := newHarness(hot, hot, hot, hot)
			h.addProc(1, 0)
			h.addProc(2, 1)
			h.addProc(3, 2)
			var events eventLog
			panicked := false
			c := &Controller{OnEvent: func(e Event) {
				events.add(e)
				if len(events.lines) == 2 || always && len(events.lines) > 2 {
					panicked = true
					panic("boom")
				}
			}}
			func() {
				defer func() {
					if r := recover(); r != "boom" {
						t.Errorf("recovered %v, want boom", r)
					}
				}()
				_ = h.run(t, c)
				t.Error("Run returned without panicking")
			}()
			if !panicked {
				t.Fatal("OnEvent never panicked")
			}
			checkLines(t, "calls", h.recorded(), []string{
				"1:gate false", "1:pause 3",
				"2:pause 2",
				"2:resume 3", "2:resume 2", "2:gate true",
			})
			for _, p := range h.Procs() {
				if p.Paused {
					t.Errorf("chunk %d still paused", p.Chunk)
				}
			}
			want := []string{
				"suspend 3 pid=1003 reason=cpu cpu=95 running=2 suspended=1",
				"suspend 2 pid=1002 reason=cpu cpu=95 running=1 suspended=2",
				"resume 3 pid=1003 reason=stop cpu=95 running=2 suspended=1",
			}
			if !always {
				want = append(want, "resume 2 pid=1002 reason=stop cpu=95 running=3 suspended=0")
			}
			checkLines(t, "events", events.lines, want)
		})
	}
}

func TestControllerGroupGone(t *testing.T) {
	h := newHarness(
		hot, // pause 3: ESRCH, it has just exited
		hot, // pause 2, the newest left
		hot, // pause 1
		step{sample: cool.sample, before: func(h *harness) { h.removeProc(2) }}, // 2 cancelled while paused
		cool, // resume 1: ESRCH
		cool,
	)
	h.addProc(1, 0)
	h.addProc(2, 1)
	h.addProc(3, 2)
	h.errs["pause 3"] = syscall.ESRCH
	h.errs["resume 1"] = fmt.Errorf("kill: %w", syscall.ESRCH)
	var events eventLog
	c := &Controller{OnEvent: events.add}
	if err := h.run(t, c); err != nil {
		t.Fatal(err)
	}
	checkLines(t, "calls", h.recorded(), []string{
		"1:gate false", "1:pause 3",
		"2:pause 2",
		"3:pause 1",
		"4:resume 1", "4:gate true",
		// tick 5, 6: cool, nothing left: hold.
		"6:gate true",
	})
	checkLines(t, "events", events.lines, []string{
		"suspend 2 pid=1002 reason=cpu cpu=95 running=1 suspended=1",
		"suspend 1 pid=1001 reason=cpu cpu=95 running=0 suspended=2",
	})
	// Chunk 2: paused at 2, gone at 4. Chunk 1: paused at 3, gone at 4.
	n, secs := c.Stats()
	if n != 2 || secs != 3 {
		t.Errorf("Stats() = %d, %v, want 2, 3", n, secs)
	}
}

func TestControllerOtherErrorsRetry(t *testing.T) {
	h := newHarness(hot, hot, cool, cool)
	h.addProc(1, 0)
	h.errs["pause 1"] = syscall.EPERM
	var events eventLog
	c := &Controller{OnEvent: events.add}
	if err := h.run(t, c); err != nil {
		t.Fatal(err)
	}
	checkLines(t, "calls", h.recorded(), []string{
		"1:gate false", "1:pause 1",
		"2:pause 1",
		"3:gate true",
		"4:gate true",
	})
	if len(events.lines) != 0 {
		t.Errorf("events %v, want none", events.lines)
	}
}

func TestControllerStats(t *testing.T) {
	h := newHarness(
		hot,  // t=1: pause 2
		hot,  // t=2: pause 1
		cool, // t=3: resume 2 (2s)
		warm, // t=4
		warm, // t=5
	)
	h.addProc(1, 0)
	h.addProc(2, 1)
	c := &Controller{}
	h.wire(c)
	// Stats from another goroutine while Run runs, for the race detector.
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
				c.Stats()
				time.Sleep(100 * time.Microsecond)
			}
		}
	})
	err := h.run(t, c)
	close(done)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	// Chunk 2: 1..3 = 2s. Chunk 1: 2..5 = 3s, resumed when Run returned.
	n, secs := c.Stats()
	if n != 2 || secs != 5 {
		t.Errorf("Stats() = %d, %v, want 2, 5", n, secs)
	}
}

func TestControllerStatsWhilePaused(t *testing.T) {
	h := newHarness(hot, warm, warm)
	h.addProc(1, 0)
	var c Controller
	c.OnSample = func(Sample) {
		// At the start of tick 3 chunk 1 has been paused since t=1.
		h.mu.Lock()
		tick := h.tick
		h.mu.Unlock()
		if tick == 3 {
			if n, secs := c.Stats(); n != 1 || secs != 2 {
				t.Errorf("Stats() during Run = %d, %v, want 1, 2", n, secs)
			}
		}
	}
	if err := h.run(t, &c); err != nil {
		t.Fatal(err)
	}
}

func TestControllerSamplerError(t *testing.T) {
	h := newHarness(hot)
	h.addProc(1, 0)
	boom := errors.New("boom")
	c := &Controller{
		Policy:   testPolicy,
		Interval: time.Millisecond,
		Target:   h,
		now:      h.now,
		Sampler: samplerFunc(func(ctx context.Context) (Sample, error) {
			if h.now().Equal(t0) {
				return h.Sample(ctx)
			}
			return Sample{}, boom
		}),
	}
	err := c.Run(t.Context())
	if !errors.Is(err, boom) {
		t.Fatalf("Run() = %v, want %v", err, boom)
	}
	checkLines(t, "calls", h.recorded(), []string{"1:gate false", "1:pause 1", "1:resume 1", "1:gate true"})
}

type samplerFunc func(context.Context) (Sample, error)

func (f samplerFunc) Sample(ctx context.Context) (Sample, error) { return f(ctx) }

func TestControllerConfig(t *testing.T) {
	h := newHarness()
	tests := []struct {
		name string
		c    *Controller
		want string
	}{
		{"bad policy", &Controller{Policy: Policy{Suspend: 60, Resume: 80}, Interval: time.Second, Sampler: h, Target: h},
			"throttle: resume threshold 80 must be below suspend threshold 60"},
		{"no interval", &Controller{Policy: testPolicy, Sampler: h, Target: h}, "throttle: interval 0s must be positive"},
		{"no sampler", &Controller{Policy: testPolicy, Interval: time.Second, Target: h}, "throttle: no sampler"},
		{"no target", &Controller{Policy: testPolicy, Interval: time.Second, Sampler: h}, "throttle: no target"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.c.Run(t.Context())
			if err == nil || err.Error() != tt.want {
				t.Errorf("Run() = %v, want %q", err, tt.want)
			}
		})
	}
	if calls := h.recorded(); len(calls) != 0 {
		t.Errorf("a misconfigured controller touched the target: %v", calls)
	}
}

// TestControllerStarvedAtTheGate: the last group ends just as it is paused (CI saw it in a
// saturated cgroup), leaving nothing running or paused and chunks queued behind the closed
// gate. After MaxSuspend of that, the gate opens for the next chunk: a busy machine slows
// the copy to one rsync, it never stops it.
func TestControllerStarvedAtTheGate(t *testing.T) {
	h := newHarness(
		step{sample: Sample{CPU: 90}, before: func(h *harness) { h.addProc(1, 0) }}, // 1: pause 1
		step{sample: Sample{CPU: 90}, before: func(h *harness) { h.removeProc(1) }}, // 2: it ended
		hot, hot, // 3, 4: stalled at the gate for 2 s
		hot, // 5: starved: the gate opens
		hot,
	)
	h.queued = 3
	p := testPolicy
	p.MaxSuspend = 2 * time.Second
	if err := h.run(t, &Controller{Policy: p}); err != nil {
		t.Fatal(err)
	}
	calls := h.recorded()
	if !slices.Contains(calls, "1:pause 1") {
		t.Fatalf("calls %v: chunk 1 was never paused", calls)
	}
	opened := slices.IndexFunc(calls, func(c string) bool { return strings.HasSuffix(c, ":gate true") })
	if opened < 0 || calls[opened] == fmt.Sprintf("%d:gate true", len(h.steps)) {
		t.Fatalf("calls %v: the gate never opened while the machine stayed busy", calls)
	}
}
