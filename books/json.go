package books

import (
	"github.com/prsync/prsync/event"
	"github.com/prsync/prsync/exec"
	"github.com/prsync/prsync/throttle"
)

// JSON prints the books as events: a progress event every interval, the summary at the
// end, and a status event when asked; and the events that carry a rate or CPU figures.
type JSON struct{ Enc *event.Encoder }

// Update writes a progress event.
func (j JSON) Update(s Snapshot) {
	j.Enc.Emit(&event.Progress{
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
	j.Enc.Emit(&event.Summary{
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
	})
}

// Status writes the status event of a request by "socket" or "signal".
func (j JSON) Status(s Snapshot, by string) {
	j.Enc.Emit(&event.Status{
		By: by, Jobs: s.Jobs, Running: s.Running, Suspended: s.Suspended, Paused: s.Paused,
		BWLimit: s.BWLimit, BWLimitNow: s.BWLimitNow, FilesDone: s.Done(), BytesDone: s.BytesDone(),
		FilesQueued: s.Queued, FilesNotOK: s.NotOK(), InputDone: s.InputDone, RateBps: s.Rate(),
		Elapsed: round3(s.Elapsed),
	})
}

// Jobs writes the jobs event of a change of the limit: with the rate measured behind
// it, or else the rate so far.
func (j JSON) Jobs(m exec.LimitChanged, s Snapshot) {
	rate := round1(m.RateBps)
	if rate == 0 {
		rate = s.Rate()
	}
	j.Enc.Emit(&event.Jobs{Old: m.Old, New: m.New, Reason: m.Reason, Detail: m.Detail, RateBps: rate})
}

// Throttle writes the throttle event of a pause or resume.
func (j JSON) Throttle(e throttle.Event) {
	s := e.Sample
	j.Enc.Emit(&event.Throttle{
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
