package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strings"

	"github.com/prsync/prsync/bench/internal/results"
	"github.com/prsync/prsync/internal/human"
)

// prsEvent holds the fields of prsync's summary event that the report uses.
type prsEvent struct {
	Chunks            float64 `json:"chunks"`
	Suspensions       float64 `json:"suspensions"`
	SecondsSuspended  float64 `json:"seconds_suspended"`
	FilesUpToDate     float64 `json:"files_up_to_date"`
	FilesTransferred  float64 `json:"files_transferred"`
	Seconds           float64 `json:"seconds"`
	CPUSeconds        float64 `json:"cpu_seconds"`
	RsyncCPUSeconds   float64 `json:"rsync_cpu_seconds"`
	JobsMin           float64 `json:"jobs_min"`
	JobsMax           float64 `json:"jobs_max"`
	FilesVerified     float64 `json:"files_verified"`
	FilesVerifyFailed float64 `json:"files_verify_failed"`
	VerifySeconds     float64 `json:"verify_seconds"`
	FilesDeleted      float64 `json:"files_deleted"`
	DeletePass        string  `json:"delete_pass"`
	DeleteDirs        float64 `json:"delete_dirs"`
	DeleteSeconds     float64 `json:"delete_seconds"`
	ExitCode          float64 `json:"exit_code"`
}

// prsRun is one line of prsync-summaries.jsonl.
type prsRun struct {
	Scenario, Method, Case string
	Rep                    int
	Event                  prsEvent
}

// loadPrsync reads prsync-summaries.jsonl; a missing file or bad lines are
// skipped (the report works without it).
func loadPrsync(path string) []prsRun {
	if path == "" {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []prsRun
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var r prsRun
		if json.Unmarshal(sc.Bytes(), &r) == nil && r.Method != "" {
			out = append(out, r)
		}
	}
	return out
}

// prsGroup is the summary events of one (scenario, method, case).
type prsGroup struct {
	Scenario, Method, Case string
	Events                 []prsEvent
}

func (g prsGroup) values(f func(prsEvent) float64) []float64 {
	xs := make([]float64, len(g.Events))
	for i, e := range g.Events {
		xs[i] = f(e)
	}
	return xs
}

// groupPrsync groups summary events, in the report's order.
func groupPrsync(runs []prsRun) []prsGroup {
	type key struct{ sc, m, c string }
	idx := map[key]int{}
	var gs []prsGroup
	for _, r := range runs {
		k := key{r.Scenario, r.Method, r.Case}
		i, ok := idx[k]
		if !ok {
			i = len(gs)
			idx[k] = i
			gs = append(gs, prsGroup{Scenario: r.Scenario, Method: r.Method, Case: r.Case})
		}
		gs[i].Events = append(gs[i].Events, r.Event)
	}
	ss := make([]results.Summary, len(gs))
	for i, g := range gs {
		ss[i] = results.Summary{Scenario: g.Scenario, Method: g.Method, Case: g.Case}
	}
	results.Sort(ss)
	out := make([]prsGroup, len(ss))
	for i, s := range ss {
		out[i] = gs[idx[key{s.Scenario, s.Method, s.Case}]]
	}
	return out
}

func findGroup(gs []prsGroup, sc, m, c string) (prsGroup, bool) {
	for _, g := range gs {
		if g.Scenario == sc && g.Method == m && g.Case == c {
			return g, true
		}
	}
	return prsGroup{}, false
}

// valuesRatio is median(a)/median(b), with the extremes min(a)/max(b) and
// max(a)/min(b), as timeRatio does for wall times.
func valuesRatio(a, b []float64) ratio {
	if len(a) == 0 || len(b) == 0 {
		return ratio{}
	}
	alo, ahi := results.MinMax(a)
	blo, bhi := results.MinMax(b)
	return ratio{results.Median(a) / results.Median(b), alo / bhi, ahi / blo, true}
}

// countCell is the median of counts, as an integer when it is one.
func countCell(xs []float64) string {
	if len(xs) == 0 {
		return "–"
	}
	m := results.Median(xs)
	if m == math.Trunc(m) {
		return human.Count(int64(m))
	}
	return num(m)
}

// cell is "median (min–max)", or the median alone for one value.
func cell(xs []float64) string {
	if len(xs) == 0 {
		return "–"
	}
	m := results.Median(xs)
	if len(xs) == 1 {
		return num(m)
	}
	lo, hi := results.MinMax(xs)
	if lo == hi {
		return num(m)
	}
	return fmt.Sprintf("%s (%s–%s)", num(m), num(lo), num(hi))
}

func cpuCell(s results.Summary) string { return cell(s.CPUs) }

// scenarioName is the scenario with its tree, as "local (small)".
func scenarioName(s results.Summary) string {
	if s.Profile == "" {
		return s.Scenario
	}
	return s.Scenario + " (" + s.Profile + ")"
}

func scenariosOf(ss []results.Summary) []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range ss {
		if !seen[s.Scenario] {
			seen[s.Scenario] = true
			out = append(out, s.Scenario)
		}
	}
	return out
}

func writeSections(w io.Writer, ss []results.Summary, prs []prsRun) {
	gs := groupPrsync(prs)
	writeRatios(w, ss)
	writeAuto(w, ss, gs)
	writeMigrate(w, ss, gs)
	writeSizes(w, ss, gs)
	writePull(w, ss, gs)
	writeCPUSplit(w, ss, gs)
}

// writeRatios: per tree, prsync's defaults against the peers and the two
// transports against each other (issue 10).
func writeRatios(w io.Writer, ss []results.Summary) {
	type row struct {
		sc, name string
		r        ratio
	}
	var rows []row
	for _, sc := range scenariosOf(ss) {
		if sc == "migrate" || sc == "sizes" || sc == "pull" {
			continue
		}
		find := func(m, c string) (results.Summary, bool) { return results.Find(ss, sc, m, c) }
		pd, okPD := find("prsync-default", "fresh")
		name := sc
		if okPD {
			name = scenarioName(pd)
		} else if s, ok := find("prsync-direct", "fresh"); ok {
			name = scenarioName(s)
		}
		add := func(n string, r ratio) { rows = append(rows, row{name, n, r}) }
		if okPD {
			best, okBest := results.Summary{}, false
			for _, m := range []string{"rsync", "parallel-chunked", "fpsync"} {
				if s, ok := find(m, "fresh"); ok && s.OK() && (!okBest || s.WallMedian < best.WallMedian) {
					best, okBest = s, true
				}
			}
			if okBest {
				add("fresh: prsync (defaults) ÷ best rsync-based peer ("+label(best)+")", timeRatio(pd, best))
			}
			if t, ok := find("tar", "fresh"); ok {
				add("fresh: prsync (defaults) ÷ `tar -c \\| tar -x`", timeRatio(pd, t))
			}
			if a, ok := find("prsync-default", "rerun"); ok {
				if b, ok := find("rsync", "rerun"); ok {
					add("re-run: prsync (defaults) ÷ `rsync -a`", timeRatio(a, b))
				}
			}
		}
		for _, c := range []string{"fresh", "rerun"} {
			// the two transports: each named one against the defaults (pipe, and direct
			// for part of 2026-12-01: a run's label says which)
			p, okP := find("prsync-default", c)
			for _, m := range []string{"prsync-direct", "prsync-pipe"} {
				if s, ok := find(m, c); ok && okP {
					tr := strings.TrimPrefix(m, "prsync-")
					add(c+": prsync `--transport "+tr+"` ÷ prsync (defaults), wall", timeRatio(s, p))
					add(c+": prsync `--transport "+tr+"` ÷ prsync (defaults), CPU", valuesRatio(s.CPUs, p.CPUs))
				}
			}
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(w, "### Ratios per tree: prsync against its peers, and the two transports (issue 10)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Ratio of medians, extremes (min ÷ max, max ÷ min) in brackets; below 1, the first is faster. "+
		"The best peer is the one with the lowest median of those that verified.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| scenario (tree) | ratio | measured |")
	fmt.Fprintln(w, "|---|---|---:|")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %s | %s |\n", r.sc, r.name, r.r)
	}
	fmt.Fprintln(w)
}

// writeAuto: -j auto against the best fixed -j and against the defaults, per
// scenario (issue 11).
func writeAuto(w io.Writer, ss []results.Summary, gs []prsGroup) {
	type row struct {
		sc, autoWall, jobs, best, bestWall, rBest, defWall, rDef, susp string
	}
	var rows []row
	notes := map[string]bool{}
	for _, sc := range scenariosOf(ss) {
		auto, ok := results.Find(ss, sc, "prsync-auto", "fresh")
		if !ok {
			continue
		}
		r := row{sc: scenarioName(auto), autoWall: wallCell(auto) + failMark(auto), jobs: "–", best: "not measured",
			bestWall: "–", rBest: "–", defWall: "not measured", rDef: "–", susp: "–"}
		if g, ok := findGroup(gs, sc, "prsync-auto", "fresh"); ok {
			lo := results.Median(g.values(func(e prsEvent) float64 { return e.JobsMin }))
			hi := results.Median(g.values(func(e prsEvent) float64 { return e.JobsMax }))
			r.jobs = fmt.Sprintf("%s–%s", countCell([]float64{lo}), countCell([]float64{hi}))
			r.susp = countCell(g.values(func(e prsEvent) float64 { return e.Suspensions }))
		}
		var best results.Summary
		okBest, allOK := false, true
		for _, s := range ss {
			if s.Scenario != sc || s.Case != "fresh" || !strings.HasPrefix(s.Method, "prsync-j") {
				continue
			}
			if s.OK() && (!okBest || s.WallMedian < best.WallMedian) {
				best, okBest = s, true
			}
			allOK = allOK && s.OK()
			if strings.Contains(s.Label, "--no-throttle") {
				notes["throttle"] = true
			}
		}
		if okBest {
			r.best = fmt.Sprintf("-j %d", best.Jobs)
			if !allOK {
				r.best += " (of those that verified)"
			}
			r.bestWall = wallCell(best)
			r.rBest = timeRatio(auto, best).String()
		}
		if d, ok := results.Find(ss, sc, "prsync-default", "fresh"); ok {
			r.defWall = wallCell(d) + failMark(d)
			if d.Jobs > 0 {
				r.defWall += fmt.Sprintf(" (-j %d)", d.Jobs)
			}
			r.rDef = timeRatio(auto, d).String()
		}
		rows = append(rows, r)
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(w, "### -j auto against fixed -j and the defaults (issue 11)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Fresh copies; wall times are medians (min–max); the ratios are of medians, extremes in brackets (below 1: auto is faster). "+
		"The limit range is the median over the repetitions of the summary's `jobs_min` and `jobs_max`. The best fixed -j is the sweep's lowest median.")
	if notes["throttle"] {
		fmt.Fprintln(w, "The fixed -j sweep runs with `--no-throttle`; `-j auto` and the defaults keep prsync's CPU throttle (their suspensions are counted here).")
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| scenario (tree) | -j auto s | its limit | best fixed -j | its wall s | auto ÷ best | defaults s | auto ÷ defaults | auto's throttle suspensions |")
	fmt.Fprintln(w, "|---|---:|---:|---|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.sc, r.autoWall, r.jobs, r.best, r.bestWall, r.rBest, r.defWall, r.rDef, r.susp)
	}
	fmt.Fprintln(w)
}

// failMark marks a summary whose runs did not all succeed.
func failMark(s results.Summary) string {
	if s.OK() {
		return ""
	}
	return " **" + check(s) + "**"
}

// writeMigrate: the final pass of a migration, each way (issue 12).
func writeMigrate(w io.Writer, ss []results.Summary, gs []prsGroup) {
	var rows []results.Summary
	for _, s := range ss {
		if s.Scenario == "migrate" {
			rows = append(rows, s)
		}
	}
	if len(rows) == 0 {
		return
	}
	ref, okRef := results.Find(ss, "migrate", "prsync-final", rows[0].Case)
	fmt.Fprintln(w, "### Migration, the final pass: copy, `--delete`, `--verify` (issue 12)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Each run starts from the same DEST (the old copy), with a cold cache. Medians (min–max), seconds. "+
		"÷ (i) is the run's median wall time over the copy alone's. prsync's and its rsyncs' CPU, the passes and the counts come from prsync's summary event; "+
		"the check compares the whole tree (names, types, sizes, mtimes) and checksums the changed files and a sample: "+
		"DEST must equal SRC after a `--delete` run and hold SRC after the others.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| run | wall s | ÷ (i) | CPU s | prsync CPU s | rsyncs' CPU s | delete pass s | verify s | transferred | deleted | verified | check |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
	for _, s := range rows {
		rel := "–"
		if okRef {
			rel = timeRatio(s, ref).String()
		}
		own, rs, del, ver, tr, dd, vf := "–", "–", "–", "–", "–", "–", "–"
		if g, ok := findGroup(gs, s.Scenario, s.Method, s.Case); ok {
			own = cell(g.values(func(e prsEvent) float64 { return e.CPUSeconds }))
			rs = cell(g.values(func(e prsEvent) float64 { return e.RsyncCPUSeconds }))
			tr = countCell(g.values(func(e prsEvent) float64 { return e.FilesTransferred }))
			if g.Events[0].DeletePass != "" && g.Events[0].DeletePass != "not requested" {
				del = cell(g.values(func(e prsEvent) float64 { return e.DeleteSeconds }))
				dd = countCell(g.values(func(e prsEvent) float64 { return e.FilesDeleted }))
				if p := g.Events[0].DeletePass; p != "ran" {
					del += " (" + p + ")"
				}
			}
			if results.Median(g.values(func(e prsEvent) float64 { return e.FilesVerified + e.FilesVerifyFailed })) > 0 {
				ver = cell(g.values(func(e prsEvent) float64 { return e.VerifySeconds }))
				vf = countCell(g.values(func(e prsEvent) float64 { return e.FilesVerified }))
			}
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", label(s), wallCell(s), rel, cpuCell(s),
			own, rs, del, ver, tr, dd, vf, check(s))
	}
	fmt.Fprintln(w)
}

// writeSizes: prsync's own CPU with and without --sizes (issue 13).
func writeSizes(w io.Writer, ss []results.Summary, gs []prsGroup) {
	a, okA := results.Find(ss, "sizes", "prsync-sizes", "fresh")
	b, okB := results.Find(ss, "sizes", "prsync-list", "fresh")
	if !okA && !okB {
		return
	}
	fmt.Fprintln(w, "### prsync's own CPU with and without `--sizes` (issue 13)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Fresh local copies, cold cache; medians (min–max), seconds. prsync CPU is the summary's `cpu_seconds`, rsyncs' its `rsync_cpu_seconds`.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| method | wall s | CPU s (whole method) | prsync CPU s | rsyncs' CPU s | prsync ÷ rsyncs | check |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---|")
	own := map[string][]float64{}
	for _, s := range []struct {
		s  results.Summary
		ok bool
	}{{b, okB}, {a, okA}} {
		if !s.ok {
			continue
		}
		o, r, q := "–", "–", "–"
		if g, ok := findGroup(gs, "sizes", s.s.Method, "fresh"); ok {
			ov := g.values(func(e prsEvent) float64 { return e.CPUSeconds })
			rv := g.values(func(e prsEvent) float64 { return e.RsyncCPUSeconds })
			own[s.s.Method] = ov
			o, r, q = cell(ov), cell(rv), valuesRatio(ov, rv).String()
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s |\n", label(s.s), wallCell(s.s), cpuCell(s.s), o, r, q, check(s.s))
	}
	fmt.Fprintln(w)
	if okA && okB {
		fmt.Fprintln(w, "| ratio, `--sizes` ÷ without | measured |")
		fmt.Fprintln(w, "|---|---:|")
		if len(own["prsync-sizes"]) > 0 && len(own["prsync-list"]) > 0 {
			fmt.Fprintf(w, "| prsync's own CPU | %s |\n", valuesRatio(own["prsync-sizes"], own["prsync-list"]))
		}
		fmt.Fprintf(w, "| CPU of the whole method | %s |\n", valuesRatio(a.CPUs, b.CPUs))
		fmt.Fprintf(w, "| wall time | %s |\n", timeRatio(a, b))
		fmt.Fprintln(w)
	}
}

// writePull: prsync pulling from an rsync daemon against one rsync -a (issue 13).
func writePull(w io.Writer, ss []results.Summary, gs []prsGroup) {
	ref, okRef := results.Find(ss, "pull", "rsync-pull", "fresh")
	var rows []results.Summary
	for _, s := range ss {
		if s.Scenario == "pull" && s.Method != "rsync-pull" {
			rows = append(rows, s)
		}
	}
	if !okRef || len(rows) == 0 {
		return
	}
	fmt.Fprintln(w, "### Pull: prsync against one `rsync -a` from the same daemon (issue 13)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Ratios of medians, extremes in brackets; below 1, prsync is faster or cheaper. Client CPU is the pulling side's, daemon CPU its sessions'.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| method | wall ÷ `rsync -a` | client CPU ÷ `rsync -a` | daemon CPU ÷ `rsync -a` | prsync's own CPU s |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|")
	for _, s := range rows {
		srv := "–"
		if s.ServerN > 0 && ref.ServerN > 0 && ref.ServerCPUMedian > 0 {
			srv = ratio{s.ServerCPUMedian / ref.ServerCPUMedian, s.ServerCPUMin / ref.ServerCPUMax, s.ServerCPUMax / ref.ServerCPUMin, true}.String()
		}
		own := "–"
		if g, ok := findGroup(gs, "pull", s.Method, s.Case); ok {
			own = cell(g.values(func(e prsEvent) float64 { return e.CPUSeconds }))
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", label(s), timeRatio(s, ref), valuesRatio(s.CPUs, ref.CPUs), srv, own)
	}
	fmt.Fprintln(w)
}

// writeCPUSplit: prsync's own CPU against its rsyncs', for every prsync run.
func writeCPUSplit(w io.Writer, ss []results.Summary, gs []prsGroup) {
	if len(gs) == 0 {
		return
	}
	fmt.Fprintln(w, "### prsync's own CPU against its rsyncs' (summary `cpu_seconds` and `rsync_cpu_seconds`)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Medians (min–max), seconds; the ratio is of medians, extremes in brackets. The last column is the whole method as measured "+
		"(prsync, its rsyncs and `find`).")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| scenario | method | case | runs | prsync CPU s | rsyncs' CPU s | prsync ÷ rsyncs | whole method CPU s |")
	fmt.Fprintln(w, "|---|---|---|---:|---:|---:|---:|---:|")
	for _, g := range gs {
		own := g.values(func(e prsEvent) float64 { return e.CPUSeconds })
		rs := g.values(func(e prsEvent) float64 { return e.RsyncCPUSeconds })
		whole := "–"
		if s, ok := results.Find(ss, g.Scenario, g.Method, g.Case); ok {
			whole = cpuCell(s)
		}
		q := valuesRatio(own, rs)
		if results.Median(rs) == 0 {
			q = ratio{}
		}
		fmt.Fprintf(w, "| %s | %s | %s | %d | %s | %s | %s | %s |\n", g.Scenario, g.Method, g.Case, len(g.Events), cell(own), cell(rs),
			strings.Replace(q.String(), "not measured", "–", 1), whole)
	}
	fmt.Fprintln(w)
}
