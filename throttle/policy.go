// Package throttle pauses and resumes rsync process groups when the machine is busy.
package throttle

import (
	"fmt"
	"math"
	"time"
)

// Policy holds the limits that decide when rsync groups are paused and resumed.
//
// Suspend and Resume are CPU use in percent, on two scales: system-wide CPU
// (Sample.CPU) and, inside a cgroup with a CPU quota, the cgroup's use of its
// budget (Sample.CgroupCPU, when Sample.HasCgroup). The machine is hot above
// Suspend on either scale and cool once both are below Resume; between them
// nothing changes, so the gap is the hysteresis that keeps the controller
// from flapping. When the sample also measures prsync's own rsyncs
// (Sample.HasOwn), prsync never throttles itself: see Decide.
//
// MaxLoad (1-minute load average), MaxCPUPressure and MaxIOPressure (Linux
// PSI cpu and io "some avg10", in percent) are optional extra limits; zero
// turns each one off. They use the same hysteresis as CPU: the machine is
// hot above the limit and counts as cool for that limit only below limit ×
// Resume/Suspend. With the default thresholds 80 and 60, --max-load 8 pauses
// above 8 and allows resuming below 6.
type Policy struct {
	Suspend        float64 // pause while CPU % is above this
	Resume         float64 // resume once CPU % is below this
	MaxLoad        float64 // 1-minute load average limit; 0 = off
	MaxIOPressure  float64 // PSI io "some avg10" limit in %; 0 = off
	MaxCPUPressure float64 // PSI cpu "some avg10" limit in %; 0 = off
	// MaxSuspend is how long every group may stay paused while the machine stays busy;
	// then one runs (see Decide). 0 means for ever.
	MaxSuspend time.Duration
}

// Validate reports whether p is usable: both thresholds in (0, 100], Resume
// below Suspend, MaxLoad zero or positive, and MaxIOPressure and
// MaxCPUPressure in [0, 100].
func (p Policy) Validate() error {
	if !(p.Suspend > 0 && p.Suspend <= 100) {
		return fmt.Errorf("suspend threshold %g must be above 0 and at most 100", p.Suspend)
	}
	if !(p.Resume > 0 && p.Resume <= 100) {
		return fmt.Errorf("resume threshold %g must be above 0 and at most 100", p.Resume)
	}
	if p.Resume >= p.Suspend {
		return fmt.Errorf("resume threshold %g must be below suspend threshold %g", p.Resume, p.Suspend)
	}
	if !(p.MaxLoad >= 0) || math.IsInf(p.MaxLoad, 1) {
		return fmt.Errorf("max load %g must be 0 (off) or a positive number", p.MaxLoad)
	}
	if !(p.MaxIOPressure >= 0 && p.MaxIOPressure <= 100) {
		return fmt.Errorf("max io pressure %g must be 0 (off) or a percentage up to 100", p.MaxIOPressure)
	}
	if !(p.MaxCPUPressure >= 0 && p.MaxCPUPressure <= 100) {
		return fmt.Errorf("max cpu pressure %g must be 0 (off) or a percentage up to 100", p.MaxCPUPressure)
	}
	return nil
}

// Sample is one measurement of how busy the machine is.
type Sample struct {
	CPU float64 // system-wide CPU use in percent since the previous sample
	// Own is the part of CPU used by prsync's rsync process groups over
	// the same interval, and by the processes on this machine at the far end
	// of their TCP connections (a local rsync daemon's or sshd's), on the
	// same scale (percent of the whole machine), in [0, CPU]; valid only if
	// HasOwn.
	Own float64
	// Kernel is the part of CPU used by the kernel's threads (writeback, I/O
	// completion, ksoftirqd, a loop device's worker), on the same scale, in
	// [0, CPU-Own]; valid only if HasOwn. It counts neither as prsync's nor as
	// other load: it serves every process's I/O, the copy's own writes the most,
	// and it is no workload to make room for.
	Kernel     float64
	Load       float64 // 1-minute load average; valid only if HasLoad
	IOPressure float64 // PSI io "some avg10" in percent; valid only if HasIO
	HasOwn     bool
	HasLoad    bool
	HasIO      bool

	// CgroupCPU is the CPU use of the cgroup that limits prsync's CPU
	// (see CgroupInfo) since the previous sample, in percent of its
	// budget: 100 means the quota is used up. It is in [0, 100]; valid
	// only if HasCgroup.
	CgroupCPU float64
	// CgroupOwn is the part of CgroupCPU used by prsync's rsync groups, on
	// the same scale, in [0, CgroupCPU]; valid only if HasCgroup and
	// HasOwn.
	CgroupOwn float64
	// CgroupCPUs is the cgroup's CPU budget in CPUs (quota / period, 0.5
	// for half a CPU); valid only if HasCgroup.
	CgroupCPUs float64
	// Throttled is the fraction of the scheduler periods that passed over
	// the interval in which the cgroup ran out of quota (nr_throttled of
	// cpu.stat times the period, over the interval), in [0, 1]: a floor of
	// its use. 0 if the cgroup ran in no period or the kernel does not count
	// them. Valid only if HasCgroup.
	Throttled   float64
	CPUPressure float64 // PSI cpu "some avg10" in percent; valid only if HasCPUPressure
	// HasCgroup says that prsync runs in a cgroup with a CPU quota and the
	// cgroup figures above were measured.
	HasCgroup      bool
	HasCPUPressure bool
}

// State is what the controller knows about the rsync groups when it decides.
type State struct {
	Running   int  // groups running and not paused
	Suspended int  // groups paused
	Queued    int  // chunks waiting to start
	GateOpen  bool // whether new chunks may start now
	// Starved says nothing has run, the machine busy, for longer than the Policy's
	// MaxSuspend, while groups were paused or chunks waited at the closed gate; Trickle that the controller is letting one group run through a
	// busy machine since (see Decide).
	Starved, Trickle bool
}

// Action is what to do to one rsync group.
type Action int

// The actions Decide can return.
const (
	Hold    Action = iota // leave every group as it is
	Suspend               // pause one running group
	Resume                // resume one paused group
)

// String returns "hold", "suspend" or "resume".
func (a Action) String() string {
	switch a {
	case Hold:
		return "hold"
	case Suspend:
		return "suspend"
	case Resume:
		return "resume"
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// Reasons name the limit behind a Decision.
const (
	ReasonCPU         = "cpu"          // system-wide CPU, Sample.CPU
	ReasonCgroupCPU   = "cgroup-cpu"   // the cgroup's CPU budget, Sample.CgroupCPU
	ReasonLoad        = "load"         // Sample.Load
	ReasonCPUPressure = "cpu-pressure" // Sample.CPUPressure
	ReasonIO          = "io"           // Sample.IOPressure
	// ReasonStarved is the resume of a group that every pause had stalled for MaxSuspend.
	ReasonStarved = "starved"
)

// Decision is the result of Decide.
type Decision struct {
	// Action applies to one group at most.
	Action Action
	// GateOpen says whether new chunks may start.
	GateOpen bool
	// Reason names the limit behind the decision: "cpu", "cgroup-cpu",
	// "load", "cpu-pressure" or "io". When the machine is hot it is the
	// first limit exceeded, in that order; between the thresholds it is the
	// first limit not yet below its resume level. The two CPU scales come
	// first together: if both are hot (or both not yet cool), the reason is
	// the one with the higher figure, "cpu" on a tie. It is empty when the
	// machine is cool, since every limit is met.
	Reason string
}

// Decide returns what to do in one interval. It is a pure function.
//
// When the machine is hot, it suspends the one running group (if any) and
// closes the gate. When it is cool, it resumes one paused group (if any), and
// opens the gate only once no group is left paused, so paused work finishes
// before new work starts. In between it holds and keeps the gate as it is.
// One group per interval at most keeps the controller gradual instead of
// pausing or resuming everything at once.
//
// The CPU limit ignores prsync's own rsyncs when the sample measures them
// (HasOwn), so that a copy alone on an idle machine is never paused. With
// others = CPU - Own - Kernel and headroom = 100 - Suspend, CPU is hot only when
// CPU > Suspend and others >= headroom: the machine is over the threshold
// and something other than prsync uses at least the headroom above it (20%
// with the default 80). Below a Suspend of 50 the headroom is Suspend itself
// instead, so others over the threshold on their own always count. CPU is
// cool when CPU < Resume or others < headroom (the other load has gone), and
// between the two it holds. Without HasOwn, CPU is hot above Suspend and
// cool below Resume, counting prsync's own use.
//
// With HasCgroup, the same rule applies on its own to the cgroup's scale,
// with CgroupCPU and CgroupOwn in place of CPU and Own, and Decide acts on
// whichever scale is busier: CPU is hot if either scale is hot (reason
// "cpu" or "cgroup-cpu") and cool only when both are cool. So a cgroup
// that uses up its quota is hot even when the host has room, and prsync's
// own rsyncs filling the quota alone still do not pause them. The load and
// pressure limits count everything, prsync included.
//
// A machine that stays busy must not stall the copy for ever: once every group has been
// paused for MaxSuspend (State.Starved), the one paused longest is resumed (reason
// "starved"), and while the machine stays hot one group keeps running (State.Trickle):
// a busy machine slows the copy down to one rsync, it does not stop it.
func Decide(p Policy, st State, s Sample) Decision {
	if reason := hotReason(p, s); reason != "" {
		d := Decision{Action: Hold, GateOpen: false, Reason: reason}
		switch {
		case st.Trickle && st.Running == 1:
			// hold the one that trickles
		case (st.Trickle || st.Starved) && st.Running == 0 && st.Suspended > 0:
			d.Action, d.Reason = Resume, ReasonStarved
		case (st.Trickle || st.Starved) && st.Running == 0:
			d.GateOpen, d.Reason = true, ReasonStarved // let the next chunk start
		case st.Running > 0:
			d.Action = Suspend
		}
		return d
	}
	if reason := warmReason(p, s); reason != "" {
		return Decision{Action: Hold, GateOpen: st.GateOpen, Reason: reason}
	}
	if st.Suspended > 0 {
		return Decision{Action: Resume, GateOpen: st.Suspended == 1}
	}
	return Decision{Action: Hold, GateOpen: true}
}

// hotReason returns the first limit that s exceeds, or "".
func hotReason(p Policy, s Sample) string {
	host := cpuHot(p, s.CPU, s.Own+s.Kernel, s.HasOwn)
	cg := s.HasCgroup && cpuHot(p, s.CgroupCPU, s.CgroupOwn, s.HasOwn)
	switch {
	case host || cg:
		return cpuReason(host, cg, s)
	case loadOn(p, s) && s.Load > p.MaxLoad:
		return ReasonLoad
	case cpuPressureOn(p, s) && s.CPUPressure > p.MaxCPUPressure:
		return ReasonCPUPressure
	case ioOn(p, s) && s.IOPressure > p.MaxIOPressure:
		return ReasonIO
	}
	return ""
}

// warmReason returns the first limit that s is not yet below the resume level
// of, or "" if the machine is cool.
func warmReason(p Policy, s Sample) string {
	ratio := p.Resume / p.Suspend
	host := !cpuCool(p, s.CPU, s.Own+s.Kernel, s.HasOwn)
	cg := s.HasCgroup && !cpuCool(p, s.CgroupCPU, s.CgroupOwn, s.HasOwn)
	switch {
	case host || cg:
		return cpuReason(host, cg, s)
	case loadOn(p, s) && !(s.Load < p.MaxLoad*ratio):
		return ReasonLoad
	case cpuPressureOn(p, s) && !(s.CPUPressure < p.MaxCPUPressure*ratio):
		return ReasonCPUPressure
	case ioOn(p, s) && !(s.IOPressure < p.MaxIOPressure*ratio):
		return ReasonIO
	}
	return ""
}

// cpuReason names the CPU scale that holds: the host's, the cgroup's, or if
// both, the one with the higher figure (the host's on a tie).
func cpuReason(host, cgroup bool, s Sample) string {
	if cgroup && (!host || s.CgroupCPU > s.CPU) {
		return ReasonCgroupCPU
	}
	return ReasonCPU
}

// cpuHot reports whether cpu % (on either scale) is above Suspend with at
// least the headroom used by something other than prsync's own % (when
// hasOwn says it is measured).
func cpuHot(p Policy, cpu, own float64, hasOwn bool) bool {
	return cpu > p.Suspend && (!hasOwn || cpu-own >= headroom(p))
}

// cpuCool reports whether cpu % (on either scale) is below Resume, or the
// load other than prsync's own % (when measured) is below the headroom.
func cpuCool(p Policy, cpu, own float64, hasOwn bool) bool {
	return cpu < p.Resume || (hasOwn && cpu-own < headroom(p))
}

// headroom is the CPU % that load other than prsync's must reach for prsync
// to pause: the headroom above Suspend, or Suspend itself if that is less
// (so a low threshold does not demand a nearly full machine of others).
func headroom(p Policy) float64 { return min(100-p.Suspend, p.Suspend) }

func loadOn(p Policy, s Sample) bool { return p.MaxLoad > 0 && s.HasLoad }

func ioOn(p Policy, s Sample) bool { return p.MaxIOPressure > 0 && s.HasIO }

func cpuPressureOn(p Policy, s Sample) bool { return p.MaxCPUPressure > 0 && s.HasCPUPressure }
