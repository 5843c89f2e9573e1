package tune

import (
	"context"
	"fmt"
	"time"
)

// Moved is what a pool has moved so far, cumulative.
type Moved struct {
	Bytes, Files float64
	// Refused counts the sessions the far side refused; Accepted is what it accepted at
	// the last refusal (refusal.FarSide.Refusals).
	Refused  int64
	Accepted int
}

// Target is the pool of rsyncs whose limit a Controller tunes. Its methods are called
// from the goroutine running Controller.Run.
type Target interface {
	Limit() int
	// SetLimit changes the limit; lowering it lets running rsyncs finish.
	SetLimit(n int, reason, detail string, rate float64)
	// Counts returns the rsync groups running and paused (by the throttle or Ctrl-Z).
	Counts() (running, paused int)
	// Moved returns the cumulative progress; Measure is called before it, every tick,
	// for measurements that need sampling.
	Measure()
	Moved() Moved
	// Drained reports that no work waits: the input has ended and nothing is queued.
	Drained() bool
	// CPU returns the CPUs' use at the newest sample (CPUs 0: not known).
	CPU() CPUUse
}

// CPUUse is how busy the CPUs prsync may use are, in CPUs: CPUs of them (a cgroup's quota,
// or the machine's), Busy used by anyone, Own by prsync's rsyncs.
type CPUUse struct {
	CPUs, Busy, Own float64
}

// Controller applies a Tuner to a Target: it samples the pool every Tick, and every
// Window hands the Tuner one Observation and applies its Decision.
type Controller struct {
	Tuner  *Tuner
	Target Target
	Tick   time.Duration // sampling period; 0 means Window / 4
	// OnDecision, if set, is called with every decision (for a trace of the limit).
	OnDecision func(Observation, Decision)
}

// Run tunes the Target until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	tick := c.Tick
	if tick <= 0 {
		tick = Window / 4
	}
	per := max(int(Window/tick), 1)
	t := time.NewTicker(tick)
	defer t.Stop()
	c.Target.Measure()
	prev, prevAt := c.Target.Moved(), time.Now()
	var running, paused, busy, own, cpus float64
	n, cpuN := 0, 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c.Target.Measure()
		r, p := c.Target.Counts()
		running += float64(r + p)
		paused += float64(p)
		if u := c.Target.CPU(); u.CPUs > 0 {
			busy, own, cpus = busy+u.Busy, own+u.Own, u.CPUs
			cpuN++
		}
		if n++; n < per {
			continue
		}
		now, at := c.Target.Moved(), time.Now()
		dt := at.Sub(prevAt).Seconds()
		o := Observation{
			Limit:   c.Target.Limit(),
			Running: running / float64(n),
			Paused:  paused / float64(n),
			Bytes:   (now.Bytes - prev.Bytes) / dt,
			Files:   (now.Files - prev.Files) / dt,
			Refused: int(now.Refused - prev.Refused),
			Drained: c.Target.Drained(),
		}
		if o.Refused > 0 {
			o.Accepted = now.Accepted
		}
		if cpuN == n { // measured all along the window
			o.CPUs, o.Busy, o.Own = cpus, busy/float64(n), own/float64(n)
		}
		d := c.Tuner.Observe(o)
		if c.OnDecision != nil {
			c.OnDecision(o, d)
		}
		if d.Limit != o.Limit {
			detail := fmt.Sprintf("best %d, utility %.3g, gain %+.2f", d.Best, d.Utility, d.Gain)
			if d.Reason == ReasonCPUBound {
				detail = fmt.Sprintf("%.1f of %.3g CPUs busy, %.1f by the rsyncs", o.Busy, o.CPUs, o.Own)
			}
			c.Target.SetLimit(d.Limit, "auto-"+d.Reason, detail, d.Rate*8)
		}
		prev, prevAt = now, at
		running, paused, n = 0, 0, 0
		busy, own, cpus, cpuN = 0, 0, 0, 0
	}
}
