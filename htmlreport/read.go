package htmlreport

import (
	"bufio"
	"bytes"
	"container/heap"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"time"

	"github.com/prsync/prsync/event"
)

// Bounds on what a report keeps, whatever the size of the events file.
const (
	maxLine         = 1 << 20 // a longer line is not an event (prsync's are under 64 KiB)
	probeLines      = 64      // lines read before giving up on a file with no event in them
	maxGroups       = 100     // failure reasons kept apart; the rest are "other reasons"
	pathsPerGroup   = 10      // the first paths shown of each reason
	maxRows         = 50      // rows of the jobs, control and error tables
	longestPauses   = 10      // the longest pauses listed
	maxReasons      = 16      // throttle reasons kept apart
	maxOpenPauses   = 1 << 16 // pauses waiting for their resume
	badLinesListed  = 5       // line numbers of skipped lines named in the report
	otherReasonsKey = "\x00other"
)

// errNoEvents is an input that holds no prsync events.
var errNoEvents = errors.New("holds no prsync events")

// Report is what a run's events say, aggregated as they stream by: bounded in size
// whatever the length of the run.
type Report struct {
	Start   *event.Start
	Summary *event.Summary
	// SummaryExtra are the summary's fields this prsync does not know (a newer schema).
	SummaryExtra map[string]json.RawMessage
	LastProgress *event.Progress

	T0, TEnd    time.Time // the first event's time (the start event's), the last's
	Events      int64     // lines read as events of the run
	Lines       int64     // lines read, empty ones included
	Bad         int64     // lines that are not events
	BadAt       []int64   // the first of them, by line number
	Truncated   bool      // the last line was cut short: the file was being written
	Runs        int       // start events: more than one when runs were appended to one file
	OtherTypes  int64     // events of types this prsync does not know
	NoStart     bool      // the first event is not a start event (the file's head is missing)
	StatusCount int64
	// WouldTransfer counts the would_transfer events of a dry run
	WouldTransfer int64

	// series over time, in seconds since T0
	bytes, files          *series // running totals from progress events
	running, paused, jobs *series
	chunkBytes, chunkFile *series
	pausedBy              map[string]*series // paused rsync-seconds, by reason
	cpu                   cpuSeries          // the CPU chart's

	Chunks       chunkStats
	Pauses       map[string]*pauseStats
	open         map[int]openPause
	Longest      pauseHeap
	JobsChanges  []event.Jobs
	JobsCount    int64
	JobsReasons  map[string]int64
	Controls     []controlRow
	ControlCount int64
	Errors       []event.Error
	ErrorCount   int64

	Failures     map[string]*failureGroup
	FailureCount int64
	Deleted      map[string]int64 // by kind
}

type chunkStats struct {
	Starts   int64
	Ends     int64
	ByStatus map[string]int64
	ByExit   map[int]int64
	Seconds  float64 // rsync time of the ended chunks, added up
}

type pauseStats struct {
	Count    int64
	Seconds  float64 // rsync-seconds paused
	Longest  float64
	EndedBy  map[string]int64 // the resume's reason: "" (cooled), starved, stop; "open" for none
	Reason   string
	Unpaired int64 // resumes with no suspend before them
}

type openPause struct {
	t      float64
	reason string
	ev     event.Throttle
}

// Pause is one pause of an rsync, for the table of the longest.
type Pause struct {
	Start, Seconds  float64
	Reason, EndedBy string
	Chunk, PID      int
	CPUPercent      float64
	Load            *float64
	Open            bool // not resumed when the file ended
}

type pauseHeap []Pause // a min-heap on Seconds: the shortest of the longest on top

func (h pauseHeap) Len() int           { return len(h) }
func (h pauseHeap) Less(i, j int) bool { return h[i].Seconds < h[j].Seconds }
func (h pauseHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *pauseHeap) Push(x any)        { *h = append(*h, x.(Pause)) }
func (h *pauseHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

type controlRow struct {
	T              float64
	What, Old, New string
	Next           string
	Kind           string // control or bwlimit
}

// failureGroup is the paths that failed for one reason.
type failureGroup struct {
	Status, Reason string // Reason as the first path had it
	Count          int64
	Paths          []string // the first pathsPerGroup, printable
}

func newReport() *Report {
	return &Report{
		bytes: newSeries(), files: newSeries(), running: newSeries(), paused: newSeries(), jobs: newSeries(),
		chunkBytes: newSeries(), chunkFile: newSeries(),
		pausedBy:    map[string]*series{},
		cpu:         newCPUSeries(),
		Chunks:      chunkStats{ByStatus: map[string]int64{}, ByExit: map[int]int64{}},
		Pauses:      map[string]*pauseStats{},
		open:        map[int]openPause{},
		JobsReasons: map[string]int64{},
		Failures:    map[string]*failureGroup{},
		Deleted:     map[string]int64{},
	}
}

// Read reads a run's events from r, line by line, and aggregates them. A line that is not
// an event is counted and skipped, and a cut-short last line marks the file as being
// written; an input with no event in its first lines is errNoEvents.
func Read(r io.Reader) (*Report, error) {
	rep := newReport()
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line)+len(chunk) <= maxLine+1 {
			line = append(line, chunk...)
		} else {
			if rep.Events == 0 {
				return nil, fmt.Errorf("%w: its first lines are not prsync's JSON events (line %d is longer than %d bytes)", errNoEvents, rep.Lines+1, maxLine)
			}
			line = append(line[:0], "\x00too long"...) // keep reading to its end; not an event
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		if len(line) > 0 {
			rep.line(bytes.TrimSpace(line), err == nil) // complete: it ended in a newline
			if rep.Events == 0 && rep.Lines >= probeLines {
				return nil, fmt.Errorf("%w: its first %d lines are not prsync's JSON events", errNoEvents, probeLines)
			}
		}
		line = line[:0]
		if err != nil {
			break
		}
	}
	if rep.Events == 0 {
		if rep.Lines == 0 {
			return nil, fmt.Errorf("%w: it is empty", errNoEvents)
		}
		return nil, fmt.Errorf("%w: none of its %d lines is a prsync JSON event", errNoEvents, rep.Lines)
	}
	rep.finish()
	return rep, nil
}

// line takes one line of the file, without its newline; complete says it had one.
func (rep *Report) line(b []byte, complete bool) {
	rep.Lines++
	if len(b) == 0 {
		return
	}
	var h event.Header
	var t time.Time
	err := json.Unmarshal(b, &h)
	if err == nil {
		t, err = time.Parse(time.RFC3339Nano, h.Time)
	}
	if err == nil && h.Type == "" {
		err = errors.New("no type")
	}
	if rep.Runs > 1 {
		if err == nil && h.Type == "start" {
			rep.Runs++
		}
		return // a later run's lines: the report is of the first
	}
	if err == nil {
		err = rep.event(h.Type, t, b)
	}
	if err != nil {
		if !complete {
			rep.Truncated = true // the writer was in the middle of this line
			return
		}
		rep.Bad++
		if len(rep.BadAt) < badLinesListed {
			rep.BadAt = append(rep.BadAt, rep.Lines)
		}
		return
	}
}

// at is t in seconds since the run's first event.
func (rep *Report) at(t time.Time) float64 { return t.Sub(rep.T0).Seconds() }

// event takes one event of type typ stamped t, as the JSON in b.
func (rep *Report) event(typ string, t time.Time, b []byte) error {
	if typ == "start" && rep.Runs > 0 {
		rep.Runs++
		return nil // the next run appended to the same file begins
	}
	decode := func(v any) error { return json.Unmarshal(b, v) }
	if rep.Events == 0 {
		rep.T0 = t
		rep.NoStart = typ != "start"
	}
	var sec float64
	switch typ {
	case "start":
		var e event.Start
		if err := decode(&e); err != nil {
			return err
		}
		rep.Start, rep.Runs = &e, 1
	case "progress":
		var e event.Progress
		if err := decode(&e); err != nil {
			return err
		}
		sec = rep.at(t)
		rep.LastProgress = &e
		rep.bytes.add(sec, float64(e.BytesDone))
		rep.files.add(sec, float64(e.FilesDone))
		rep.running.add(sec, float64(e.Running))
		rep.paused.add(sec, float64(e.Suspended))
		rep.jobs.add(sec, float64(e.Jobs))
		rep.cpu.progress(sec, e.CPU)
	case "chunk_start":
		var e event.ChunkStart
		if err := decode(&e); err != nil {
			return err
		}
		sec = rep.at(t)
		rep.Chunks.Starts++
		rep.chunkBytes.add(sec, float64(e.Bytes))
		rep.chunkFile.add(sec, float64(e.Files))
	case "chunk_end":
		var e event.ChunkEnd
		if err := decode(&e); err != nil {
			return err
		}
		rep.Chunks.Ends++
		rep.Chunks.ByStatus[clip(e.Status, 40)]++
		rep.Chunks.ByExit[e.ExitCode]++
		rep.Chunks.Seconds += e.Seconds
	case "throttle":
		var e event.Throttle
		if err := decode(&e); err != nil {
			return err
		}
		rep.throttle(rep.at(t), e)
	case "jobs":
		var e event.Jobs
		if err := decode(&e); err != nil {
			return err
		}
		rep.JobsCount++
		rep.JobsReasons[clip(e.Reason, 60)]++
		if len(rep.JobsChanges) < maxRows {
			e.Time = fmt.Sprintf("%.3f", rep.at(t))
			rep.JobsChanges = append(rep.JobsChanges, e)
		}
	case "control", "bwlimit":
		row := controlRow{T: rep.at(t), Kind: typ}
		if typ == "control" {
			var e event.Control
			if err := decode(&e); err != nil {
				return err
			}
			row.What, row.Old, row.New = e.What, e.Old, e.New
		} else {
			var e event.BWLimit
			if err := decode(&e); err != nil {
				return err
			}
			row.What, row.Old, row.New, row.Next = "bwlimit", e.Old, e.New, e.Next
		}
		rep.ControlCount++
		if len(rep.Controls) < maxRows {
			rep.Controls = append(rep.Controls, row)
		}
	case "error":
		var e event.Error
		if err := decode(&e); err != nil {
			return err
		}
		rep.ErrorCount++
		if len(rep.Errors) < maxRows {
			e.Time = fmt.Sprintf("%.3f", rep.at(t))
			rep.Errors = append(rep.Errors, e)
		}
	case "path_failed":
		var e event.PathFailed
		if err := decode(&e); err != nil {
			return err
		}
		rep.failure(e)
	case "deleted":
		var e event.Deleted
		if err := decode(&e); err != nil {
			return err
		}
		rep.Deleted[clip(e.Kind, 20)]++
	case "summary":
		var e event.Summary
		if err := decode(&e); err != nil {
			return err
		}
		rep.Summary = &e
		rep.SummaryExtra = extraFields(b, e)
	case "status":
		rep.StatusCount++
	case "would_transfer":
		rep.WouldTransfer++
	default:
		rep.OtherTypes++
	}
	rep.Events++
	if t.After(rep.TEnd) {
		rep.TEnd = t
	}
	return nil
}

// throttle pairs each suspend with the resume of the same process group.
func (rep *Report) throttle(sec float64, e event.Throttle) {
	switch e.Action {
	case "suspend":
		reason := rep.reasonKey(e.Reason)
		ps := rep.pauseStats(reason)
		ps.Count++
		if prev, ok := rep.open[e.PID]; ok {
			rep.closePause(prev, sec, "suspended again", e.PID) // a resume went unwritten
		}
		if len(rep.open) < maxOpenPauses {
			rep.open[e.PID] = openPause{t: sec, reason: reason, ev: e}
		}
	case "resume":
		p, ok := rep.open[e.PID]
		if !ok {
			rep.pauseStats(rep.reasonKey("")).Unpaired++
			return
		}
		delete(rep.open, e.PID)
		rep.closePause(p, sec, e.Reason, e.PID)
	}
}

// reasonKey is a throttle reason as the report keeps it apart: the first maxReasons
// reasons seen, and "other" for the rest.
func (rep *Report) reasonKey(r string) string {
	r = clip(r, 40)
	if _, ok := rep.Pauses[r]; ok || len(rep.Pauses) < maxReasons {
		return r
	}
	return "other"
}

func (rep *Report) pauseStats(reason string) *pauseStats {
	ps, ok := rep.Pauses[reason]
	if !ok {
		ps = &pauseStats{Reason: reason, EndedBy: map[string]int64{}}
		rep.Pauses[reason] = ps
	}
	return ps
}

func (rep *Report) closePause(p openPause, end float64, endedBy string, pid int) {
	d := max(0, end-p.t)
	ps := rep.pauseStats(p.reason)
	ps.Seconds += d
	ps.Longest = max(ps.Longest, d)
	ps.EndedBy[clip(endedBy, 40)]++
	s, ok := rep.pausedBy[p.reason]
	if !ok {
		s = newSeries()
		rep.pausedBy[p.reason] = s
	}
	s.addSpan(p.t, end, 1)
	rep.cpu.throttled.addSpan(p.t, end, 1)
	pause := Pause{Start: p.t, Seconds: d, Reason: p.reason, EndedBy: endedBy, Chunk: p.ev.Chunk, PID: pid,
		CPUPercent: p.ev.CPUPercent, Load: p.ev.Load, Open: endedBy == "open"}
	switch {
	case len(rep.Longest) < longestPauses:
		heap.Push(&rep.Longest, pause)
	case d > rep.Longest[0].Seconds:
		rep.Longest[0] = pause
		heap.Fix(&rep.Longest, 0)
	}
}

// quoted matches what rsync's messages quote, from the first quote to the last (a name may
// hold quotes itself), so that the same failure of many paths is one reason.
var quoted = regexp.MustCompile(`(?s)".*"`)

func (rep *Report) failure(e event.PathFailed) {
	rep.FailureCount++
	reason := clip(e.Reason, 400)
	key := clip(e.Status, 20) + "\x00" + quoted.ReplaceAllString(reason, `"…"`)
	g, ok := rep.Failures[key]
	if !ok && len(rep.Failures) >= maxGroups {
		key = otherReasonsKey
		g, ok = rep.Failures[key]
		reason = "(other reasons)"
	}
	if !ok {
		g = &failureGroup{Status: e.Status, Reason: reason}
		rep.Failures[key] = g
	}
	g.Count++
	if len(g.Paths) < pathsPerGroup {
		name := []byte(e.Path)
		if e.PathB64 != "" {
			if raw, err := base64.StdEncoding.DecodeString(e.PathB64); err == nil {
				name = raw
			}
		}
		g.Paths = append(g.Paths, printable(name, false))
	}
}

// finish closes the pauses still open at the file's end.
func (rep *Report) finish() {
	end := rep.at(rep.TEnd)
	pids := make([]int, 0, len(rep.open))
	for pid := range rep.open {
		pids = append(pids, pid)
	}
	sort.Ints(pids)
	for _, pid := range pids {
		rep.closePause(rep.open[pid], end, "open", pid)
	}
	clear(rep.open)
}

// extraFields returns the fields of the JSON object b that Summary does not have.
func extraFields(b []byte, s event.Summary) map[string]json.RawMessage {
	var all map[string]json.RawMessage
	if json.Unmarshal(b, &all) != nil {
		return nil
	}
	known, _ := json.Marshal(s)
	var k map[string]json.RawMessage
	json.Unmarshal(known, &k)
	for name := range k {
		delete(all, name)
	}
	if len(all) == 0 {
		return nil
	}
	return all
}

// clip cuts s to at most n bytes, at a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}
