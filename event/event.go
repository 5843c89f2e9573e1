// Package event defines prsync's JSON-lines events and writes them through one encoder.
package event

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"
	"unicode/utf8"
)

// Schema is the version of the event schema. It grows only by adding fields or types.
const Schema = 1

// Header is embedded first in every event.
type Header struct {
	Type string `json:"type"`
	Time string `json:"time"`
}

func (h *Header) header() *Header { return h }

// Event is any of the event structs below.
type Event interface{ header() *Header }

// Start is written once, first.
type Start struct {
	Header
	Version string `json:"version"`
	Schema  int    `json:"schema"`
	PID     int    `json:"pid"`
	Jobs    int    `json:"jobs"`
	// JobsAuto says -j auto: Jobs is where it starts, MaxJobs the most it may reach (also
	// the bound of live control).
	JobsAuto     bool     `json:"jobs_auto"`
	MaxJobs      int      `json:"max_jobs"`
	Dest         string   `json:"dest"`
	Root         string   `json:"root"`
	Rsync        string   `json:"rsync"`
	RsyncVersion string   `json:"rsync_version"`
	RsyncArgs    []string `json:"rsync_args"`
	Null         bool     `json:"null"`
	DryRun       bool     `json:"dry_run"`
	ChunkFiles   int      `json:"chunk_files"`
	ChunkBytes   int64    `json:"chunk_bytes"`
	// ChunkTime is the duration chunks aim at, in seconds (--chunk-time); 0 when they are
	// cut at ChunkFiles paths or ChunkBytes bytes exactly.
	ChunkTime  float64 `json:"chunk_time"`
	Shard      int     `json:"shard"`
	Shards     int     `json:"shards"`
	QuickCheck bool    `json:"quick_check"`
	// ListDest says DEST is on a network filesystem and its directories are listed ahead of
	// the rsyncs (splitter: "Listing a network DEST").
	ListDest bool `json:"list_dest"`
	// Transport is how the rsyncs of a local copy run: "pipe" or "direct".
	Transport string `json:"transport"`
	// SourceRemote says --root names a remote source (pull mode); Sizes that the records
	// carry their sizes (--sizes).
	SourceRemote bool `json:"source_remote"`
	Sizes        bool `json:"sizes"`
	// Cgroup is what the throttle found of prsync's cgroup (absent outside Linux).
	Cgroup *Cgroup `json:"cgroup,omitempty"`
	// MaxSuspend is --max-suspend in seconds (0: for ever).
	MaxSuspend float64 `json:"max_suspend"`
	// ControlSocket is the socket of live control (prsync ctl), or "".
	ControlSocket string `json:"control_socket"`
	// BWLimit is the total bandwidth limit (--bwlimit) as given, or "off".
	BWLimit string `json:"bwlimit"`
	// Delete says a deletion pass follows the copy (--delete); Verify is the
	// verification pass: "off", "transferred" or "all".
	Delete bool   `json:"delete"`
	Verify string `json:"verify"`
	// The throttle's limits: SuspendThreshold and ResumeThreshold in percent of CPU,
	// MaxLoad, MaxCPUPressure and MaxIOPressure (0: off), ThrottleInterval in seconds;
	// NoThrottle says --no-throttle: nothing is paused.
	SuspendThreshold float64 `json:"suspend_threshold"`
	ResumeThreshold  float64 `json:"resume_threshold"`
	MaxLoad          float64 `json:"max_load"`
	MaxCPUPressure   float64 `json:"max_cpu_pressure"`
	MaxIOPressure    float64 `json:"max_io_pressure"`
	ThrottleInterval float64 `json:"throttle_interval"`
	NoThrottle       bool    `json:"no_throttle"`
	// MaxDuration is the time window (--max-duration) in seconds, and MaxDurationGrace
	// its grace; both only with a window.
	MaxDuration      float64  `json:"max_duration,omitempty"`
	MaxDurationGrace *float64 `json:"max_duration_grace,omitempty"`
	// RemoteLists is --remote-lists in force for a push to a remote DEST: "auto", "on" or
	// "off"; absent otherwise.
	RemoteLists string `json:"remote_lists,omitempty"`
}

// Cgroup describes the cgroup the throttle measures against.
type Cgroup struct {
	Version int     `json:"version"`        // 1, 2, or 0 when none was found
	Path    string  `json:"path,omitempty"` // as /proc/self/cgroup names it
	CPUs    float64 `json:"cpus"`           // the CPU quota in CPUs; 0: none
	// Usage is where the cgroup's CPU use is read: cpu.stat, cpuacct.usage or procs.
	Usage string `json:"usage,omitempty"`
	// PSI is where pressure is read: cgroup (its own files) or system (/proc/pressure).
	PSI             string `json:"psi,omitempty"`
	CPUPressureFile string `json:"cpu_pressure_file,omitempty"`
	IOPressureFile  string `json:"io_pressure_file,omitempty"`
}

// ChunkStart is written when an rsync starts on a chunk.
type ChunkStart struct {
	Header
	Chunk   int   `json:"chunk"`
	Attempt int   `json:"attempt"`
	Files   int   `json:"files"`
	Bytes   int64 `json:"bytes"`
	PID     int   `json:"pid"`
	// List is "remote" when the rsync reads the chunk's list on the far side
	// (--remote-lists); absent when it reads it on stdin.
	List string `json:"list,omitempty"`
}

// ChunkEnd is written when that rsync has ended.
type ChunkEnd struct {
	Header
	Chunk            int     `json:"chunk"`
	Attempt          int     `json:"attempt"`
	Files            int     `json:"files"`
	Bytes            int64   `json:"bytes"`
	FilesTransferred int     `json:"files_transferred"`
	BytesTransferred int64   `json:"bytes_transferred"`
	FilesFailed      int     `json:"files_failed"`
	FilesVanished    int     `json:"files_vanished"`
	Seconds          float64 `json:"seconds"`
	ExitCode         int     `json:"exit_code"`
	Status           string  `json:"status"`
	Error            string  `json:"error,omitempty"`
	Hint             string  `json:"hint,omitempty"`
	// ConfirmedBy says how the paths were proven after a non-zero exit: "lstat" of a
	// local DEST, a "dry-run" pass of rsync, or "none"; ConfirmPaths of them needed it,
	// ConfirmLanded were proven, in ConfirmSeconds.
	ConfirmedBy    string  `json:"confirmed_by,omitempty"`
	ConfirmPaths   int     `json:"confirm_paths,omitempty"`
	ConfirmLanded  int     `json:"confirm_landed,omitempty"`
	ConfirmSeconds float64 `json:"confirm_seconds,omitempty"`
	// Unexplained is an rsync error that names no path, although every path was proven.
	Unexplained string `json:"unexplained,omitempty"`
	// VerifyPaths were checked by the verification pass (--verify), VerifyFailed of them
	// differ from the source or could not be checked, in VerifySeconds.
	VerifyPaths   int     `json:"verify_paths,omitempty"`
	VerifyFailed  int     `json:"verify_failed,omitempty"`
	VerifySeconds float64 `json:"verify_seconds,omitempty"`
}

// Jobs is written when the number of rsyncs allowed at once changes.
type Jobs struct {
	Header
	Old    int    `json:"old"`
	New    int    `json:"new"`
	Reason string `json:"reason"`
	// Detail is the far side's own words when it refused sessions.
	Detail  string  `json:"detail,omitempty"`
	RateBps float64 `json:"rate_bps"`
}

// Throttle is written for each pause or resume of an rsync process group.
type Throttle struct {
	Header
	Action string `json:"action"`
	Reason string `json:"reason"`
	CPU
	Load        *float64 `json:"load,omitempty"`
	IOPressure  *float64 `json:"io_pressure,omitempty"`
	CPUPressure *float64 `json:"cpu_pressure,omitempty"`
	CgroupCPU
	Chunk     int `json:"chunk"`
	PID       int `json:"pid"`
	Running   int `json:"running"`
	Suspended int `json:"suspended"`
}

// CPU is the machine's CPU use in a throttle or progress event. The two events embed
// it, and CgroupCPU, where their fields stand, so their JSON keeps its order.
type CPU struct {
	CPUPercent float64 `json:"cpu_percent"`
	// OwnCPUPercent is the part of CPUPercent used by prsync's own rsyncs (Linux only).
	OwnCPUPercent *float64 `json:"own_cpu_percent,omitempty"`
	// KernelCPUPercent is the part used by kernel threads, neither prsync's nor other
	// load (Linux only).
	KernelCPUPercent *float64 `json:"kernel_cpu_percent,omitempty"`
}

// CgroupCPU is the cgroup's CPU use in percent of its quota, and CgroupOwnCPUPercent
// the part of it prsync's own; only inside a cgroup with a quota.
type CgroupCPU struct {
	CgroupCPUPercent    *float64 `json:"cgroup_cpu_percent,omitempty"`
	CgroupOwnCPUPercent *float64 `json:"cgroup_own_cpu_percent,omitempty"`
}

// Progress is written every throttle interval while prsync runs.
type Progress struct {
	Header
	FilesDone   int64   `json:"files_done"`
	BytesDone   int64   `json:"bytes_done"`
	FilesQueued int64   `json:"files_queued"`
	InputDone   bool    `json:"input_done"`
	RateBps     float64 `json:"rate_bps"`
	CPU
	CgroupCPU
	Running   int     `json:"running"`
	Suspended int     `json:"suspended"`
	Elapsed   float64 `json:"elapsed"`
	// Jobs is the number of rsyncs allowed at once.
	Jobs int `json:"jobs"`
	// Phase is "copy", then "delete" during the deletion pass (--delete).
	Phase string `json:"phase"`
	// FilesVerified and FilesVerifyFailed count the verification pass so far (--verify);
	// DirsChecked and FilesDeleted the deletion pass.
	FilesVerified     int64 `json:"files_verified,omitempty"`
	FilesVerifyFailed int64 `json:"files_verify_failed,omitempty"`
	DirsChecked       int64 `json:"dirs_checked,omitempty"`
	FilesDeleted      int64 `json:"files_deleted,omitempty"`
}

// Status is written when prsync is asked for its status: by prsync ctl status, or by
// SIGUSR1 (SIGINFO, Ctrl-T, on macOS).
type Status struct {
	Header
	By          string  `json:"by"` // socket or signal
	Jobs        int     `json:"jobs"`
	Running     int     `json:"running"`
	Suspended   int     `json:"suspended"`
	Paused      bool    `json:"paused"` // prsync ctl pause is in effect
	BWLimit     string  `json:"bwlimit"`
	BWLimitNow  string  `json:"bwlimit_now"`
	FilesDone   int64   `json:"files_done"`
	BytesDone   int64   `json:"bytes_done"`
	FilesQueued int64   `json:"files_queued"`
	FilesNotOK  int64   `json:"files_not_ok"` // failed, vanished or not done so far
	InputDone   bool    `json:"input_done"`
	RateBps     float64 `json:"rate_bps"`
	Elapsed     float64 `json:"elapsed"`
}

// BWLimit is written when the total bandwidth limit in force changes (a timetable's
// hour, or live control).
type BWLimit struct {
	Header
	Old string `json:"old"` // a rate such as 20M, or "off"
	New string `json:"new"`
	// Next is when a timetable changes it again (RFC 3339), or "".
	Next string `json:"next,omitempty"`
}

// Control is written for each change made by live control.
type Control struct {
	Header
	What string `json:"what"` // jobs, bwlimit, pause, resume
	Old  string `json:"old"`
	New  string `json:"new"`
}

// PathFailed is written for each input path that failed, vanished or was not done.
type PathFailed struct {
	Header
	Path    string `json:"path"`
	PathB64 string `json:"path_b64,omitempty"`
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	Chunk   int    `json:"chunk,omitempty"`
}

// WouldTransfer is written in a dry run (-n) for each input path that rsync would
// transfer, with rsync's itemized change (%i, as rsync -n -i prints it) and, for a
// regular file, its size.
type WouldTransfer struct {
	Header
	Path    string `json:"path"`
	PathB64 string `json:"path_b64,omitempty"`
	Itemize string `json:"itemize"`
	Bytes   int64  `json:"bytes"`
	Chunk   int    `json:"chunk"`
}

// Deleted is written for each entry the deletion pass removed from DEST (or, in a dry
// run, would remove). Path is relative to DEST; Kind is file, dir, link, special or, when
// a remote DEST cannot tell, unknown.
type Deleted struct {
	Header
	Path    string `json:"path"`
	PathB64 string `json:"path_b64,omitempty"`
	Kind    string `json:"kind"`
	DryRun  bool   `json:"dry_run,omitempty"`
}

// Error is written when prsync itself hits an error that ends or shortens the run.
type Error struct {
	Header
	Error string `json:"error"`
}

// Summary is written once, last, also after an interrupt.
type Summary struct {
	Header
	Files            int64   `json:"files"`
	Bytes            int64   `json:"bytes"`
	FilesTransferred int64   `json:"files_transferred"`
	BytesTransferred int64   `json:"bytes_transferred"`
	FilesUpToDate    int64   `json:"files_up_to_date"`
	FilesFailed      int64   `json:"files_failed"`
	FilesVanished    int64   `json:"files_vanished"`
	FilesNotDone     int64   `json:"files_not_done"`
	EmptyRecords     int64   `json:"empty_records"`
	Chunks           int64   `json:"chunks"`
	ChunksFailed     int64   `json:"chunks_failed"`
	Retries          int64   `json:"retries"`
	Suspensions      int     `json:"suspensions"`
	SecondsSuspended float64 `json:"seconds_suspended"`
	Seconds          float64 `json:"seconds"`
	RateBps          float64 `json:"rate_bps"`
	// CPUSeconds is prsync's own user+system CPU time; RsyncCPUSeconds its rsyncs'.
	CPUSeconds      float64 `json:"cpu_seconds"`
	RsyncCPUSeconds float64 `json:"rsync_cpu_seconds"`
	ExitCode        int     `json:"exit_code"`
	Shard           int     `json:"shard"`
	Shards          int     `json:"shards"`
	// InputComplete is false when prsync stopped before reading its input to the end:
	// the paths never read are in no list.
	InputComplete bool `json:"input_complete"`
	// ChunkErrors counts rsync errors that named no path while every path was proven.
	ChunkErrors int64 `json:"chunk_errors"`
	// ConfirmSeconds is the time spent proving paths after rsyncs that exited non-zero.
	ConfirmSeconds float64 `json:"confirm_seconds"`
	// JobsMin and JobsMax are the range of the number of rsyncs allowed at once.
	JobsMin int `json:"jobs_min"`
	JobsMax int `json:"jobs_max"`
	// FilesVerified are the paths the verification pass found to match the source, and
	// FilesVerifyFailed those it found to differ or could not check (also in
	// files_failed), in VerifySeconds of rsync time.
	FilesVerified     int64   `json:"files_verified"`
	FilesVerifyFailed int64   `json:"files_verify_failed"`
	VerifySeconds     float64 `json:"verify_seconds"`
	// FilesDeleted counts the entries the deletion pass removed (would remove, in a dry
	// run); DeletePass says "ran", "not requested", "skipped: <reason>", "failed:
	// <reason>" or "interrupted"; DeleteDirs is the number of directories it checked, in
	// DeleteSeconds.
	FilesDeleted  int64   `json:"files_deleted"`
	DeletePass    string  `json:"delete_pass"`
	DeleteDirs    int64   `json:"delete_dirs"`
	DeleteSeconds float64 `json:"delete_seconds"`
	// MaxDurationReached: the --max-duration window ended before the run did (nothing
	// started after it); only then.
	MaxDurationReached bool `json:"max_duration_reached,omitempty"`
	// OwnCPUSeconds is the CPU time counted as the copy's own, as own_cpu_percent counts
	// it (Linux): prsync, its rsyncs, the daemon or sshd on this machine that serves them,
	// and the list's producer, from prsync's first reading of /proc to the end.
	OwnCPUSeconds *float64 `json:"own_cpu_seconds,omitempty"`
	// RemoteLists is what the chunks' lists on the far side cost and did, when an upload
	// ran or the run turned them off.
	RemoteLists *RemoteLists `json:"remote_lists,omitempty"`
}

// RemoteLists is the summary's account of the lists of a push held on the far side
// (--remote-lists).
type RemoteLists struct {
	// Uploads are the upload sessions (UploadsFailed of them failed), carrying
	// UploadBytes of lists in UploadSeconds (the sweep's listing included).
	Uploads       int     `json:"uploads"`
	UploadsFailed int     `json:"uploads_failed"`
	UploadBytes   int64   `json:"upload_bytes"`
	UploadSeconds float64 `json:"upload_seconds"`
	// Rsyncs read their list on the far side.
	Rsyncs int `json:"rsyncs"`
	// Swept are lists that crashed runs had left, removed.
	Swept int `json:"swept"`
	// Off says why the run turned them off and read the rest of its lists on stdin.
	Off string `json:"off,omitempty"`
	// Removal says when this run's lists left the far side: "early" (beside the copy's
	// last chunks), "before_root" (just before the root's chunk) or "end" (at the run's
	// end); absent when they did not (a removal refused or cut short).
	Removal string `json:"removal,omitempty"`
}

// PathFields returns the path as a JSON string and, when the name is not valid UTF-8
// (and so cannot round-trip through a JSON string), its bytes in standard base64.
func PathFields(p []byte) (path, b64 string) {
	if utf8.Valid(p) {
		return string(p), ""
	}
	return string(p), base64.StdEncoding.EncodeToString(p)
}

// Encoder writes events as JSON lines. It is safe for concurrent use, but prsync calls it
// from one goroutine at a time: the reporter that owns the books.
type Encoder struct {
	mu  sync.Mutex
	w   io.Writer
	enc *json.Encoder
	// Now returns the time stamped on each event; tests replace it.
	Now func() time.Time
	// OnError, if set, is called once, with the first write error.
	OnError func(error)
	err     error
}

// NewEncoder returns an Encoder writing to w, one event per line.
func NewEncoder(w io.Writer) *Encoder {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return &Encoder{w: w, enc: enc, Now: time.Now}
}

// Emit stamps ev with its type and the time and writes it as one line.
// After a write error (a closed stdout), later events are dropped and Err reports it.
func (e *Encoder) Emit(ev Event) {
	h := ev.header()
	h.Type = typeName(ev)
	e.mu.Lock()
	defer e.mu.Unlock()
	h.Time = e.Now().UTC().Format(time.RFC3339Nano)
	if e.err != nil {
		return
	}
	if err := e.enc.Encode(ev); err != nil {
		e.err = fmt.Errorf("write event: %w", err)
		if e.OnError != nil {
			e.OnError(err)
		}
	}
}

// Err returns the first write error, if any.
func (e *Encoder) Err() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err
}

func typeName(ev Event) string {
	switch ev.(type) {
	case *Start:
		return "start"
	case *ChunkStart:
		return "chunk_start"
	case *ChunkEnd:
		return "chunk_end"
	case *Throttle:
		return "throttle"
	case *Progress:
		return "progress"
	case *PathFailed:
		return "path_failed"
	case *WouldTransfer:
		return "would_transfer"
	case *Deleted:
		return "deleted"
	case *Error:
		return "error"
	case *Jobs:
		return "jobs"
	case *Status:
		return "status"
	case *Control:
		return "control"
	case *BWLimit:
		return "bwlimit"
	case *Summary:
		return "summary"
	}
	panic(fmt.Sprintf("event: unknown type %T", ev))
}
