package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const autoLog = `{"type":"start","time":"2026-12-01T10:00:00Z","jobs":4,"jobs_auto":true}
{"type":"chunk_start","time":"2026-12-01T10:00:00.1Z","chunk":1}
{"type":"progress","time":"2026-12-01T10:00:01Z","elapsed":1.0,"running":4,"jobs":4}
{"type":"jobs","time":"2026-12-01T10:00:02.5Z","old":4,"new":8,"reason":"auto-probe-up"}
{"type":"progress","time":"2026-12-01T10:00:03Z","elapsed":3.0,"running":7,"jobs":8}
{"type":"jobs","time":"2026-12-01T10:00:04Z","old":8,"new":6,"reason":"auto-revert"}
{"type":"progress","time":"2026-12-01T10:00:05Z","elapsed":5.0,"running":6,"jobs":6}
{"type":"summary","time":"2026-12-01T10:00:06Z","seconds":6.0,"jobs_min":4,"jobs_max":8}
`

func TestParseAndSteps(t *testing.T) {
	r, err := parse(strings.NewReader(autoLog))
	if err != nil {
		t.Fatal(err)
	}
	if !r.Auto || r.End != 6 || r.JobsMin != 4 || r.JobsMax != 8 {
		t.Errorf("run = %+v", r)
	}
	if len(r.Running) != 3 || r.Running[1].Y != 7 {
		t.Errorf("running = %v", r.Running)
	}
	want := []point{{0, 4}, {2.5, 8}, {4, 6}}
	if len(r.Limit) != len(want) {
		t.Fatalf("limit = %v, want %v", r.Limit, want)
	}
	for i := range want {
		if r.Limit[i] != want[i] {
			t.Errorf("limit[%d] = %v, want %v", i, r.Limit[i], want[i])
		}
	}
	xy := steps(r.Limit, r.End)
	// 0,4 → 2.5,4 → 2.5,8 → 4,8 → 4,6 → 6,6
	if len(xy) != 6 || xy[1].X != 2.5 || xy[1].Y != 4 || xy[5].X != 6 || xy[5].Y != 6 {
		t.Errorf("steps = %v", xy)
	}
}

func TestFindRunsAndDraw(t *testing.T) {
	dir := t.TempDir()
	logs := filepath.Join(dir, "logs")
	if err := os.Mkdir(logs, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"net-big-prsync-auto-fresh-1.jsonl":    autoLog,
		"net-big-prsync-auto-fresh-2.jsonl":    autoLog,
		"net-big-prsync-default-fresh-1.jsonl": strings.Replace(autoLog, `"jobs_auto":true`, `"jobs_auto":false`, 1),
		"local-prsync-auto-fresh-1.jsonl":      autoLog,
		"local-prsync-auto-rerun-1.jsonl":      autoLog,
		"local-prsync-j8-fresh-1.jsonl":        autoLog,
		"local-rsync-fresh-1.out":              "",
	}
	for n, c := range files {
		if err := os.WriteFile(filepath.Join(logs, n), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ms := []string{"prsync-auto", "prsync-default"}
	runs, err := findRuns(logs, ms, "fresh")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range runs {
		got = append(got, r.Scenario+"/"+r.Method+"/"+r.Case)
	}
	want := "local/prsync-auto/fresh net-big/prsync-auto/fresh net-big/prsync-auto/fresh net-big/prsync-default/fresh"
	if strings.Join(got, " ") != want {
		t.Errorf("runs = %v, want %s", got, want)
	}
	for _, sc := range scenarios(runs) {
		name := filepath.Join(dir, "jobs-"+sc+".png")
		if err := drawScenario(name, sc, ms, runs, 8, map[string]string{}); err != nil {
			t.Fatal(err)
		}
		if st, err := os.Stat(name); err != nil || st.Size() < 1000 {
			t.Errorf("%s: %v", name, err)
		}
	}
}
