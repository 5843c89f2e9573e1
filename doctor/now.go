package doctor

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/prsync/prsync/throttle"
)

// NameNow is the check of how busy the machine is now, against the run's throttle.
const NameNow = "throttle-now"

// NowSample is how long LookNow measures: the throttle's first decision in a run comes
// after one --throttle-interval (1 s by default).
const NowSample = time.Second

// NowFacts is one sample of the machine, taken as the run's throttle takes its samples,
// with the limits asked for.
type NowFacts struct {
	Sample  throttle.Sample
	Over    time.Duration // the sample's length
	Err     error         // the sample could not be taken
	Policy  throttle.Policy
	Off     bool // --no-throttle
	Skipped bool // ctx ended before the sample was taken
}

// LookNow measures the machine over d with the sampler the run uses (its own CPU counted
// as at the start of a run, before the first rsync), and reads the load average and the
// PSI figures whether or not a limit asks for them, so that the check can show them.
func LookNow(ctx context.Context, p throttle.Policy, off bool, d time.Duration) NowFacts {
	f := NowFacts{Policy: p, Off: off, Over: d}
	read := p
	read.MaxLoad, read.MaxIOPressure, read.MaxCPUPressure = 1, 1, 1 // read every figure; p's limits decide
	s := throttle.NewSystemSampler(read, nil, func() []int { return nil })
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		f.Skipped = true
		return f
	case <-t.C:
	}
	f.Sample, f.Err = s.Sample(ctx)
	return f
}

// Now checks whether the run's throttle would pause its rsyncs at once on the machine as
// it is now: a warning then, with the limit that would, and how to change it.
func Now(f NowFacts) Check {
	switch {
	case f.Skipped:
		return ok(NameNow, "not measured: doctor was stopped")
	case f.Err != nil:
		return warn(NameNow, "", "the machine's CPU use could not be measured (%v): the run's throttle would fail the same way", f.Err)
	}
	figures := fmt.Sprintf("the machine now (a %v sample): %s", f.Over, machine(f.Sample))
	if f.Off {
		return ok(NameNow, "%s; --no-throttle: the run never pauses its rsyncs", figures)
	}
	d := throttle.Decide(f.Policy, throttle.State{Running: 1, GateOpen: true}, f.Sample)
	if d.Action == throttle.Suspend {
		return warn(NameNow, throttle.Fix(f.Policy, f.Sample)+"; or start the copy when the machine is quieter",
			"%s: the throttle would pause the run's rsyncs at once: %s", figures, throttle.Cause(f.Policy, f.Sample))
	}
	if c := throttle.Cause(f.Policy, f.Sample); c != "" {
		return ok(NameNow, "%s: the run's rsyncs would start, close to a limit: %s", figures, c)
	}
	return ok(NameNow, "%s: below every limit of the run (--suspend-threshold %g%s): the run's rsyncs would start at once", figures, f.Policy.Suspend, limits(f.Policy))
}

// machine words a sample's figures: CPU (and the part not prsync's own), the cgroup's,
// the load average and the PSI figures, those that were read.
func machine(s throttle.Sample) string {
	parts := []string{fmt.Sprintf("CPU %.0f%%", s.CPU)}
	if s.HasOwn {
		parts[0] += fmt.Sprintf(" (%.0f%% not prsync's)", max(0, s.CPU-s.Own-s.Kernel))
	}
	if s.HasCgroup {
		parts = append(parts, fmt.Sprintf("the cgroup's CPU %.0f%% of %g CPUs", s.CgroupCPU, s.CgroupCPUs))
	}
	if s.HasLoad {
		parts = append(parts, fmt.Sprintf("load %.2f", s.Load))
	}
	if s.HasCPUPressure {
		parts = append(parts, fmt.Sprintf("PSI cpu %.1f%%", s.CPUPressure))
	}
	if s.HasIO {
		parts = append(parts, fmt.Sprintf("PSI io %.1f%%", s.IOPressure))
	}
	return strings.Join(parts, ", ")
}

// limits names the optional limits set, after the CPU threshold.
func limits(p throttle.Policy) string {
	var out string
	if p.MaxLoad > 0 {
		out += fmt.Sprintf(", --max-load %g", p.MaxLoad)
	}
	if p.MaxCPUPressure > 0 {
		out += fmt.Sprintf(", --max-cpu-pressure %g", p.MaxCPUPressure)
	}
	if p.MaxIOPressure > 0 {
		out += fmt.Sprintf(", --max-io-pressure %g", p.MaxIOPressure)
	}
	return out
}
