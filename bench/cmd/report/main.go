// Command report turns the raw results CSV of bench/run.sh (and of
// bench/migrate.sh and bench/pull.sh, which write the same columns) into a
// summary CSV and a markdown table (printed to stdout and optionally written
// to a file), with the ratios against the performance goals of issue 5, and,
// where their methods ran: the transport and peer ratios (issue 10), -j auto
// against the fixed -j (issue 11), the migration passes (issue 12), --sizes
// and the pull (issue 13), and prsync's own CPU against its rsyncs'.
//
// Usage: report -in results.csv [-machine machine.txt] [-summary summary.csv] [-md RESULTS.md]
//
//	[-prsync-summaries prsync-summaries.jsonl]
package main

import (
	"bufio"
	"encoding/csv"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/prsync/prsync/bench/internal/results"
	"github.com/prsync/prsync/internal/human"
)

func main() {
	in := flag.String("in", "", "raw results CSV written by run.sh")
	machine := flag.String("machine", "", "machine description (key: value lines)")
	summary := flag.String("summary", "", "write the summary CSV here")
	md := flag.String("md", "", "also write the markdown here")
	title := flag.String("title", "", "first line of the markdown (default: derived)")
	prs := flag.String("prsync-summaries", "", "prsync-summaries.jsonl written by run.sh (optional)")
	flag.Parse()
	if *in == "" {
		fmt.Fprintln(os.Stderr, "usage: report -in results.csv [-machine FILE] [-summary FILE] [-md FILE]")
		os.Exit(2)
	}
	runs, err := results.ReadFile(*in)
	if err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
	ss := results.Summarize(runs)
	results.Sort(ss)

	if *summary != "" {
		if err := writeSummary(*summary, ss); err != nil {
			fmt.Fprintln(os.Stderr, "report:", err)
			os.Exit(1)
		}
	}
	var sb strings.Builder
	m := readMachine(*machine)
	prsRuns := loadPrsync(*prs)
	writeMarkdown(&sb, runs, ss, m, *title)
	writeSections(&sb, ss, prsRuns)
	writePrsync(&sb, prsRuns)
	fmt.Print(sb.String())
	if *md != "" {
		if err := os.WriteFile(*md, []byte(sb.String()), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "report:", err)
			os.Exit(1)
		}
	}
}

type kv struct{ k, v string }

func readMachine(path string) []kv {
	if path == "" {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []kv
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok {
			out = append(out, kv{strings.TrimSpace(k), strings.TrimSpace(v)})
		}
	}
	return out
}

func get(m []kv, k string) string {
	for _, e := range m {
		if e.k == k {
			return e.v
		}
	}
	return ""
}

func writeSummary(path string, ss []results.Summary) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	w.Write([]string{"scenario", "method", "label", "case", "n", "jobs", "extrapolated",
		"wall_median_s", "wall_min_s", "wall_max_s", "cpu_median_s", "cpu_min_s", "cpu_max_s",
		"maxrss_median_mb", "files", "bytes", "files_per_s", "mb_per_s", "mbit_per_s",
		"verify_failed", "exit_codes"})
	ff := func(x float64) string { return strconv.FormatFloat(x, 'f', 3, 64) }
	for _, s := range ss {
		var exits []string
		for _, e := range s.Exits {
			exits = append(exits, strconv.Itoa(e))
		}
		w.Write([]string{s.Scenario, s.Method, s.Label, s.Case, strconv.Itoa(s.N),
			strconv.Itoa(s.Jobs), strconv.FormatBool(s.Extrapolated),
			ff(s.WallMedian), ff(s.WallMin), ff(s.WallMax), ff(s.CPUMedian), ff(s.CPUMin), ff(s.CPUMax),
			ff(s.RSSMedianMB), strconv.FormatInt(s.Files, 10), strconv.FormatInt(s.Bytes, 10),
			ff(s.FilesPerSec()), ff(s.MBPerSec()), ff(s.MbitPerSec()),
			strconv.Itoa(s.Failed), strings.Join(exits, " ")})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// num formats with thousands separators and a precision that suits the size.
func num(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "–"
	}
	var s string
	switch ax := math.Abs(x); {
	case ax >= 100:
		s = strconv.FormatFloat(x, 'f', 0, 64)
	case ax >= 10:
		s = strconv.FormatFloat(x, 'f', 1, 64)
	default:
		s = strconv.FormatFloat(x, 'f', 2, 64)
	}
	return human.Thousands(s)
}

func check(s results.Summary) string {
	var parts []string
	if s.Failed > 0 {
		parts = append(parts, fmt.Sprintf("**FAIL** %d/%d", s.Failed, s.N))
	}
	if len(s.Exits) > 0 {
		var e []string
		for _, x := range s.Exits {
			e = append(e, strconv.Itoa(x))
		}
		parts = append(parts, "exit "+strings.Join(e, ","))
	}
	if len(parts) == 0 {
		return "ok"
	}
	return strings.Join(parts, "; ")
}

func label(s results.Summary) string {
	l := s.Label
	if l == "" {
		l = s.Method
	}
	l = "`" + strings.ReplaceAll(l, "|", `\|`) + "`"
	if s.Extrapolated {
		l += " (extrapolated ×" + num(s.Scale) + ")"
	}
	return l
}

func serverCell(s results.Summary) string {
	if s.ServerN == 0 {
		return "–"
	}
	return num(s.ServerCPUMedian)
}

func wallCell(s results.Summary) string {
	if s.N == 1 {
		return num(s.WallMedian)
	}
	return fmt.Sprintf("%s (%s–%s)", num(s.WallMedian), num(s.WallMin), num(s.WallMax))
}

var scenarioTitle = map[string]string{
	"local":   "Local disk to local disk (same filesystem)",
	"migrate": "Migration, the final pass (bench/migrate.sh): DEST holds the old copy; about 1 % of the files deleted, added and modified since",
	"sizes":   "prsync's own CPU with and without `--sizes` (bench/pull.sh), fresh local copy",
	"pull":    "Pull from a local `rsync://` daemon (bench/pull.sh), fresh copy",
}

var treeName = map[string]string{
	"big": "20 × 100 MiB tree", "small": "the 50k-file tree", "many": "200k tiny files", "tiny": "the tiny tree",
}

// title of a scenario; network ones carry the shaping, from machine.txt.
func titleOf(sc string, m []kv) string {
	if t := scenarioTitle[sc]; t != "" {
		return t
	}
	if prof, ok := strings.CutPrefix(sc, "net-"); ok {
		tree := treeName[prof]
		if tree == "" {
			tree = "profile " + prof
		}
		return "Network, " + tree + ": " + netShaping(m)
	}
	return sc
}

// netShaping describes the shaped link from machine.txt (defaults when absent).
func netShaping(m []kv) string {
	stream, link := get(m, "net stream cap"), get(m, "net link cap")
	if stream == "" {
		stream = "400mbit"
	}
	if link == "" {
		link = "2gbit"
	}
	s := fmt.Sprintf("`rsync://` daemon across a veth pair, %s per TCP stream, %s link (tc htb)", rateText(stream), rateText(link))
	if mc := get(m, "net max connections"); mc != "" && mc != "0" {
		s += ", daemon `max connections = " + mc + "`"
	}
	return s
}

// rateText turns tc's 400mbit into 400 Mbit/s.
func rateText(r string) string {
	for _, u := range []struct{ suf, txt string }{{"tbit", " Tbit/s"}, {"gbit", " Gbit/s"}, {"mbit", " Mbit/s"}, {"kbit", " kbit/s"},
		{"tbps", " TB/s"}, {"gbps", " GB/s"}, {"mbps", " MB/s"}, {"kbps", " kB/s"}, {"bit", " bit/s"}, {"bps", " B/s"}} {
		if n, ok := strings.CutSuffix(strings.ToLower(r), u.suf); ok {
			return n + u.txt
		}
	}
	return r
}

func writeMarkdown(w io.Writer, runs []results.Run, ss []results.Summary, m []kv, title string) {
	prof, reps := "", 0
	for _, r := range runs {
		if r.Scenario == "local" || prof == "" {
			prof = r.Profile
		}
		reps = max(reps, r.Rep)
	}
	if title == "" {
		title = "## prsync benchmark results"
	}
	fmt.Fprintln(w, title)
	fmt.Fprintln(w)
	if tree := get(m, "tree"); tree != "" {
		fmt.Fprintf(w, "Tree: %s. ", tree)
	} else if prof != "" {
		fmt.Fprintf(w, "Profile `%s`. ", prof)
	}
	fmt.Fprintf(w, "%d repetition(s), methods interleaved; every figure is the median, min–max in brackets.", reps)
	if c := get(m, "page cache"); c != "" {
		fmt.Fprintf(w, " Page cache: %s.", c)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w)
	if len(m) > 0 {
		var parts []string
		for _, e := range m {
			if e.k == "tree" || e.k == "page cache" {
				continue
			}
			parts = append(parts, e.k+": "+e.v)
		}
		fmt.Fprintf(w, "Machine: %s.\n\n", strings.Join(parts, "; "))
	}

	scenarios := []string{}
	seen := map[string]bool{}
	for _, s := range ss {
		if !seen[s.Scenario] {
			seen[s.Scenario] = true
			scenarios = append(scenarios, s.Scenario)
		}
	}
	for _, sc := range scenarios {
		fmt.Fprintf(w, "### %s\n\n", titleOf(sc, m))
		net := strings.HasPrefix(sc, "net") || sc == "pull"
		server := false
		for _, s := range ss {
			server = server || (s.Scenario == sc && s.ServerN > 0)
		}
		if net {
			if server {
				fmt.Fprintln(w, "| method | case | wall s | Mbit/s | files/s | client CPU s | daemon CPU s | peak RSS MB | check |")
				fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---|")
			} else {
				fmt.Fprintln(w, "| method | case | wall s | Mbit/s | files/s | client CPU s | peak RSS MB | check |")
				fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---|")
			}
		} else {
			fmt.Fprintln(w, "| method | case | wall s | CPU s | peak RSS MB | files/s | MB/s | check |")
			fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---|")
		}
		for _, s := range ss {
			if s.Scenario != sc {
				continue
			}
			if net {
				srv := ""
				if server {
					srv = " " + serverCell(s) + " |"
				}
				fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |%s %s | %s |\n", label(s), s.Case, wallCell(s),
					num(s.MbitPerSec()), num(s.FilesPerSec()), num(s.CPUMedian), srv, num(s.RSSMedianMB), check(s))
			} else {
				fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", label(s), s.Case, wallCell(s),
					num(s.CPUMedian), num(s.RSSMedianMB), num(s.FilesPerSec()), num(s.MBPerSec()), check(s))
			}
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "CPU s is user + system time of the whole method, children included; peak RSS is the largest single process. "+
		"`rerun` repeats the method on the already-synced destination (nothing to copy); files/s and MB/s there are the tree size over the wall time.")
	for _, sc := range scenarios {
		if strings.HasPrefix(sc, "net") || sc == "pull" {
			fmt.Fprintln(w)
			fmt.Fprintln(w, "On the network and pull tables, client CPU is the side the method runs on; daemon CPU (where shown) is the rsync daemon's sessions, "+
				"read from its reaped children's rusage, on the same machine.")
			break
		}
	}
	fmt.Fprintln(w)
	writeGoals(w, ss)
}

// ratio of a to b: medians, and the range from the extremes.
type ratio struct {
	med, lo, hi float64
	ok          bool
}

func timeRatio(a, b results.Summary) ratio {
	return ratio{a.WallMedian / b.WallMedian, a.WallMin / b.WallMax, a.WallMax / b.WallMin, true}
}

func (r ratio) String() string {
	if !r.ok {
		return "not measured"
	}
	return fmt.Sprintf("%.2f (%.2f–%.2f)", r.med, r.lo, r.hi)
}

func writeGoals(w io.Writer, ss []results.Summary) {
	type goal struct {
		name, target string
		r            ratio
		met          func(float64) bool
	}
	var goals []goal
	find := func(sc, m, c string) (results.Summary, bool) { return results.Find(ss, sc, m, c) }

	hasLocal := false
	for _, s := range ss {
		hasLocal = hasLocal || s.Scenario == "local"
	}
	pd, okPD := find("local", "prsync-default", "fresh")
	best, okBest := results.Summary{}, false
	for _, m := range []string{"parallel-chunked", "fpsync"} {
		if s, ok := find("local", m, "fresh"); ok && s.OK() && (!okBest || s.WallMedian < best.WallMedian) {
			best, okBest = s, true
		}
	}
	g := goal{name: "fresh copy: prsync (defaults) ÷ best of chunked parallel and fpsync", target: "≤ 0.85",
		met: func(x float64) bool { return x <= 0.85 }}
	if okPD && okBest {
		g.r = timeRatio(pd, best)
		g.name += " (" + best.Method + ")"
	}
	goals = append(goals, g)

	g = goal{name: "fresh copy: prsync (defaults) ÷ `cp -a`", target: "≤ 1.0", met: func(x float64) bool { return x <= 1.0 }}
	if cp, ok := find("local", "cp", "fresh"); ok && okPD {
		g.r = timeRatio(pd, cp)
	}
	goals = append(goals, g)

	g = goal{name: "re-run: prsync (defaults) ÷ `rsync -a`", target: "≤ 1.0", met: func(x float64) bool { return x <= 1.0 }}
	if a, ok := find("local", "prsync-default", "rerun"); ok {
		if b, ok := find("local", "rsync", "rerun"); ok {
			g.r = timeRatio(a, b)
		}
	}
	goals = append(goals, g)
	if !hasLocal {
		goals = nil
	}

	for _, sc := range []string{"net-big", "net-small"} {
		g = goal{name: sc + ": throughput prsync -j 8 ÷ fpsync", target: "≥ 1.2", met: func(x float64) bool { return x >= 1.2 }}
		p8, ok1 := find(sc, "prsync-j8", "fresh")
		fp, ok2 := find(sc, "fpsync", "fresh")
		if ok1 && ok2 {
			// throughput ratio = inverse time ratio
			g.r = ratio{fp.WallMedian / p8.WallMedian, fp.WallMin / p8.WallMax, fp.WallMax / p8.WallMin, true}
		}
		if ok1 || ok2 {
			goals = append(goals, g)
		}
	}

	if len(goals) == 0 {
		return
	}
	fmt.Fprintln(w, "### Goals of issue 5 (ratio of medians, extremes in brackets)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| goal | measured | target | met |")
	fmt.Fprintln(w, "|---|---:|---:|---|")
	for _, g := range goals {
		met := "–"
		if g.r.ok {
			met = "no"
			if g.met(g.r.med) {
				met = "yes"
			}
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", g.name, g.r, g.target, met)
	}
	fmt.Fprintln(w)
}

// writePrsync summarizes prsync's own summary events: chunks and throttle
// suspensions per method and case (medians over the repetitions).
func writePrsync(w io.Writer, runs []prsRun) {
	groups := groupPrsync(runs)
	if len(groups) == 0 {
		return
	}
	fmt.Fprintln(w, "### prsync's own summary events (medians)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| scenario | method | case | chunks | throttle suspensions | seconds suspended | files up to date |")
	fmt.Fprintln(w, "|---|---|---|---:|---:|---:|---:|")
	for _, g := range groups {
		count := func(f func(prsEvent) float64) string {
			m := results.Median(g.values(f))
			if m == math.Trunc(m) {
				return human.Count(int64(m))
			}
			return num(m)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s |\n", g.Scenario, g.Method, g.Case,
			count(func(e prsEvent) float64 { return e.Chunks }),
			count(func(e prsEvent) float64 { return e.Suspensions }),
			num(results.Median(g.values(func(e prsEvent) float64 { return e.SecondsSuspended }))),
			count(func(e prsEvent) float64 { return e.FilesUpToDate }))
	}
	fmt.Fprintln(w)
}
