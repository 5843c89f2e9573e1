package htmlreport

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/prsync/prsync/internal/human"
)

// The geometry of a chart, in the SVG's own units (it scales to the page's width).
const (
	chartW, chartH              = 1100, 230
	padL, padR, padT, padB      = 78, 34, 30, 38
	plotW, plotH                = chartW - padL - padR, chartH - padT - padB
	maxXTicks, yTicksWanted     = 12, 4
	legendStep              int = 130
)

// Chart is one SVG chart, ready for the template: every number is in place.
type Chart struct {
	ID, Title, Caption string
	YLabel, XLabel     string
	W, H               int
	X0, X1, Y0, Y1     int // the plot's box
	TickEnd            int // the bottom of the time axis's ticks
	YMid               int // the middle of the y axis, in the rotated frame of its label
	XTicks, YTicks     []Tick
	Lines              []Line
	Empty              string // said instead of lines when there is no data
	// Spans are shaded behind the lines (the throttle's pauses), with one legend entry
	Spans               []Span
	SpanName, SpanColor string
	SpanLegendX         int
}

// Tick is a tick on an axis: its position and its label.
type Tick struct {
	Pos   string
	Label string
}

// Line is one series drawn: its path, the band of its min and max, and its legend.
type Line struct {
	Name, Color, D, Band string
	Dash                 bool
	LegendX              int
}

// lineSpec is a series to draw.
type lineSpec struct {
	name, color string
	points      []point
	dash, band  bool
}

// axis kinds: how tick labels are written.
type unit int

const (
	unitCount     unit = iota // plain numbers, integer steps
	unitRate                  // per second, decimal prefixes
	unitBytes                 // bytes
	unitBytesRate             // bytes per second
	unitPercent               // percent
)

func (u unit) label(v float64) string {
	switch u {
	case unitBytes:
		return bytesShort(v)
	case unitBytesRate:
		return bytesShort(v) + "/s"
	case unitRate:
		return short(v) + "/s"
	case unitPercent:
		return short(v) + "%"
	}
	return short(v)
}

// newChart lays out lines over [0, end] seconds.
func newChart(id, title, caption, ylabel string, u unit, end float64, lines []lineSpec, empty string) Chart {
	c := Chart{ID: id, Title: title, Caption: caption, YLabel: ylabel, XLabel: "time since the start (h:mm:ss)",
		W: chartW, H: chartH, X0: padL, X1: padL + plotW, Y0: padT, Y1: padT + plotH, TickEnd: padT + plotH + 5, YMid: -(padT + plotH/2)}
	top := 0.0
	n := 0
	for _, l := range lines {
		for _, p := range l.points {
			top = max(top, p.v)
			if l.band {
				top = max(top, p.hi)
			}
			n++
		}
	}
	if n == 0 {
		c.Empty = empty
	}
	if u == unitPercent {
		top = max(top, 100) // a percentage's axis runs to 100
	}
	if end <= 0 {
		end = 1
	}
	step := niceStep(top/yTicksWanted, u == unitCount)
	ymax := math.Max(step, math.Ceil(top/step-1e-9)*step)
	x := func(t float64) float64 { return padL + math.Max(0, math.Min(1, t/end))*plotW }
	y := func(v float64) float64 { return padT + plotH - math.Max(0, math.Min(1, v/ymax))*plotH }
	for v := 0.0; v <= ymax*(1+1e-9); v += step {
		c.YTicks = append(c.YTicks, Tick{Pos: num(y(v)), Label: u.label(v)})
	}
	xstep := timeStep(end)
	for t := 0.0; t <= end*(1+1e-9); t += xstep {
		c.XTicks = append(c.XTicks, Tick{Pos: num(x(t)), Label: human.Clock(t)})
	}
	for i, l := range lines {
		ln := Line{Name: l.name, Color: l.color, Dash: l.dash, LegendX: padL + plotW - (len(lines)-i)*legendStep}
		var d, b strings.Builder
		for _, seg := range segments(l.points) {
			// a subpath per stretch of samples: a gap breaks the line, and the band
			for j, p := range seg {
				if j == 0 {
					fmt.Fprintf(&d, " M%s %s", num(x(p.t)), num(y(p.v)))
				} else {
					fmt.Fprintf(&d, " L%s %s", num(x(p.t)), num(y(p.v)))
				}
			}
			if len(seg) == 1 {
				d.WriteString(" h0") // a lone sample: a dot (round caps)
			}
			if l.band && hasSpread(seg) {
				for j, p := range seg {
					fmt.Fprintf(&b, " %s%s %s", map[bool]string{true: "M", false: "L"}[j == 0], num(x(p.t)), num(y(p.hi)))
				}
				for j := len(seg) - 1; j >= 0; j-- {
					fmt.Fprintf(&b, " L%s %s", num(x(seg[j].t)), num(y(seg[j].lo)))
				}
				b.WriteString(" Z")
			}
		}
		ln.D = strings.TrimSpace(d.String())
		ln.Band = strings.TrimSpace(b.String())
		c.Lines = append(c.Lines, ln)
	}
	return c
}

// gapFactor is how much wider than a line's usual spacing of points a stretch with no
// point must be to break the line: samples are missing there (prsync was stopped, the
// machine slept, the file holds two runs' tails), and joining across would draw values
// no one measured.
const gapFactor = 3

// segments splits points where the time to the next point is more than gapFactor times
// the median spacing of the points.
func segments(ps []point) [][]point {
	if len(ps) < 3 {
		if len(ps) == 0 {
			return nil
		}
		return [][]point{ps}
	}
	gaps := make([]float64, len(ps)-1)
	for i := range gaps {
		gaps[i] = ps[i+1].t - ps[i].t
	}
	sorted := slices.Clone(gaps)
	slices.Sort(sorted)
	usual := sorted[(len(sorted)-1)/2]
	var out [][]point
	start := 0
	for i, g := range gaps {
		if usual > 0 && g > gapFactor*usual {
			out = append(out, ps[start:i+1])
			start = i + 1
		}
	}
	return append(out, ps[start:])
}

func hasSpread(ps []point) bool {
	for _, p := range ps {
		if p.hi > p.lo {
			return true
		}
	}
	return false
}

// num formats a coordinate with one decimal.
func num(v float64) string { return fmt.Sprintf("%.1f", v) }

// niceStep returns the 1, 2 or 5 times a power of ten at or above raw; at least 1 for
// counts.
func niceStep(raw float64, integer bool) float64 {
	if raw <= 0 || math.IsNaN(raw) || math.IsInf(raw, 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	step := 10 * p
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw*(1-1e-9) {
			step = m * p
			break
		}
	}
	if integer {
		step = math.Max(1, math.Round(step))
	}
	return step
}

// timeStep returns a step for the time axis that gives at most maxXTicks ticks.
func timeStep(end float64) float64 {
	for _, s := range []float64{1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400} {
		if end/s <= maxXTicks {
			return s
		}
	}
	return niceStep(end/maxXTicks, true)
}
