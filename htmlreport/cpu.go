package htmlreport

import (
	"fmt"

	"github.com/prsync/prsync/event"
)

// The throttle's thresholds when the start event gives none (an older prsync's, or a
// file without its head): prsync's defaults.
const (
	defaultSuspend = 80
	defaultResume  = 60
)

// spanColor shades the stretches of time in which the throttle held an rsync.
const spanColor = "#d62728"

// Span is a stretch of a chart's time shaded behind its lines: the throttle held an rsync.
type Span struct{ X, Y, W, H string }

// cpuSeries are what the CPU chart draws, filled as the events stream by.
type cpuSeries struct {
	cpu, own  *series // the progress events' cpu_percent and own_cpu_percent
	throttled *series // rsync-seconds paused by the throttle, from its suspend→resume pairs
	hasOwn    bool
}

func newCPUSeries() cpuSeries {
	return cpuSeries{cpu: newSeries(), own: newSeries(), throttled: newSeries()}
}

// progress takes a progress event's CPU figures at sec.
func (c *cpuSeries) progress(sec float64, e event.CPU) {
	c.cpu.add(sec, e.CPUPercent)
	if e.OwnCPUPercent != nil {
		c.own.add(sec, *e.OwnCPUPercent)
		c.hasOwn = true
	}
}

// cpuChart draws the machine's CPU use, the copy's own share of it, the throttle's
// thresholds (the start event's, else prsync's defaults; none with --no-throttle) and
// the stretches of time in which it held an rsync.
func cpuChart(rep *Report, end float64) Chart {
	c := rep.cpu
	suspend, resume, given, off := thresholds(rep.Start)
	lines := []lineSpec{{name: "the machine", color: colors[0], points: c.cpu.means(), band: true}}
	if c.hasOwn {
		lines = append(lines, lineSpec{name: "the copy's own", color: colors[2], points: c.own.means(), band: true})
	}
	caption := "The machine's CPU use (progress events' cpu_percent) and the part prsync's own rsyncs used (own_cpu_percent, Linux): the mean over each stretch of time, the band the least and most. "
	switch {
	case off:
		caption += "The run had --no-throttle: nothing was paused."
	case len(lines[0].points) > 0:
		lines = append(lines,
			lineSpec{name: fmt.Sprintf("suspend %g%%", suspend), color: colors[9], points: level(suspend, end), dash: true},
			lineSpec{name: fmt.Sprintf("resume %g%%", resume), color: colors[6], points: level(resume, end), dash: true})
		from := "as the start event gives them"
		if !given {
			from = "prsync's defaults (the start event gives none)"
		}
		caption += fmt.Sprintf("Dashed: --suspend-threshold and --resume-threshold, %s; where the copy's own CPU is measured, the throttle pauses only when the load besides the copy's is high too. "+
			"Shaded: the throttle held an rsync (from its suspend to its resume).", from)
	}
	ch := newChart("cpu", "CPU use and the throttle", caption, "CPU %", unitPercent, end, lines, "No progress events in the file.")
	if ch.Empty == "" {
		ch.Spans = spans(c.throttled, end)
		if len(ch.Spans) > 0 {
			ch.SpanName, ch.SpanColor = "paused", spanColor
			ch.SpanLegendX = padL + plotW - (len(lines)+1)*legendStep
		}
	}
	return ch
}

// thresholds are the run's --suspend-threshold and --resume-threshold from its start
// event, and whether it gave them (else prsync's defaults), and --no-throttle.
func thresholds(st *event.Start) (suspend, resume float64, given, off bool) {
	if st == nil || st.SuspendThreshold <= 0 || st.ResumeThreshold <= 0 {
		return defaultSuspend, defaultResume, false, st != nil && st.NoThrottle
	}
	return st.SuspendThreshold, st.ResumeThreshold, true, st.NoThrottle
}

// level is a flat line at v from the start to end.
func level(v, end float64) []point {
	return []point{{t: 0, v: v, lo: v, hi: v}, {t: max(end, 1), v: v, lo: v, hi: v}}
}

// spans are the stretches of [0, end] in which s (rsync-seconds paused) holds any: each
// run of buckets with some, as one shaded box.
func spans(s *series, end float64) []Span {
	if len(s.buckets) == 0 || end <= 0 {
		return nil
	}
	s.index(end)
	x := func(t float64) float64 { return padL + max(0, min(1, t/end))*plotW }
	var out []Span
	from := -1.0
	for i := 0; i <= len(s.buckets); i++ {
		on := i < len(s.buckets) && s.buckets[i].sum > 0 && float64(i)*s.width <= end
		switch {
		case on && from < 0:
			from = float64(i) * s.width
		case !on && from >= 0:
			x0, x1 := x(from), x(float64(i)*s.width)
			out = append(out, Span{X: num(x0), Y: num(padT), W: num(max(x1-x0, 1)), H: num(plotH)})
			from = -1
		}
	}
	return out
}
