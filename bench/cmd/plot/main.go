// Command plot draws the results of bench/run.sh as one PNG:
//
//  1. fresh-copy throughput against -j for prsync, with fpsync, chunked GNU
//     parallel, rsync -a and cp -a as reference points and lines;
//  2. fresh-copy and re-run wall times per method (bars at the median,
//     whiskers from min to max);
//  3. if the network scenario ran, throughput per method on the shaped link.
//
// Usage: plot -in results.csv [-machine machine.txt] -out results.png
//
// machine.txt (written by run.sh) gives the network shaping for the third
// panel's title and cap line (net stream cap, net link cap, net max connections).
package main

import (
	"bufio"
	"flag"
	"fmt"
	"image/color"
	"os"
	"sort"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/prsync/prsync/bench/internal/results"
)

var (
	colPrsync = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	colFresh  = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	colRerun  = color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}
	colPeer   = []color.Color{
		color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, // fpsync
		color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}, // parallel
		color.RGBA{R: 0x7f, G: 0x7f, B: 0x7f, A: 0xff}, // rsync
		color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}, // cp
		color.RGBA{R: 0x17, G: 0xbe, B: 0xcf, A: 0xff}, // prsync -j auto
		color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff}, // prsync --transport direct
		color.RGBA{R: 0xe3, G: 0x77, B: 0xc2, A: 0xff}, // prsync --transport pipe
	}
	colNet = []color.Color{colFresh, colRerun, color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}, color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}}
)

func main() {
	in := flag.String("in", "", "raw results CSV written by run.sh")
	out := flag.String("out", "results.png", "PNG to write")
	width := flag.Float64("width", 10, "width in inches")
	machine := flag.String("machine", "", "machine.txt of the run (network shaping for the titles)")
	flag.Parse()
	shaping = readShaping(*machine)
	if *in == "" {
		fmt.Fprintln(os.Stderr, "usage: plot -in results.csv -out results.png")
		os.Exit(2)
	}
	runs, err := results.ReadFile(*in)
	if err != nil {
		fatal(err)
	}
	ss := results.Summarize(runs)
	results.Sort(ss)

	var rows [][]*plot.Plot
	if p, err := scalingPlot(ss); err != nil {
		fatal(err)
	} else if p != nil {
		rows = append(rows, []*plot.Plot{p})
	}
	if p, err := timesPlot(ss, *width); err != nil {
		fatal(err)
	} else if p != nil {
		rows = append(rows, []*plot.Plot{p})
	}
	if p, err := netPlot(ss, *width, shaping); err != nil {
		fatal(err)
	} else if p != nil {
		rows = append(rows, []*plot.Plot{p})
	}
	if len(rows) == 0 {
		fatal(fmt.Errorf("nothing to plot in %s", *in))
	}

	w := vg.Length(*width) * vg.Inch
	h := vg.Length(4.2*float64(len(rows))) * vg.Inch
	img := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(110))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(rows), Cols: 1, PadX: vg.Millimeter, PadY: 6 * vg.Millimeter,
		PadTop: 2 * vg.Millimeter, PadBottom: 2 * vg.Millimeter, PadLeft: 2 * vg.Millimeter, PadRight: 4 * vg.Millimeter}
	cs := plot.Align(rows, tiles, dc)
	for i := range rows {
		rows[i][0].Draw(cs[i][0])
	}
	f, err := os.Create(*out)
	if err != nil {
		fatal(err)
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		fatal(err)
	}
	if err := f.Close(); err != nil {
		fatal(err)
	}
}

// netShape is the network scenario's shaping, from machine.txt.
type netShape struct {
	stream, link string  // tc rates as given, such as 400mbit
	linkMbit     float64 // the link cap in Mbit/s
	maxConn      string
}

var shaping netShape

func readShaping(path string) netShape {
	n := netShape{stream: "400mbit", link: "2gbit", maxConn: "0"}
	if f, err := os.Open(path); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			k, v, ok := strings.Cut(sc.Text(), ":")
			if !ok {
				continue
			}
			v = strings.TrimSpace(v)
			switch strings.TrimSpace(k) {
			case "net stream cap":
				n.stream = v
			case "net link cap":
				n.link = v
			case "net max connections":
				n.maxConn = v
			}
		}
		f.Close()
	}
	n.linkMbit = tcMbit(n.link)
	return n
}

// tcMbit converts a tc rate (400mbit, 2gbit, 125mbps) into Mbit/s; 0 if unknown.
func tcMbit(r string) float64 {
	r = strings.ToLower(strings.TrimSpace(r))
	i := strings.IndexFunc(r, func(c rune) bool { return (c < '0' || c > '9') && c != '.' })
	if i <= 0 {
		return 0
	}
	x, err := strconv.ParseFloat(r[:i], 64)
	if err != nil {
		return 0
	}
	unit := r[i:]
	m := 1e-6
	switch {
	case strings.HasPrefix(unit, "k"):
		m = 1e-3
	case strings.HasPrefix(unit, "m"):
		m = 1
	case strings.HasPrefix(unit, "g"):
		m = 1e3
	case strings.HasPrefix(unit, "t"):
		m = 1e6
	}
	if strings.HasSuffix(unit, "bps") {
		m *= 8
	}
	return x * m
}

// rateText turns 400mbit into 400 Mbit/s.
func rateText(r string) string {
	if x := tcMbit(r); x >= 1000 && !strings.HasSuffix(strings.ToLower(r), "bps") {
		return strconv.FormatFloat(x/1000, 'g', 4, 64) + " Gbit/s"
	} else if x > 0 && !strings.HasSuffix(strings.ToLower(r), "bps") {
		return strconv.FormatFloat(x, 'g', 4, 64) + " Mbit/s"
	}
	return r
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "plot:", err)
	os.Exit(1)
}

// mbps returns the median, low and high throughput of a summary in MB/s.
func mbps(s results.Summary) (med, lo, hi float64) {
	b := float64(s.Bytes) / 1e6
	return b / s.WallMedian, b / s.WallMax, b / s.WallMin
}

type errPoints struct {
	plotter.XYs
	plotter.YErrors
}

func scalingPlot(ss []results.Summary) (*plot.Plot, error) {
	var sweep []results.Summary
	for _, s := range ss {
		if s.Scenario == "local" && s.Case == "fresh" && strings.HasPrefix(s.Method, "prsync-j") {
			sweep = append(sweep, s)
		}
	}
	if len(sweep) == 0 {
		return nil, nil
	}
	sort.Slice(sweep, func(i, j int) bool { return sweep[i].Jobs < sweep[j].Jobs })
	p := plot.New()
	p.Title.Text = "Fresh copy, local disk: throughput against concurrency (median, min–max)"
	p.X.Label.Text = "concurrent rsync processes (-j)"
	p.Y.Label.Text = "MB/s"
	p.X.Scale = plot.LogScale{}
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.XOffs = vg.Points(12)

	maxJ := 1
	yMax := 0.0
	var pts errPoints
	for _, s := range sweep {
		med, lo, hi := mbps(s)
		pts.XYs = append(pts.XYs, plotter.XY{X: float64(s.Jobs), Y: med})
		pts.YErrors = append(pts.YErrors, struct{ Low, High float64 }{med - lo, hi - med})
		maxJ = max(maxJ, s.Jobs)
		yMax = max(yMax, hi)
	}
	line, scatter, err := plotter.NewLinePoints(pts.XYs)
	if err != nil {
		return nil, err
	}
	line.Color, scatter.Color = colPrsync, colPrsync
	line.Width = vg.Points(2)
	eb, err := plotter.NewYErrorBars(pts)
	if err != nil {
		return nil, err
	}
	eb.Color = colPrsync
	p.Add(line, scatter, eb)
	legendN := 1
	p.Legend.Add("prsync -j N "+strings.TrimSpace(strings.TrimPrefix(labelOpts(sweep[0].Label), "-j")), line, scatter)

	// prsync with default flags, and the peers, as single points.
	points := []struct {
		method, name string
		col          color.Color
		shape        draw.GlyphDrawer
	}{
		{"prsync-default", "prsync, defaults", color.Black, draw.PyramidGlyph{}},
		{"fpsync", "fpsync", colPeer[0], draw.SquareGlyph{}},
		{"parallel-chunked", "parallel --pipe (chunked)", colPeer[1], draw.TriangleGlyph{}},
	}
	for _, pt := range points {
		s, ok := results.Find(ss, "local", pt.method, "fresh")
		if !ok || s.Jobs <= 0 {
			continue
		}
		maxJ = max(maxJ, s.Jobs)
		med, lo, hi := mbps(s)
		yMax = max(yMax, hi)
		e := errPoints{plotter.XYs{{X: float64(s.Jobs), Y: med}}, plotter.YErrors{{Low: med - lo, High: hi - med}}}
		sc, err := plotter.NewScatter(e.XYs)
		if err != nil {
			return nil, err
		}
		sc.Color, sc.Shape, sc.Radius = pt.col, pt.shape, vg.Points(5)
		eb, err := plotter.NewYErrorBars(e)
		if err != nil {
			return nil, err
		}
		eb.Color = pt.col
		p.Add(sc, eb)
		p.Legend.Add(fmt.Sprintf("%s (-j %d)", pt.name, s.Jobs), sc)
		legendN++
	}
	// Single-process tools, and -j auto (whose limit moves), as horizontal lines.
	for i, m := range []struct{ method, name string }{{"rsync", "rsync -a"}, {"cp", "cp -a"}, {"prsync-auto", "prsync -j auto"}, {"prsync-direct", "prsync --transport direct"}, {"prsync-pipe", "prsync --transport pipe"}} {
		s, ok := results.Find(ss, "local", m.method, "fresh")
		if !ok {
			continue
		}
		med, _, _ := mbps(s)
		yMax = max(yMax, med)
		f := plotter.NewFunction(func(float64) float64 { return med })
		f.Color = colPeer[2+i]
		f.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
		f.Width = vg.Points(1.5)
		f.XMin, f.XMax = 0.8, float64(maxJ)*1.25
		p.Add(f)
		p.Legend.Add(m.name, f)
		legendN++
	}
	p.X.Min, p.X.Max = 0.8, float64(maxJ)*1.25
	var ticks plot.ConstantTicks
	for j := 1; j <= maxJ*2; j *= 2 {
		ticks = append(ticks, plot.Tick{Value: float64(j), Label: fmt.Sprint(j)})
	}
	p.X.Tick.Marker = ticks
	p.Y.Min = 0
	// Room for the legend: 1.45 for the five entries it used to have, more
	// when -j auto and --transport direct add theirs.
	p.Y.Max = yMax * max(1.45, 1.1+0.075*float64(legendN))
	p.Add(plotter.NewGrid())
	return p, nil
}

// labelOpts returns what follows "prsync -0" in a label, e.g. "-j 4 --no-throttle".
func labelOpts(label string) string {
	if i := strings.Index(label, "prsync -0"); i >= 0 {
		opts := strings.TrimSpace(label[i+len("prsync -0"):])
		fs := strings.Fields(opts)
		if len(fs) >= 2 && fs[0] == "-j" {
			return strings.Join(fs[2:], " ")
		}
		return opts
	}
	return ""
}

func shortName(s results.Summary) string {
	switch s.Method {
	case "parallel-chunked":
		return "parallel\n--pipe"
	case "parallel-perfile":
		return "parallel\nper file"
	case "prsync-default":
		return "prsync\ndefaults"
	case "prsync-direct":
		return "prsync\ndirect"
	case "prsync-pipe":
		return "prsync\npipe"
	case "prsync-auto":
		return "prsync\n-j auto"
	case "rsync":
		return "rsync -a"
	case "cp":
		return "cp -a"
	case "tar":
		return "tar | tar"
	}
	if strings.HasPrefix(s.Method, "prsync-j") {
		return "prsync\n-j " + strings.TrimPrefix(s.Method, "prsync-j")
	}
	return s.Method
}

func timesPlot(ss []results.Summary, widthIn float64) (*plot.Plot, error) {
	type pair struct {
		name         string
		fresh, rerun *results.Summary
	}
	var groups []*pair
	idx := map[string]*pair{}
	var omitted []string
	for i := range ss {
		s := &ss[i]
		if s.Scenario != "local" {
			continue
		}
		if s.Extrapolated {
			omitted = append(omitted, fmt.Sprintf("%s: %.0f s fresh, extrapolated", strings.ReplaceAll(shortName(*s), "\n", " "), s.WallMedian))
			continue
		}
		g, ok := idx[s.Method]
		if !ok {
			g = &pair{name: shortName(*s)}
			idx[s.Method] = g
			groups = append(groups, g)
		}
		if s.Case == "rerun" {
			g.rerun = s
		} else {
			g.fresh = s
		}
	}
	if len(groups) == 0 {
		return nil, nil
	}
	p := plot.New()
	p.Title.Text = "Local disk: wall time per method (bar = median, whisker = min–max; lower is better)"
	if len(omitted) > 0 {
		p.Title.Text += "\nnot drawn: " + strings.Join(omitted, "; ")
	}
	p.Y.Label.Text = "seconds"
	p.Legend.Top = true
	n := len(groups)
	yMax := 0.0
	// About 80% of the width is the data area; two bars share 70% of a slot.
	barW := vg.Length(widthIn*72*0.8/float64(n)) * 0.35

	for k, kase := range []string{"fresh", "rerun"} {
		var vals plotter.Values
		var e errPoints
		for i, g := range groups {
			s := g.fresh
			if kase == "rerun" {
				s = g.rerun
			}
			x := float64(i) + (float64(k)-0.5)*0.36
			if s == nil {
				vals = append(vals, 0)
				continue
			}
			vals = append(vals, s.WallMedian)
			yMax = max(yMax, s.WallMax)
			e.XYs = append(e.XYs, plotter.XY{X: x, Y: s.WallMedian})
			e.YErrors = append(e.YErrors, struct{ Low, High float64 }{s.WallMedian - s.WallMin, s.WallMax - s.WallMedian})
		}
		bc, err := plotter.NewBarChart(vals, barW)
		if err != nil {
			return nil, err
		}
		bc.XMin = (float64(k) - 0.5) * 0.36
		bc.LineStyle.Width = 0
		if kase == "fresh" {
			bc.Color = colFresh
			p.Legend.Add("fresh copy (empty destination)", bc)
		} else {
			bc.Color = colRerun
			p.Legend.Add("re-run (nothing changed)", bc)
		}
		p.Add(bc)
		if len(e.XYs) > 0 {
			eb, err := plotter.NewYErrorBars(e)
			if err != nil {
				return nil, err
			}
			p.Add(eb)
		}
	}
	names := make([]string, n)
	for i, g := range groups {
		names[i] = g.name
	}
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.6, float64(n)-0.4
	p.Y.Min = 0
	p.Y.Max = yMax * 1.2
	p.Add(plotter.NewGrid())
	return p, nil
}

func netPlot(ss []results.Summary, widthIn float64, sh netShape) (*plot.Plot, error) {
	var scen []string
	var methods []string
	seen := map[string]bool{}
	for _, s := range ss {
		if strings.HasPrefix(s.Scenario, "net") && s.Case == "fresh" && !seen[s.Method] {
			seen[s.Method] = true
			methods = append(methods, s.Method)
		}
		if strings.HasPrefix(s.Scenario, "net") && !seen["scenario "+s.Scenario] {
			seen["scenario "+s.Scenario] = true
			scen = append(scen, s.Scenario)
		}
	}
	if len(methods) == 0 {
		return nil, nil
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("rsync:// over a veth pair, %s per TCP stream, %s link", rateText(sh.stream), rateText(sh.link))
	if sh.maxConn != "" && sh.maxConn != "0" {
		p.Title.Text += ", daemon max connections " + sh.maxConn
	}
	p.Title.Text += ": throughput (higher is better)"
	p.Y.Label.Text = "Mbit/s"
	p.Legend.Top = true
	n := len(methods)
	ns := len(scen)
	slot := 0.72 / float64(ns) // of one method's unit: one bar per scenario
	offset := func(k int) float64 { return (float64(k) - float64(ns-1)/2) * slot }
	barW := vg.Length(widthIn*72*0.8/float64(n)) * vg.Length(0.7/float64(ns))
	yMax := sh.linkMbit // the link cap
	for k, sc := range scen {
		var vals plotter.Values
		var e errPoints
		any := false
		for i, m := range methods {
			s, ok := results.Find(ss, sc, m, "fresh")
			x := float64(i) + offset(k)
			if !ok {
				vals = append(vals, 0)
				continue
			}
			any = true
			b := float64(s.Bytes) * 8 / 1e6
			med := b / s.WallMedian
			vals = append(vals, med)
			yMax = max(yMax, b/s.WallMin)
			e.XYs = append(e.XYs, plotter.XY{X: x, Y: med})
			e.YErrors = append(e.YErrors, struct{ Low, High float64 }{med - b/s.WallMax, b/s.WallMin - med})
		}
		if !any {
			continue
		}
		bc, err := plotter.NewBarChart(vals, barW)
		if err != nil {
			return nil, err
		}
		bc.XMin = offset(k)
		bc.LineStyle.Width = 0
		bc.Color = colNet[k%len(colNet)]
		name := map[string]string{"net-big": "20 × 100 MiB", "net-small": "50k-file tree", "net-many": "200k tiny files"}[sc]
		if name == "" {
			name = strings.TrimPrefix(sc, "net-")
		}
		p.Legend.Add(name, bc)
		p.Add(bc)
		eb, err := plotter.NewYErrorBars(e)
		if err != nil {
			return nil, err
		}
		p.Add(eb)
	}
	names := make([]string, n)
	for i, m := range methods {
		names[i] = shortName(results.Summary{Method: m})
	}
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.6, float64(n)-0.4
	p.Y.Min = 0
	p.Y.Max = yMax * 1.25
	if sh.linkMbit > 0 {
		capLine := plotter.NewFunction(func(float64) float64 { return sh.linkMbit })
		capLine.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		capLine.Color = color.Gray{Y: 0x60}
		p.Add(capLine)
		p.Legend.Add("link cap "+rateText(sh.link), capLine)
	}
	p.Add(plotter.NewGrid())
	return p, nil
}

// Len resolves the ambiguity between the two embedded Len methods.
func (e errPoints) Len() int { return len(e.XYs) }
