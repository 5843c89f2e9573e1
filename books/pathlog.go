package books

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/prsync/prsync/event"
	"github.com/prsync/prsync/rsync"
)

// PathLog is the --paths-log record: one JSON object per line for each input path, written
// as the path settles, with its final status, the bytes transferred, its chunk, rsync's
// itemized change and, for a path not done, the reason. After the first error it writes
// nothing more, and Close returns that error. A nil *PathLog records nothing.
type PathLog struct {
	w   *bufio.Writer
	enc *json.Encoder
	c   io.Closer
	now func() time.Time
	err error
}

// PathRecord is one line of a PathLog.
type PathRecord struct {
	Path    string `json:"path"`
	PathB64 string `json:"path_b64,omitempty"`
	Status  string `json:"status"`
	Bytes   int64  `json:"bytes"`
	Chunk   int    `json:"chunk,omitempty"`
	Itemize string `json:"itemize,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Time    string `json:"time"`
}

// NewPathLog returns a PathLog writing to w; now stamps each line (time.Now if nil).
func NewPathLog(w io.WriteCloser, now func() time.Time) *PathLog {
	if now == nil {
		now = time.Now
	}
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	return &PathLog{w: bw, enc: enc, c: w, now: now}
}

// Add records one path: its input bytes, status, reason, the bytes transferred, its
// chunk (0 when it never reached rsync) and rsync's %i.
func (l *PathLog) Add(input []byte, status rsync.Status, reason string, bytes int64, chunk int, change string) {
	if l == nil || l.err != nil {
		return
	}
	p, b64 := event.PathFields(input)
	rec := PathRecord{Path: p, PathB64: b64, Status: string(status), Bytes: bytes, Chunk: chunk, Itemize: change,
		Time: l.now().UTC().Format(time.RFC3339Nano)}
	if status != rsync.Transferred && status != rsync.UpToDate {
		rec.Reason = reason
	}
	if err := l.enc.Encode(&rec); err != nil {
		l.err = fmt.Errorf("write --paths-log: %w", err)
	}
}

// Flush writes out the buffered lines, so that a crash still leaves the record of every
// path settled so far.
func (l *PathLog) Flush() {
	if l == nil || l.err != nil {
		return
	}
	if err := l.w.Flush(); err != nil {
		l.err = fmt.Errorf("write --paths-log: %w", err)
	}
}

// Close flushes and closes the record, and returns its first error.
func (l *PathLog) Close() error {
	if l == nil {
		return nil
	}
	l.Flush()
	if err := l.c.Close(); err != nil && l.err == nil {
		l.err = fmt.Errorf("close --paths-log: %w", err)
	}
	return l.err
}
