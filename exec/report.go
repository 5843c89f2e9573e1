package exec

import (
	"github.com/prsync/prsync/rsync"
	"github.com/prsync/prsync/splitter"
)

// Report is what the pool tells the one goroutine that owns the books. Reports of one
// chunk arrive in order. Tell hands a report to the Listener's method of its kind, so that
// no kind of report can be sent that a Listener does not take.
type Report interface{ Tell(Listener) }

// A Listener takes each kind of Report: the books do.
type Listener interface {
	ChunkStarted(ChunkStarted)
	ChunkEnded(ChunkEnded)
	ChunkDropped(ChunkDropped)
	LimitChanged(LimitChanged)
	DeleteEnded(DeleteEnded)
}

// ChunkStarted says an rsync started on a chunk.
type ChunkStarted struct {
	Chunk   *splitter.Chunk
	Attempt int
	PID     int
	// RemoteList: the rsync reads the chunk's list on the far side (RemoteLists), not on
	// its stdin
	RemoteList bool
}

// ChunkEnded says an rsync on a chunk ended. Outcomes is set (one per path, in the order
// of Chunk.Inputs) when the chunk is settled; it is nil for an attempt that is retried.
// Every chunk the pool runs ends its first attempt with one, even when its rsync could
// not start: the books count chunks and retries from these.
type ChunkEnded struct {
	Chunk    *splitter.Chunk
	Attempt  int
	Status   ChunkStatus
	ExitCode int
	Seconds  float64
	// FirstLine is the seconds from the rsync's start to its first logged line; 0: none.
	FirstLine float64
	// CPUSeconds is the CPU time of the rsync and the processes it waited for.
	CPUSeconds float64
	// Paused says the rsync was stopped a while (the throttle, the bandwidth limit, Ctrl-Z
	// or live control): Seconds is more than its work took.
	Paused bool
	// BytesLogged is what rsync's output said it transferred in this attempt.
	BytesLogged int64
	Error       string // rsync's stderr, cut to a few KiB
	Hint        string
	Outcomes    []rsync.Outcome
	// Unexplained is an error rsync reported that names no path while every path was
	// confirmed: the run must not end as a success.
	Unexplained string
	// Confirm says how paths were proven after a non-zero exit, when they had to be.
	Confirm *Confirmation
	// Verify is what the verification pass checked, when it ran.
	Verify *Verification
}

// ChunkStatus is how an rsync on a chunk ended: the status of its chunk_end event.
type ChunkStatus string

// The statuses of a chunk. A chunk's last chunk_end says how it settled; the ones before it
// say that another rsync follows.
const (
	ChunkOK        ChunkStatus = "ok"        // every path proven
	ChunkPartial   ChunkStatus = "partial"   // some paths failed, or rsync reported an error that names no path
	ChunkVanished  ChunkStatus = "vanished"  // some paths vanished, and none failed
	ChunkFailed    ChunkStatus = "failed"    // every path failed
	ChunkCancelled ChunkStatus = "cancelled" // prsync stopped its rsync
	// ChunkRetrying: the attempt failed in a way that passes; the chunk runs again.
	ChunkRetrying ChunkStatus = "retrying"
	// ChunkIsolating: rsync stopped on one path, or failed for no path; the unproven paths
	// run again without it, or in halves.
	ChunkIsolating ChunkStatus = "isolating"
)

// Confirmation is what proving a chunk's paths after a non-zero exit cost.
type Confirmation struct {
	Method  string  // "lstat" or "dry-run"
	Paths   int     // paths that needed proof
	Landed  int     // of them, proven landed
	Seconds float64 // time it took
}

// ChunkDropped is a chunk that no rsync will run (interrupted, or the run stopped early);
// every path has the same outcome.
type ChunkDropped struct {
	Chunk  *splitter.Chunk
	Status rsync.Status
	Reason string
	// Started: an earlier attempt ran (the chunk was waiting to retry).
	Started bool
}

// LimitChanged says the number of rsyncs allowed at once changed.
type LimitChanged struct {
	Old, New int
	Reason   string
	// Detail is the far side's own words, when it refused sessions, or what the tuner saw.
	Detail string
	// RateBps is the rate measured behind the change, or 0.
	RateBps float64
}

func (m ChunkStarted) Tell(l Listener) { l.ChunkStarted(m) }
func (m ChunkEnded) Tell(l Listener)   { l.ChunkEnded(m) }
func (m ChunkDropped) Tell(l Listener) { l.ChunkDropped(m) }
func (m LimitChanged) Tell(l Listener) { l.LimitChanged(m) }
func (m DeleteEnded) Tell(l Listener)  { l.DeleteEnded(m) }
