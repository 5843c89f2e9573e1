// Package results reads the raw results CSV that bench/run.sh writes and
// summarizes it: one row per (scenario, method, case), with median, min and
// max over the repetitions.
package results

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
)

// Header is the column list of the raw results CSV, in order.
var Header = []string{
	"profile", "scenario", "method", "label", "case", "rep", "jobs",
	"extrapolated", "scale", "wall_s", "user_s", "sys_s", "maxrss_kb",
	"exit", "verify", "files", "bytes", "server_cpu_s",
}

// Run is one measured run (one row of the raw CSV).
type Run struct {
	Profile      string
	Scenario     string // local, net-big, net-small
	Method       string // rsync, cp, tar, parallel-perfile, parallel-chunked, fpsync, prsync-j4, prsync-default
	Label        string // the command, for people
	Case         string // fresh or rerun
	Rep          int
	Jobs         int     // concurrent transfers; 0 when not applicable
	Extrapolated bool    // measured on a subset and scaled by Scale
	Scale        float64 // wall and CPU are already multiplied by it
	Wall         float64
	User, Sys    float64
	MaxRSSKB     int64
	Exit         int
	Verify       string // ok, or FAIL: reason
	Files        int64
	Bytes        int64
	// ServerCPU is the CPU seconds of the far side (the rsync daemon's
	// sessions) when the harness could measure it; HasServer says so.
	ServerCPU float64
	HasServer bool
}

// Read parses a raw results CSV. Columns are matched by name, so files with
// extra columns still read.
func Read(r io.Reader) ([]Run, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	rows, err := cr.ReadAll()
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("empty results file")
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[strings.TrimSpace(h)] = i
	}
	for _, h := range []string{"scenario", "method", "case", "wall_s"} {
		if _, ok := col[h]; !ok {
			return nil, fmt.Errorf("results: missing column %q", h)
		}
	}
	get := func(row []string, name string) string {
		if i, ok := col[name]; ok && i < len(row) {
			return strings.TrimSpace(row[i])
		}
		return ""
	}
	f := func(row []string, name string) float64 {
		v, _ := strconv.ParseFloat(get(row, name), 64)
		return v
	}
	n := func(row []string, name string) int64 {
		v, _ := strconv.ParseInt(get(row, name), 10, 64)
		return v
	}
	var runs []Run
	for i, row := range rows[1:] {
		if len(row) == 1 && row[0] == "" {
			continue
		}
		if _, err := strconv.ParseFloat(get(row, "wall_s"), 64); err != nil {
			return nil, fmt.Errorf("results line %d: bad wall_s %q", i+2, get(row, "wall_s"))
		}
		runs = append(runs, Run{
			Profile:      get(row, "profile"),
			Scenario:     get(row, "scenario"),
			Method:       get(row, "method"),
			Label:        get(row, "label"),
			Case:         get(row, "case"),
			Rep:          int(n(row, "rep")),
			Jobs:         int(n(row, "jobs")),
			Extrapolated: get(row, "extrapolated") == "1" || get(row, "extrapolated") == "true",
			Scale:        f(row, "scale"),
			Wall:         f(row, "wall_s"),
			User:         f(row, "user_s"),
			Sys:          f(row, "sys_s"),
			MaxRSSKB:     n(row, "maxrss_kb"),
			Exit:         int(n(row, "exit")),
			Verify:       get(row, "verify"),
			Files:        n(row, "files"),
			Bytes:        n(row, "bytes"),
			ServerCPU:    f(row, "server_cpu_s"),
			HasServer:    get(row, "server_cpu_s") != "",
		})
	}
	return runs, nil
}

// ReadFile reads a raw results CSV from a file.
func ReadFile(path string) ([]Run, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	return Read(fh)
}

// Summary aggregates the runs of one (scenario, method, case).
type Summary struct {
	Profile                       string // the tree of the first run
	Scenario, Method, Label, Case string
	Jobs                          int
	Extrapolated                  bool
	Scale                         float64
	N                             int
	WallMedian, WallMin, WallMax  float64
	CPUMedian, CPUMin, CPUMax     float64
	RSSMedianMB                   float64
	Files, Bytes                  int64
	Failed                        int   // runs whose verification failed
	Exits                         []int // distinct non-zero exit codes
	// The far side's CPU (median, min, max) over the runs that measured it;
	// ServerN is how many did.
	ServerCPUMedian, ServerCPUMin, ServerCPUMax float64
	ServerN                                     int
	Walls, CPUs                                 []float64 // every run's, in order
}

// FilesPerSec is files divided by the median wall time.
func (s Summary) FilesPerSec() float64 { return div(float64(s.Files), s.WallMedian) }

// MBPerSec is megabytes (10^6) divided by the median wall time.
func (s Summary) MBPerSec() float64 { return div(float64(s.Bytes)/1e6, s.WallMedian) }

// MbitPerSec is megabits (10^6) divided by the median wall time.
func (s Summary) MbitPerSec() float64 { return div(float64(s.Bytes)*8/1e6, s.WallMedian) }

// OK reports whether every run verified and exited 0.
func (s Summary) OK() bool { return s.Failed == 0 && len(s.Exits) == 0 }

func div(a, b float64) float64 {
	if b <= 0 {
		return math.NaN()
	}
	return a / b
}

// Median of xs (the mean of the middle two for an even count).
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}

// MinMax returns the smallest and the largest of xs (+Inf, -Inf when empty).
func MinMax(xs []float64) (float64, float64) { return minMax(xs) }

func minMax(xs []float64) (float64, float64) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, x := range xs {
		lo, hi = math.Min(lo, x), math.Max(hi, x)
	}
	return lo, hi
}

// Summarize groups runs by (scenario, method, case), keeping the order in
// which each group first appears.
func Summarize(runs []Run) []Summary {
	type key struct{ sc, m, c string }
	idx := map[key]int{}
	var out []Summary
	var walls, cpus, rss, srv [][]float64
	for _, r := range runs {
		k := key{r.Scenario, r.Method, r.Case}
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, Summary{Profile: r.Profile, Scenario: r.Scenario, Method: r.Method, Label: r.Label,
				Case: r.Case, Jobs: r.Jobs, Extrapolated: r.Extrapolated, Scale: r.Scale,
				Files: r.Files, Bytes: r.Bytes})
			walls, cpus, rss, srv = append(walls, nil), append(cpus, nil), append(rss, nil), append(srv, nil)
		}
		s := &out[i]
		s.N++
		walls[i] = append(walls[i], r.Wall)
		cpus[i] = append(cpus[i], r.User+r.Sys)
		rss[i] = append(rss[i], float64(r.MaxRSSKB)/1024)
		if r.HasServer {
			srv[i] = append(srv[i], r.ServerCPU)
		}
		if r.Jobs > s.Jobs {
			s.Jobs = r.Jobs
		}
		if r.Verify != "ok" {
			s.Failed++
		}
		if r.Exit != 0 && !contains(s.Exits, r.Exit) {
			s.Exits = append(s.Exits, r.Exit)
		}
	}
	for i := range out {
		s := &out[i]
		s.WallMedian = Median(walls[i])
		s.WallMin, s.WallMax = minMax(walls[i])
		s.CPUMedian = Median(cpus[i])
		s.CPUMin, s.CPUMax = minMax(cpus[i])
		s.RSSMedianMB = Median(rss[i])
		s.Walls, s.CPUs = walls[i], cpus[i]
		if s.ServerN = len(srv[i]); s.ServerN > 0 {
			s.ServerCPUMedian = Median(srv[i])
			s.ServerCPUMin, s.ServerCPUMax = minMax(srv[i])
		}
	}
	return out
}

func contains(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// Find returns the summary for (scenario, method, case).
func Find(ss []Summary, scenario, method, kase string) (Summary, bool) {
	for _, s := range ss {
		if s.Scenario == scenario && s.Method == method && s.Case == kase {
			return s, true
		}
	}
	return Summary{}, false
}

var methodRank = map[string]int{
	"rsync": 0, "cp": 1, "tar": 2, "parallel-perfile": 3, "parallel-chunked": 4,
	"fpsync": 5, "prsync-default": 1000, "prsync-direct": 1001, "prsync-auto": 1002,
	// bench/migrate.sh, in the order of its runs (i)-(vi)
	"prsync-final": 1100, "prsync-final-delete": 1101, "prsync-final-verify": 1102,
	"prsync-final-delete-verify": 1103, "rsync-delete": 1104, "rsync-checksum": 1105,
	// bench/pull.sh
	"prsync-list": 1200, "prsync-sizes": 1201,
	"rsync-pull": 1300, "prsync-pull": 1301, "prsync-pull-sizes": 1302,
}

var scenarioRank = map[string]int{"local": 0, "net-tiny": 1, "net-big": 2, "net-small": 3, "net-many": 4,
	"migrate": 10, "sizes": 11, "pull": 12}

func rank(m string) int {
	if r, ok := methodRank[m]; ok {
		return r
	}
	var j int
	if _, err := fmt.Sscanf(m, "prsync-j%d", &j); err == nil {
		return 100 + j
	}
	return 2000
}

// Sort orders summaries by scenario, then a fixed method order (prsync by -j,
// defaults last), then fresh before rerun.
func Sort(ss []Summary) {
	sort.SliceStable(ss, func(i, j int) bool {
		a, b := ss[i], ss[j]
		ra, oka := scenarioRank[a.Scenario]
		rb, okb := scenarioRank[b.Scenario]
		if !oka {
			ra = 99
		}
		if !okb {
			rb = 99
		}
		if ra != rb {
			return ra < rb
		}
		if a.Scenario != b.Scenario {
			return a.Scenario < b.Scenario
		}
		if rank(a.Method) != rank(b.Method) {
			return rank(a.Method) < rank(b.Method)
		}
		if a.Method != b.Method {
			return a.Method < b.Method
		}
		return a.Case == "fresh" && b.Case != "fresh"
	})
}
