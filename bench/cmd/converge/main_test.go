package main

import (
	"math"
	"strings"
	"testing"
)

// TestConverge: where a run's limit settles, when it entered the band and when it came to
// stay there, from its events.
func TestConverge(t *testing.T) {
	ev := func(typ string, sec float64, field string) string {
		s := `{"type":"` + typ + `","time":"2026-12-05T10:00:` + twoDigits(sec) + `Z"`
		if field != "" {
			s += "," + field
		}
		return s + "}\n"
	}
	for _, tc := range []struct {
		name            string
		log             string
		settled         int
		entered, stayed float64
	}{
		{"pinned: settled from the start",
			ev("start", 0, `"jobs":8`) + ev("summary", 20, ""), 8, 0, 0},
		{"climbs to 16 at 3 s and stays",
			ev("start", 0, `"jobs":8`) + ev("jobs", 1, `"new":10`) + ev("jobs", 3, `"new":16`) + ev("summary", 20, ""), 16, 3, 3},
		{"within 10 %: 15 is in the band of 16",
			ev("start", 0, `"jobs":4`) + ev("jobs", 2, `"new":15`) + ev("jobs", 6, `"new":16`) + ev("summary", 20, ""), 16, 2, 2},
		{"a brief probe out of the band does not undo it",
			ev("start", 0, `"jobs":8`) + ev("jobs", 4, `"new":4`) + ev("jobs", 10, `"new":5`) + ev("jobs", 11, `"new":4`) + ev("summary", 30, ""), 4, 4, 4},
		{"settles late",
			ev("start", 0, `"jobs":8`) + ev("jobs", 2, `"new":2`) + ev("jobs", 5, `"new":8`) + ev("jobs", 12, `"new":3`) + ev("summary", 40, ""), 3, 12, 12},
		{"entered early, left, came back",
			ev("start", 0, `"jobs":8`) + ev("jobs", 1, `"new":3`) + ev("jobs", 2, `"new":8`) + ev("jobs", 9, `"new":3`) + ev("summary", 40, ""), 3, 1, 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := read(strings.NewReader(tc.log))
			if err != nil {
				t.Fatal(err)
			}
			c := r.converge()
			if c.settled != tc.settled || !near(c.entered, tc.entered) || !near(c.stayed, tc.stayed) {
				t.Errorf("settled %d, entered %.1f, stayed %.1f; want %d, %.1f, %.1f", c.settled, c.entered, c.stayed, tc.settled, tc.entered, tc.stayed)
			}
		})
	}
	if _, err := read(strings.NewReader(ev("start", 0, `"jobs":8`))); err == nil {
		t.Error("a run with no summary read as one that ended")
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6 }

func twoDigits(sec float64) string {
	s := int(sec)
	return string(rune('0'+s/10)) + string(rune('0'+s%10))
}
