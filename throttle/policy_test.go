package throttle

import (
	"math"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		p    Policy
		want string // "" means valid
	}{
		{"defaults", Policy{Suspend: 80, Resume: 60}, ""},
		{"all limits", Policy{Suspend: 80, Resume: 60, MaxLoad: 8, MaxIOPressure: 20}, ""},
		{"edges", Policy{Suspend: 100, Resume: 99.5, MaxIOPressure: 100}, ""},
		{"tiny", Policy{Suspend: 0.2, Resume: 0.1}, ""},
		{"suspend zero", Policy{Suspend: 0, Resume: 60}, "suspend threshold 0 must be above 0 and at most 100"},
		{"suspend over 100", Policy{Suspend: 101, Resume: 60}, "suspend threshold 101 must be above 0 and at most 100"},
		{"suspend NaN", Policy{Suspend: math.NaN(), Resume: 60}, "suspend threshold NaN must be above 0 and at most 100"},
		{"resume zero", Policy{Suspend: 80, Resume: 0}, "resume threshold 0 must be above 0 and at most 100"},
		{"resume negative", Policy{Suspend: 80, Resume: -5}, "resume threshold -5 must be above 0 and at most 100"},
		{"resume NaN", Policy{Suspend: 80, Resume: math.NaN()}, "resume threshold NaN must be above 0 and at most 100"},
		{"resume above suspend", Policy{Suspend: 60, Resume: 80}, "resume threshold 80 must be below suspend threshold 60"},
		{"resume equals suspend", Policy{Suspend: 70, Resume: 70}, "resume threshold 70 must be below suspend threshold 70"},
		{"max load negative", Policy{Suspend: 80, Resume: 60, MaxLoad: -1}, "max load -1 must be 0 (off) or a positive number"},
		{"max load NaN", Policy{Suspend: 80, Resume: 60, MaxLoad: math.NaN()}, "max load NaN must be 0 (off) or a positive number"},
		{"max load Inf", Policy{Suspend: 80, Resume: 60, MaxLoad: math.Inf(1)}, "max load +Inf must be 0 (off) or a positive number"},
		{"max io negative", Policy{Suspend: 80, Resume: 60, MaxIOPressure: -0.5}, "max io pressure -0.5 must be 0 (off) or a percentage up to 100"},
		{"max io over 100", Policy{Suspend: 80, Resume: 60, MaxIOPressure: 150}, "max io pressure 150 must be 0 (off) or a percentage up to 100"},
		{"max cpu pressure set", Policy{Suspend: 80, Resume: 60, MaxCPUPressure: 100}, ""},
		{"max cpu pressure negative", Policy{Suspend: 80, Resume: 60, MaxCPUPressure: -1}, "max cpu pressure -1 must be 0 (off) or a percentage up to 100"},
		{"max cpu pressure over 100", Policy{Suspend: 80, Resume: 60, MaxCPUPressure: 100.5}, "max cpu pressure 100.5 must be 0 (off) or a percentage up to 100"},
		{"max cpu pressure NaN", Policy{Suspend: 80, Resume: 60, MaxCPUPressure: math.NaN()}, "max cpu pressure NaN must be 0 (off) or a percentage up to 100"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.p.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tt.want != "" && err == nil:
				t.Fatalf("Validate() = nil, want %q", tt.want)
			case tt.want != "" && err.Error() != tt.want:
				t.Fatalf("Validate() = %q, want %q", err, tt.want)
			}
		})
	}
}

func TestActionString(t *testing.T) {
	for a, want := range map[Action]string{Hold: "hold", Suspend: "suspend", Resume: "resume", Action(7): "Action(7)"} {
		if got := a.String(); got != want {
			t.Errorf("Action(%d).String() = %q, want %q", int(a), got, want)
		}
	}
}

func TestDecide(t *testing.T) {
	cpuOnly := Policy{Suspend: 80, Resume: 60}
	// Ratio 60/80 = 0.75: load resumes below 6, io below 15.
	limits := Policy{Suspend: 80, Resume: 60, MaxLoad: 8, MaxIOPressure: 20}

	cpu := func(c float64) Sample { return Sample{CPU: c} }
	load := func(c, l float64) Sample { return Sample{CPU: c, Load: l, HasLoad: true} }
	iop := func(c, p float64) Sample { return Sample{CPU: c, IOPressure: p, HasIO: true} }
	own := func(c, o float64) Sample { return Sample{CPU: c, Own: o, HasOwn: true} }
	// Ratio 0.75: cpu pressure resumes below 30.
	cpuPSI := Policy{Suspend: 80, Resume: 60, MaxLoad: 8, MaxCPUPressure: 40, MaxIOPressure: 20}
	cpup := func(c, p float64) Sample { return Sample{CPU: c, CPUPressure: p, HasCPUPressure: true} }
	// A cgroup with half a CPU: host CPU c, the cgroup's use g of its budget.
	cg := func(c, g float64) Sample { return Sample{CPU: c, CgroupCPU: g, CgroupCPUs: 0.5, HasCgroup: true} }
	// The same with prsync's own use o on the host and og in the cgroup.
	cgOwn := func(c, o, g, og float64) Sample {
		return Sample{CPU: c, Own: o, CgroupCPU: g, CgroupOwn: og, CgroupCPUs: 0.5, HasCgroup: true, HasOwn: true}
	}

	tests := []struct {
		name string
		p    Policy
		st   State
		s    Sample
		want Decision
	}{
		// Hot on CPU.
		{"hot suspends one", cpuOnly, State{Running: 3, GateOpen: true}, cpu(95), Decision{Suspend, false, "cpu"}},
		{"hot with some paused suspends one more", cpuOnly, State{Running: 1, Suspended: 2}, cpu(81), Decision{Suspend, false, "cpu"}},
		{"hot nothing running holds", cpuOnly, State{Suspended: 2}, cpu(99), Decision{Hold, false, "cpu"}},
		{"hot closes the gate with work queued", cpuOnly, State{Queued: 5, GateOpen: true}, cpu(90), Decision{Hold, false, "cpu"}},
		{"hot at 100", cpuOnly, State{Running: 1, GateOpen: true}, cpu(100), Decision{Suspend, false, "cpu"}},

		// Between the thresholds: hold, the gate stays as it was.
		{"at suspend threshold holds", cpuOnly, State{Running: 2, GateOpen: true}, cpu(80), Decision{Hold, true, "cpu"}},
		{"between keeps gate open", cpuOnly, State{Running: 2, GateOpen: true}, cpu(70), Decision{Hold, true, "cpu"}},
		{"between keeps gate closed", cpuOnly, State{Running: 1, Suspended: 2}, cpu(70), Decision{Hold, false, "cpu"}},
		{"at resume threshold holds", cpuOnly, State{Suspended: 2}, cpu(60), Decision{Hold, false, "cpu"}},
		{"NaN cpu holds", cpuOnly, State{Running: 1, Suspended: 1}, cpu(math.NaN()), Decision{Hold, false, "cpu"}},

		// Cool: resume one; the gate opens when nothing stays paused.
		{"cool resumes one, gate stays closed", cpuOnly, State{Running: 1, Suspended: 3}, cpu(30), Decision{Resume, false, ""}},
		{"cool resumes the last, gate opens", cpuOnly, State{Running: 1, Suspended: 1}, cpu(59.9), Decision{Resume, true, ""}},
		{"cool nothing paused opens the gate", cpuOnly, State{Running: 2}, cpu(10), Decision{Hold, true, ""}},
		{"cool idle with queue opens the gate", cpuOnly, State{Queued: 4}, cpu(0), Decision{Hold, true, ""}},
		{"cool already open", cpuOnly, State{Running: 2, Queued: 1, GateOpen: true}, cpu(5), Decision{Hold, true, ""}},

		// Load average.
		{"load hot", limits, State{Running: 2, GateOpen: true}, load(10, 9), Decision{Suspend, false, "load"}},
		{"load at limit is not hot", limits, State{Running: 2, GateOpen: true}, load(10, 8), Decision{Hold, true, "load"}},
		{"load between holds", limits, State{Suspended: 1}, load(10, 7), Decision{Hold, false, "load"}},
		{"load at resume level holds", limits, State{Suspended: 1}, load(10, 6), Decision{Hold, false, "load"}},
		{"load below resume level resumes", limits, State{Suspended: 1}, load(10, 5.9), Decision{Resume, true, ""}},
		{"load unavailable is ignored", limits, State{Suspended: 1}, Sample{CPU: 10, Load: 50}, Decision{Resume, true, ""}},
		{"load off is ignored", cpuOnly, State{Running: 1, GateOpen: true}, load(10, 50), Decision{Hold, true, ""}},

		// IO pressure.
		{"io hot", limits, State{Running: 2, GateOpen: true}, iop(10, 25), Decision{Suspend, false, "io"}},
		{"io at limit is not hot", limits, State{Running: 2, GateOpen: true}, iop(10, 20), Decision{Hold, true, "io"}},
		{"io between holds", limits, State{Suspended: 2}, iop(10, 17), Decision{Hold, false, "io"}},
		{"io at resume level holds", limits, State{Suspended: 2}, iop(10, 15), Decision{Hold, false, "io"}},
		{"io below resume level resumes", limits, State{Suspended: 2}, iop(10, 14), Decision{Resume, false, ""}},
		{"io unavailable is ignored", limits, State{Running: 1}, Sample{CPU: 10, IOPressure: 90}, Decision{Hold, true, ""}},
		{"io off is ignored", cpuOnly, State{Running: 1}, iop(10, 90), Decision{Hold, true, ""}},

		// Which limit is reported.
		{"cpu named before load", limits, State{Running: 1}, Sample{CPU: 90, Load: 20, HasLoad: true}, Decision{Suspend, false, "cpu"}},
		{"load named before io", limits, State{Running: 1}, Sample{CPU: 10, Load: 20, HasLoad: true, IOPressure: 90, HasIO: true}, Decision{Suspend, false, "load"}},
		{"hot io beats warm cpu", limits, State{Running: 1, GateOpen: true}, Sample{CPU: 70, IOPressure: 90, HasIO: true}, Decision{Suspend, false, "io"}},
		{"warm cpu named before warm io", limits, State{Suspended: 1}, Sample{CPU: 70, IOPressure: 17, HasIO: true}, Decision{Hold, false, "cpu"}},
		{"only io warm", limits, State{Suspended: 1}, Sample{CPU: 10, Load: 1, HasLoad: true, IOPressure: 17, HasIO: true}, Decision{Hold, false, "io"}},
		{"all cool", limits, State{Suspended: 1}, Sample{CPU: 10, Load: 1, HasLoad: true, IOPressure: 1, HasIO: true}, Decision{Resume, true, ""}},

		// prsync's own CPU (HasOwn): others = CPU - Own, headroom = 100 - Suspend = 20.
		{"copy alone at 100 holds, gate open", cpuOnly, State{Running: 2, Queued: 3, GateOpen: true}, own(100, 98), Decision{Hold, true, ""}},
		{"copy alone opens a closed gate", cpuOnly, State{Running: 2, Queued: 3}, own(100, 98), Decision{Hold, true, ""}},
		{"hog 50 and copy 50 suspends", cpuOnly, State{Running: 2, GateOpen: true}, own(100, 50), Decision{Suspend, false, "cpu"}},
		{"others exactly at headroom suspends", cpuOnly, State{Running: 2, GateOpen: true}, own(90, 70), Decision{Suspend, false, "cpu"}},
		{"others just below headroom is cool", cpuOnly, State{Running: 2, GateOpen: true}, own(90, 70.5), Decision{Hold, true, ""}},
		{"at suspend threshold with others holds", cpuOnly, State{Running: 2, GateOpen: true}, own(80, 10), Decision{Hold, true, "cpu"}},
		{"paused, others 10 resumes", cpuOnly, State{Running: 1, Suspended: 2}, own(75, 65), Decision{Resume, false, ""}},
		{"paused, others 10 resumes the last", cpuOnly, State{Suspended: 1}, own(10, 0), Decision{Resume, true, ""}},
		{"paused, others still 70 holds", cpuOnly, State{Suspended: 2}, own(70, 0), Decision{Hold, false, "cpu"}},
		{"paused, others 50 plus copy 20 holds", cpuOnly, State{Running: 1, Suspended: 1}, own(70, 20), Decision{Hold, false, "cpu"}},
		{"cool below resume whatever others", cpuOnly, State{Suspended: 1}, own(59, 0), Decision{Resume, true, ""}},
		// Kernel threads (writeback, ksoftirqd) count neither as prsync's nor as others.
		{"copy and its writeback at 99 holds, gate open", cpuOnly, State{Running: 7, Queued: 3, GateOpen: true}, Sample{CPU: 99, Own: 75, Kernel: 10, HasOwn: true}, Decision{Hold, true, ""}},
		{"the same without Kernel suspends", cpuOnly, State{Running: 7, Queued: 3, GateOpen: true}, own(99, 75), Decision{Suspend, false, "cpu"}},
		{"kernel does not hide a hog", cpuOnly, State{Running: 2, GateOpen: true}, Sample{CPU: 100, Own: 40, Kernel: 10, HasOwn: true}, Decision{Suspend, false, "cpu"}},
		{"kernel threads alone resume", cpuOnly, State{Suspended: 1}, Sample{CPU: 85, Own: 20, Kernel: 60, HasOwn: true}, Decision{Resume, true, ""}},
		{"kernel does not cool the cgroup", cpuOnly, State{Running: 1, GateOpen: true}, Sample{CPU: 30, Own: 10, Kernel: 15, CgroupCPU: 100, CgroupOwn: 10, CgroupCPUs: 0.5, HasCgroup: true, HasOwn: true}, Decision{Suspend, false, "cgroup-cpu"}},
		{"own does not hide a hot load", limits, State{Running: 1, GateOpen: true}, Sample{CPU: 100, Own: 100, HasOwn: true, Load: 9, HasLoad: true}, Decision{Suspend, false, "load"}},
		{"own does not hide a warm io", limits, State{Suspended: 1}, Sample{CPU: 100, Own: 100, HasOwn: true, IOPressure: 17, HasIO: true}, Decision{Hold, false, "io"}},
		{"NaN own holds", cpuOnly, State{Running: 1, Suspended: 1}, own(95, math.NaN()), Decision{Hold, false, "cpu"}},
		{"suspend 100 never hot", Policy{Suspend: 100, Resume: 50}, State{Running: 1, GateOpen: true}, own(100, 0), Decision{Hold, true, "cpu"}},
		{"low threshold: others over it suspend", Policy{Suspend: 30, Resume: 20}, State{Running: 1, GateOpen: true}, own(100, 50), Decision{Suspend, false, "cpu"}},
		{"low threshold: others under it are cool", Policy{Suspend: 30, Resume: 20}, State{Suspended: 1}, own(100, 75), Decision{Resume, true, ""}},
		{"threshold 1: any other load suspends", Policy{Suspend: 1, Resume: 0.5}, State{Running: 2, GateOpen: true}, own(50, 45), Decision{Suspend, false, "cpu"}},
		// Without HasOwn, Own is ignored and prsync's use counts, as before.
		{"no own: copy alone at 100 suspends", cpuOnly, State{Running: 2, GateOpen: true}, Sample{CPU: 100, Own: 98}, Decision{Suspend, false, "cpu"}},
		{"no own: between holds", cpuOnly, State{Suspended: 1}, Sample{CPU: 70, Own: 65}, Decision{Hold, false, "cpu"}},

		// CPU pressure, with the same hysteresis as io.
		{"cpu pressure hot", cpuPSI, State{Running: 2, GateOpen: true}, cpup(10, 45), Decision{Suspend, false, "cpu-pressure"}},
		{"cpu pressure at limit is not hot", cpuPSI, State{Running: 2, GateOpen: true}, cpup(10, 40), Decision{Hold, true, "cpu-pressure"}},
		{"cpu pressure between holds", cpuPSI, State{Suspended: 1}, cpup(10, 35), Decision{Hold, false, "cpu-pressure"}},
		{"cpu pressure at resume level holds", cpuPSI, State{Suspended: 1}, cpup(10, 30), Decision{Hold, false, "cpu-pressure"}},
		{"cpu pressure below resume level resumes", cpuPSI, State{Suspended: 1}, cpup(10, 29.9), Decision{Resume, true, ""}},
		{"cpu pressure unavailable is ignored", cpuPSI, State{Running: 1}, Sample{CPU: 10, CPUPressure: 90}, Decision{Hold, true, ""}},
		{"cpu pressure off is ignored", limits, State{Running: 1}, cpup(10, 90), Decision{Hold, true, ""}},
		{"NaN cpu pressure holds", cpuPSI, State{Suspended: 1}, cpup(10, math.NaN()), Decision{Hold, false, "cpu-pressure"}},
		{"load named before cpu pressure", cpuPSI, State{Running: 1}, Sample{CPU: 10, Load: 20, HasLoad: true, CPUPressure: 90, HasCPUPressure: true}, Decision{Suspend, false, "load"}},
		{"cpu pressure named before io", cpuPSI, State{Running: 1}, Sample{CPU: 10, CPUPressure: 90, HasCPUPressure: true, IOPressure: 90, HasIO: true}, Decision{Suspend, false, "cpu-pressure"}},
		{"hot io beats warm cpu pressure", cpuPSI, State{Running: 1}, Sample{CPU: 10, CPUPressure: 35, HasCPUPressure: true, IOPressure: 90, HasIO: true}, Decision{Suspend, false, "io"}},
		{"warm cpu pressure named before warm io", cpuPSI, State{Suspended: 1}, Sample{CPU: 10, CPUPressure: 35, HasCPUPressure: true, IOPressure: 17, HasIO: true}, Decision{Hold, false, "cpu-pressure"}},
		{"own does not hide cpu pressure", cpuPSI, State{Running: 1, GateOpen: true}, Sample{CPU: 100, Own: 100, HasOwn: true, CPUPressure: 50, HasCPUPressure: true}, Decision{Suspend, false, "cpu-pressure"}},

		// A cgroup with a CPU quota (HasCgroup): CgroupCPU is % of the budget.
		{"cgroup hot, host idle suspends", cpuOnly, State{Running: 2, GateOpen: true}, cg(25, 100), Decision{Suspend, false, "cgroup-cpu"}},
		{"cgroup hot closes the gate", cpuOnly, State{Queued: 2, GateOpen: true}, cg(25, 95), Decision{Hold, false, "cgroup-cpu"}},
		{"cgroup at suspend threshold holds", cpuOnly, State{Running: 2, GateOpen: true}, cg(25, 80), Decision{Hold, true, "cgroup-cpu"}},
		{"cgroup between keeps gate closed", cpuOnly, State{Running: 1, Suspended: 1}, cg(25, 70), Decision{Hold, false, "cgroup-cpu"}},
		{"cgroup at resume threshold holds", cpuOnly, State{Suspended: 1}, cg(25, 60), Decision{Hold, false, "cgroup-cpu"}},
		{"cgroup cool resumes", cpuOnly, State{Suspended: 1}, cg(25, 59.9), Decision{Resume, true, ""}},
		{"cgroup cool, host hot suspends on cpu", cpuOnly, State{Running: 1, GateOpen: true}, cg(90, 10), Decision{Suspend, false, "cpu"}},
		{"cgroup cool, host warm holds on cpu", cpuOnly, State{Suspended: 1}, cg(70, 10), Decision{Hold, false, "cpu"}},
		{"cgroup warm, host cool holds on cgroup", cpuOnly, State{Suspended: 1}, cg(10, 70), Decision{Hold, false, "cgroup-cpu"}},
		{"cgroup hot, host warm", cpuOnly, State{Running: 1, GateOpen: true}, cg(70, 95), Decision{Suspend, false, "cgroup-cpu"}},
		{"host hot, cgroup warm", cpuOnly, State{Running: 1, GateOpen: true}, cg(95, 70), Decision{Suspend, false, "cpu"}},
		{"both hot, cgroup higher", cpuOnly, State{Running: 1, GateOpen: true}, cg(90, 100), Decision{Suspend, false, "cgroup-cpu"}},
		{"both hot, host higher", cpuOnly, State{Running: 1, GateOpen: true}, cg(95, 90), Decision{Suspend, false, "cpu"}},
		{"both hot, tie names cpu", cpuOnly, State{Running: 1, GateOpen: true}, cg(90, 90), Decision{Suspend, false, "cpu"}},
		{"both warm, cgroup higher", cpuOnly, State{Suspended: 1}, cg(65, 75), Decision{Hold, false, "cgroup-cpu"}},
		{"both cool resumes", cpuOnly, State{Suspended: 1}, cg(30, 50), Decision{Resume, true, ""}},
		{"NaN cgroup holds", cpuOnly, State{Running: 1, Suspended: 1}, cg(10, math.NaN()), Decision{Hold, false, "cgroup-cpu"}},
		{"no HasCgroup: CgroupCPU is ignored", cpuOnly, State{Running: 1, GateOpen: true}, Sample{CPU: 10, CgroupCPU: 100, CgroupCPUs: 0.5}, Decision{Hold, true, ""}},
		{"cgroup-cpu named before load", limits, State{Running: 1}, Sample{CPU: 10, CgroupCPU: 100, HasCgroup: true, Load: 20, HasLoad: true}, Decision{Suspend, false, "cgroup-cpu"}},
		{"hot load beats warm cgroup", limits, State{Running: 1}, Sample{CPU: 10, CgroupCPU: 70, HasCgroup: true, Load: 20, HasLoad: true}, Decision{Suspend, false, "load"}},
		{"warm cgroup named before warm io", limits, State{Suspended: 1}, Sample{CPU: 10, CgroupCPU: 70, HasCgroup: true, IOPressure: 17, HasIO: true}, Decision{Hold, false, "cgroup-cpu"}},

		// prsync's own use on the cgroup's scale: others = CgroupCPU - CgroupOwn, headroom 20.
		{"copy alone fills the quota: holds, gate open", cpuOnly, State{Running: 2, Queued: 3, GateOpen: true}, cgOwn(25, 24, 100, 96), Decision{Hold, true, ""}},
		{"copy alone fills the quota: opens a closed gate", cpuOnly, State{Running: 2, Queued: 3}, cgOwn(25, 24, 100, 96), Decision{Hold, true, ""}},
		{"hog and copy share the quota: suspends", cpuOnly, State{Running: 2, GateOpen: true}, cgOwn(25, 12, 100, 50), Decision{Suspend, false, "cgroup-cpu"}},
		{"cgroup others exactly at headroom suspends", cpuOnly, State{Running: 2, GateOpen: true}, cgOwn(25, 17, 90, 70), Decision{Suspend, false, "cgroup-cpu"}},
		{"cgroup others just below headroom is cool", cpuOnly, State{Running: 2, GateOpen: true}, cgOwn(25, 17, 90, 70.5), Decision{Hold, true, ""}},
		{"paused, cgroup others gone resumes", cpuOnly, State{Running: 1, Suspended: 2}, cgOwn(20, 16, 75, 65), Decision{Resume, false, ""}},
		{"paused, cgroup others still 70 holds", cpuOnly, State{Suspended: 2}, cgOwn(20, 0, 70, 0), Decision{Hold, false, "cgroup-cpu"}},
		{"host own-cool does not hide a hot cgroup", cpuOnly, State{Running: 1, GateOpen: true}, cgOwn(90, 80, 100, 40), Decision{Suspend, false, "cgroup-cpu"}},
		{"cgroup own-cool does not hide a hot host", cpuOnly, State{Running: 1, GateOpen: true}, cgOwn(100, 50, 100, 100), Decision{Suspend, false, "cpu"}},
		{"both own-cool holds", cpuOnly, State{Running: 1, GateOpen: true}, cgOwn(100, 90, 100, 95), Decision{Hold, true, ""}},
		{"no own: copy alone in the cgroup suspends", cpuOnly, State{Running: 1, GateOpen: true}, Sample{CPU: 25, CgroupCPU: 100, CgroupOwn: 100, HasCgroup: true}, Decision{Suspend, false, "cgroup-cpu"}},
		{"NaN cgroup own holds", cpuOnly, State{Running: 1, Suspended: 1}, cgOwn(10, 0, 95, math.NaN()), Decision{Hold, false, "cgroup-cpu"}},
		{"suspend 100: a full cgroup is never hot", Policy{Suspend: 100, Resume: 50}, State{Running: 1, GateOpen: true}, cg(25, 100), Decision{Hold, true, "cgroup-cpu"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Decide(tt.p, tt.st, tt.s); got != tt.want {
				t.Errorf("Decide(%+v, %+v, %+v) = %+v, want %+v", tt.p, tt.st, tt.s, got, tt.want)
			}
		})
	}
}

// TestDecideSequence applies each decision to a model of the pool, one call
// per interval, and checks that the controller moves one group at a time and
// holds between the thresholds.
func TestDecideSequence(t *testing.T) {
	p := Policy{Suspend: 80, Resume: 60}
	st := State{Running: 3, Queued: 2, GateOpen: true}
	steps := []struct {
		cpu  float64
		want Action
		st   State // after applying the action
	}{
		{50, Hold, State{Running: 3, Queued: 2, GateOpen: true}},
		{90, Suspend, State{Running: 2, Suspended: 1, Queued: 2}},
		{95, Suspend, State{Running: 1, Suspended: 2, Queued: 2}},
		{75, Hold, State{Running: 1, Suspended: 2, Queued: 2}}, // hysteresis: no resume yet
		{61, Hold, State{Running: 1, Suspended: 2, Queued: 2}},
		{85, Suspend, State{Suspended: 3, Queued: 2}},
		{99, Hold, State{Suspended: 3, Queued: 2}}, // nothing left to pause
		{79, Hold, State{Suspended: 3, Queued: 2}},
		{40, Resume, State{Running: 1, Suspended: 2, Queued: 2}},
		{40, Resume, State{Running: 2, Suspended: 1, Queued: 2}},
		{70, Hold, State{Running: 2, Suspended: 1, Queued: 2}},
		{40, Resume, State{Running: 3, Queued: 2, GateOpen: true}}, // the last resume opens the gate
		{40, Hold, State{Running: 3, Queued: 2, GateOpen: true}},
		{70, Hold, State{Running: 3, Queued: 2, GateOpen: true}},
	}
	for i, step := range steps {
		d := Decide(p, st, Sample{CPU: step.cpu})
		if d.Action != step.want {
			t.Fatalf("step %d (cpu %v): action %v, want %v", i, step.cpu, d.Action, step.want)
		}
		switch d.Action {
		case Suspend:
			st.Running--
			st.Suspended++
		case Resume:
			st.Running++
			st.Suspended--
		}
		st.GateOpen = d.GateOpen
		if st != step.st {
			t.Fatalf("step %d (cpu %v): state %+v, want %+v", i, step.cpu, st, step.st)
		}
	}
}

// TestDecideStarved: a machine that stays busy slows the copy to one rsync, never to none.
func TestDecideStarved(t *testing.T) {
	p := Policy{Suspend: 80, Resume: 60, MaxSuspend: 30 * time.Second}
	hot := Sample{CPU: 95}
	tests := []struct {
		name   string
		st     State
		action Action
		gate   bool
		reason string
	}{
		{"paused, not yet starved", State{Suspended: 3}, Hold, false, ReasonCPU},
		{"starved: resume one", State{Suspended: 3, Starved: true}, Resume, false, ReasonStarved},
		{"trickling: hold the one", State{Running: 1, Suspended: 2, Trickle: true}, Hold, false, ReasonCPU},
		{"trickling, the one ended: the next paused one", State{Suspended: 2, Trickle: true}, Resume, false, ReasonStarved},
		{"trickling, none paused: a new chunk may start", State{Trickle: true}, Hold, true, ReasonStarved},
		{"starved at the closed gate, none paused: a new chunk may start", State{Queued: 2, Starved: true}, Hold, true, ReasonStarved},
		{"trickling, more running: suspend", State{Running: 3, Trickle: true}, Suspend, false, ReasonCPU},
	}
	for _, tt := range tests {
		d := Decide(p, tt.st, hot)
		if d.Action != tt.action || d.GateOpen != tt.gate || d.Reason != tt.reason {
			t.Errorf("%s: %+v", tt.name, d)
		}
	}
	if d := Decide(p, State{Suspended: 2, Trickle: true}, Sample{CPU: 10}); d.Action != Resume || d.Reason != "" {
		t.Errorf("cool while trickling: %+v, want a plain resume", d)
	}
}
