package books

import (
	"io"
	"time"

	"github.com/prsync/prsync/bw"
	"github.com/prsync/prsync/event"
	"github.com/prsync/prsync/exec"
	"github.com/prsync/prsync/rsync"
	"github.com/prsync/prsync/throttle"
)

// JSON prints the news of a run as events, one JSON line each (package event): it writes
// every event prsync writes.
type JSON struct{ enc *event.Encoder }

// NewJSON returns the printer of the events, written to w. onError, if not nil, is told
// the first write that fails; no event is written after it.
func NewJSON(w io.Writer, onError func(error)) JSON {
	enc := event.NewEncoder(w)
	enc.OnError = onError
	return JSON{enc}
}

// Err returns the first write error, if any.
func (j JSON) Err() error { return j.enc.Err() }

// Started writes the start event.
func (j JSON) Started(r Run) {
	p := r.Policy
	j.enc.Emit(&event.Start{
		Version: r.Version, Schema: event.Schema, PID: r.PID, Jobs: r.Jobs, JobsAuto: r.JobsAuto, MaxJobs: r.MaxJobs,
		Dest: r.Dest, Root: r.Root,
		Rsync: r.Rsync, RsyncVersion: r.RsyncVersion, RsyncArgs: r.RsyncArgs, Null: r.Null, DryRun: r.DryRun,
		ChunkFiles: r.ChunkFiles, ChunkBytes: r.ChunkBytes, ChunkTime: r.ChunkTime.Seconds(), Shard: r.Shard, Shards: r.Shards,
		QuickCheck: r.QuickCheck, ListDest: r.ListDest, Transport: r.Transport, SourceRemote: r.SourceRemote, Sizes: r.Sizes,
		Cgroup: cgroupOf(r.Cgroup), MaxSuspend: p.MaxSuspend.Seconds(), ControlSocket: r.ControlSocket,
		BWLimit: r.BWLimit, Delete: r.Delete, Verify: r.Verify,
		SuspendThreshold: p.Suspend, ResumeThreshold: p.Resume, MaxLoad: p.MaxLoad,
		MaxCPUPressure: p.MaxCPUPressure, MaxIOPressure: p.MaxIOPressure,
		ThrottleInterval: r.ThrottleInterval.Seconds(), NoThrottle: r.NoThrottle,
		MaxDuration: r.MaxDuration.Seconds(), MaxDurationGrace: graceOf(r), RemoteLists: r.RemoteLists,
	})
}

// cgroupOf is what the start event says of the cgroup found.
func cgroupOf(c throttle.CgroupInfo) *event.Cgroup {
	if c.Version == 0 && c.PSI == "" {
		return nil
	}
	return &event.Cgroup{Version: c.Version, Path: c.Path, CPUs: c.CPUs, Usage: c.Usage, PSI: c.PSI,
		CPUPressureFile: c.CPUPressureFile, IOPressureFile: c.IOPressureFile}
}

// graceOf is the start event's max_duration_grace: only with a window.
func graceOf(r Run) *float64 {
	if r.MaxDuration <= 0 {
		return nil
	}
	g := r.MaxDurationGrace.Seconds()
	return &g
}

// ChunkStarted writes the chunk_start event.
func (j JSON) ChunkStarted(m exec.ChunkStarted) {
	ev := &event.ChunkStart{Chunk: m.Chunk.ID, Attempt: m.Attempt, Files: m.Chunk.Len(), Bytes: m.Chunk.Bytes, PID: m.PID}
	if m.RemoteList {
		ev.List = "remote"
	}
	j.enc.Emit(ev)
}

// Hint writes nothing: advice is for a person (Text).
func (JSON) Hint(string) {}

// PathFailed writes the path_failed event.
func (j JSON) PathFailed(f Failure) {
	p, b64 := event.PathFields(f.Input)
	j.enc.Emit(&event.PathFailed{Path: p, PathB64: b64, Status: string(f.Status), Reason: f.Reason, Chunk: f.Chunk})
}

// WouldTransfer writes the would_transfer event, with rsync's itemized change.
func (j JSON) WouldTransfer(input []byte, o rsync.Outcome, chunk int) {
	p, b64 := event.PathFields(input)
	j.enc.Emit(&event.WouldTransfer{Path: p, PathB64: b64, Itemize: o.Change, Bytes: o.Bytes, Chunk: chunk})
}

// ChunkEnded writes the chunk_end event; t is what its paths came to, once the chunk is
// settled.
func (j JSON) ChunkEnded(m exec.ChunkEnded, t ChunkTally) {
	ev := &event.ChunkEnd{
		Chunk: m.Chunk.ID, Attempt: m.Attempt, Files: m.Chunk.Len(), Bytes: m.Chunk.Bytes,
		BytesTransferred: m.BytesLogged, Seconds: m.Seconds, ExitCode: m.ExitCode, Status: string(m.Status),
		Error: m.Error, Hint: m.Hint, Unexplained: m.Unexplained,
	}
	if v := m.Verify; v != nil {
		ev.VerifyPaths, ev.VerifyFailed, ev.VerifySeconds = v.Paths, v.Failed, v.Seconds
	}
	if m.Confirm != nil {
		ev.ConfirmedBy, ev.ConfirmPaths, ev.ConfirmLanded, ev.ConfirmSeconds = m.Confirm.Method, m.Confirm.Paths, m.Confirm.Landed, m.Confirm.Seconds
	}
	if m.Outcomes != nil {
		ev.FilesTransferred, ev.FilesFailed, ev.FilesVanished = t.Transferred, t.Failed, t.Vanished
		ev.BytesTransferred = t.BytesTransferred
	}
	j.enc.Emit(ev)
}

// Deleted writes the deleted event.
func (j JSON) Deleted(d exec.Deleted, dryRun bool) {
	p, b64 := event.PathFields(d.Path)
	j.enc.Emit(&event.Deleted{Path: p, PathB64: b64, Kind: d.Kind, DryRun: dryRun})
}

// Error writes the error event.
func (j JSON) Error(msg string) { j.enc.Emit(&event.Error{Error: msg}) }

// ThrottleNotice writes nothing: the throttle event of each pause and resume says it.
func (JSON) ThrottleNotice(throttle.Notice) {}

// BWLimitChanged writes the bwlimit event.
func (j JSON) BWLimitChanged(c bw.Change) {
	ev := &event.BWLimit{Old: rateOf(c.Old), New: rateOf(c.New)}
	if !c.Next.IsZero() {
		ev.Next = c.Next.UTC().Format(time.RFC3339)
	}
	j.enc.Emit(ev)
}

// rateOf is a rate of the bwlimit event: "off" for none.
func rateOf(r float64) string {
	if r == bw.Unlimited {
		return "off"
	}
	return bw.FormatRate(r)
}

// ControlChanged writes the control event.
func (j JSON) ControlChanged(what, old, new string) {
	j.enc.Emit(&event.Control{What: what, Old: old, New: new})
}

// WindowEnded writes nothing: the summary says the window was reached.
func (JSON) WindowEnded(string, time.Duration, Snapshot) {}

// Update writes a progress event.
func (j JSON) Update(s Snapshot) {
	j.enc.Emit(&event.Progress{
		FilesDone: s.Done(), BytesDone: s.BytesDone(), FilesQueued: s.Queued,
		InputDone: s.InputDone, RateBps: s.Rate(), CPU: cpuOf(s.Sample), CgroupCPU: cgroupCPUOf(s.Sample),
		Running: s.Running, Suspended: s.Suspended, Elapsed: round3(s.Elapsed),
		Jobs: s.Jobs, Phase: s.Phase,
		FilesVerified: s.Verified, FilesVerifyFailed: s.VerifyFailed, DirsChecked: s.DirsChecked, FilesDeleted: s.Deleted,
	})
}

// Finish writes the summary; s must have its End.
func (j JSON) Finish(s Snapshot) {
	e := s.End
	j.enc.Emit(&event.Summary{
		Files: s.Files, Bytes: s.Bytes, FilesTransferred: s.Transferred, BytesTransferred: s.BytesTransferred,
		FilesUpToDate: s.UpToDate, FilesFailed: s.Failed, FilesVanished: s.Vanished, FilesNotDone: s.NotDone,
		EmptyRecords: s.Empty, Chunks: s.Chunks, ChunksFailed: s.ChunksFailed, Retries: s.Retries,
		Suspensions: s.Suspensions, SecondsSuspended: round3(s.SecondsSuspended), Seconds: round3(s.Elapsed),
		RateBps: round1(s.AverageRate()), ExitCode: e.ExitCode, Shard: e.Shard, Shards: e.Shards,
		CPUSeconds: round3(e.CPUSeconds), RsyncCPUSeconds: round3(e.RsyncCPUSeconds),
		InputComplete: e.InputComplete, ChunkErrors: s.ChunkErrors, ConfirmSeconds: round3(s.ConfirmSeconds),
		JobsMin: s.JobsMin, JobsMax: s.JobsMax,
		FilesVerified: s.Verified, FilesVerifyFailed: s.VerifyFailed, VerifySeconds: round3(s.VerifySeconds),
		FilesDeleted: s.Deleted, DeletePass: e.DeletePass, DeleteDirs: s.DirsChecked, DeleteSeconds: round3(e.DeleteSeconds),
		MaxDurationReached: e.MaxDurationReached,
		OwnCPUSeconds:      optional3(e.HasOwnCPU, e.OwnCPUSeconds),
		RemoteLists:        remoteListsOf(e.RemoteLists),
	})
}

// remoteListsOf is the summary's remote_lists.
func remoteListsOf(l *exec.ListStats) *event.RemoteLists {
	if l == nil {
		return nil
	}
	return &event.RemoteLists{
		Uploads: l.Uploads, UploadsFailed: l.UploadFailed, UploadBytes: l.UploadBytes, UploadSeconds: round3(l.UploadSeconds),
		Rsyncs: l.Remote, Swept: l.Swept, Off: l.Off, Removal: l.Removal,
	}
}

// Status writes the status event of a request by "socket" or "signal".
func (j JSON) Status(s Snapshot, by string) {
	j.enc.Emit(&event.Status{
		By: by, Jobs: s.Jobs, Running: s.Running, Suspended: s.Suspended, Paused: s.Paused,
		BWLimit: s.BWLimit, BWLimitNow: s.BWLimitNow, FilesDone: s.Done(), BytesDone: s.BytesDone(),
		FilesQueued: s.Queued, FilesNotOK: s.NotOK(), InputDone: s.InputDone, RateBps: s.Rate(),
		Elapsed: round3(s.Elapsed),
	})
}

// JobsChanged writes the jobs event of a change of the limit: with the rate measured
// behind it, or else the rate so far.
func (j JSON) JobsChanged(m exec.LimitChanged, s Snapshot) {
	rate := round1(m.RateBps)
	if rate == 0 {
		rate = s.Rate()
	}
	j.enc.Emit(&event.Jobs{Old: m.Old, New: m.New, Reason: m.Reason, Detail: m.Detail, RateBps: rate})
}

// Throttled writes the throttle event of a pause or resume.
func (j JSON) Throttled(e throttle.Event) {
	s := e.Sample
	j.enc.Emit(&event.Throttle{
		Action: e.Action, Reason: e.Reason, CPU: cpuOf(s),
		Load:        optional(s.HasLoad, s.Load),
		IOPressure:  optional(s.HasIO, s.IOPressure),
		CPUPressure: optional(s.HasCPUPressure, s.CPUPressure),
		CgroupCPU:   cgroupCPUOf(s),
		Chunk:       e.Chunk, PID: e.PID, Running: e.Running, Suspended: e.Suspended,
	})
}

// cpuOf and cgroupCPUOf are the CPU fields of a throttle or progress event.
func cpuOf(s throttle.Sample) event.CPU {
	return event.CPU{CPUPercent: round1(s.CPU), OwnCPUPercent: optional(s.HasOwn, s.Own), KernelCPUPercent: optional(s.HasOwn, s.Kernel)}
}

func cgroupCPUOf(s throttle.Sample) event.CgroupCPU {
	return event.CgroupCPU{CgroupCPUPercent: optional(s.HasCgroup, s.CgroupCPU), CgroupOwnCPUPercent: optional(s.HasCgroup && s.HasOwn, s.CgroupOwn)}
}

// optional is v, rounded, for an event field that is there only when has is true.
// optional3 is optional to a thousandth.
func optional3(has bool, v float64) *float64 {
	if !has {
		return nil
	}
	v = round3(v)
	return &v
}

func optional(has bool, v float64) *float64 {
	if !has {
		return nil
	}
	v = round1(v)
	return &v
}
