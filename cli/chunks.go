package cli

import (
	"os"
	"strings"
	"time"

	"github.com/prsync/prsync/plan"
	"github.com/prsync/prsync/rsync"
)

// PullChunkFiles is --chunk-files's default in a pull from a remote --root whose lists
// cannot carry anchors (rsync.AnchorsApply: -r, --no-dirs, --old-dirs, --no-implied-dirs
// after --), where the client's rsync checks each name the sender lists against every
// path of its chunk: one rsync pulling 2,000 tiny files from a daemon used 0.16 s of user
// time on that check, 10,000 used 1.9 s; pulled in chunks of 1,000, 2,000 and 4,000,
// 40,000 tiny files cost 1.58, 1.83 and 2.74 CPU-s in all. Elsewhere, anchored pulls
// included, the default is 10,000: a push of 600,000 tiny files to a daemon (bench
// scenario 9) took 26 s in chunks of 8,000 against 42 to 48 s in chunks of 2,000, each
// chunk's session (an rsync's start, a daemon's fork, its module's setup) paid 300 times
// instead of 77; a pull of the same files (scenario 10), with anchors, 43.69 s against
// 55.49 s in chunks of 2,000 without them (H58).
const PullChunkFiles = 2000

// listBytes is the most bytes of list a chunk holds (splitter.Config.ListBytes): in a pull
// from an rsync daemon whose lists carry anchors, rsync.AnchoredListBytes unless
// --chunk-files is given; 0, no bound, elsewhere. Over ssh no list size was seen to be all
// sent ahead of the sender's names, and each chunk is one more ssh session.
func (r *runner) listBytes() int64 {
	if r.anchors() && rsync.IsDaemon(r.srcRemote) && !flagGiven(r.argv, "chunk-files") {
		return rsync.AnchoredListBytes
	}
	return 0
}

// chunkTarget is the duration chunks aim at (--chunk-time), or 0 when they are cut by
// --chunk-files and --chunk-bytes alone: --chunk-time 0, or either bound given (on the
// command line or in the environment) without --chunk-time, which keeps their meaning
// from before chunks were sized by time.
func (r *runner) chunkTarget() time.Duration {
	f := &r.f
	if flagGiven(r.argv, "chunk-time") {
		return f.ChunkTime
	}
	if flagGiven(r.argv, "chunk-files") || flagGiven(r.argv, "chunk-bytes") {
		return 0
	}
	return f.ChunkTime
}

// planner returns the run's planner (package plan): how big each chunk is and when it is
// cut, which starts next and how many rsyncs run at once. cpus is what the copy may use.
func (r *runner) planner(cpus float64) *plan.Planner {
	f := &r.f
	return plan.New(plan.Config{
		Target: r.chunkTarget(), Files: f.ChunkFiles, Bytes: int64(f.ChunkBytes), Wait: f.ChunkWait,
		Jobs: r.jobs, MaxJobs: r.maxJobs, Auto: r.tuner, CPUs: cpus,
	})
}

// flagGiven reports whether --name was given before "--", or PRSYNC_NAME is set.
func flagGiven(args []string, name string) bool {
	if _, ok := os.LookupEnv("PRSYNC_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))); ok {
		return true
	}
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "--"+name || strings.HasPrefix(a, "--"+name+"=") {
			return true
		}
	}
	return false
}

// usableCPUs returns the CPUs prsync's rsyncs may really use on a machine of cpus CPUs: a
// cgroup's CPU quota (quota CPUs, 0 for none) when it is lower.
func usableCPUs(cpus int, quota float64) float64 {
	if quota > 0 && quota < float64(cpus) {
		return quota
	}
	return float64(cpus)
}
