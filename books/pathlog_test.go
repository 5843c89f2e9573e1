package books

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prsync/prsync/exec"
	"github.com/prsync/prsync/rsync"
)

// TestPathLog: the books record every path once as it settles, whichever way: found up
// to date by the splitter, settled by it, by rsync, or dropped; a failed path with its
// reason, a transferred one with its bytes, chunk and rsync's change; and the record
// flushes with each report, so that what settled is on disk before the run ends.
func TestPathLog(t *testing.T) {
	var buf bytes.Buffer
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	b := New(Config{Jobs: 2, PathLog: NewPathLog(nopCloser{&buf}, func() time.Time { return at })})
	sent := func(o rsync.Outcome, change string) rsync.Outcome { o.Change = change; return o }
	reports := []any{
		&Input{Queued: 5, QueuedBytes: 500, Fresh: 1, FreshBytes: 10, FreshInputs: [][]byte{[]byte("fresh")},
			Settled: []Settled{{[]byte("outside\xff"), rsync.Failed, "outside --root"}}},
		exec.ChunkStarted{Chunk: chunk(1, "a", "b", "c"), Attempt: 1, PID: 7},
		exec.ChunkEnded{Chunk: chunk(1, "a", "b", "c"), Attempt: 1, Status: exec.ChunkPartial, ExitCode: 23,
			Outcomes: []rsync.Outcome{sent(ok(100), ">f+++++++++"), lost, gone}},
		exec.ChunkDropped{Chunk: chunk(2, "d", "e"), Status: rsync.NotDone, Reason: "interrupted before rsync started"},
	}
	lines := []int{2, 2, 5, 7} // lines written out after each report
	for i, m := range reports {
		apply(b, m)
		if got := strings.Count(buf.String(), "\n"); got != lines[i] {
			t.Errorf("after report %d: %d lines flushed, want %d", i, got, lines[i])
		}
	}
	if err := b.CloseList(); err != nil {
		t.Fatal(err)
	}
	const ts = `"time":"2026-12-01T10:00:00Z"}`
	want := `{"path":"fresh","status":"up_to_date","bytes":0,` + ts + "\n" +
		`{"path":"outside\ufffd","path_b64":"b3V0c2lkZf8=","status":"failed","bytes":0,"reason":"outside --root",` + ts + "\n" +
		`{"path":"a","status":"transferred","bytes":100,"chunk":1,"itemize":">f+++++++++",` + ts + "\n" +
		`{"path":"b","status":"failed","bytes":0,"chunk":1,"reason":"rsync exit 23: open: Permission denied (13) [sender]",` + ts + "\n" +
		`{"path":"c","status":"vanished","bytes":0,"chunk":1,"reason":"file has vanished",` + ts + "\n" +
		`{"path":"d","status":"not_done","bytes":0,"chunk":2,"reason":"interrupted before rsync started",` + ts + "\n" +
		`{"path":"e","status":"not_done","bytes":0,"chunk":2,"reason":"interrupted before rsync started",` + ts + "\n"
	if buf.String() != want {
		t.Errorf("the record:\n%s\nwant:\n%s", buf.String(), want)
	}
	if c := b.Counts(); int64(strings.Count(want, "\n")) != c.Files || c.Done() != c.Files {
		t.Errorf("counts %+v for %d records", c, strings.Count(want, "\n"))
	}
}

// TestPathLogErrors: a write or close that fails is the error CloseList returns, with
// the --failed list's; a nil PathLog records nothing.
func TestPathLogErrors(t *testing.T) {
	for _, tt := range []struct {
		name string
		w    *badWriter
		err  string
	}{
		{"a write fails", &badWriter{n: 10}, "write --paths-log: disk full"},
		{"the close fails", &badWriter{n: 1000, closeErr: errors.New("EIO")}, "close --paths-log: EIO"},
	} {
		b := New(Config{Jobs: 1, Failed: &badWriter{n: 1000, closeErr: errors.New("EROFS")}, Sep: '\n', PathLog: NewPathLog(tt.w, nil)})
		b.ChunkDropped(exec.ChunkDropped{Chunk: chunk(1, "a"), Status: rsync.NotDone, Reason: "interrupted"})
		err := b.CloseList()
		if want := "close --failed list: EROFS\n" + tt.err; fmt.Sprint(err) != want {
			t.Errorf("%s: %v, want %q", tt.name, err, want)
		}
	}
	var none *PathLog
	none.Add([]byte("a"), rsync.Failed, "x", 0, 1, "")
	none.Flush()
	if err := none.Close(); err != nil {
		t.Errorf("a nil PathLog: %v", err)
	}
}
