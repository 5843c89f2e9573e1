package books

import (
	"time"

	"github.com/prsync/prsync/bw"
	"github.com/prsync/prsync/exec"
	"github.com/prsync/prsync/rsync"
	"github.com/prsync/prsync/throttle"
)

// A Printer shows the news of a run as the books tell it, one method per kind of news, as
// restic's ProgressPrinter does: JSON writes every event, Text every line on the terminal,
// the metrics file the snapshots. The books call each printer in turn, from the one
// goroutine that owns them. A printer that shows only some kinds of news embeds Quiet.
type Printer interface {
	// Started: the run starts.
	Started(Run)
	// ChunkStarted: an rsync started on a chunk.
	ChunkStarted(exec.ChunkStarted)
	// Hint: advice for the path failure told next, given once.
	Hint(string)
	// PathFailed: a path failed, vanished or was not done, once counted and listed.
	PathFailed(Failure)
	// WouldTransfer: in a dry run, a path of a settled chunk that rsync would transfer,
	// told before the chunk's end.
	WouldTransfer(input []byte, o rsync.Outcome, chunk int)
	// ChunkEnded: an rsync on a chunk ended; t is what its paths came to, once settled.
	ChunkEnded(m exec.ChunkEnded, t ChunkTally)
	// Deleted: the deletion pass deleted an entry of DEST, or would have (dryRun).
	Deleted(d exec.Deleted, dryRun bool)
	// Error: something went wrong that no path's status says: the input could not be
	// read, a part of the deletion pass failed.
	Error(msg string)
	// JobsChanged: the number of rsyncs allowed at once changed; s is the books after it.
	JobsChanged(m exec.LimitChanged, s Snapshot)
	// Throttled: the throttle paused or resumed rsyncs.
	Throttled(throttle.Event)
	// ThrottleNotice: the throttle has held every rsync a while, or they run again.
	ThrottleNotice(throttle.Notice)
	// BWLimitChanged: the total bandwidth limit in force changed.
	BWLimitChanged(bw.Change)
	// ControlChanged: live control (prsync ctl) changed what, from old to new.
	ControlChanged(what, old, new string)
	// WindowEnded: the --max-duration window ended (cause): no rsync starts any more, and
	// the ones running have grace to finish.
	WindowEnded(cause string, grace time.Duration, s Snapshot)
	// Status: a status was asked for, by "socket" or "signal".
	Status(s Snapshot, by string)
	// Update: the books, every interval while the run goes on.
	Update(Snapshot)
	// Finish: the last snapshot, with its End, once the run has ended.
	Finish(Snapshot)
}

var (
	_ Printer = JSON{}
	_ Printer = (*Text)(nil)
)

// Failure is a path that failed, vanished or was not done, in chunk (0: none).
type Failure struct {
	Input  []byte
	Status rsync.Status
	Reason string
	Chunk  int
}

// Run is what a run starts with.
type Run struct {
	Version string
	PID     int
	// Jobs is the number of rsyncs allowed at once at the start; JobsAuto says -j auto,
	// MaxJobs the most it, or live control, may set.
	Jobs, MaxJobs int
	JobsAuto      bool
	// Dest is DEST as given, Root the source root (absolute when local).
	Dest, Root string
	// Rsync is the rsync binary, RsyncArgs the options every rsync gets.
	Rsync, RsyncVersion string
	RsyncArgs           []string
	Null, DryRun        bool
	// ChunkFiles and ChunkBytes bound a chunk; ChunkTime is the duration chunks aim at,
	// 0 when they are cut by those bounds alone.
	ChunkFiles int
	ChunkBytes int64
	ChunkTime  time.Duration
	Shard      int
	Shards     int
	// QuickCheck says the splitter skips paths it finds up to date, ListDest that it lists
	// a network DEST's directories ahead of the rsyncs.
	QuickCheck, ListDest bool
	Transport            string // "pipe" or "direct"
	RemoteLists          string // --remote-lists in force for a push to a remote DEST, or ""
	SourceRemote, Sizes  bool
	Cgroup               throttle.CgroupInfo
	ControlSocket        string // "" without live control
	BWLimit              string // the total bandwidth limit as set, or "off"
	Delete               bool
	Verify               string
	// Policy is the throttle's, ThrottleInterval its sampling period; NoThrottle: nothing
	// is paused.
	Policy           throttle.Policy
	ThrottleInterval time.Duration
	NoThrottle       bool
	// MaxDuration is the time window (0: none), MaxDurationGrace its grace.
	MaxDuration, MaxDurationGrace time.Duration
}

// Quiet is a Printer that shows nothing: a printer embeds it to show only some kinds of news.
type Quiet struct{}

func (Quiet) Started(Run)                                 {}
func (Quiet) ChunkStarted(exec.ChunkStarted)              {}
func (Quiet) Hint(string)                                 {}
func (Quiet) PathFailed(Failure)                          {}
func (Quiet) WouldTransfer([]byte, rsync.Outcome, int)    {}
func (Quiet) ChunkEnded(exec.ChunkEnded, ChunkTally)      {}
func (Quiet) Deleted(exec.Deleted, bool)                  {}
func (Quiet) Error(string)                                {}
func (Quiet) JobsChanged(exec.LimitChanged, Snapshot)     {}
func (Quiet) Throttled(throttle.Event)                    {}
func (Quiet) ThrottleNotice(throttle.Notice)              {}
func (Quiet) BWLimitChanged(bw.Change)                    {}
func (Quiet) ControlChanged(string, string, string)       {}
func (Quiet) WindowEnded(string, time.Duration, Snapshot) {}
func (Quiet) Status(Snapshot, string)                     {}
func (Quiet) Update(Snapshot)                             {}
func (Quiet) Finish(Snapshot)                             {}
