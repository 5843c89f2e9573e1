package htmlreport

import (
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"testing"
)

func TestSeries(t *testing.T) {
	tests := []struct {
		name      string
		samples   [][2]float64 // time, value
		wantWidth float64
		wantMeans []point
		wantRates []point
	}{
		{"empty", nil, firstWidth, nil, nil},
		{"two in one bucket", [][2]float64{{0.001, 2}, {0.009, 4}}, firstWidth,
			[]point{{t: 0.005, v: 3, lo: 2, hi: 4}}, []point{{t: 0.009, v: 4 / 0.009, lo: 4 / 0.009, hi: 4 / 0.009}}},
		{"a running total", [][2]float64{{1, 100}, {2, 300}, {3, 300}}, firstWidth,
			[]point{{1, 100, 100, 100}, {2, 300, 300, 300}, {3, 300, 300, 300}},
			[]point{{1, 100, 100, 100}, {2, 200, 200, 200}, {3, 0, 0, 0}}},
		{"a total that falls gives 0", [][2]float64{{1, 100}, {2, 50}}, firstWidth, nil,
			[]point{{1, 100, 100, 100}, {2, 0, 0, 0}}},
		// 25 s at 10 ms needs 2,500 buckets: one doubling merges the first two
		{"past the last bucket the width doubles", [][2]float64{{0, 1}, {0.015, 3}, {25, 5}}, 2 * firstWidth,
			[]point{{0.0075, 2, 1, 3}, {25, 5, 5, 5}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSeries()
			for _, p := range tt.samples {
				s.add(p[0], p[1])
			}
			if s.width != tt.wantWidth {
				t.Errorf("width %v, want %v", s.width, tt.wantWidth)
			}
			if tt.wantMeans != nil {
				checkPoints(t, "means", s.means(), tt.wantMeans)
			}
			if tt.wantRates != nil {
				checkPoints(t, "rates", s.rates(), tt.wantRates)
			}
		})
	}
}

func checkPoints(t *testing.T, what string, got, want []point) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d points %v, want %d %v", what, len(got), got, len(want), want)
	}
	for i := range got {
		g, w := got[i], want[i]
		for _, p := range [][2]float64{{g.t, w.t}, {g.v, w.v}, {g.lo, w.lo}, {g.hi, w.hi}} {
			if math.Abs(p[0]-p[1]) > 1e-6*max(1, math.Abs(p[1])) {
				t.Errorf("%s[%d] = %+v, want %+v", what, i, g, w)
				break
			}
		}
	}
}

// TestSeriesBounded: six hours of one sample a second stay within maxBuckets, and the
// rate over them is the rate of the samples.
func TestSeriesBounded(t *testing.T) {
	s := newSeries()
	for sec := 1; sec <= 6*3600; sec++ {
		s.add(float64(sec), float64(sec)*1e6) // 1 MB/s
	}
	if n := len(s.buckets); n > maxBuckets || n < maxBuckets/2 {
		t.Errorf("%d buckets, want %d/2 to %d", n, maxBuckets, maxBuckets)
	}
	for _, p := range s.rates() {
		if math.Abs(p.v-1e6) > 1 {
			t.Fatalf("rate %v at %v, want 1e6", p.v, p.t)
		}
	}
}

func TestSeriesSpan(t *testing.T) {
	s := newSeries()
	s.addSpan(0, 30, 1) // 30 s paused: the buckets must first cover 30 s
	s.addSpan(10, 20, 1)
	total := 0.0
	for _, b := range s.buckets {
		total += b.sum
	}
	if math.Abs(total-40) > 1e-6 {
		t.Errorf("span total %v, want 40", total)
	}
	ps := s.perSecond(30)
	var peak float64
	for _, p := range ps {
		peak = max(peak, p.v)
	}
	if math.Abs(peak-2) > 1e-6 {
		t.Errorf("peak %v rsyncs paused, want 2", peak)
	}
}

const (
	evStart   = `{"type":"start","time":"2026-11-29T11:00:00Z","version":"v1","schema":1,"pid":42,"jobs":4,"dest":"/dst/","chunk_files":2000,"chunk_bytes":1073741824}`
	evSummary = `{"type":"summary","time":"2026-11-29T11:00:10Z","files":5,"files_transferred":3,"files_failed":2,"exit_code":23,"some_new_field":7}`
)

func ev(sec float64, typ, fields string) string {
	s := fmt.Sprintf(`{"type":%q,"time":"2026-11-29T11:00:%09.6fZ"`, typ, sec)
	if fields != "" {
		s += "," + fields
	}
	return s + "}"
}

func TestRead(t *testing.T) {
	lines := func(ls ...string) string { return strings.Join(ls, "\n") + "\n" }
	tests := []struct {
		name  string
		input string
		err   string // a part of the error, or ""
		check func(t *testing.T, r *Report)
	}{
		{name: "empty", input: "", err: "it is empty"},
		{name: "blank lines", input: "\n\n  \n", err: "none of its 3 lines"},
		{name: "not events", input: strings.Repeat("hello world\n", 100), err: "its first 64 lines"},
		{name: "one endless line", input: strings.Repeat("x", 3*maxLine), err: "line 1 is longer than 1048576 bytes"},
		{name: "JSON but not events", input: lines(`{"a":1}`, `[1,2]`, `{"type":"x"}`), err: "none of its 3 lines"},
		{name: "a whole run", input: lines(evStart, ev(1, "progress", `"files_done":1,"bytes_done":10,"running":2,"jobs":4`), evSummary),
			check: func(t *testing.T, r *Report) {
				if r.Start == nil || r.Summary == nil || r.Truncated || r.Bad != 0 || r.NoStart || r.Runs != 1 {
					t.Errorf("report %+v", r)
				}
				if r.Summary.FilesFailed != 2 || string(r.SummaryExtra["some_new_field"]) != "7" || len(r.SummaryExtra) != 1 {
					t.Errorf("summary %+v, extra %v", r.Summary, r.SummaryExtra)
				}
				if got := r.at(r.TEnd); got != 10 {
					t.Errorf("end at %v s, want 10", got)
				}
			}},
		{name: "cut short", input: lines(evStart, ev(1, "progress", `"files_done":1`)) + `{"type":"chunk_end","ti`,
			check: func(t *testing.T, r *Report) {
				if !r.Truncated || r.Summary != nil || r.Bad != 0 || r.Events != 2 {
					t.Errorf("truncated %v, summary %v, bad %d, events %d", r.Truncated, r.Summary, r.Bad, r.Events)
				}
			}},
		{name: "a last line without its newline is still read", input: lines(evStart) + evSummary,
			check: func(t *testing.T, r *Report) {
				if r.Truncated || r.Summary == nil {
					t.Errorf("truncated %v, summary %v", r.Truncated, r.Summary)
				}
			}},
		{name: "garbage in the middle is counted", input: lines(evStart, "garbage", `{"type":"progress","time":"yesterday"}`, ev(2, "progress", `"files_done":"many"`), evSummary),
			check: func(t *testing.T, r *Report) {
				if r.Bad != 3 || fmt.Sprint(r.BadAt) != "[2 3 4]" || r.Truncated || r.Summary == nil {
					t.Errorf("bad %d at %v, truncated %v", r.Bad, r.BadAt, r.Truncated)
				}
			}},
		{name: "a line too long is not an event", input: lines(evStart, `{"type":"error","time":"2026-11-29T11:00:01Z","error":"`+strings.Repeat("x", maxLine)+`"}`, evSummary),
			check: func(t *testing.T, r *Report) {
				if r.Bad != 1 || r.ErrorCount != 0 || r.Summary == nil {
					t.Errorf("bad %d, errors %d", r.Bad, r.ErrorCount)
				}
			}},
		{name: "the tail of a run", input: lines(ev(5, "progress", `"files_done":1`), evSummary),
			check: func(t *testing.T, r *Report) {
				if !r.NoStart || r.Start != nil || r.at(r.TEnd) != 5 {
					t.Errorf("no start %v, start %v, end %v", r.NoStart, r.Start, r.at(r.TEnd))
				}
			}},
		{name: "two runs: the first is reported", input: lines(evStart, ev(1, "error", `"error":"first"`), evSummary, evStart, ev(3, "error", `"error":"second"`), "garbage", evSummary, evStart),
			check: func(t *testing.T, r *Report) {
				if r.Runs != 3 || r.ErrorCount != 1 || r.Errors[0].Error != "first" || r.Bad != 0 {
					t.Errorf("runs %d, errors %v", r.Runs, r.Errors)
				}
			}},
		{name: "unknown types are counted", input: lines(evStart, ev(1, "wormhole", `"x":1`), ev(2, "status", "")),
			check: func(t *testing.T, r *Report) {
				if r.OtherTypes != 1 || r.StatusCount != 1 || r.Events != 3 {
					t.Errorf("other %d, status %d, events %d", r.OtherTypes, r.StatusCount, r.Events)
				}
			}},
		{name: "pauses", input: lines(evStart,
			ev(1, "throttle", `"action":"suspend","reason":"cpu","pid":7,"chunk":1,"cpu_percent":95`),
			ev(2, "throttle", `"action":"suspend","reason":"io","pid":8,"chunk":2`),
			ev(4, "throttle", `"action":"resume","reason":"","pid":7`),
			ev(5, "throttle", `"action":"resume","reason":"starved","pid":9`),
			ev(9, "throttle", `"action":"suspend","reason":"cpu","pid":7`),
			ev(10, "throttle", `"action":"resume","reason":"stop","pid":7`),
			ev(12, "progress", "")),
			check: func(t *testing.T, r *Report) {
				cpu, io := r.Pauses["cpu"], r.Pauses["io"]
				if cpu == nil || cpu.Count != 2 || cpu.Seconds != 4 || cpu.Longest != 3 || cpu.EndedBy[""] != 1 || cpu.EndedBy["stop"] != 1 {
					t.Errorf("cpu %+v", cpu)
				}
				// pid 8 was never resumed: open until the last event
				if io == nil || io.Count != 1 || io.Seconds != 10 || io.EndedBy["open"] != 1 {
					t.Errorf("io %+v", io)
				}
				if r.Pauses[""] == nil || r.Pauses[""].Unpaired != 1 {
					t.Errorf("the resume of pid 9 is not counted unpaired: %+v", r.Pauses[""])
				}
				if len(r.Longest) != 3 {
					t.Errorf("longest %v", r.Longest)
				}
			}},
		{name: "failures by reason", input: lines(evStart,
			ev(1, "path_failed", `"path":"a","status":"failed","reason":"rsync: [sender] send_files failed to open \"/s/a\": Permission denied (13)"`),
			ev(1, "path_failed", `"path":"b\"q","status":"failed","reason":"rsync: [sender] send_files failed to open \"/s/b\"q\": Permission denied (13)"`),
			ev(1, "path_failed", `"path":"bad\ufffd","path_b64":"YmFk/w==","status":"vanished","reason":"lstat: no such file or directory"`),
			ev(1, "path_failed", `"path":"c","status":"failed","reason":"lstat: no such file or directory"`)),
			check: func(t *testing.T, r *Report) {
				if len(r.Failures) != 3 || r.FailureCount != 4 {
					t.Fatalf("groups %v", r.Failures)
				}
				g := r.Failures["failed\x00"+`rsync: [sender] send_files failed to open "…": Permission denied (13)`]
				if g == nil || g.Count != 2 || fmt.Sprint(g.Paths) != `[a b"q]` {
					t.Errorf("permission denied group %+v", g)
				}
				if g := r.Failures["vanished\x00lstat: no such file or directory"]; g == nil || g.Paths[0] != `bad\xff` {
					t.Errorf("vanished group %+v", g)
				}
			}},
		{name: "chunks, jobs, control", input: lines(evStart,
			ev(1, "chunk_start", `"chunk":1,"files":10,"bytes":1000`),
			ev(2, "chunk_end", `"chunk":1,"status":"ok","exit_code":0,"seconds":1`),
			ev(2, "chunk_end", `"chunk":2,"status":"partial","exit_code":23,"seconds":0.5`),
			ev(3, "jobs", `"old":4,"new":2,"reason":"refused","detail":"max connections"`),
			ev(4, "control", `"what":"jobs","old":"2","new":"6"`),
			ev(5, "bwlimit", `"old":"off","new":"20M","next":"2026-11-29T19:00:00Z"`),
			ev(6, "deleted", `"path":"x","kind":"file"`)),
			check: func(t *testing.T, r *Report) {
				if r.Chunks.Starts != 1 || r.Chunks.Ends != 2 || r.Chunks.ByStatus["partial"] != 1 || r.Chunks.ByExit[23] != 1 || r.Chunks.Seconds != 1.5 {
					t.Errorf("chunks %+v", r.Chunks)
				}
				if r.JobsCount != 1 || r.JobsReasons["refused"] != 1 || r.ControlCount != 2 || r.Deleted["file"] != 1 {
					t.Errorf("jobs %d %v, control %d, deleted %v", r.JobsCount, r.JobsReasons, r.ControlCount, r.Deleted)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Read(strings.NewReader(tt.input))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one with %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, r)
		})
	}
}

// TestReadBounded: many failures for many reasons, and many jobs events, keep the report's
// tables at their bounds.
func TestReadBounded(t *testing.T) {
	pr, pw := io.Pipe()
	go func() {
		fmt.Fprintln(pw, evStart)
		for i := range 100000 {
			fmt.Fprintln(pw, ev(1, "path_failed", fmt.Sprintf(`"path":"p%d","status":"failed","reason":"reason %d"`, i, i%1000)))
		}
		for range 1000 {
			fmt.Fprintln(pw, ev(2, "jobs", `"old":4,"new":2,"reason":"auto-probe-down"`))
			fmt.Fprintln(pw, ev(2, "error", `"error":"x"`))
			fmt.Fprintln(pw, ev(2, "control", `"what":"pause"`))
		}
		pw.Close()
	}()
	r, err := Read(pr)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Failures) != maxGroups+1 || r.FailureCount != 100000 {
		t.Errorf("%d groups, %d failures", len(r.Failures), r.FailureCount)
	}
	for _, g := range r.Failures {
		if len(g.Paths) > pathsPerGroup {
			t.Fatalf("group %q keeps %d paths", g.Reason, len(g.Paths))
		}
	}
	if other := r.Failures[otherReasonsKey]; other == nil || other.Count != 100000-100*100 {
		t.Errorf("other reasons %+v", other)
	}
	if len(r.JobsChanges) != maxRows || len(r.Errors) != maxRows || len(r.Controls) != maxRows || r.JobsCount != 1000 {
		t.Errorf("rows kept: jobs %d, errors %d, control %d", len(r.JobsChanges), len(r.Errors), len(r.Controls))
	}
}

// TestReadGolden reads the events golden file, which holds every type of event.
func TestReadGolden(t *testing.T) {
	f, err := os.Open("../event/testdata/events.golden.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := Read(f)
	if err != nil {
		t.Fatal(err)
	}
	if r.Bad != 0 || r.OtherTypes != 0 || r.Summary == nil || r.Start == nil || r.Truncated {
		t.Errorf("bad %d, other %d, summary %v, truncated %v", r.Bad, r.OtherTypes, r.Summary != nil, r.Truncated)
	}
}

func TestPrintable(t *testing.T) {
	tests := []struct {
		in   string
		text bool
		want string
	}{
		{"plain/path.txt", false, "plain/path.txt"},
		{"a\nb\tc\rd", false, `a\nb\tc\rd`},
		{"a\nb\tc", true, "a\nb\tc"},
		{"bad\xffbyte", false, `bad\xffbyte`},
		{"nul\x00bel\x07del\x7f", false, `nul\x00bel\x07del\x7f`},
		{"bidi\u202egnp.exe", false, `bidi\u202egnp.exe`},
		{"zero\u200bwidth", false, `zero\u200bwidth`},
		{"c1\u0085", false, `c1\u0085`},
		{"<script>&\"'", false, "<script>&\"'"}, // html/template escapes these
		{"ünïcödé 文字", false, "ünïcödé 文字"},
	}
	for _, tt := range tests {
		if got := printable([]byte(tt.in), tt.text); got != tt.want {
			t.Errorf("printable(%q, %v) = %q, want %q", tt.in, tt.text, got, tt.want)
		}
	}
}

func TestFormat(t *testing.T) {
	tests := []struct{ got, want string }{
		{counted(1, "reason", "reasons"), "1 reason"}, {counted(int64(1234), "reason", "reasons"), "1,234 reasons"},
		{short(0), "0"}, {short(950), "950"}, {short(1500), "1.5k"}, {short(20e6), "20M"}, {short(1234567), "1.23M"},
		{bytesShort(999), "999 B"}, {bytesShort(20e6), "20 MB"}, {bytesShort(1.5e9), "1.5 GB"},
		{duration(0.25), "0.25 s"}, {duration(42), "42 s"}, {duration(185), "3 min 05 s"}, {duration(7440), "2 h 04 min"},
		{rate(8e6), "1 MB/s"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

func TestNiceStep(t *testing.T) {
	tests := []struct {
		raw     float64
		integer bool
		want    float64
	}{
		{0, false, 1}, {0.3, false, 0.5}, {1, false, 1}, {1.1, false, 2}, {3, false, 5}, {7, false, 10},
		{0.3, true, 1}, {1.5, true, 2}, {2.4e6, false, 5e6}, {math.NaN(), false, 1},
	}
	for _, tt := range tests {
		if got := niceStep(tt.raw, tt.integer); math.Abs(got-tt.want) > 1e-9*tt.want {
			t.Errorf("niceStep(%v, %v) = %v, want %v", tt.raw, tt.integer, got, tt.want)
		}
	}
}
