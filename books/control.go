package books

import "github.com/prsync/prsync/control"

// ControlStatus is the status prsync ctl status reports.
func ControlStatus(s Snapshot) control.Status {
	return control.Status{
		PID: s.PID, Jobs: s.Jobs, MaxJobs: s.MaxJobs, JobsAuto: s.JobsAuto,
		Running: s.Running, Suspended: s.Suspended, Paused: s.Paused,
		BWLimit: s.BWLimit, BWLimitNow: s.BWLimitNow,
		FilesDone: s.Done(), BytesDone: s.BytesDone(), FilesQueued: s.Queued,
		FilesFailed: s.NotOK(), InputDone: s.InputDone, RateBps: s.Rate(),
		Elapsed: round3(s.Elapsed),
	}
}
