package throttle

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestHeldWatch drives the timing of the notices under a fake clock: a script of
// intervals (held or not, one second apart unless a gap says otherwise) and the notices
// it must give, with the stall's length.
func TestHeldWatch(t *testing.T) {
	type tick struct {
		at   time.Duration // since t0
		held bool
	}
	// every second from a to b (exclusive), held or not
	span := func(a, b time.Duration, held bool) []tick {
		var out []tick
		for at := a; at < b; at += time.Second {
			out = append(out, tick{at, held})
		}
		return out
	}
	cat := func(parts ...[]tick) []tick { return slices.Concat(parts...) }
	tests := []struct {
		name  string
		ticks []tick
		want  []string // "held 10s at 12s", "running 14s at 16s"
	}{
		{"never held", span(0, 30*time.Second, false), nil},
		{"held 9s: nothing", cat(span(0, 2*time.Second, false), span(2*time.Second, 11*time.Second, true), span(11*time.Second, 20*time.Second, false)), nil},
		{"held 10s: one notice, then running", cat(span(0, 2*time.Second, false), span(2*time.Second, 15*time.Second, true), span(15*time.Second, 17*time.Second, false)),
			[]string{"held 10s at 12s", "running 13s at 15s"}},
		{"held from the first interval", span(0, 11*time.Second, true), []string{"held 10s at 10s"}},
		{"held for ever: again every 5 minutes", span(0, 11*time.Minute, true),
			[]string{"held 10s at 10s", "held 5m10s at 5m10s", "held 10m10s at 10m10s"}},
		{"a second stall within 5 minutes: no notice, and no running notice after it",
			cat(span(0, 11*time.Second, true), span(11*time.Second, 20*time.Second, false),
				span(20*time.Second, 60*time.Second, true), span(60*time.Second, 62*time.Second, false)),
			[]string{"held 10s at 10s", "running 11s at 11s"}},
		{"a second stall 5 minutes after the notice: told again once 10s held",
			cat(span(0, 11*time.Second, true), span(11*time.Second, 5*time.Minute, false),
				span(5*time.Minute, 5*time.Minute+12*time.Second, true), span(5*time.Minute+12*time.Second, 5*time.Minute+13*time.Second, false)),
			[]string{"held 10s at 10s", "running 11s at 11s", "held 10s at 5m10s", "running 12s at 5m12s"}},
		{"a long stall that began within 5 minutes of a notice: told when 5 minutes have passed",
			cat(span(0, 11*time.Second, true), span(11*time.Second, time.Minute, false), span(time.Minute, 6*time.Minute, true)),
			[]string{"held 10s at 10s", "running 11s at 11s", "held 4m10s at 5m10s"}},
		{"sparse intervals: the clock counts, not the intervals",
			[]tick{{0, true}, {4 * time.Second, true}, {12 * time.Second, true}, {13 * time.Second, false}},
			[]string{"held 12s at 12s", "running 13s at 13s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := heldWatch{after: HeldAfter, every: HeldEvery}
			var got []string
			for _, tk := range tt.ticks {
				switch n, d := w.observe(t0.Add(tk.at), tk.held); n {
				case heldNotice:
					got = append(got, fmt.Sprintf("held %v at %v", d, tk.at))
				case runningNotice:
					got = append(got, fmt.Sprintf("running %v at %v", d, tk.at))
				}
			}
			checkLines(t, "notices", got, tt.want)
		})
	}
}

// TestControllerNotices: the controller gives a Held notice once every group has been
// paused for HeldAfter (here every interval is a second of the fake clock), with the
// sample and the reason, and one that they run again when the machine cools or
// MaxSuspend lets one through; none while one runs, and none that they run again when
// the paused groups ended instead.
func TestControllerNotices(t *testing.T) {
	steps := func(n int, s step) []step {
		out := make([]step, n)
		for i := range out {
			out[i] = s
		}
		return out
	}
	withProcs := func(s step) step {
		s.before = func(h *harness) { h.addProc(1, 0); h.addProc(2, 1) }
		return s
	}
	tests := []struct {
		name       string
		maxSuspend time.Duration
		steps      []step
		want       []string
	}{
		{"busy 14 s, then cool", 0,
			slices.Concat([]step{withProcs(hot)}, steps(13, hot), steps(3, cool)),
			// paused at ticks 1 and 2: all held from tick 2, told at 12, resumed at 15
			[]string{"12: held for 10s reason=cpu cpu=95", "15: running for 13s reason= cpu=20"}},
		{"busy, --max-suspend 12s lets one through", 12 * time.Second,
			slices.Concat([]step{withProcs(hot)}, steps(16, hot)),
			[]string{"12: held for 10s reason=cpu cpu=95", "15: running for 13s reason=starved cpu=95"}},
		{"warm holds them too", 0,
			slices.Concat([]step{withProcs(hot), hot}, steps(11, warm)),
			[]string{"12: held for 10s reason=cpu cpu=70"}},
		{"busy 9 s: nothing", 0,
			slices.Concat([]step{withProcs(hot)}, steps(9, hot), steps(3, cool)), nil},
		{"the paused groups end: no running notice", 0,
			slices.Concat([]step{withProcs(hot)}, steps(11, hot),
				[]step{{sample: hot.sample, before: func(h *harness) { h.removeProc(1); h.removeProc(2) }}}, steps(2, hot)),
			[]string{"12: held for 10s reason=cpu cpu=95"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(tt.steps...)
			p := testPolicy
			p.MaxSuspend = tt.maxSuspend
			var got []string
			c := &Controller{Policy: p, OnNotice: func(n Notice) {
				what := "running"
				if n.Held {
					what = "held"
				}
				got = append(got, fmt.Sprintf("%d: %s for %v reason=%s cpu=%g", h.tick, what, n.For, n.Reason, n.Sample.CPU))
			}}
			if err := h.run(t, c); err != nil {
				t.Fatal(err)
			}
			checkLines(t, "notices", got, tt.want)
		})
	}
}

// TestNoticeMessage: the line names the cause with its figure, the limit with its flag,
// and the flags that change it.
func TestNoticeMessage(t *testing.T) {
	p := Policy{Suspend: 80, Resume: 60, MaxLoad: 8, MaxIOPressure: 20, MaxCPUPressure: 30, MaxSuspend: 30 * time.Second}
	tests := []struct {
		name    string
		n       Notice
		warning bool
		want    []string
	}{
		{"cpu, own measured", Notice{Held: true, For: 10 * time.Second, Reason: ReasonCPU, Policy: p,
			Sample: Sample{CPU: 97.4, Own: 2, Kernel: 0.5, HasOwn: true}}, true,
			[]string{"every rsync has been paused for 10s: the machine's CPU use is 97% (95% not the copy's), above --suspend-threshold 80; ",
				"raise --suspend-threshold (at most 100)", "lower --max-suspend (30s: then one rsync runs on a busy machine)", "--no-throttle"}},
		{"cpu, own not measured", Notice{Held: true, For: 10400 * time.Millisecond, Policy: p, Sample: Sample{CPU: 91}}, true,
			[]string{"paused for 10s: the machine's CPU use is 91%, above --suspend-threshold 80;"}},
		{"cpu between the thresholds", Notice{Held: true, For: 5 * time.Minute, Policy: p, Sample: Sample{CPU: 70}}, true,
			[]string{"paused for 5m0s: the machine's CPU use is 70%, not yet below --resume-threshold 60;"}},
		{"cgroup", Notice{Held: true, For: 10 * time.Second, Policy: p,
			Sample: Sample{CPU: 30, CgroupCPU: 99, CgroupCPUs: 0.5, HasCgroup: true}}, true,
			[]string{"the cgroup's CPU use is 99% of its quota of 0.5 CPUs, above --suspend-threshold 80"}},
		{"load", Notice{Held: true, For: 10 * time.Second, Policy: p, Sample: Sample{CPU: 10, Load: 9.1, HasLoad: true}}, true,
			[]string{"the 1-minute load average is 9.10, above --max-load 8;", "raise --max-load (or drop it)"}},
		{"load between", Notice{Held: true, For: 10 * time.Second, Policy: p, Sample: Sample{CPU: 10, Load: 7, HasLoad: true}}, true,
			[]string{"the 1-minute load average is 7.00, not yet below 6, where --max-load 8 resumes;"}},
		{"cpu pressure", Notice{Held: true, For: 10 * time.Second, Policy: p, Sample: Sample{CPU: 10, CPUPressure: 41.25, HasCPUPressure: true}}, true,
			[]string{`PSI cpu "some avg10" is 41.2%, above --max-cpu-pressure 30;`, "raise --max-cpu-pressure (or drop it)"}},
		{"io", Notice{Held: true, For: 10 * time.Second, Policy: p, Sample: Sample{CPU: 10, IOPressure: 35, HasIO: true}}, true,
			[]string{`PSI io "some avg10" is 35.0%, above --max-io-pressure 20;`, "raise --max-io-pressure (or drop it)"}},
		{"no --max-suspend", Notice{Held: true, For: 10 * time.Second, Policy: Policy{Suspend: 30, Resume: 20}, Sample: Sample{CPU: 100}}, true,
			[]string{"above --suspend-threshold 30;", "set --max-suspend (0 now: paused for as long as the machine is busy)"}},
		{"cooled", Notice{For: 14 * time.Second, Policy: p, Sample: Sample{CPU: 20}}, false,
			[]string{"the throttle lets the rsyncs run again after 14s of all paused: the machine is below its limits"}},
		{"starved", Notice{For: 30 * time.Second, Reason: ReasonStarved, Policy: p, Sample: Sample{CPU: 99}}, false,
			[]string{"the throttle lets one rsync run after 30s of all paused (--max-suspend 30s); the machine is still busy"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg, warning := tt.n.Message()
			if warning != tt.warning || strings.Contains(msg, "\n") {
				t.Errorf("Message() = %q, warning %v; want warning %v and one line", msg, warning, tt.warning)
			}
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("Message() = %q\nwant it to hold %q", msg, w)
				}
			}
		})
	}
}

// TestCauseCool: a sample within every limit has no cause.
func TestCauseCool(t *testing.T) {
	p := Policy{Suspend: 80, Resume: 60, MaxLoad: 8}
	if c := Cause(p, Sample{CPU: 30, Load: 2, HasLoad: true}); c != "" {
		t.Errorf("Cause of a cool machine = %q", c)
	}
}
