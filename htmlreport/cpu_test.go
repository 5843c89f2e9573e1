package htmlreport

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// cpuFigure renders events and returns the CPU chart's figure.
func cpuFigure(t *testing.T, events string) *node {
	t.Helper()
	root := checkPage(t, render(t, events))
	fig := root.byID("cpu")
	if fig == nil || len(fig.byName("svg")) != 1 {
		t.Fatalf("no CPU chart")
	}
	return fig
}

// legend returns the names in a chart's legend and its lines' path data.
func legend(fig *node) (names []string, paths []string) {
	for _, tx := range fig.byName("text") {
		if tx.attrs["dx"] == "21" {
			names = append(names, tx.text.String())
		}
	}
	for _, p := range fig.byName("path") {
		paths = append(paths, p.attrs["d"])
	}
	return names, paths
}

// shaded returns the shaded spans of a chart as [x, x+width] pairs.
func shaded(t *testing.T, fig *node) [][2]float64 {
	t.Helper()
	var out [][2]float64
	for _, r := range fig.byName("rect") {
		if r.attrs["fill-opacity"] != "0.13" {
			continue
		}
		x, err1 := strconv.ParseFloat(r.attrs["x"], 64)
		w, err2 := strconv.ParseFloat(r.attrs["width"], 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("rect %v", r.attrs)
		}
		out = append(out, [2]float64{x, x + w})
	}
	return out
}

// TestCPUChart renders testdata/cpu.jsonl, a 10 s run with --suspend-threshold 70 and
// --resume-threshold 50 in its start event, CPU and own CPU in its progress events, and
// pauses from 3 to 6 s (two rsyncs, overlapping) and from 8 s to the end: the chart draws
// the machine's CPU and the copy's own, the two thresholds where they are, and the
// pauses as two shaded spans.
func TestCPUChart(t *testing.T) {
	b, err := os.ReadFile("testdata/cpu.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	fig := cpuFigure(t, string(b))
	names, paths := legend(fig)
	want := []string{"paused", "the machine", "the copy's own", "suspend 70%", "resume 50%"}
	if strings.Join(names, "|") != strings.Join(want[1:], "|")+"|paused" {
		t.Errorf("legend %q, want %q", names, want)
	}
	if len(paths) != 4 {
		t.Fatalf("%d lines, want 4: %q", len(paths), paths)
	}
	// the y axis runs 0-100 %: y(v) = padT + plotH*(1 - v/100); the time axis 0-10 s
	y := func(v float64) string { return num(padT + plotH*(1-v/100)) }
	x := func(sec float64) float64 { return padL + sec/10*plotW }
	for i, v := range []float64{70, 50} {
		d := paths[2+i]
		if want := "M" + num(padL) + " " + y(v) + " L" + num(padL+plotW) + " " + y(v); d != want {
			t.Errorf("threshold %g: d=%q, want %q", v, d, want)
		}
	}
	// the machine's line passes through its 10 samples, 98 % last
	if d := paths[0]; strings.Count(d, "L") != 9 || !strings.HasSuffix(d, num(x(10))+" "+y(98)) {
		t.Errorf("the machine's line %q", d)
	}
	if d := paths[1]; strings.Count(d, "L") != 9 || !strings.HasSuffix(d, num(x(10))+" "+y(2)) {
		t.Errorf("the copy's own line %q", d)
	}
	spans := shaded(t, fig)
	wantSpans := [][2]float64{{x(3), x(6)}, {x(8), x(10)}}
	if len(spans) != len(wantSpans) {
		t.Fatalf("shaded %v, want %v", spans, wantSpans)
	}
	for i, s := range spans {
		if d0, d1 := s[0]-wantSpans[i][0], s[1]-wantSpans[i][1]; d0*d0 > 1 || d1*d1 > 1 {
			t.Errorf("span %d: %v, want %v", i, s, wantSpans[i])
		}
	}
	if !strings.Contains(fig.text.String(), "--suspend-threshold and --resume-threshold, as the start event gives them") {
		t.Errorf("caption: %q", fig.text.String())
	}
}

// TestCPUChartThresholds: a start event without thresholds (an older prsync) gets prsync's
// defaults, said so; --no-throttle draws none; no progress event leaves the chart empty.
func TestCPUChartThresholds(t *testing.T) {
	progress := ev(1, "progress", `"cpu_percent":50,"running":1,"jobs":2`) + "\n" + ev(2, "progress", `"cpu_percent":60,"running":1,"jobs":2`)
	tests := []struct {
		name, events string
		names        []string
		caption      string
	}{
		{"no thresholds in the start event", evStart + "\n" + progress + "\n",
			[]string{"the machine", "suspend 80%", "resume 60%"}, "prsync's defaults (the start event gives none)"},
		{"no start event", progress + "\n",
			[]string{"the machine", "suspend 80%", "resume 60%"}, "prsync's defaults"},
		{"--no-throttle", strings.TrimSuffix(evStart, "}") + `,"suspend_threshold":70,"resume_threshold":50,"no_throttle":true}` + "\n" + progress + "\n",
			[]string{"the machine"}, "The run had --no-throttle: nothing was paused."},
		{"no progress", evStart + "\n" + evSummary + "\n", nil, "No progress events in the file."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fig := cpuFigure(t, tt.events)
			names, _ := legend(fig)
			if strings.Join(names, "|") != strings.Join(tt.names, "|") {
				t.Errorf("legend %q, want %q", names, tt.names)
			}
			if !strings.Contains(fig.text.String(), tt.caption) {
				t.Errorf("the chart does not say %q: %q", tt.caption, fig.text.String())
			}
			if n := len(shaded(t, fig)); n != 0 {
				t.Errorf("%d shaded spans without a pause", n)
			}
		})
	}
}
