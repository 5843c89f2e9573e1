package books

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prsync/prsync/bw"
	"github.com/prsync/prsync/exec"
	"github.com/prsync/prsync/rsync"
	"github.com/prsync/prsync/splitter"
	"github.com/prsync/prsync/throttle"
)

// chunk returns chunk id with the paths named, of 100 bytes each.
func chunk(id int, names ...string) *splitter.Chunk {
	c := &splitter.Chunk{ID: id, Bytes: int64(100 * len(names))}
	for _, n := range names {
		c.Inputs = append(c.Inputs, []byte(n))
	}
	return c
}

func apply(b *Books, m any) {
	switch m := m.(type) {
	case *Input:
		b.Read(m)
	case exec.Report:
		m.Tell(b)
	default:
		panic(fmt.Sprintf("apply: %T", m))
	}
}

// recorder is a printer that notes the paths told failed and the chunks' tallies.
type recorder struct {
	Quiet
	failed  strings.Builder
	tallies []ChunkTally
}

func (r *recorder) PathFailed(f Failure) {
	fmt.Fprintf(&r.failed, "%s %s %d %s; ", f.Input, f.Status, f.Chunk, f.Reason)
}

func (r *recorder) ChunkEnded(_ exec.ChunkEnded, t ChunkTally) { r.tallies = append(r.tallies, t) }

func ok(bytes int64) rsync.Outcome { return rsync.Outcome{Status: rsync.Transferred, Bytes: bytes} }

var (
	fresh = rsync.Outcome{Status: rsync.UpToDate}
	lost  = rsync.Outcome{Status: rsync.Failed, Reason: "rsync exit 23: open: Permission denied (13) [sender]",
		Hint: "the source is not readable for the user prsync runs as"}
	gone = rsync.Outcome{Status: rsync.Vanished, Reason: "file has vanished"}
)

// TestBooks applies a run's reports in order and checks the snapshot they come to: its
// counts, the --failed list, and the paths told failed.
func TestBooks(t *testing.T) {
	c1, c2 := chunk(1, "a", "b"), chunk(2, "c", "d", "e")
	tests := []struct {
		name     string
		jobs     int
		reports  []any
		want     Counts
		listed   string // the --failed list, '\n' after each path
		failed   string // what PathFailed was told
		jobsMin  int
		jobsMax  int
		refusals int
		hint     bool
	}{
		{
			name: "what the splitter read and settled",
			jobs: 4,
			reports: []any{&Input{Queued: 3, QueuedBytes: 300, Fresh: 2, FreshBytes: 20, Empty: 1, Settled: []Settled{
				{[]byte("x"), rsync.Vanished, "lstat: no such file"}, {[]byte("y"), rsync.Failed, "lstat: permission denied"}}}},
			want:   Counts{Files: 7, Bytes: 320, Queued: 3, QueuedBytes: 300, UpToDate: 2, Empty: 1, Vanished: 1, Failed: 1},
			listed: "x\ny\n", failed: "x vanished 0 lstat: no such file; y failed 0 lstat: permission denied; ",
			jobsMin: 4, jobsMax: 4,
		},
		{
			name: "a chunk that settles at once",
			jobs: 4,
			reports: []any{
				&Input{Queued: 2, QueuedBytes: 200},
				exec.ChunkStarted{Chunk: c1, Attempt: 1},
				exec.ChunkEnded{Chunk: c1, Attempt: 1, Status: exec.ChunkOK, Outcomes: []rsync.Outcome{ok(70), fresh}},
			},
			want:    Counts{Files: 2, Bytes: 200, Transferred: 1, BytesTransferred: 70, UpToDate: 1, Chunks: 1},
			jobsMin: 4, jobsMax: 4,
		},
		{
			name: "a chunk retried twice, then partial",
			jobs: 4,
			reports: []any{
				&Input{Queued: 3, QueuedBytes: 300},
				exec.ChunkStarted{Chunk: c2, Attempt: 1},
				exec.ChunkEnded{Chunk: c2, Attempt: 1, Status: exec.ChunkRetrying, BytesLogged: 50},
				exec.ChunkStarted{Chunk: c2, Attempt: 2},
				exec.ChunkEnded{Chunk: c2, Attempt: 2, Status: exec.ChunkRetrying},
				exec.ChunkStarted{Chunk: c2, Attempt: 3},
				exec.ChunkEnded{Chunk: c2, Attempt: 3, Status: exec.ChunkPartial, Outcomes: []rsync.Outcome{ok(100), lost, gone},
					Confirm: &exec.Confirmation{Method: "lstat", Paths: 3, Landed: 1, Seconds: 0.25}},
			},
			want: Counts{Files: 3, Bytes: 300, Transferred: 1, BytesTransferred: 100, Failed: 1, Vanished: 1,
				ConfirmSeconds: 0.25, Chunks: 1, ChunksFailed: 1, Retries: 2},
			listed: "d\ne\n", failed: "d failed 2 " + lost.Reason + "; e vanished 2 file has vanished; ",
			jobsMin: 4, jobsMax: 4, hint: true,
		},
		{
			name: "a chunk whose rsync never started counts at its first end",
			jobs: 4,
			reports: []any{
				exec.ChunkEnded{Chunk: c1, Attempt: 1, Status: exec.ChunkFailed, ExitCode: 127, Outcomes: []rsync.Outcome{lost, lost}},
			},
			want:   Counts{Failed: 2, Chunks: 1, ChunksFailed: 1},
			listed: "a\nb\n", failed: "a failed 1 " + lost.Reason + "; b failed 1 " + lost.Reason + "; ",
			jobsMin: 4, jobsMax: 4, hint: true,
		},
		{
			name: "verified, and an error that names no path",
			jobs: 4,
			reports: []any{
				&Input{Queued: 2, QueuedBytes: 200},
				exec.ChunkStarted{Chunk: c1, Attempt: 1},
				exec.ChunkEnded{Chunk: c1, Attempt: 1, Status: exec.ChunkPartial, Unexplained: "rsync: some error",
					Outcomes: []rsync.Outcome{ok(10), ok(20)}, Verify: &exec.Verification{Paths: 2, Failed: 0, Seconds: 0.5}},
			},
			want: Counts{Files: 2, Bytes: 200, Transferred: 2, BytesTransferred: 30, ChunkErrors: 1,
				Verified: 2, VerifySeconds: 0.5, Chunks: 1, ChunksFailed: 1},
			jobsMin: 4, jobsMax: 4,
		},
		{
			name: "chunks dropped before and after they started",
			jobs: 4,
			reports: []any{
				&Input{Queued: 5, QueuedBytes: 500},
				exec.ChunkDropped{Chunk: c1, Status: rsync.NotDone, Reason: "interrupted before rsync started"},
				exec.ChunkStarted{Chunk: c2, Attempt: 1},
				exec.ChunkEnded{Chunk: c2, Attempt: 1, Status: exec.ChunkRetrying},
				exec.ChunkDropped{Chunk: c2, Status: rsync.NotDone, Reason: "interrupted while waiting to retry", Started: true},
			},
			want:   Counts{Files: 5, Bytes: 500, NotDone: 5, Chunks: 1, Retries: 1},
			listed: "a\nb\nc\nd\ne\n",
			failed: "a not_done 1 interrupted before rsync started; b not_done 1 interrupted before rsync started; " +
				"c not_done 2 interrupted while waiting to retry; d not_done 2 interrupted while waiting to retry; e not_done 2 interrupted while waiting to retry; ",
			jobsMin: 4, jobsMax: 4,
		},
		{
			name: "the limit's range and the refusals",
			jobs: 4,
			reports: []any{
				exec.LimitChanged{Old: 4, New: 2, Reason: "refused", Detail: "@ERROR: max connections (2) reached"},
				exec.LimitChanged{Old: 2, New: 8, Reason: "control"},
				exec.LimitChanged{Old: 8, New: 3, Reason: "refused"},
			},
			jobsMin: 2, jobsMax: 8, refusals: 2,
		},
		{
			name: "the deletion pass",
			jobs: 2,
			reports: []any{
				exec.DeleteEnded{Dirs: 10, Deleted: []exec.Deleted{{Path: []byte("old")}, {Path: []byte("older")}}},
				exec.DeleteEnded{Dirs: 5, Err: "interrupted"},
			},
			want:    Counts{DirsChecked: 15, Deleted: 2},
			jobsMin: 2, jobsMax: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var list bytes.Buffer
			rec := &recorder{}
			b := New(Config{Jobs: tt.jobs, Failed: nopCloser{&list}, Sep: '\n', Printers: []Printer{rec}})
			for _, m := range tt.reports {
				apply(b, m)
			}
			s := b.Snapshot(Live{Elapsed: 1})
			if s.Counts != tt.want {
				t.Errorf("counts\ngot  %+v\nwant %+v", s.Counts, tt.want)
			}
			if s.JobsMin != tt.jobsMin || s.JobsMax != tt.jobsMax || s.Refusals != tt.refusals {
				t.Errorf("jobs %d-%d, %d refusals; want %d-%d, %d", s.JobsMin, s.JobsMax, s.Refusals, tt.jobsMin, tt.jobsMax, tt.refusals)
			}
			if (s.Hint != "") != tt.hint {
				t.Errorf("hint %q, want one: %v", s.Hint, tt.hint)
			}
			if list.String() != tt.listed { // flushed after every report, before Close
				t.Errorf("--failed list %q, want %q", list.String(), tt.listed)
			}
			if rec.failed.String() != tt.failed {
				t.Errorf("paths told failed\ngot  %q\nwant %q", rec.failed.String(), tt.failed)
			}
			if err := b.CloseList(); err != nil {
				t.Errorf("CloseList: %v", err)
			}
		})
	}
}

func TestEndedTally(t *testing.T) {
	rec := &recorder{}
	b := New(Config{Jobs: 1, Printers: []Printer{rec}})
	b.ChunkEnded(exec.ChunkEnded{Chunk: chunk(1, "a", "b", "c", "d"), Attempt: 1, Status: exec.ChunkPartial,
		Outcomes: []rsync.Outcome{ok(10), ok(5), lost, gone}})
	b.ChunkEnded(exec.ChunkEnded{Chunk: chunk(2, "e"), Attempt: 1, Status: exec.ChunkRetrying, BytesLogged: 9})
	want := []ChunkTally{{Transferred: 2, Failed: 1, Vanished: 1, BytesTransferred: 15}, {}} // a retried attempt's: none
	if !slices.Equal(rec.tallies, want) {
		t.Errorf("tallies %+v, want %+v", rec.tallies, want)
	}
}

func TestSetPhase(t *testing.T) {
	b := New(Config{Jobs: 1})
	if s := b.Snapshot(Live{}); s.Phase != "copy" || s.DeleteDirs != 0 {
		t.Errorf("phase %q %d at the start", s.Phase, s.DeleteDirs)
	}
	b.SetPhase("delete", 40)
	if s := b.Snapshot(Live{}); s.Phase != "delete" || s.DeleteDirs != 40 {
		t.Errorf("phase %q %d, want delete 40", s.Phase, s.DeleteDirs)
	}
}

func TestSnapshotFigures(t *testing.T) {
	tests := []struct {
		s         Snapshot
		bytesDone int64
		rate      float64
		average   float64
	}{
		{Snapshot{Counts: Counts{BytesTransferred: 1000}, Live: Live{InFlight: 250, Elapsed: 2}}, 1250, 5000, 4000},
		{Snapshot{Counts: Counts{BytesTransferred: 1}, Live: Live{Elapsed: 3}}, 1, 2.7, 8.0 / 3},
		{Snapshot{Counts: Counts{BytesTransferred: 1000}, Live: Live{InFlight: 5}}, 1005, 0, 0}, // no time yet: no rate
	}
	for _, tt := range tests {
		s := tt.s
		if s.BytesDone() != tt.bytesDone || s.Rate() != tt.rate || (s.Elapsed > 0 && s.AverageRate() != tt.average) {
			t.Errorf("%+v: bytes done %d, rate %v, average %v; want %d, %v, %v", s, s.BytesDone(), s.Rate(), s.AverageRate(), tt.bytesDone, tt.rate, tt.average)
		}
	}
	c := Counts{Transferred: 1, UpToDate: 2, Failed: 3, Vanished: 4, NotDone: 5, Queued: 100}
	if c.Done() != 15 || c.NotOK() != 12 {
		t.Errorf("done %d, not ok %d; want 15, 12", c.Done(), c.NotOK())
	}
}

type nopCloser struct{ *bytes.Buffer }

func (nopCloser) Close() error { return nil }

// badWriter fails its writes after n bytes, and its Close.
type badWriter struct {
	n        int
	closeErr error
	buf      bytes.Buffer
}

func (w *badWriter) Write(p []byte) (int, error) {
	if w.buf.Len()+len(p) > w.n {
		return 0, errors.New("disk full")
	}
	return w.buf.Write(p)
}

func (w *badWriter) Close() error { return w.closeErr }

func TestList(t *testing.T) {
	tests := []struct {
		name    string
		w       *badWriter
		paths   []string
		flushes bool // flush after each path
		want    string
		err     string
	}{
		{"NUL-separated", &badWriter{n: 100}, []string{"a", "b c", "d\ne"}, false, "a\x00b c\x00d\ne\x00", ""},
		{"a write fails: the rest is dropped", &badWriter{n: 2}, []string{"a", "b", "c"}, true, "a\x00", "write --failed list: disk full"},
		{"the close fails", &badWriter{n: 100, closeErr: errors.New("EIO")}, []string{"a"}, false, "a\x00", "close --failed list: EIO"},
	}
	for _, tt := range tests {
		l := NewList(tt.w, 0)
		for _, p := range tt.paths {
			l.Add([]byte(p))
			if tt.flushes {
				l.Flush()
			}
		}
		err := l.Close()
		if tt.w.buf.String() != tt.want || fmt.Sprint(err) != fmt.Sprint(errOrNil(tt.err)) {
			t.Errorf("%s: wrote %q, %v; want %q, %v", tt.name, tt.w.buf.String(), err, tt.want, tt.err)
		}
	}
	var none *List // no --failed: nothing to do, no error
	none.Add([]byte("a"))
	none.Flush()
	if err := none.Close(); err != nil {
		t.Errorf("a nil List: %v", err)
	}
}

func errOrNil(s string) error {
	if s == "" {
		return nil
	}
	return errors.New(s)
}

// teller is a printer that notes each piece of news it is told, with its name.
type teller struct {
	name string
	log  *[]string
}

func (p teller) note(format string, a ...any) {
	*p.log = append(*p.log, p.name+" "+fmt.Sprintf(format, a...))
}

func (p teller) Started(r Run)                    { p.note("started %s", r.Dest) }
func (p teller) ChunkStarted(m exec.ChunkStarted) { p.note("chunk_start %d", m.Chunk.ID) }
func (p teller) Hint(h string)                    { p.note("hint %s", h) }
func (p teller) PathFailed(f Failure)             { p.note("path_failed %q", f.Input) }
func (p teller) WouldTransfer(in []byte, _ rsync.Outcome, c int) {
	p.note("would_transfer %s %d", in, c)
}
func (p teller) ChunkEnded(m exec.ChunkEnded, t ChunkTally) {
	p.note("chunk_end %d %s %d", m.Chunk.ID, m.Status, t.Transferred)
}
func (p teller) Deleted(d exec.Deleted, dryRun bool)         { p.note("deleted %s %v", d.Path, dryRun) }
func (p teller) Error(msg string)                            { p.note("error %s", msg) }
func (p teller) JobsChanged(m exec.LimitChanged, s Snapshot) { p.note("jobs %d %d", m.New, s.Refusals) }
func (p teller) Throttled(e throttle.Event)                  { p.note("throttle %s", e.Action) }
func (p teller) ThrottleNotice(throttle.Notice)              { p.note("notice") }
func (p teller) BWLimitChanged(c bw.Change)                  { p.note("bwlimit %v", c.New) }
func (p teller) ControlChanged(what, _, new string)          { p.note("control %s %s", what, new) }
func (p teller) WindowEnded(c string, _ time.Duration, s Snapshot) {
	p.note("window %s %d", c, s.Running)
}
func (p teller) Status(s Snapshot, by string) { p.note("status %s %d", by, s.Done()) }
func (p teller) Update(s Snapshot)            { p.note("update %s %d", s.Phase, s.Running) }
func (p teller) Finish(s Snapshot)            { p.note("finish %d", s.End.ExitCode) }

// TestTell: the books tell each piece of news to every printer in turn, in the order the
// events and lines come out: the hint before the path failure it explains (once), in a
// dry run each path rsync would transfer before its chunk's end, the deletion pass's
// error unless it was interrupted; and each snapshot with what Live says.
func TestTell(t *testing.T) {
	var log []string
	b := New(Config{Jobs: 2, Printers: []Printer{teller{"1", &log}, teller{"2", &log}},
		Live: func() Live { return Live{Running: 3} }, DryRun: true, Lines: true, InsideDestHint: "DEST is inside the source"})
	c := chunk(1, "a", "b\r", "c")
	b.Start(Run{Dest: "dst"})
	b.Read(&Input{Queued: 3, Settled: []Settled{{[]byte("d"), rsync.Failed, splitter.InsideDest}, {[]byte("e"), rsync.Failed, splitter.InsideDest}}})
	exec.Report(exec.ChunkStarted{Chunk: c, Attempt: 1}).Tell(b)
	exec.Report(exec.ChunkEnded{Chunk: c, Attempt: 1, Status: exec.ChunkPartial, Outcomes: []rsync.Outcome{ok(1), gone, ok(2)}}).Tell(b)
	exec.Report(exec.LimitChanged{Old: 2, New: 1, Reason: "refused"}).Tell(b)
	b.Throttled(throttle.Event{Action: "suspend"})
	b.ThrottleNotice(throttle.Notice{})
	b.BWLimitChanged(bw.Change{New: 5})
	b.ControlChanged("pause", "running", "paused")
	b.InputFailed(errors.New("read error"))
	b.WindowEnded("the time window ended", time.Second)
	b.SetPhase("delete", 2)
	b.Update()
	exec.Report(exec.DeleteEnded{Dirs: 1, Deleted: []exec.Deleted{{Path: []byte("old")}}, Err: "code 23"}).Tell(b)
	exec.Report(exec.DeleteEnded{Dirs: 1, Err: "interrupted"}).Tell(b)
	if s := b.Status("signal"); s.Running != 3 {
		t.Errorf("status snapshot %+v: Live not asked", s.Live)
	}
	b.Finish(End{ExitCode: 23})
	want := []string{
		"started dst",
		"hint DEST is inside the source", "path_failed \"d\"", "path_failed \"e\"", // the hint once
		"chunk_start 1",
		"hint the input has CRLF line ends; convert it with tr -d '\\r'", "path_failed \"b\\r\"",
		"would_transfer a 1", "would_transfer c 1", "chunk_end 1 partial 2",
		"jobs 1 1", "throttle suspend", "notice", "bwlimit 5", "control pause paused", "error read error",
		"window the time window ended 3", "update delete 3",
		"deleted old true", "error deletion pass: code 23", // and none for the interrupted part
		"status signal 5", "finish 23",
	}
	var got []string // printer 2 is told each piece right after printer 1
	for i := 0; i+1 < len(log); i += 2 {
		one, two := strings.TrimPrefix(log[i], "1 "), strings.TrimPrefix(log[i+1], "2 ")
		if one != two || !strings.HasPrefix(log[i], "1 ") || !strings.HasPrefix(log[i+1], "2 ") {
			t.Fatalf("told %q then %q: not each printer in turn", log[i], log[i+1])
		}
		got = append(got, one)
	}
	if !slices.Equal(got, want) {
		t.Errorf("told\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
