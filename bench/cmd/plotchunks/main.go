// Command plotchunks draws, from prsync's JSON-lines events kept by bench/scenarios.sh,
// the rsyncs running (counted from chunk_start and chunk_end), the limit on them (-j: the
// start event's jobs, then each jobs event's new, dashed) and the size of each chunk
// (chunk_start's files, a point at its start) over time: one PNG per scenario, two
// panels, one colour per repetition.
//
// Log names are sS-METHOD-REP.jsonl, as scenarios.sh writes them.
//
// Usage: plotchunks -logs DIR [-scenarios 1,3] [-method prsync-default] [-out PREFIX]
//
// It writes PREFIX-sS.png and prints their names.
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
	logs := flag.String("logs", "", "directory of the per-run logs (sS-METHOD-REP.jsonl)")
	scs := flag.String("scenarios", "1,3", "scenarios to draw, comma-separated")
	method := flag.String("method", "prsync-default", "method to draw")
	out := flag.String("out", "", "prefix of the PNGs (default DIR/../chunks)")
	flag.Parse()
	if *logs == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: plotchunks -logs DIR [-scenarios 1,3] [-method prsync-default] [-out PREFIX]")
		os.Exit(2)
	}
	if *out == "" {
		*out = filepath.Join(filepath.Dir(filepath.Clean(*logs)), "chunks")
	}
	status := 0
	for _, sc := range strings.Split(*scs, ",") {
		sc = strings.TrimSpace(sc)
		if sc == "" {
			continue
		}
		runs, err := load(*logs, sc, *method)
		if err == nil && len(runs) == 0 {
			err = fmt.Errorf("no logs of %s in scenario %s", *method, sc)
		}
		if err == nil {
			name := fmt.Sprintf("%s-s%s.png", *out, sc)
			if err = draw2(name, sc, *method, runs); err == nil {
				fmt.Println(name)
			}
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "plotchunks:", err)
			status = 1
		}
	}
	os.Exit(status)
}

type point struct{ X, Y float64 }

// run is one repetition: the running rsyncs and the limit as steps, the chunk sizes as
// points.
type run struct {
	Rep     int
	Running []point
	Limit   []point
	Chunks  []point
	End     float64
}

type event struct {
	Type  string    `json:"type"`
	Time  time.Time `json:"time"`
	Files int       `json:"files"`
	Jobs  int       `json:"jobs"` // start: the limit the run starts with
	New   int       `json:"new"`  // jobs: the limit from now on
}

func load(dir, sc, method string) ([]run, error) {
	re := regexp.MustCompile(`^s` + regexp.QuoteMeta(sc) + `-` + regexp.QuoteMeta(method) + `-([0-9]+)\.jsonl$`)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var runs []run
	for _, e := range ents {
		m := re.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		r, err := parse(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.Name(), err)
		}
		r.Rep, _ = strconv.Atoi(m[1])
		runs = append(runs, r)
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].Rep < runs[j].Rep })
	return runs, nil
}

func parse(rd io.Reader) (run, error) {
	var r run
	var t0 time.Time
	started := false
	n := 0.0
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue
		}
		if e.Type == "start" {
			t0, started = e.Time, true
			r.Running = append(r.Running, point{0, 0})
			r.Limit = append(r.Limit, point{0, float64(e.Jobs)})
			continue
		}
		if !started {
			continue
		}
		x := e.Time.Sub(t0).Seconds()
		switch e.Type {
		case "chunk_start":
			r.Running = append(r.Running, point{x, n})
			n++
			r.Running = append(r.Running, point{x, n})
			r.Chunks = append(r.Chunks, point{x, float64(e.Files)})
		case "chunk_end":
			r.Running = append(r.Running, point{x, n})
			n--
			r.Running = append(r.Running, point{x, n})
		case "jobs":
			if k := len(r.Limit); k > 0 {
				r.Limit = append(r.Limit, point{x, r.Limit[k-1].Y})
			}
			r.Limit = append(r.Limit, point{x, float64(e.New)})
		case "summary":
			r.End = x
		}
		r.End = max(r.End, x)
	}
	if err := sc.Err(); err != nil {
		return r, err
	}
	if !started {
		return r, fmt.Errorf("no start event")
	}
	if k := len(r.Limit); k > 0 {
		r.Limit = append(r.Limit, point{r.End, r.Limit[k-1].Y})
	}
	return r, nil
}

var colors = []color.Color{
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}, color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
}

func draw2(name, sc, method string, runs []run) error {
	top, bottom := plot.New(), plot.New()
	top.Title.Text = fmt.Sprintf("scenario %s, %s: rsyncs running (chunk_start/chunk_end), and -j dashed", sc, method)
	bottom.Title.Text = fmt.Sprintf("scenario %s, %s: files per chunk, at each chunk_start", sc, method)
	for _, p := range []*plot.Plot{top, bottom} {
		p.X.Label.Text = "seconds since start"
		p.Add(plotter.NewGrid())
		p.Legend.Top = true
	}
	top.Y.Label.Text = "rsyncs"
	bottom.Y.Label.Text = "files"
	xMax := 1.0
	for i, r := range runs {
		col := colors[i%len(colors)]
		xy := make(plotter.XYs, len(r.Running))
		for k, q := range r.Running {
			xy[k] = plotter.XY{X: q.X, Y: q.Y}
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			return err
		}
		l.Color, l.Width = col, vg.Points(1.5)
		top.Add(l)
		top.Legend.Add(fmt.Sprintf("rep %d (%.1f s)", r.Rep, r.End), l)
		if len(r.Limit) > 0 {
			lim := make(plotter.XYs, len(r.Limit))
			for k, q := range r.Limit {
				lim[k] = plotter.XY{X: q.X, Y: q.Y}
			}
			ll, err := plotter.NewLine(lim)
			if err != nil {
				return err
			}
			ll.Color, ll.Width, ll.Dashes = col, vg.Points(1), []vg.Length{vg.Points(4), vg.Points(3)}
			top.Add(ll)
		}
		if len(r.Chunks) > 0 {
			pts := make(plotter.XYs, len(r.Chunks))
			for k, q := range r.Chunks {
				pts[k] = plotter.XY{X: q.X, Y: q.Y}
			}
			s, err := plotter.NewScatter(pts)
			if err != nil {
				return err
			}
			s.Color, s.Radius = col, vg.Points(2.5)
			bottom.Add(s)
			bottom.Legend.Add(fmt.Sprintf("rep %d: %d chunks", r.Rep, len(r.Chunks)), s)
		}
		xMax = max(xMax, r.End)
	}
	for _, p := range []*plot.Plot{top, bottom} {
		p.X.Min, p.X.Max = 0, xMax*1.02
		p.Y.Min = 0
	}
	rows := [][]*plot.Plot{{top}, {bottom}}
	img := vgimg.NewWith(vgimg.UseWH(10*vg.Inch, 7*vg.Inch), vgimg.UseDPI(100))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadX: vg.Millimeter, PadY: 6 * vg.Millimeter,
		PadTop: 2 * vg.Millimeter, PadBottom: 2 * vg.Millimeter, PadLeft: 2 * vg.Millimeter, PadRight: 4 * vg.Millimeter}
	cs := plot.Align(rows, tiles, dc)
	top.Draw(cs[0][0])
	bottom.Draw(cs[1][0])
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
