package books

import (
	"github.com/prsync/prsync/exec"
	"github.com/prsync/prsync/throttle"
)

// Snapshot is the books at one moment, with what the rest of the run said then: all
// that the progress and status lines and events, prsync ctl status, the metrics file and
// the summary show. Its printers format it; none counts anything itself.
type Snapshot struct {
	Counts
	Live
	// JobsMin and JobsMax are the range of the number of rsyncs allowed at once so far.
	JobsMin, JobsMax int
	// Refusals counts the sessions the far side refused that lowered the limit.
	Refusals int
	// Phase is "copy", then "delete" during the deletion pass, over DeleteDirs
	// directories.
	Phase      string
	DeleteDirs int64
	// Hint is the advice for the first path failure that has one, or "".
	Hint string
	// End is how the run ended, in the last snapshot only.
	End *End
}

// Live is what the books do not count themselves, read from the pool, the throttle, the
// bandwidth limit and the clock when a snapshot is taken.
type Live struct {
	PID     int
	Elapsed float64 // seconds since the run started
	// InFlight are the file bytes logged by the rsyncs still running.
	InFlight int64
	// Running and Suspended are the rsync groups running and stopped; Jobs the number
	// allowed at once, MaxJobs the most live control may set, JobsAuto -j auto.
	Running, Suspended int
	Jobs, MaxJobs      int
	JobsAuto           bool
	Paused             bool // prsync ctl pause is in effect
	InputDone          bool // the input has ended
	// BWLimit is the total bandwidth limit as set, BWLimitNow the rate in force ("off"
	// for none), BWRate that rate in bytes per second (0 for none).
	BWLimit, BWLimitNow string
	BWRate              float64
	// Sample is the last CPU sample.
	Sample throttle.Sample
	// Suspensions and SecondsSuspended are the throttle's pauses so far.
	Suspensions      int
	SecondsSuspended float64
	// MaxDurationReached: the --max-duration window has ended.
	MaxDurationReached bool
}

// End is how a run ended, for the summary.
type End struct {
	ExitCode      int
	InputComplete bool // the input was read to its end
	// DeletePass is what became of the deletion pass, in DeleteSeconds.
	DeletePass    string
	DeleteSeconds float64
	// CPUSeconds is prsync's own CPU time, RsyncCPUSeconds its rsyncs'.
	CPUSeconds, RsyncCPUSeconds float64
	Shard, Shards               int
	// MaxDurationReached: the --max-duration window ended before the run did.
	MaxDurationReached bool
	// OwnCPUSeconds is the CPU the throttle counted as the copy's own, when it did
	// (HasOwnCPU): throttle.SystemSampler.OwnCPUSeconds.
	OwnCPUSeconds float64
	HasOwnCPU     bool
	// RemoteLists is what the lists held on the far side did, when any was used or they
	// were turned off (exec.RemoteLists); nil otherwise.
	RemoteLists *exec.ListStats
}

// BytesDone returns the file bytes transferred, by rsyncs that ended or still run.
func (s Snapshot) BytesDone() int64 { return s.BytesTransferred + s.InFlight }

// Rate returns the rate so far in bits per second, to a tenth, as every status shows it.
func (s Snapshot) Rate() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return round1(float64(s.BytesDone()) * 8 / s.Elapsed)
}

// AverageRate returns the rate of the bytes transferred by rsyncs that ended, in bits
// per second over the whole run: the summary's.
func (s Snapshot) AverageRate() float64 { return float64(s.BytesTransferred) * 8 / s.Elapsed }

func round1(v float64) float64 { return float64(int64(v*10+0.5)) / 10 }
func round3(v float64) float64 { return float64(int64(v*1000+0.5)) / 1000 }
