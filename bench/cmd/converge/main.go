// Command converge says how fast prsync's number of rsyncs settled in a run, from the
// JSON-lines events of the run (bench/scenarios.sh keeps them in $OUT/logs): issue 45's goal
// is "-j within 10 % of where it settles in ≤ 5 s".
//
// Where it settles (S) is the limit that held the most time over the second half of the run
// (the start event's jobs, then each jobs event's new, up to the summary). The band is the
// limits within 10 % of S (S alone below 10). For each log it prints the limit at the start,
// S, when the limit first entered the band (seconds from the start event), when it came to
// stay there (the first moment after which it was in the band at least 90 % of the
// remaining time: the tuner probes a step up or down now and then), the number of changes
// and the run's length.
//
// Usage: converge LOG.jsonl...
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: converge LOG.jsonl...")
		os.Exit(2)
	}
	fmt.Println("log\tstart\tsettled\tentered_s\tstayed_s\tchanges\tseconds")
	bad := false
	for _, name := range os.Args[1:] {
		f, err := os.Open(name)
		if err != nil {
			fmt.Fprintln(os.Stderr, "converge:", err)
			bad = true
			continue
		}
		r, err := read(f)
		f.Close()
		if err != nil {
			fmt.Fprintf(os.Stderr, "converge: %s: %v\n", name, err)
			bad = true
			continue
		}
		c := r.converge()
		fmt.Printf("%s\t%d\t%d\t%.1f\t%.1f\t%d\t%.1f\n", name, r.steps[0].limit, c.settled, c.entered, c.stayed, len(r.steps)-1, r.end)
	}
	if bad {
		os.Exit(1)
	}
}

// step is the limit from a moment on, in seconds from the start event.
type step struct {
	at    float64
	limit int
}

// run is a run's limit over time, and its length.
type run struct {
	steps []step
	end   float64
}

// read reads a run's events: the start event's jobs, each jobs event's new, the summary's
// time as the end.
func read(r io.Reader) (run, error) {
	var out run
	var t0 time.Time
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e struct {
			Type string    `json:"type"`
			Time time.Time `json:"time"`
			Jobs *int      `json:"jobs"`
			New  *int      `json:"new"`
		}
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue // a line that is not an event (a bench's own note)
		}
		switch {
		case e.Type == "start" && e.Jobs != nil:
			t0 = e.Time
			out.steps = []step{{0, *e.Jobs}}
		case e.Type == "jobs" && e.New != nil && len(out.steps) > 0:
			out.steps = append(out.steps, step{e.Time.Sub(t0).Seconds(), *e.New})
		case e.Type == "summary" && len(out.steps) > 0:
			out.end = e.Time.Sub(t0).Seconds()
		}
	}
	if err := sc.Err(); err != nil {
		return run{}, err
	}
	if len(out.steps) == 0 {
		return run{}, fmt.Errorf("no start event")
	}
	if out.end <= 0 {
		return run{}, fmt.Errorf("no summary: the run did not end")
	}
	return out, nil
}

// convergence is what converge prints of a run.
type convergence struct {
	settled         int
	entered, stayed float64 // seconds from the start; NaN: never
}

// held returns, per limit, the seconds it held within [from, to].
func (r run) held(from, to float64) map[int]float64 {
	h := map[int]float64{}
	for i, s := range r.steps {
		next := r.end
		if i+1 < len(r.steps) {
			next = r.steps[i+1].at
		}
		if lo, hi := math.Max(s.at, from), math.Min(next, to); hi > lo {
			h[s.limit] += hi - lo
		}
	}
	return h
}

func (r run) converge() convergence {
	h := r.held(r.end/2, r.end)
	limits := make([]int, 0, len(h))
	for l := range h {
		limits = append(limits, l)
	}
	sort.Ints(limits)
	c := convergence{settled: r.steps[len(r.steps)-1].limit, entered: math.NaN(), stayed: math.NaN()}
	for _, l := range limits {
		if h[l] > h[c.settled] || (h[l] == h[c.settled] && l < c.settled) {
			c.settled = l
		}
	}
	in := func(l int) bool { return math.Abs(float64(l-c.settled)) <= 0.1*float64(c.settled) }
	inBand := func(from float64) float64 {
		var t float64
		for l, s := range r.held(from, r.end) {
			if in(l) {
				t += s
			}
		}
		return t
	}
	for _, s := range r.steps {
		if in(s.limit) {
			c.entered = s.at
			break
		}
	}
	// the first step from which on the band held at least 90 % of the remaining time
	for _, s := range r.steps {
		if rest := r.end - s.at; rest > 0 && in(s.limit) && inBand(s.at) >= 0.9*rest {
			c.stayed = s.at
			break
		}
	}
	return c
}
