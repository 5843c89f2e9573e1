package cli

import (
	"errors"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/prsync/prsync/bw"
	"github.com/prsync/prsync/exec"
	"github.com/prsync/prsync/internal/cmdline"
	"github.com/prsync/prsync/rsync"
	"github.com/prsync/prsync/splitter"
	"github.com/prsync/prsync/throttle"
	"github.com/prsync/prsync/tune"
)

// Validate checks the command line, and everything else that can be checked with no side
// effect: it starts nothing, and creates, opens and writes nothing. It fills in what the
// flags decide (the jobs, the throttle's policy, the source root, the rsync binary and the
// options every rsync gets, the quick check, the confirming pass) and returns the first
// problem found, which ends the run before it starts.
func (r *runner) Validate() error {
	f := &r.f
	if len(f.RsyncArgs) > 0 && !containsDashDash(r.argv) {
		if err := rsyncHabit(append([]string{f.Dest}, f.RsyncArgs...)); err != nil {
			return err // prsync SRC/ DEST/, as for rsync
		}
		return usage(fmt.Sprintf("unexpected argument %q", f.RsyncArgs[0]), "put rsync options after --, as in: prsync DEST -- --bwlimit=10m")
	}
	if f.Shard == "" && emptyShardGiven(r.argv) {
		return usage("empty --shard (or PRSYNC_SHARD)", "write --shard K/N with 0 <= K < N; an array job must set the task index")
	}
	if err := rsync.CheckOptions(f.RsyncArgs, f.NoThrottle); err != nil {
		var oe *rsync.OptionError
		if errors.As(err, &oe) {
			return usage(oe.Error(), oe.Hint)
		}
		return usage(err.Error(), "")
	}
	var err error
	if f.shard, f.shards, err = parseShard(f.Shard); err != nil {
		return err
	}
	if f.MaxJobs < 0 {
		return usage(fmt.Sprintf("--max-jobs %d: want at least 1 (0: 4 x CPUs, at least 32)", f.MaxJobs), "")
	}
	r.maxJobs = f.MaxJobs
	if r.maxJobs == 0 {
		r.maxJobs = defaultMaxJobs()
	}
	netDest := false // DEST a directory on a network filesystem (NFS, SMB, sshfs...)
	if f.Dest != "" && !rsync.IsRemote(f.Dest) {
		if abs, err := filepath.Abs(f.Dest); err == nil {
			netDest = splitter.NetworkFS(abs)
		}
	}
	switch {
	case f.Jobs.Auto:
		pol := tune.DefaultPolicy(runtime.NumCPU())
		pol.Max = r.maxJobs
		// start where a fixed -j does, so that a copy too short to search never loses to
		// the default; the search then goes from there (up first, then down)
		pol.Start = min(defaultJobs(netDest), pol.Max)
		if r.tuner, err = tune.New(pol); err != nil {
			return usage(fmt.Sprintf("-j auto: %v", err), "")
		}
		r.jobs = pol.Start
	case f.Jobs.N == 0:
		r.jobs = defaultJobs(netDest)
	default:
		r.jobs = f.Jobs.N
	}
	r.maxJobs = max(r.maxJobs, r.jobs)
	if f.ChunkFiles < 1 {
		return usage(fmt.Sprintf("--chunk-files %d: want at least 1", f.ChunkFiles), "")
	}
	if f.ChunkTime < 0 {
		return usage(fmt.Sprintf("--chunk-time %v: want 0 or more", f.ChunkTime), "")
	}
	if f.Retries < 0 {
		return usage(fmt.Sprintf("--retries %d: want 0 or more", f.Retries), "")
	}
	if f.RetryDelay < 0 {
		return usage(fmt.Sprintf("--retry-delay %v: want 0 or more", f.RetryDelay), "")
	}
	if f.ThrottleInterval <= 0 {
		return usage("--throttle-interval must be positive", "")
	}
	if _, err := bw.ParseSchedule(orOff(f.BWLimit)); err != nil {
		return usage(err.Error(), `write a rate such as 20M (a bare number is KiB/s), or a timetable such as --bwlimit "08:00,20M 19:00,200M 23:00,off"`)
	}
	if f.MaxDuration < 0 {
		return usage(fmt.Sprintf("--max-duration %v: want a positive duration, or 0 for no limit", f.MaxDuration), "for example --max-duration 6h, or 90m")
	}
	if f.MaxDurationGrace < 0 {
		return usage(fmt.Sprintf("--max-duration-grace %v: want 0 or more", f.MaxDurationGrace), "")
	}
	if f.MaxSuspend < 0 {
		return usage("--max-suspend must be 0 or positive", "")
	}
	switch f.Verify {
	case "all":
		r.verify = exec.VerifyAll
	case "transferred":
		r.verify = exec.VerifyTransferred
	}
	if len(f.MetricsLabel) > 0 && f.MetricsFile == "" {
		return usage("--metrics-label without --metrics-file", "add --metrics-file PATH, or drop --metrics-label")
	}
	if f.MetricsFile != "" {
		if r.mlabels, err = metricsLabels(f.MetricsLabel, f.Dest, f.shard, f.shards); err != nil {
			return err
		}
	}
	if f.DeleteAfterErrors && !f.Delete {
		return usage("--delete-after-errors without --delete", "add --delete, or drop --delete-after-errors")
	}
	r.policy = throttle.Policy{Suspend: f.SuspendThreshold, Resume: f.ResumeThreshold, MaxLoad: f.MaxLoad,
		MaxIOPressure: f.MaxIOPressure, MaxCPUPressure: f.MaxCPUPressure, MaxSuspend: f.MaxSuspend}
	if err := r.policy.Validate(); err != nil {
		return usage(err.Error(), "")
	}
	if r.cwd, err = os.Getwd(); err != nil {
		return &cmdline.Error{Code: ExitInput, Msg: fmt.Sprintf("working directory: %v", err)}
	}
	if err := r.validateRoot(); err != nil {
		return err
	}
	if !f.NoArchive {
		r.args = append(r.args, "--archive")
	}
	if f.Compress {
		r.args = append(r.args, "--compress")
	}
	if f.DryRun {
		r.args = append(r.args, "--dry-run")
	}
	if rsync.IsDaemon(f.Dest) || rsync.IsDaemon(r.srcRemote) {
		r.args = append(r.args, rsync.DaemonSocketOptions(f.RsyncArgs)...)
	}
	r.args = append(r.args, f.RsyncArgs...)
	path, err := osexec.LookPath(f.Rsync)
	if err != nil {
		return &cmdline.Error{Code: ExitNoRsync, Msg: fmt.Sprintf("rsync not found: %v", err), Hint: "install rsync 3.1 or newer (apt-get install rsync, brew install rsync), or pass --rsync PATH"}
	}
	r.rsync = path

	local := f.Dest != "" && !rsync.IsRemote(f.Dest)
	if local && !f.NoQuickCheck && f.Verify != "all" && !f.NoArchive && !f.Sizes && r.srcRemote == "" && rsync.QuickCheckSafe(f.RsyncArgs) {
		// Not on a network filesystem: there each lstat of DEST waits a round trip, and the
		// rsyncs' own checks, chunk by chunk side by side, came first. An sshfs DEST with a
		// 2 ms round trip, 1,000 changed of 20,000 (bench scenario 2, medians of 3 side by
		// side): the check read about 1,000 paths a second, and the copy took 28.0 s with
		// it, 16.9 s without (GNU parallel -N 2000: 17.4 s at -j 8, 13.5 s at -j 16). With
		// the listing below, the check still lost: the changed paths it let through came
		// in bursts, into chunks too few and too long (22 to 30 s, against 12.6 s).
		if abs, err := filepath.Abs(f.Dest); err == nil && !netDest {
			r.quick = &splitter.QuickCheck{Dest: abs, Owner: os.Geteuid() == 0}
		}
	}
	if local && netDest {
		// the rsyncs' lstats of DEST find the attributes that a listing of each directory
		// brought (splitter: "Listing a network DEST")
		if abs, err := filepath.Abs(f.Dest); err == nil {
			r.list = splitter.NewLister(abs)
		}
	}
	if (rsync.IsDaemon(f.Dest) || rsync.IsDaemon(r.srcRemote)) && !passwordGiven(f.RsyncArgs) {
		// Without a password, rsync asks for one on stdin, which holds the chunk's list:
		// an empty RSYNC_PASSWORD makes a module that wants one fail its login instead.
		r.env = append(os.Environ(), "RSYNC_PASSWORD=")
	}
	switch {
	case f.DryRun:
		r.confirm = exec.ConfirmNothing
	case !rsync.IsRemote(f.Dest) && r.srcRemote == "" && rsync.StatConfirmable(!f.NoArchive, f.RsyncArgs):
		r.confirm = exec.ConfirmStat
	default:
		r.confirm = exec.ConfirmDryRun
	}
	return nil
}

// validateRoot checks --root: a remote one is rsync's source, a local one must be a
// directory.
func (r *runner) validateRoot() error {
	f := &r.f
	switch {
	case f.Root == "":
	case rsync.IsRemote(f.Root):
		if rsync.IsRemote(f.Dest) {
			return usage(fmt.Sprintf("a remote --root %s and a remote DEST %s", f.Root, f.Dest),
				"rsync copies from one host to another only through a local side: run prsync on one of them")
		}
		r.srcRemote = trimSlashes(f.Root)
		if p, _ := rsync.EndpointPath(r.srcRemote); filepath.IsAbs(p) {
			r.root = filepath.Clean(p)
		}
	default:
		root, err := filepath.Abs(f.Root)
		if err != nil {
			return usage(fmt.Sprintf("--root: %v", err), "")
		}
		if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
			return usage(fmt.Sprintf("--root %s is not a directory", f.Root), "")
		}
		r.root = root
	}
	return nil
}

// stats reports whether prsync lstats the paths itself, for tuneRuntime.
func (r *runner) stats() bool {
	return splitter.Config{Sizes: r.f.Sizes, RemoteSrc: r.srcRemote, HardLinks: rsync.HardLinks(r.args), Quick: r.quick}.Stats()
}

// passwordGiven reports whether rsync has a daemon password: RSYNC_PASSWORD or
// --password-file.
func passwordGiven(args []string) bool {
	if _, ok := os.LookupEnv("RSYNC_PASSWORD"); ok {
		return true
	}
	for _, a := range args {
		if a == "--password-file" || strings.HasPrefix(a, "--password-file=") {
			return true
		}
	}
	return false
}
