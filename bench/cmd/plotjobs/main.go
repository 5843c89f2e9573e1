// Command plotjobs draws prsync's concurrency over time from the JSON-lines
// logs that bench/run.sh keeps in $OUT/logs: for each scenario, one PNG with a
// panel per method (default: prsync-auto, then prsync-default), and in each
// panel, for every repetition, the limit on concurrent rsyncs (the start
// event's jobs, then each jobs event: a step line) and the rsyncs running
// (the progress events' running, once per --throttle-interval; for a run too
// short for two progress events, counted from chunk_start and chunk_end).
//
// Log names are SCENARIO-METHOD-CASE-REP.jsonl, as run.sh writes them.
//
// Usage: plotjobs -logs DIR [-out PREFIX] [-methods prsync-auto,prsync-default] [-case fresh] [-machine machine.txt]
//
// It writes PREFIX-SCENARIO.png (PREFIX defaults to DIR/../jobs) and prints
// the names of the files it wrote.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"image/color"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

func main() {
	logs := flag.String("logs", "", "directory of the per-run logs (SCENARIO-METHOD-CASE-REP.jsonl)")
	out := flag.String("out", "", "prefix of the PNGs: PREFIX-SCENARIO.png (default DIR/../jobs)")
	methods := flag.String("methods", "prsync-auto,prsync-default", "methods to draw, one panel each, comma-separated")
	kase := flag.String("case", "fresh", "case to draw: fresh or rerun")
	machine := flag.String("machine", "", "machine.txt of the run (network shaping for the titles)")
	width := flag.Float64("width", 10, "width in inches")
	flag.Parse()
	if *logs == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: plotjobs -logs DIR [-out PREFIX] [-methods LIST] [-case fresh] [-machine FILE]")
		os.Exit(2)
	}
	if *out == "" {
		*out = filepath.Join(filepath.Dir(filepath.Clean(*logs)), "jobs")
	}
	var ms []string
	for _, m := range strings.Split(*methods, ",") {
		if m = strings.TrimSpace(m); m != "" {
			ms = append(ms, m)
		}
	}
	runs, err := findRuns(*logs, ms, *kase)
	if err != nil {
		fatal(err)
	}
	if len(runs) == 0 {
		fatal(fmt.Errorf("no %s logs of %s in %s", *kase, strings.Join(ms, ", "), *logs))
	}
	shaping := readMachine(*machine)
	for _, sc := range scenarios(runs) {
		name := *out + "-" + sc + ".png"
		if err := drawScenario(name, sc, ms, runs, *width, shaping); err != nil {
			fatal(err)
		}
		fmt.Println(name)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "plotjobs:", err)
	os.Exit(1)
}

// run is one prsync run's concurrency record.
type run struct {
	Scenario, Method, Case string
	Rep                    int
	Limit                  []point // steps: the limit from each point's X on
	Running                []point // progress samples
	ChunkRunning           bool    // Running was counted from chunk events
	End                    float64 // seconds from the start event to the summary
	JobsMin, JobsMax       float64
	Auto                   bool
}

type point struct{ X, Y float64 }

// findRuns reads every log of the given methods and case in dir.
func findRuns(dir string, methods []string, kase string) ([]run, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var res []*regexp.Regexp
	for _, m := range methods {
		res = append(res, regexp.MustCompile(`^(.+)-(`+regexp.QuoteMeta(m)+`)-(`+regexp.QuoteMeta(kase)+`)-([0-9]+)\.jsonl$`))
	}
	var out []run
	for _, e := range ents {
		for _, re := range res {
			g := re.FindStringSubmatch(e.Name())
			if g == nil {
				continue
			}
			rep, _ := strconv.Atoi(g[4])
			f, err := os.Open(filepath.Join(dir, e.Name()))
			if err != nil {
				return nil, err
			}
			r, err := parse(f)
			f.Close()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", e.Name(), err)
			}
			r.Scenario, r.Method, r.Case, r.Rep = g[1], g[2], g[3], rep
			out = append(out, r)
			break
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Scenario != b.Scenario {
			return a.Scenario < b.Scenario
		}
		if a.Method != b.Method {
			return a.Method < b.Method
		}
		return a.Rep < b.Rep
	})
	return out, nil
}

type event struct {
	Type     string    `json:"type"`
	Time     time.Time `json:"time"`
	Jobs     *float64  `json:"jobs"`
	JobsAuto bool      `json:"jobs_auto"`
	New      *float64  `json:"new"`
	Running  *float64  `json:"running"`
	Elapsed  *float64  `json:"elapsed"`
	Seconds  float64   `json:"seconds"`
	JobsMin  float64   `json:"jobs_min"`
	JobsMax  float64   `json:"jobs_max"`
}

// parse reads one prsync log: the limit from the start and jobs events, the
// running rsyncs from the progress events. Times of jobs events are taken
// relative to the start event; progress events carry their own elapsed.
func parse(rd io.Reader) (run, error) {
	var r run
	var t0 time.Time
	started := false
	last := 0.0
	var chunkRun []point
	inFlight := 0.0
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue
		}
		switch e.Type {
		case "start":
			t0, started = e.Time, true
			r.Auto = e.JobsAuto
			if e.Jobs != nil {
				r.Limit = append(r.Limit, point{0, *e.Jobs})
			}
		case "jobs":
			if started && e.New != nil {
				x := e.Time.Sub(t0).Seconds()
				r.Limit = append(r.Limit, point{x, *e.New})
				last = max(last, x)
			}
		case "chunk_start", "chunk_end":
			if started {
				if e.Type == "chunk_start" {
					inFlight++
				} else {
					inFlight--
				}
				chunkRun = append(chunkRun, point{e.Time.Sub(t0).Seconds(), inFlight})
			}
		case "progress":
			if e.Elapsed != nil && e.Running != nil {
				r.Running = append(r.Running, point{*e.Elapsed, *e.Running})
				last = max(last, *e.Elapsed)
				// A limit that moved without a jobs event (older versions)
				// still shows through progress's jobs.
				if e.Jobs != nil && len(r.Limit) > 0 && r.Limit[len(r.Limit)-1].Y != *e.Jobs {
					r.Limit = append(r.Limit, point{*e.Elapsed, *e.Jobs})
				}
			}
		case "summary":
			if started {
				r.End = e.Time.Sub(t0).Seconds()
			} else {
				r.End = e.Seconds
			}
			r.JobsMin, r.JobsMax = e.JobsMin, e.JobsMax
		}
	}
	if err := sc.Err(); err != nil {
		return r, err
	}
	if !started {
		return r, fmt.Errorf("no start event")
	}
	if len(r.Running) < 2 && len(chunkRun) > 0 {
		// Steps, like the limit: the count holds until the next event.
		r.Running, r.ChunkRunning = nil, true
		prev := 0.0
		for _, q := range chunkRun {
			r.Running = append(r.Running, point{q.X, prev}, q)
			prev = q.Y
		}
	}
	r.End = max(r.End, last)
	return r, nil
}

// steps turns the limit's change points into a line with vertical steps,
// ending at end.
func steps(ps []point, end float64) plotter.XYs {
	var xy plotter.XYs
	for i, p := range ps {
		if i > 0 {
			xy = append(xy, plotter.XY{X: p.X, Y: ps[i-1].Y})
		}
		xy = append(xy, plotter.XY{X: p.X, Y: p.Y})
	}
	if len(ps) > 0 && end > ps[len(ps)-1].X {
		xy = append(xy, plotter.XY{X: end, Y: ps[len(ps)-1].Y})
	}
	return xy
}

func scenarios(runs []run) []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range runs {
		if !seen[r.Scenario] {
			seen[r.Scenario] = true
			out = append(out, r.Scenario)
		}
	}
	return out
}

var repColors = []color.Color{
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
	color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff},
	color.RGBA{R: 0xe3, G: 0x77, B: 0xc2, A: 0xff},
	color.RGBA{R: 0x7f, G: 0x7f, B: 0x7f, A: 0xff},
}

var methodTitle = map[string]string{
	"prsync-auto":    "prsync -j auto (otherwise defaults, throttle on)",
	"prsync-default": "prsync, defaults (fixed -j, throttle on)",
	"prsync-direct":  "prsync --transport direct",
	"prsync-pipe":    "prsync --transport pipe",
}

func scenarioTitle(sc string, m map[string]string) string {
	switch {
	case sc == "local":
		return "local disk"
	case strings.HasPrefix(sc, "net-"):
		t := fmt.Sprintf("network, tree %s, %s per stream, %s link", strings.TrimPrefix(sc, "net-"),
			or(m["net stream cap"], "400mbit"), or(m["net link cap"], "2gbit"))
		if mc := m["net max connections"]; mc != "" && mc != "0" {
			t += ", max connections " + mc
		}
		return t
	}
	return sc
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func readMachine(path string) map[string]string {
	m := map[string]string{}
	f, err := os.Open(path)
	if err != nil {
		return m
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok {
			m[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return m
}

// panel draws one method's runs of one scenario.
func panel(sc, method string, runs []run, machine map[string]string) (*plot.Plot, error) {
	p := plot.New()
	title := methodTitle[method]
	if title == "" {
		title = method
	}
	p.Title.Text = fmt.Sprintf("%s: %s\nconcurrent rsyncs over time: limit (solid steps) and running (dashed, sampled)", scenarioTitle(sc, machine), title)
	p.X.Label.Text = "seconds since start"
	p.Y.Label.Text = "rsyncs"
	p.Legend.Top = true
	p.Legend.Left = false
	yMax, xMax := 1.0, 1.0
	for i, r := range runs {
		col := repColors[i%len(repColors)]
		lim := steps(r.Limit, r.End)
		if len(lim) > 0 {
			l, err := plotter.NewLine(lim)
			if err != nil {
				return nil, err
			}
			l.Color, l.Width = col, vg.Points(2)
			p.Add(l)
			rng := ""
			if r.JobsMax > 0 {
				rng = fmt.Sprintf(", limit %g–%g", r.JobsMin, r.JobsMax)
			}
			p.Legend.Add(fmt.Sprintf("rep %d: limit (%.1f s%s)", r.Rep, r.End, rng), l)
			for _, q := range lim {
				yMax = max(yMax, q.Y)
			}
		}
		if len(r.Running) > 0 {
			xy := make(plotter.XYs, len(r.Running))
			for k, q := range r.Running {
				xy[k] = plotter.XY{X: q.X, Y: q.Y}
				yMax = max(yMax, q.Y)
			}
			l, s, err := plotter.NewLinePoints(xy)
			if err != nil {
				return nil, err
			}
			l.Color, l.Width = col, vg.Points(1)
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
			s.Color, s.Radius = col, vg.Points(1.5)
			p.Add(l, s)
			how := "running"
			if r.ChunkRunning {
				how = "running (from chunk events)"
			}
			p.Legend.Add(fmt.Sprintf("rep %d: %s", r.Rep, how), l, s)
		}
		xMax = max(xMax, r.End)
	}
	p.X.Min, p.X.Max = 0, xMax*1.02
	p.Y.Min, p.Y.Max = 0, yMax*1.6 // room for the legend
	p.Add(plotter.NewGrid())
	return p, nil
}

func drawScenario(name, sc string, methods []string, runs []run, widthIn float64, machine map[string]string) error {
	var rows [][]*plot.Plot
	for _, m := range methods {
		var rs []run
		for _, r := range runs {
			if r.Scenario == sc && r.Method == m {
				rs = append(rs, r)
			}
		}
		if len(rs) == 0 {
			continue
		}
		p, err := panel(sc, m, rs, machine)
		if err != nil {
			return err
		}
		rows = append(rows, []*plot.Plot{p})
	}
	if len(rows) == 0 {
		return fmt.Errorf("nothing to draw for %s", sc)
	}
	w := vg.Length(widthIn) * vg.Inch
	h := vg.Length(4*float64(len(rows))) * vg.Inch
	img := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(110))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(rows), Cols: 1, PadX: vg.Millimeter, PadY: 6 * vg.Millimeter,
		PadTop: 2 * vg.Millimeter, PadBottom: 2 * vg.Millimeter, PadLeft: 2 * vg.Millimeter, PadRight: 4 * vg.Millimeter}
	cs := plot.Align(rows, tiles, dc)
	for i := range rows {
		rows[i][0].Draw(cs[i][0])
	}
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
