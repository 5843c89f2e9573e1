// Command scenreport turns bench/scenarios.sh's results.csv into the markdown section of
// bench/RESULTS.md for the scenarios (issue 23's seven, and issue 45's large variants): per scenario the medians of one
// rsync -a, the best GNU parallel and fpsync settings of the sweep, prsync's best fixed
// --chunk-files x -j and prsync's defaults, the ratios of the defaults to the others, and
// the goals marked met or missed. Only methods whose every repetition exited 0
// and matched the source take part; the others are listed as FAIL.
//
// Usage: scenreport -in results.csv [-machine machine.txt] [-md OUT.md] [-summary OUT.csv]
// [-splice RESULTS.md -plots PREFIX]
package main

import (
	"bufio"
	"encoding/csv"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
)

func main() {
	in := flag.String("in", "", "results.csv of scenarios.sh")
	machine := flag.String("machine", "", "machine.txt of the run")
	md := flag.String("md", "", "write the markdown section here (default stdout)")
	summary := flag.String("summary", "", "write per-method medians here (CSV)")
	splice := flag.String("splice", "", "replace the section between the scenario markers of this file (appended when absent)")
	plots := flag.String("plots", "", "prefix of the chunk plots, relative to the markdown file (PREFIX-s1.png)")
	flag.Parse()
	if *in == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: scenreport -in results.csv [-machine F] [-md F] [-summary F] [-splice F -plots PREFIX]")
		os.Exit(2)
	}
	if err := run(*in, *machine, *md, *summary, *splice, *plots); err != nil {
		fmt.Fprintln(os.Stderr, "scenreport:", err)
		os.Exit(1)
	}
}

func run(in, machine, mdPath, summaryPath, splicePath, plots string) error {
	f, err := os.Open(in)
	if err != nil {
		return err
	}
	defer f.Close()
	rows, err := readRows(f)
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	ms := summarize(rows)
	var mach []string
	if machine != "" {
		b, err := os.ReadFile(machine)
		if err != nil {
			return err
		}
		mach = strings.Split(strings.TrimSpace(string(b)), "\n")
	}
	text := render(ms, mach, plots)
	if summaryPath != "" {
		if err := writeSummary(summaryPath, ms); err != nil {
			return err
		}
	}
	if splicePath != "" {
		return spliceInto(splicePath, text)
	}
	if mdPath == "" {
		fmt.Print(text)
		return nil
	}
	fmt.Print(text)
	return os.WriteFile(mdPath, []byte(text), 0o644)
}

// Row is one run of results.csv.
type Row struct {
	Scenario, Name, Method, Tool string
	Chunk, Jobs, Rep             int
	Wall, CPU                    float64
	Chunks, Suspended            float64 // from prsync's summary; NaN for the others
	OK                           bool
	Verify                       string
}

func readRows(r io.Reader) ([]Row, error) {
	cr := csv.NewReader(r)
	recs, err := cr.ReadAll()
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("empty")
	}
	col := map[string]int{}
	for i, h := range recs[0] {
		col[h] = i
	}
	for _, h := range []string{"scenario", "name", "method", "tool", "chunk", "jobs", "rep", "wall_s", "user_s", "sys_s", "exit", "verify"} {
		if _, ok := col[h]; !ok {
			return nil, fmt.Errorf("no column %s", h)
		}
	}
	var rows []Row
	for _, rec := range recs[1:] {
		g := func(h string) string { return rec[col[h]] }
		num := func(h string) float64 { v, _ := strconv.ParseFloat(g(h), 64); return v }
		r := Row{Scenario: g("scenario"), Name: g("name"), Method: g("method"), Tool: g("tool"),
			Chunk: int(num("chunk")), Jobs: int(num("jobs")), Rep: int(num("rep")),
			Wall: num("wall_s"), CPU: num("user_s") + num("sys_s"), Verify: g("verify")}
		r.Chunks, r.Suspended = math.NaN(), math.NaN()
		if i, ok := col["chunks"]; ok && rec[i] != "" {
			r.Chunks, _ = strconv.ParseFloat(rec[i], 64)
		}
		if i, ok := col["suspended_s"]; ok && rec[i] != "" {
			r.Suspended, _ = strconv.ParseFloat(rec[i], 64)
		}
		r.OK = g("exit") == "0" && r.Verify == "ok"
		rows = append(rows, r)
	}
	return rows, nil
}

// Method is one method of one scenario over its repetitions.
type Method struct {
	Scenario, Name, Method, Tool string
	Chunk, Jobs                  int
	Walls, CPUs                  []float64
	Chunks, Suspended            []float64
	Runs, Failed                 int
	FirstFail                    string
}

// OK says every repetition exited 0 and matched the source.
func (m *Method) OK() bool { return m.Runs > 0 && m.Failed == 0 }

// Median is the median wall time.
func (m *Method) Median() float64 { return median(m.Walls) }

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func summarize(rows []Row) []*Method {
	idx := map[string]*Method{}
	var out []*Method
	for _, r := range rows {
		k := r.Scenario + "\x00" + r.Method
		m := idx[k]
		if m == nil {
			m = &Method{Scenario: r.Scenario, Name: r.Name, Method: r.Method, Tool: r.Tool, Chunk: r.Chunk, Jobs: r.Jobs}
			idx[k] = m
			out = append(out, m)
		}
		m.Runs++
		m.Walls = append(m.Walls, r.Wall)
		m.CPUs = append(m.CPUs, r.CPU)
		if !math.IsNaN(r.Chunks) {
			m.Chunks = append(m.Chunks, r.Chunks)
		}
		if !math.IsNaN(r.Suspended) {
			m.Suspended = append(m.Suspended, r.Suspended)
		}
		if !r.OK {
			m.Failed++
			if m.FirstFail == "" {
				m.FirstFail = r.Verify
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return scenarioLess(out[i].Scenario, out[j].Scenario) })
	return out
}

// scenarioLess orders scenarios by number: 2 before 10.
func scenarioLess(a, b string) bool {
	x, errA := strconv.Atoi(a)
	y, errB := strconv.Atoi(b)
	if errA != nil || errB != nil {
		return a < b
	}
	return x < y
}

// best returns the verified method of scenario sc whose tool is one of tools with the
// lowest median, or nil.
func best(ms []*Method, sc string, tools ...string) *Method {
	var b *Method
	for _, m := range ms {
		if m.Scenario != sc || !m.OK() || !contains(tools, m.Tool) {
			continue
		}
		if b == nil || m.Median() < b.Median() {
			b = m
		}
	}
	return b
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}

// Goal is one of issue 45's goals for prsync's defaults.
type Goal struct {
	What  string
	Ratio float64 // NaN when it cannot be computed
	Max   float64
}

// goals are issue 45's goals for prsync's defaults in scenario sc, from its ratios to one
// rsync -a, to the best peer and to prsync's own best fixed setting.
func goals(sc string, toRsync, toPeer, toFixed float64) []Goal {
	g := []Goal{{"≤ 1.05× best fixed", toFixed, 1.05}, {"≤ 0.95× best peer", toPeer, 0.95}}
	switch sc {
	case "1", "2":
		g = append(g, Goal{"≤ 0.30× rsync -a", toRsync, 0.30})
	case "3", "4":
		g = append(g, Goal{"≤ 0.95× rsync -a", toRsync, 0.95})
	case "5", "6", "7":
		g = append(g, Goal{"≤ 1.2× rsync -a", toRsync, 1.2})
	case "8", "9", "10":
		g = append(g, Goal{"≤ 1.0× rsync -a", toRsync, 1.0})
	}
	return g
}

var scenarioNames = map[string]string{
	"1": "NAS fresh", "2": "NAS incremental", "3": "local, cold cache", "4": "real tree (/usr, -H)",
	"5": "capped streams", "6": "daemon, max connections", "7": "pull from a daemon",
	"8": "capped streams, large", "9": "daemon, max connections, large", "10": "pull from a daemon, large",
}

func setting(m *Method) string {
	if m == nil {
		return "—"
	}
	if m.Chunk > 0 {
		return fmt.Sprintf("%.2f s (%s -f/-N %d -j %d)", m.Median(), m.Tool, m.Chunk, m.Jobs)
	}
	return fmt.Sprintf("%.2f s", m.Median())
}

// renderAuto writes the table that decides whether -j auto becomes the default: within 5 %
// of prsync's best fixed setting in every scenario (issue 23). Nothing without prsync-auto runs.
func renderAuto(b *strings.Builder, ms []*Method, scs []string) {
	if !ranAny(ms, scs, "prsync-auto") {
		return
	}
	b.WriteString("\n`-j auto` (prsync-auto: default chunks, `-j auto`) against prsync's best fixed setting and its defaults; it becomes the default only where it is within 5 % of the best fixed in every scenario:\n\n")
	b.WriteString("| # | scenario | prsync -j auto | prsync best fixed | prsync defaults | auto ÷ best fixed | auto ÷ defaults | within 5 % |\n|---|---|---|---|---|---|---|---|\n")
	for _, sc := range scs {
		auto, fixed, def := best(ms, sc, "prsync-auto"), best(ms, sc, "prsync"), best(ms, sc, "prsync-default")
		r := ratio(auto, fixed)
		ok := "n/a"
		if !math.IsNaN(r) {
			ok = "no"
			if r <= 1.05 {
				ok = "yes"
			}
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", sc, scenarioNames[sc], setting(auto), setting(fixed), setting(def), fr(r), fr(ratio(auto, def)), ok)
	}
}

// renderList compares, where the run has it, one rsync fed the whole list (rsync-list)
// with rsync -a: the cost of handing rsync a list at all, which every tool that does,
// prsync included, pays before any parallelism pays back.
func renderList(b *strings.Builder, ms []*Method, scs []string) {
	if !ranAny(ms, scs, "rsync-list") {
		return
	}
	b.WriteString("\nOne rsync fed the whole list (rsync-list: `rsync -a --files-from=- --from0`, one session), against `rsync -a` of the tree and prsync's defaults; a tool that hands rsync lists starts from its cost:\n\n")
	b.WriteString("| # | scenario | rsync -a | one rsync, the list | list ÷ rsync -a | prsync defaults | defaults ÷ rsync -a | defaults ÷ list |\n|---|---|---|---|---|---|---|---|\n")
	for _, sc := range scs {
		rs, list, def := best(ms, sc, "rsync"), best(ms, sc, "rsync-list"), best(ms, sc, "prsync-default")
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", sc, scenarioNames[sc], setting(rs), setting(list), fr(ratio(list, rs)),
			setting(def), fr(ratio(def, rs)), fr(ratio(def, list)))
	}
}

// ranAny reports whether tool has a method that counts (best) in any of the scenarios.
func ranAny(ms []*Method, scs []string, tool string) bool {
	for _, sc := range scs {
		if best(ms, sc, tool) != nil {
			return true
		}
	}
	return false
}

func ratio(a, b *Method) float64 {
	if a == nil || b == nil || b.Median() == 0 {
		return math.NaN()
	}
	return a.Median() / b.Median()
}

func fr(x float64) string {
	if math.IsNaN(x) {
		return "—"
	}
	return fmt.Sprintf("%.2f", x)
}

func render(ms []*Method, machine []string, plots string) string {
	var b strings.Builder
	label := ""
	for _, l := range machine {
		if v, ok := strings.CutPrefix(l, "label: "); ok {
			label = " — " + v
		}
	}
	fmt.Fprintf(&b, "## The scenarios (issues 23 and 45)%s\n\n", label)
	b.WriteString("Made by `bench/scenarios.sh` (see bench/README.md, *Seven scenarios*); raw runs in [results-scenarios.csv](results-scenarios.csv). ")
	b.WriteString("Times are medians of wall seconds; a method counts only if every repetition exited 0 and its DEST matched the source (listing and checksums). ")
	b.WriteString("\"Best peer\" is the fastest of GNU parallel + rsync and fpsync over the sweep; \"best fixed\" is prsync's fastest `--chunk-files C -j J` of the same sweep.\n\n")
	if len(machine) > 0 {
		b.WriteString("Machine and run:\n\n")
		for _, l := range machine {
			if !strings.HasPrefix(l, "label: ") {
				fmt.Fprintf(&b, "- %s\n", l)
			}
		}
		b.WriteString("\n")
	}
	var scs []string
	seen := map[string]bool{}
	for _, m := range ms {
		if !seen[m.Scenario] {
			seen[m.Scenario] = true
			scs = append(scs, m.Scenario)
		}
	}
	b.WriteString("| # | scenario | rsync -a | best parallel | best fpsync | prsync best fixed | prsync defaults | ÷ rsync -a | ÷ best peer | ÷ best fixed | goals |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, sc := range scs {
		rs := best(ms, sc, "rsync")
		par := best(ms, sc, "parallel")
		fp := best(ms, sc, "fpsync")
		peer := best(ms, sc, "parallel", "fpsync")
		fixed := best(ms, sc, "prsync")
		def := best(ms, sc, "prsync-default")
		toR, toP, toF := ratio(def, rs), ratio(def, peer), ratio(def, fixed)
		var gs []string
		for _, g := range goals(sc, toR, toP, toF) {
			st := "n/a"
			if !math.IsNaN(g.Ratio) {
				st = "missed"
				if g.Ratio <= g.Max {
					st = "met"
				}
			}
			gs = append(gs, g.What+": **"+st+"**")
		}
		defs := setting(def)
		if def == nil {
			defs = "FAIL"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", sc, scenarioNames[sc],
			setting(rs), setting(par), setting(fp), setting(fixed), defs, fr(toR), fr(toP), fr(toF), strings.Join(gs, "; "))
	}
	renderAuto(&b, ms, scs)
	renderList(&b, ms, scs)
	b.WriteString("\nEvery method, median [min–max] wall seconds over its repetitions, and CPU (user+system, children included):\n\n")
	b.WriteString("| # | method | median s | min–max s | CPU s | prsync chunks | prsync suspended s | runs | check |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, m := range ms {
		lo, hi := minmax(m.Walls)
		chk := "ok"
		if !m.OK() {
			chk = fmt.Sprintf("FAIL %d/%d: %s", m.Failed, m.Runs, m.FirstFail)
		}
		fmt.Fprintf(&b, "| %s | %s | %.2f | %.2f–%.2f | %.2f | %s | %s | %d | %s |\n", m.Scenario, m.Method, m.Median(), lo, hi, median(m.CPUs),
			fr0(median(m.Chunks)), fr0dot(median(m.Suspended)), m.Runs, chk)
	}
	if plots != "" {
		b.WriteString("\nRunning rsyncs and files per chunk over time, prsync's defaults (from its `chunk_start` and `chunk_end` events):\n\n")
		for _, sc := range []string{"1", "3"} {
			if seen[sc] {
				fmt.Fprintf(&b, "![scenario %s](%s-s%s.png)\n\n", sc, plots, sc)
			}
		}
	}
	return b.String()
}

func fr0(x float64) string {
	if math.IsNaN(x) {
		return ""
	}
	return fmt.Sprintf("%.0f", x)
}

func fr0dot(x float64) string {
	if math.IsNaN(x) {
		return ""
	}
	return fmt.Sprintf("%.1f", x)
}

func minmax(xs []float64) (float64, float64) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, x := range xs {
		lo, hi = math.Min(lo, x), math.Max(hi, x)
	}
	return lo, hi
}

func writeSummary(path string, ms []*Method) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	fmt.Fprintln(w, "scenario,method,tool,chunk,jobs,runs,failed,median_s,min_s,max_s,cpu_median_s")
	for _, m := range ms {
		lo, hi := minmax(m.Walls)
		fmt.Fprintf(w, "%s,%s,%s,%d,%d,%d,%d,%.3f,%.3f,%.3f,%.3f\n", m.Scenario, m.Method, m.Tool, m.Chunk, m.Jobs, m.Runs, m.Failed, m.Median(), lo, hi, median(m.CPUs))
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

const (
	beginMark = "<!-- scenarios:begin (bench/scenarios.sh --publish writes this section) -->"
	endMark   = "<!-- scenarios:end -->"
)

// spliceInto replaces the text between the markers of path with text; when path has
// none, it puts the markers and text under its "# " title (or at the end).
func spliceInto(path, text string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(b)
	block := beginMark + "\n\n" + text + "\n" + endMark + "\n"
	i, j := strings.Index(s, beginMark), strings.Index(s, endMark)
	if i >= 0 && j > i {
		s = s[:i] + strings.TrimSuffix(block, "\n") + s[j+len(endMark):]
	} else if strings.HasPrefix(s, "# ") && strings.Contains(s, "\n") {
		// The newest results come first: right under the title.
		k := strings.Index(s, "\n") + 1
		s = s[:k] + "\n" + block + "\n" + strings.TrimLeft(s[k:], "\n")
	} else {
		if !strings.HasSuffix(s, "\n") {
			s += "\n"
		}
		s += "\n" + block
	}
	return os.WriteFile(path, []byte(s), 0o644)
}
