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
	var running, paused float64
	n := 0
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
		d := c.Tuner.Observe(o)
		if c.OnDecision != nil {
			c.OnDecision(o, d)
		}
		if d.Limit != o.Limit {
			c.Target.SetLimit(d.Limit, "auto-"+d.Reason,
				fmt.Sprintf("best %d, utility %.3g, gain %+.2f", d.Best, d.Utility, d.Gain), d.Rate*8)
		}
		prev, prevAt = now, at
		running, paused, n = 0, 0, 0
	}
}
