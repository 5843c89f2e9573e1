package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/prsync/prsync/bench/internal/results"
)

const csvHead = "profile,scenario,method,label,case,rep,jobs,extrapolated,scale,wall_s,user_s,sys_s,maxrss_kb,exit,verify,files,bytes,server_cpu_s\n"

// row: scenario, method, label, case, rep, jobs, wall, cpu (user), server cpu
func row(sc, m, label, kase string, rep, jobs int, wall, cpu float64, srv string) string {
	return strings.Join([]string{"small", sc, m, label, kase, itoa(rep), itoa(jobs), "0", "1",
		ftoa(wall), ftoa(cpu), "0", "1000", "0", "ok", "50000", "1090000000", srv}, ",") + "\n"
}

func itoa(n int) string     { return strconv.Itoa(n) }
func ftoa(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }

func TestSections(t *testing.T) {
	var b strings.Builder
	b.WriteString(csvHead)
	for rep := 1; rep <= 3; rep++ {
		d := float64(rep-2) * 0.1 // -0.1, 0, +0.1
		b.WriteString(row("local", "rsync", "rsync -a", "fresh", rep, 1, 7+d, 7, ""))
		b.WriteString(row("local", "rsync", "rsync -a", "rerun", rep, 1, 0.6+d/10, 0.6, ""))
		b.WriteString(row("local", "tar", "tar -c | tar -x", "fresh", rep, 1, 5+d, 6, ""))
		b.WriteString(row("local", "parallel-chunked", "parallel", "fresh", rep, 8, 6.8+d, 12, ""))
		b.WriteString(row("local", "prsync-default", "find -print0 | prsync -0 (defaults: pipe transport; throttle on)", "fresh", rep, 8, 6.4+d, 12, ""))
		b.WriteString(row("local", "prsync-default", "find -print0 | prsync -0 (defaults: pipe transport; throttle on)", "rerun", rep, 8, 0.6+d/10, 0.8, ""))
		b.WriteString(row("local", "prsync-direct", "find -print0 | prsync -0 --transport direct", "fresh", rep, 8, 3.2+d, 6, ""))
		b.WriteString(row("local", "prsync-auto", "find -print0 | prsync -0 -j auto", "fresh", rep, 4, 6+d, 12, ""))
		b.WriteString(row("local", "prsync-j2", "find -print0 | prsync -0 -j 2 --no-throttle", "fresh", rep, 2, 8+d, 12, ""))
		b.WriteString(row("local", "prsync-j4", "find -print0 | prsync -0 -j 4 --no-throttle", "fresh", rep, 4, 5+d, 12, ""))
		b.WriteString(row("net-big", "prsync-auto", "find -print0 | prsync -0 -j auto", "fresh", rep, 4, 10+d, 3, "2"))
		b.WriteString(row("net-big", "prsync-j16", "find -print0 | prsync -0 -j 16 --no-throttle", "fresh", rep, 16, 8+d, 3, "2"))
		b.WriteString(row("migrate", "prsync-final", "(i) copy", "final", rep, 0, 2+d, 1, ""))
		b.WriteString(row("migrate", "prsync-final-delete", "(ii) delete", "final", rep, 0, 3+d, 1, ""))
		b.WriteString(row("migrate", "rsync-delete", "(v) rsync", "final", rep, 0, 4+d, 1, ""))
		b.WriteString(row("sizes", "prsync-list", "list", "fresh", rep, 8, 6+d, 10, ""))
		b.WriteString(row("sizes", "prsync-sizes", "sizes", "fresh", rep, 8, 5+d, 9, ""))
		b.WriteString(row("pull", "rsync-pull", "rsync pull", "fresh", rep, 1, 10+d, 5, "4"))
		b.WriteString(row("pull", "prsync-pull", "prsync pull", "fresh", rep, 8, 5+d, 6, "5"))
	}
	runs, err := results.Read(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	ss := results.Summarize(runs)
	results.Sort(ss)

	dir := t.TempDir()
	jl := filepath.Join(dir, "s.jsonl")
	var j strings.Builder
	for rep := 1; rep <= 3; rep++ {
		for _, l := range []string{
			`{"scenario":"local","method":"prsync-default","case":"fresh","rep":R,"event":{"type":"summary","cpu_seconds":1.0,"rsync_cpu_seconds":10,"jobs_min":8,"jobs_max":8}}`,
			`{"scenario":"local","method":"prsync-auto","case":"fresh","rep":R,"event":{"type":"summary","cpu_seconds":1.0,"rsync_cpu_seconds":10,"jobs_min":4,"jobs_max":12,"suspensions":3}}`,
			`{"scenario":"migrate","method":"prsync-final-delete","case":"final","rep":R,"event":{"type":"summary","cpu_seconds":0.5,"rsync_cpu_seconds":2,"delete_pass":"ran","delete_seconds":0.7,"files_deleted":900,"files_transferred":1000}}`,
			`{"scenario":"migrate","method":"prsync-final","case":"final","rep":R,"event":{"type":"summary","cpu_seconds":0.5,"rsync_cpu_seconds":2,"delete_pass":"not requested","files_transferred":1000}}`,
			`{"scenario":"sizes","method":"prsync-list","case":"fresh","rep":R,"event":{"type":"summary","cpu_seconds":1.0,"rsync_cpu_seconds":9}}`,
			`{"scenario":"sizes","method":"prsync-sizes","case":"fresh","rep":R,"event":{"type":"summary","cpu_seconds":0.5,"rsync_cpu_seconds":8.5}}`,
		} {
			j.WriteString(strings.Replace(l, "R", itoa(rep), 1) + "\n")
		}
	}
	if err := os.WriteFile(jl, []byte(j.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	m := []kv{{"net stream cap", "100mbit"}, {"net link cap", "2gbit"}, {"net max connections", "3"}}
	writeMarkdown(&out, runs, ss, m, "")
	writeSections(&out, ss, loadPrsync(jl))
	got := out.String()
	for _, want := range []string{
		"100 Mbit/s per TCP stream, 2 Gbit/s link (tc htb), daemon `max connections = 3`",
		"| local (small) | fresh: prsync (defaults) ÷ best rsync-based peer (`parallel`) | 0.94 (0.91–0.97) |",
		"| local (small) | fresh: prsync (defaults) ÷ `tar -c \\| tar -x` | 1.28 (1.24–1.33) |",
		"| local (small) | re-run: prsync (defaults) ÷ `rsync -a` | 1.00 (0.97–1.03) |",
		"| local (small) | fresh: prsync `--transport direct` ÷ prsync (defaults), wall | 0.50 (0.48–0.52) |",
		"| local (small) | 6.00 (5.90–6.10) | 4–12 | -j 4 | 5.00 (4.90–5.10) | 1.20 (1.16–1.24) | 6.40 (6.30–6.50) (-j 8) | 0.94 (0.91–0.97) | 3 |",
		"| net-big (small) | 10.0 (9.90–10.1) | – | -j 16 |",
		"The fixed -j sweep runs with `--no-throttle`",
		"| `(ii) delete` | 3.00 (2.90–3.10) | 1.50 (1.38–1.63) | 1.00 | 0.50 | 2.00 | 0.70 | – | 1,000 | 900 | – | ok |",
		"| `(i) copy` | 2.00 (1.90–2.10) | 1.00 (0.90–1.11) | 1.00 | 0.50 | 2.00 | – | – | 1,000 | – | – | ok |",
		"| prsync's own CPU | 0.50 (0.50–0.50) |",
		"| `prsync pull` | 0.50 (0.49–0.52) | 1.20 (1.20–1.20) | 1.25 (1.25–1.25) | – |",
		"| local | prsync-auto | fresh | 3 | 1.00 | 10.0 | 0.10 (0.10–0.10) | 12.0 |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q", want)
		}
	}
	if t.Failed() {
		t.Log(got)
	}
}
