package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const events = `{"type":"start","time":"2026-12-02T10:00:00Z","jobs":8}
{"type":"chunk_start","time":"2026-12-02T10:00:01Z","chunk":1,"files":250}
{"type":"chunk_start","time":"2026-12-02T10:00:02Z","chunk":2,"files":500}
{"type":"chunk_end","time":"2026-12-02T10:00:03Z","chunk":1,"files":250}
{"type":"jobs","time":"2026-12-02T10:00:03.5Z","old":8,"new":3,"reason":"refused"}
{"type":"chunk_end","time":"2026-12-02T10:00:04Z","chunk":2,"files":500}
{"type":"summary","time":"2026-12-02T10:00:05Z"}
`

func TestParse(t *testing.T) {
	r, err := parse(strings.NewReader(events))
	if err != nil {
		t.Fatal(err)
	}
	if want := []point{{1, 250}, {2, 500}}; len(r.Chunks) != 2 || r.Chunks[0] != want[0] || r.Chunks[1] != want[1] {
		t.Errorf("chunks %v, want %v", r.Chunks, want)
	}
	peak := 0.0
	for _, p := range r.Running {
		peak = max(peak, p.Y)
	}
	if last := r.Running[len(r.Running)-1]; peak != 2 || last.Y != 0 || last.X != 4 {
		t.Errorf("running %v: want a peak of 2, back to 0 at 4 s", r.Running)
	}
	if r.End != 5 {
		t.Errorf("end %v, want 5", r.End)
	}
	// -j: 8 from the start, 3 from the jobs event at 3.5 s, to the end
	if want := []point{{0, 8}, {3.5, 8}, {3.5, 3}, {5, 3}}; len(r.Limit) != len(want) || r.Limit[0] != want[0] || r.Limit[2] != want[2] || r.Limit[3] != want[3] {
		t.Errorf("limit %v, want %v", r.Limit, want)
	}
	if _, err := parse(strings.NewReader(`{"type":"chunk_start"}`)); err == nil {
		t.Error("no error without a start event")
	}
}

func TestDraw(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"s1-prsync-default-1.jsonl", "s1-prsync-default-2.jsonl", "s1-rsync-1.jsonl"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(events), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	runs, err := load(dir, "1", "prsync-default")
	if err != nil || len(runs) != 2 || runs[1].Rep != 2 {
		t.Fatalf("load: %v, %d runs", err, len(runs))
	}
	out := filepath.Join(dir, "c-s1.png")
	if err := draw2(out, "1", "prsync-default", runs); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(out); err != nil || fi.Size() < 1000 {
		t.Fatalf("png: %v", err)
	}
}
