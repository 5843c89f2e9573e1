package htmlreport

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/prsync/prsync/event"
	"github.com/prsync/prsync/internal/human"
)

//go:embed report.html.tmpl
var pageText string

var page = template.Must(template.New("report").Parse(pageText))

// colors of the lines, readable on white and told apart without red-green.
var colors = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#d62728"}

// view is the report as the template shows it: every string already printable.
type view struct {
	Title    string
	Source   string
	Subtitle string
	Outcome  string
	Class    string // ok, failed or partial: the outcome's colour
	Notes    []Note
	Run      []Row
	Summary  [][]Row // in two columns
	Charts   []Chart
	Throttle struct {
		Reasons []ReasonRow
		Longest []PauseRow
		Total   string
	}
	Failures     []FailureRow
	FailureTotal string
	Jobs         []EventRow
	JobsMore     string
	JobsReasons  []Row
	Controls     []EventRow
	ControlsMore string
	Chunks       []Row
	Exits        []Row
	Errors       []EventRow
	ErrorsMore   string
	File         []Row
}

// Note is a sentence the reader must see before the figures; Strong ones are in a banner.
type Note struct {
	Text   string
	Strong bool
}

// Row is a label and its value.
type Row struct{ Label, Value, Title string }

// ReasonRow is the pauses of one throttle reason.
type ReasonRow struct {
	Reason, Means, Count, Seconds, Mean, Longest, EndedBy string
}

// PauseRow is one long pause.
type PauseRow struct{ Start, Seconds, Reason, EndedBy, Chunk, PID, CPU string }

// FailureRow is the paths that failed for one reason.
type FailureRow struct {
	Status, Reason, Count string
	Paths                 []string
	More                  string
}

// EventRow is one event in a table: its time and its words.
type EventRow struct{ Time, What, Detail string }

// Render writes rep as one self-contained HTML page; source names the events file.
func Render(w io.Writer, rep *Report, source string) error {
	v := build(rep, source)
	var b bytes.Buffer
	if err := page.Execute(&b, v); err != nil {
		return fmt.Errorf("render: %w", err)
	}
	_, err := w.Write(b.Bytes())
	return err
}

func build(rep *Report, source string) *view {
	v := &view{Title: "prsync run report", Source: showLine(source)}
	end := rep.at(rep.TEnd)
	st, sum := rep.Start, rep.Summary
	if st != nil {
		v.Title = "prsync report: " + showLine(st.Dest)
	}
	v.Subtitle = fmt.Sprintf("started %s, last event %s (%s later)", stamp(rep.T0), stamp(rep.TEnd), duration(end))

	switch {
	case sum == nil:
		v.Outcome, v.Class = "not ended", "partial"
		v.Notes = append(v.Notes, Note{Strong: true, Text: fmt.Sprintf(
			"The run had not ended when this file was written: it has no summary event. "+
				"The report shows the run up to its last event, %s after the start; the run may still be going, or was killed.", duration(end))})
	case sum.ExitCode == 0:
		v.Outcome, v.Class = "exit 0: every path done", "ok"
	default:
		v.Outcome, v.Class = fmt.Sprintf("exit %d: %s failed, %s vanished, %s not done",
			sum.ExitCode, counted(sum.FilesFailed, "path", "paths"), human.Count(sum.FilesVanished), human.Count(sum.FilesNotDone)), "failed"
	}
	if rep.Truncated {
		v.Notes = append(v.Notes, Note{Strong: true, Text: "The file's last line was cut short (prsync was writing it, or was killed while it did); the report leaves it out."})
	}
	if rep.Bad > 0 {
		at := make([]string, len(rep.BadAt))
		for i, n := range rep.BadAt {
			at[i] = human.Count(n)
		}
		v.Notes = append(v.Notes, Note{Strong: true, Text: fmt.Sprintf("%s line(s) of the file are not prsync events and were skipped (line %s%s).",
			human.Count(rep.Bad), strings.Join(at, ", "), map[bool]string{true: ", …", false: ""}[rep.Bad > int64(len(rep.BadAt))])})
	}
	if rep.NoStart {
		v.Notes = append(v.Notes, Note{Strong: true, Text: "The file does not begin with prsync's start event: it holds the tail of a run, and its times count from its first event."})
	}
	if rep.Runs > 1 {
		v.Notes = append(v.Notes, Note{Strong: true, Text: fmt.Sprintf("The file holds %d runs, one after another; this report shows the first. Split the file at each start event to see the others.", rep.Runs)})
	}
	if st != nil && st.Schema > event.Schema {
		v.Notes = append(v.Notes, Note{Text: fmt.Sprintf("The events are of schema %d, newer than this prsync's %d: fields it does not know are left out, or listed as they are.", st.Schema, event.Schema)})
	}
	if st != nil && st.DryRun {
		v.Notes = append(v.Notes, Note{Text: "A dry run (-n): nothing was copied." + wouldTransfer(rep)})
	}

	v.Run = runRows(rep)
	if rows := summaryRows(rep); len(rows) > 0 {
		half := (len(rows) + 1) / 2
		v.Summary = [][]Row{rows[:half], rows[half:]}
	}
	v.Charts = charts(rep, end)
	throttleRows(rep, v)
	failureRows(rep, v)
	for _, e := range rep.JobsChanges {
		detail := show(e.Reason)
		if e.Detail != "" {
			detail += ": " + show(e.Detail)
		}
		if e.RateBps > 0 {
			detail += " (at " + rate(e.RateBps) + ")"
		}
		v.Jobs = append(v.Jobs, EventRow{Time: clockOf(e.Time), What: fmt.Sprintf("%d → %d", e.Old, e.New), Detail: detail})
	}
	v.JobsMore = more(rep.JobsCount, len(rep.JobsChanges))
	v.JobsReasons = sortedCounts(rep.JobsReasons, nil)
	for _, c := range rep.Controls {
		detail := showLine(c.Old) + " → " + showLine(c.New)
		if c.Next != "" {
			detail += " (until " + showLine(c.Next) + ")"
		}
		what := showLine(c.What)
		if c.Kind == "control" {
			what = "prsync ctl " + what
		} else {
			what = "bandwidth limit"
		}
		v.Controls = append(v.Controls, EventRow{Time: human.Clock(c.T), What: what, Detail: detail})
	}
	v.ControlsMore = more(rep.ControlCount, len(rep.Controls))
	v.Chunks = sortedCounts(rep.Chunks.ByStatus, nil)
	exits := map[string]int64{}
	for code, n := range rep.Chunks.ByExit {
		exits[fmt.Sprint(code)] = n
	}
	v.Exits = sortedCounts(exits, exitMeaning)
	for _, e := range rep.Errors {
		v.Errors = append(v.Errors, EventRow{Time: clockOf(e.Time), Detail: show(e.Error)})
	}
	v.ErrorsMore = more(rep.ErrorCount, len(rep.Errors))
	v.File = []Row{
		{Label: "file", Value: showLine(source)},
		{Label: "lines", Value: human.Count(rep.Lines)},
		{Label: "events of the run", Value: human.Count(rep.Events)},
		{Label: "lines skipped", Value: human.Count(rep.Bad)},
		{Label: "last line cut short", Value: yesNo(rep.Truncated)},
		{Label: "events of unknown types", Value: human.Count(rep.OtherTypes)},
		{Label: "status events", Value: human.Count(rep.StatusCount)},
	}
	return v
}

func runRows(rep *Report) []Row {
	st := rep.Start
	if st == nil {
		return []Row{{Label: "start event", Value: "missing"}}
	}
	jobs := fmt.Sprint(st.Jobs)
	if st.JobsAuto {
		jobs = fmt.Sprintf("auto (from %d, at most %d)", st.Jobs, st.MaxJobs)
	}
	rows := []Row{
		{Label: "prsync", Value: fmt.Sprintf("%s (pid %d, schema %d)", showLine(st.Version), st.PID, st.Schema)},
		{Label: "started", Value: stamp(rep.T0)},
		{Label: "DEST", Value: showLine(st.Dest)},
		{Label: "--root", Value: orNone(showLine(st.Root))},
		{Label: "rsync", Value: showLine(st.Rsync) + " " + showLine(st.RsyncVersion)},
		{Label: "rsync options", Value: orNone(showLine(strings.Join(st.RsyncArgs, " ")))},
		{Label: "-j", Value: jobs},
		{Label: "chunks", Value: fmt.Sprintf("%s files or %s", human.Count(st.ChunkFiles), bytesShort(float64(st.ChunkBytes)))},
		{Label: "transport", Value: showLine(st.Transport)},
		{Label: "--bwlimit", Value: orNone(showLine(st.BWLimit))},
		{Label: "--max-suspend", Value: duration(st.MaxSuspend)},
		{Label: "quick check", Value: yesNo(st.QuickCheck)},
		{Label: "--delete, --verify", Value: yesNo(st.Delete) + ", " + orNone(showLine(st.Verify))},
	}
	if st.Shards > 1 {
		rows = append(rows, Row{Label: "shard", Value: fmt.Sprintf("%d of %d", st.Shard, st.Shards)})
	}
	if st.Cgroup != nil && st.Cgroup.CPUs > 0 {
		rows = append(rows, Row{Label: "cgroup CPU quota", Value: fmt.Sprintf("%g CPUs", st.Cgroup.CPUs)})
	}
	return rows
}

func summaryRows(rep *Report) []Row {
	s := rep.Summary
	if s == nil {
		p := rep.LastProgress
		if p == nil {
			return nil
		}
		return []Row{
			{Label: "state", Value: "no summary: the last progress event's figures"},
			{Label: "files done", Value: human.Count(p.FilesDone)},
			{Label: "bytes done", Value: bytesShort(float64(p.BytesDone))},
			{Label: "files queued", Value: human.Count(p.FilesQueued)},
			{Label: "input read to its end", Value: yesNo(p.InputDone)},
			{Label: "elapsed", Value: duration(p.Elapsed)},
			{Label: "rate", Value: rate(p.RateBps)},
			{Label: "rsyncs running, paused", Value: fmt.Sprintf("%d, %d", p.Running, p.Suspended)},
			{Label: "phase", Value: showLine(p.Phase)},
		}
	}
	identity := s.FilesTransferred + s.FilesUpToDate + s.FilesVanished + s.FilesFailed + s.FilesNotDone
	rows := []Row{
		{Label: "exit code", Value: fmt.Sprint(s.ExitCode)},
		{Label: "files", Value: human.Count(s.Files), Title: "every non-empty input record this run took"},
		{Label: "bytes", Value: bytesShort(float64(s.Bytes))},
		{Label: "files transferred", Value: human.Count(s.FilesTransferred)},
		{Label: "bytes transferred", Value: bytesShort(float64(s.BytesTransferred))},
		{Label: "files up to date", Value: human.Count(s.FilesUpToDate)},
		{Label: "files failed", Value: human.Count(s.FilesFailed)},
		{Label: "files vanished", Value: human.Count(s.FilesVanished)},
		{Label: "files not done", Value: human.Count(s.FilesNotDone)},
		{Label: "every path accounted for", Value: yesNo(identity == s.Files), Title: "files = transferred + up to date + vanished + failed + not done"},
		{Label: "input read to its end", Value: yesNo(s.InputComplete)},
		{Label: "empty records", Value: human.Count(s.EmptyRecords)},
		{Label: "time", Value: duration(s.Seconds)},
		{Label: "rate", Value: rate(s.RateBps)},
		{Label: "chunks", Value: human.Count(s.Chunks)},
		{Label: "chunks failed", Value: human.Count(s.ChunksFailed)},
		{Label: "retries", Value: human.Count(s.Retries)},
		{Label: "chunk errors", Value: human.Count(s.ChunkErrors), Title: "rsync errors that named no path"},
		{Label: "-j range", Value: fmt.Sprintf("%d–%d", s.JobsMin, s.JobsMax)},
		{Label: "pauses by the throttle", Value: human.Count(s.Suspensions)},
		{Label: "rsync time paused", Value: duration(s.SecondsSuspended)},
		{Label: "proving paths", Value: duration(s.ConfirmSeconds)},
		{Label: "CPU: prsync, its rsyncs", Value: duration(s.CPUSeconds) + ", " + duration(s.RsyncCPUSeconds)},
		{Label: "files verified, differing", Value: human.Count(s.FilesVerified) + ", " + human.Count(s.FilesVerifyFailed)},
		{Label: "verification time", Value: duration(s.VerifySeconds)},
		{Label: "deletion pass", Value: orNone(showLine(s.DeletePass))},
		{Label: "entries deleted", Value: human.Count(s.FilesDeleted)},
		{Label: "directories checked, time", Value: human.Count(s.DeleteDirs) + ", " + duration(s.DeleteSeconds)},
	}
	if s.Shards > 1 {
		rows = append(rows, Row{Label: "shard", Value: fmt.Sprintf("%d of %d", s.Shard, s.Shards)})
	}
	names := make([]string, 0, len(rep.SummaryExtra))
	for k := range rep.SummaryExtra {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		rows = append(rows, Row{Label: showLine(k), Value: showLine(clip(string(rep.SummaryExtra[k]), 200))})
	}
	return rows
}

func charts(rep *Report, end float64) []Chart {
	var out []Chart
	noProgress := "No progress events in the file."
	out = append(out, newChart("rate-bytes", "Transfer rate", "Bytes done per second, from the progress events' bytes_done (what rsyncs proved and logged so far).",
		"bytes/s", unitBytesRate, end, []lineSpec{{name: "bytes/s", color: colors[0], points: rep.bytes.rates()}}, noProgress))
	out = append(out, newChart("rate-files", "Files per second", "Paths done per second, from the progress events' files_done.",
		"files/s", unitRate, end, []lineSpec{{name: "files/s", color: colors[2], points: rep.files.rates()}}, noProgress))
	out = append(out, newChart("rsyncs", "rsyncs running and paused, and the -j limit",
		"Each point is the mean over its stretch of time, the band the least and most; paused counts every held rsync (the throttle, the bandwidth limit, prsync ctl pause, Ctrl-Z).",
		"rsyncs", unitCount, end, []lineSpec{
			{name: "running", color: colors[0], points: rep.running.means(), band: true},
			{name: "paused", color: colors[1], points: rep.paused.means(), band: true},
			{name: "-j limit", color: colors[6], points: rep.jobs.means(), dash: true},
		}, noProgress))
	out = append(out, newChart("chunk-bytes", "Chunk size: bytes", "The bytes of each rsync's chunk when it starts (retries and halved chunks too): the mean, with the least and most.",
		"bytes", unitBytes, end, []lineSpec{{name: "bytes per chunk", color: colors[3], points: rep.chunkBytes.means(), band: true}}, "No chunk_start events in the file."))
	out = append(out, newChart("chunk-files", "Chunk size: files", "The paths of each rsync's chunk when it starts: the mean, with the least and most.",
		"files", unitCount, end, []lineSpec{{name: "files per chunk", color: colors[4], points: rep.chunkFile.means(), band: true}}, "No chunk_start events in the file."))
	var lines []lineSpec
	for i, r := range pauseReasons(rep) {
		if s, ok := rep.pausedBy[r]; ok {
			lines = append(lines, lineSpec{name: reasonName(r), color: colors[(i+1)%len(colors)], points: s.perSecond(end)})
		}
	}
	out = append(out, newChart("paused-by", "Paused by the throttle, by reason", "The mean number of rsyncs the throttle held, by the reason it paused them.",
		"rsyncs paused", unitCount, end, lines, "The throttle paused no rsync."))
	out = append(out, cpuChart(rep, end))
	return out
}

// pauseReasons are the throttle's reasons, the most paused first.
func pauseReasons(rep *Report) []string {
	var rs []string
	for r, ps := range rep.Pauses {
		if ps.Count > 0 {
			rs = append(rs, r)
		}
	}
	sort.Slice(rs, func(i, j int) bool {
		a, b := rep.Pauses[rs[i]], rep.Pauses[rs[j]]
		if a.Seconds != b.Seconds {
			return a.Seconds > b.Seconds
		}
		return rs[i] < rs[j]
	})
	return rs
}

// reasonMeaning says what each throttle reason measured.
var reasonMeaning = map[string]string{
	"cpu":          "system CPU use above --suspend-threshold",
	"cgroup-cpu":   "the cgroup's CPU use above --suspend-threshold of its quota",
	"load":         "the 1-minute load average above --max-load",
	"cpu-pressure": "PSI cpu some avg10 above --max-cpu-pressure",
	"io":           "PSI io some avg10 above --max-io-pressure",
	"other":        "further reasons, kept together",
}

func reasonName(r string) string {
	if r == "" {
		return "(none)"
	}
	return showLine(r)
}

// endedBy names how a pause ended, from its resume's reason.
func endedBy(r string) string {
	switch r {
	case "":
		return "cooled"
	case "starved":
		return "--max-suspend"
	case "stop":
		return "the run's end"
	case "open":
		return "still paused at the file's end"
	}
	return showLine(r)
}

func throttleRows(rep *Report, v *view) {
	var total float64
	var n int64
	for _, r := range pauseReasons(rep) {
		ps := rep.Pauses[r]
		total += ps.Seconds
		n += ps.Count
		var ends []string
		for _, e := range sortedKeys(ps.EndedBy) {
			ends = append(ends, fmt.Sprintf("%s %s", human.Count(ps.EndedBy[e]), endedBy(e)))
		}
		v.Throttle.Reasons = append(v.Throttle.Reasons, ReasonRow{
			Reason: reasonName(r), Means: reasonMeaning[r], Count: human.Count(ps.Count), Seconds: duration(ps.Seconds),
			Mean: duration(ps.Seconds / float64(ps.Count)), Longest: duration(ps.Longest), EndedBy: strings.Join(ends, ", "),
		})
	}
	if n > 0 {
		v.Throttle.Total = fmt.Sprintf("%s, %s of rsync time paused in all.", counted(n, "pause", "pauses"), duration(total))
	}
	longest := append(pauseHeap(nil), rep.Longest...)
	sort.Slice(longest, func(i, j int) bool {
		if longest[i].Seconds != longest[j].Seconds {
			return longest[i].Seconds > longest[j].Seconds
		}
		return longest[i].Start < longest[j].Start
	})
	for _, p := range longest {
		cpu := fmt.Sprintf("%.1f %%", p.CPUPercent)
		if p.Load != nil {
			cpu += fmt.Sprintf(", load %.2f", *p.Load)
		}
		v.Throttle.Longest = append(v.Throttle.Longest, PauseRow{Start: human.Clock(p.Start), Seconds: duration(p.Seconds),
			Reason: reasonName(p.Reason), EndedBy: endedBy(p.EndedBy), Chunk: fmt.Sprint(p.Chunk), PID: fmt.Sprint(p.PID), CPU: cpu})
	}
}

func failureRows(rep *Report, v *view) {
	groups := make([]*failureGroup, 0, len(rep.Failures))
	for _, g := range rep.Failures {
		groups = append(groups, g)
	}
	sort.Slice(groups, func(i, j int) bool {
		if groups[i].Count != groups[j].Count {
			return groups[i].Count > groups[j].Count
		}
		return groups[i].Reason < groups[j].Reason
	})
	for _, g := range groups {
		row := FailureRow{Status: showLine(g.Status), Reason: show(g.Reason), Count: human.Count(g.Count), Paths: g.Paths}
		if g.Count > int64(len(g.Paths)) {
			row.More = fmt.Sprintf("and %s more", human.Count(g.Count-int64(len(g.Paths))))
		}
		v.Failures = append(v.Failures, row)
	}
	if rep.FailureCount > 0 {
		v.FailureTotal = fmt.Sprintf("%s, for %s.",
			counted(rep.FailureCount, "path failed, vanished or was not done", "paths failed, vanished or were not done"),
			counted(len(groups), "reason", "reasons"))
	}
}

// exitMeaning names rsync's exit codes that chunks end with most.
func exitMeaning(code string) string {
	return map[string]string{
		"0": "success", "-1": "killed by a signal", "1": "syntax or usage error", "3": "errors selecting files",
		"5": "error starting the client-server protocol", "10": "error in socket I/O", "11": "error in file I/O",
		"12": "error in the rsync protocol data stream", "20": "SIGUSR1 or SIGINT received", "23": "partial transfer due to error",
		"24": "partial transfer due to vanished source files", "30": "timeout in data send/receive", "35": "timeout waiting for daemon connection",
		"255": "ssh failed",
	}[code]
}

// sortedCounts turns counts into rows, the largest first; meaning, if given, titles them.
func sortedCounts(m map[string]int64, meaning func(string) string) []Row {
	keys := sortedKeys(m)
	sort.SliceStable(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] })
	rows := make([]Row, 0, len(keys))
	for _, k := range keys {
		label := showLine(k)
		if label == "" {
			label = `""`
		}
		if meaning != nil && meaning(k) != "" {
			label += " (" + meaning(k) + ")"
		}
		rows = append(rows, Row{Label: label, Value: human.Count(m[k])})
	}
	return rows
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func more(total int64, shown int) string {
	if total > int64(shown) {
		return fmt.Sprintf("The first %d of %s are shown.", shown, human.Count(total))
	}
	return ""
}

// clockOf reads the seconds that Read left in an event's time field.
func clockOf(s string) string {
	var sec float64
	if _, err := fmt.Sscan(s, &sec); err != nil {
		return "?"
	}
	return human.Clock(sec)
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "–"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// wouldTransfer says how many paths a dry run named as ones rsync would transfer.
func wouldTransfer(rep *Report) string {
	if rep.WouldTransfer == 0 {
		return ""
	}
	return fmt.Sprintf(" rsync would transfer %s of the paths (would_transfer events).", human.Count(rep.WouldTransfer))
}
