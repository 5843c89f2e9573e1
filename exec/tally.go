package exec

import (
	"bufio"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/prsync/prsync/event"
)

// Path outcomes. Every input path ends in exactly one of them.
const (
	Transferred = "transferred"
	UpToDate    = "up_to_date"
	Vanished    = "vanished"
	Failed      = "failed"
	NotDone     = "not_done"
)

// Tally counts what became of every input path. It writes failed, vanished and
// not-done paths to the --failed list and as path_failed events, as they happen.
// It is safe for concurrent use.
type Tally struct {
	Events *event.Encoder
	Sep    byte

	files, bytes                  atomic.Int64
	transferred, bytesTransferred atomic.Int64
	upToDate, failed, vanished    atomic.Int64
	notDone, empty                atomic.Int64
	queued, queuedBytes           atomic.Int64

	mu     sync.Mutex
	list   *bufio.Writer
	closer io.Closer
	err    error
}

// SetFailedList makes the tally write failed paths to w, each followed by Sep.
func (t *Tally) SetFailedList(w io.WriteCloser) {
	t.list = bufio.NewWriter(w)
	t.closer = w
}

// Accepted counts a path read from the input and handed on to a chunk.
func (t *Tally) Accepted(size int64) {
	t.files.Add(1)
	t.bytes.Add(size)
	t.queued.Add(1)
	t.queuedBytes.Add(size)
}

// Fresh counts a path found up to date without rsync.
func (t *Tally) Fresh(input []byte, size int64) {
	t.files.Add(1)
	t.bytes.Add(size)
	t.upToDate.Add(1)
}

// Empty counts an empty input record.
func (t *Tally) Empty() { t.empty.Add(1) }

// Started moves a chunk's paths out of the queue.
func (t *Tally) Started(files int, bytes int64) {
	t.queued.Add(-int64(files))
	t.queuedBytes.Add(-bytes)
}

// Settled counts a path that never reached a chunk (it vanished, or failed before rsync).
func (t *Tally) Settled(input []byte, status, reason string) {
	t.files.Add(1)
	t.Path(input, status, reason, 0)
}

// Path records the outcome of one path. chunk is 0 for a path that never reached rsync.
func (t *Tally) Path(input []byte, status, reason string, chunk int) {
	switch status {
	case Transferred:
		t.transferred.Add(1)
		return
	case UpToDate:
		t.upToDate.Add(1)
		return
	case Vanished:
		t.vanished.Add(1)
	case Failed:
		t.failed.Add(1)
	case NotDone:
		t.notDone.Add(1)
	default:
		panic("exec: unknown status " + status)
	}
	path, b64 := event.PathFields(input)
	if t.Events != nil {
		t.Events.Emit(&event.PathFailed{Path: path, PathB64: b64, Status: status, Reason: reason, Chunk: chunk})
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.list == nil || t.err != nil {
		return
	}
	t.list.Write(input)
	if err := t.list.WriteByte(t.Sep); err != nil {
		t.err = fmt.Errorf("write --failed list: %w", err)
	}
}

// BytesTransferred adds file bytes rsync reported done.
func (t *Tally) BytesTransferred(n int64) { t.bytesTransferred.Add(n) }

// Flush writes out the buffered part of the --failed list.
func (t *Tally) Flush() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.list != nil && t.err == nil {
		if err := t.list.Flush(); err != nil {
			t.err = fmt.Errorf("write --failed list: %w", err)
		}
	}
	return t.err
}

// Close flushes and closes the --failed list.
func (t *Tally) Close() error {
	err := t.Flush()
	if t.closer != nil {
		if cerr := t.closer.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close --failed list: %w", cerr)
		}
	}
	return err
}

// Counts is a snapshot of a Tally.
type Counts struct {
	Files, Bytes                  int64
	Transferred, BytesTransferred int64
	UpToDate, Failed, Vanished    int64
	NotDone, Empty                int64
	Queued, QueuedBytes           int64
}

// Done returns the number of paths settled one way or another.
func (c Counts) Done() int64 { return c.Transferred + c.UpToDate + c.Failed + c.Vanished + c.NotDone }

// Counts returns a snapshot.
func (t *Tally) Counts() Counts {
	return Counts{
		Files: t.files.Load(), Bytes: t.bytes.Load(),
		Transferred: t.transferred.Load(), BytesTransferred: t.bytesTransferred.Load(),
		UpToDate: t.upToDate.Load(), Failed: t.failed.Load(), Vanished: t.vanished.Load(),
		NotDone: t.notDone.Load(), Empty: t.empty.Load(),
		Queued: t.queued.Load(), QueuedBytes: t.queuedBytes.Load(),
	}
}
