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
// effect: it starts nothing, creates, opens and writes nothing, and sets nothing (derive
// does, once it has passed). It returns the first problem found, which ends the run
// before it starts: the flags' own rules first (checkFlags), then what they name in the
// world (the working directory, --root, the rsync binary).
func (r *runner) Validate() error {
	if err := r.checkFlags(); err != nil {
		return err
	}
	if _, err := os.Getwd(); err != nil {
		return &cmdline.Error{Code: ExitInput, Msg: fmt.Sprintf("working directory: %v", err)}
	}
	if _, _, err := sourceRoot(&r.f); err != nil {
		return err
	}
	_, err := lookRsync(r.f.Rsync)
	return err
}

// checkFlags checks the flags and the rsync options on their own.
func (r *runner) checkFlags() error {
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
	shard, shards, err := parseShard(f.Shard)
	if err != nil {
		return err
	}
	if f.MaxJobs < 0 {
		return usage(fmt.Sprintf("--max-jobs %d: want at least 1 (0: 4 x CPUs, at least 32)", f.MaxJobs), "")
	}
	if _, err := f.jobs(); err != nil {
		return err
	}
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
	if len(f.MetricsLabel) > 0 && f.MetricsFile == "" {
		return usage("--metrics-label without --metrics-file", "add --metrics-file PATH, or drop --metrics-label")
	}
	if f.MetricsFile != "" {
		if _, err := metricsLabels(f.MetricsLabel, f.Dest, shard, shards); err != nil {
			return err
		}
	}
	if f.DeleteAfterErrors && !f.Delete {
		return usage("--delete-after-errors without --delete", "add --delete, or drop --delete-after-errors")
	}
	if err := f.policy().Validate(); err != nil {
		return usage(err.Error(), "")
	}
	return nil
}

// derive fills in what the flags decide, once Validate has passed: the shard, the jobs,
// the throttle's policy, the working directory, the source root, the options every rsync
// gets and the rsync binary. What only one part of the run needs is worked out where it
// is used: the quick check and DEST's listing (quickCheck, destLister), rsync's
// environment (rsyncEnv), the confirming pass (confirmMode), the verification
// (verifyMode) and the metrics' labels (metricsLabels).
func (r *runner) derive() {
	f := &r.f
	f.shard, f.shards, _ = parseShard(f.Shard)
	j, _ := f.jobs()
	r.jobs, r.maxJobs, r.tuner = j.jobs, j.max, j.tuner
	r.policy = f.policy()
	r.cwd, _ = os.Getwd()
	r.root, r.srcRemote, _ = sourceRoot(f)
	if r.srcRemote != "" && !flagGiven(r.argv, "chunk-files") && !rsync.TrustsSender(f.RsyncArgs) && !rsync.AnchorsApply(f.RsyncArgs) {
		// a pull's rsync matches every name the sender lists against each path of its
		// chunk: without anchors (rsync.Anchor), past 2,000 paths that check costs more
		// than a chunk's start saves
		f.ChunkFiles = min(f.ChunkFiles, PullChunkFiles)
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
	var err error
	if r.rsync, err = lookRsync(f.Rsync); err != nil {
		r.rsync = f.Rsync // prsync doctor goes on, and says so
	}
}

// jobPlan is how many rsyncs run at once: jobs when the run starts, at most max (-j auto,
// live control), and the tuner of -j auto.
type jobPlan struct {
	jobs, max int
	tuner     *tune.Tuner
}

// jobs works out -j, --max-jobs and -j auto's tuner. The default depends on DEST: on a
// network filesystem (NFS, SMB, sshfs...) more rsyncs hide more of its latency.
func (f *Flags) jobs() (jobPlan, error) {
	p := jobPlan{max: f.MaxJobs}
	if p.max == 0 {
		p.max = defaultMaxJobs()
	}
	netDest := false
	if f.Dest != "" && !rsync.IsRemote(f.Dest) {
		if abs, err := filepath.Abs(f.Dest); err == nil {
			netDest = splitter.NetworkFS(abs)
		}
	}
	switch {
	case f.Jobs.Auto:
		pol := tune.DefaultPolicy(runtime.NumCPU())
		pol.Max = p.max
		// start where a fixed -j does, so that a copy too short to search never loses to
		// the default; the search then goes from there (up first, then down)
		pol.Start = min(defaultJobs(netDest), pol.Max)
		t, err := tune.New(pol)
		if err != nil {
			return jobPlan{}, usage(fmt.Sprintf("-j auto: %v", err), "")
		}
		p.jobs, p.tuner = pol.Start, t
	case f.Jobs.N == 0:
		p.jobs = defaultJobs(netDest)
	default:
		p.jobs = f.Jobs.N
	}
	p.max = max(p.max, p.jobs)
	return p, nil
}

// policy is the throttle's policy the flags give.
func (f *Flags) policy() throttle.Policy {
	return throttle.Policy{Suspend: f.SuspendThreshold, Resume: f.ResumeThreshold, MaxLoad: f.MaxLoad,
		MaxIOPressure: f.MaxIOPressure, MaxCPUPressure: f.MaxCPUPressure, MaxSuspend: f.MaxSuspend}
}

// lookRsync finds the rsync binary (--rsync).
func lookRsync(name string) (string, error) {
	path, err := osexec.LookPath(name)
	if err != nil {
		return "", &cmdline.Error{Code: ExitNoRsync, Msg: fmt.Sprintf("rsync not found: %v", err), Hint: "install rsync 3.1 or newer (apt-get install rsync, brew install rsync), or pass --rsync PATH"}
	}
	return path, nil
}

// sourceRoot checks --root and returns the source root: a remote one is rsync's source
// (remote, with root the absolute path it names, if any), a local one must be a
// directory (root, absolute).
func sourceRoot(f *Flags) (root, remote string, err error) {
	switch {
	case f.Root == "":
	case rsync.IsRemote(f.Root):
		if rsync.IsRemote(f.Dest) {
			return "", "", usage(fmt.Sprintf("a remote --root %s and a remote DEST %s", f.Root, f.Dest),
				"rsync copies from one host to another only through a local side: run prsync on one of them")
		}
		remote = trimSlashes(f.Root)
		if p, _ := rsync.EndpointPath(remote); filepath.IsAbs(p) {
			root = filepath.Clean(p)
		}
	default:
		root, err = filepath.Abs(f.Root)
		if err != nil {
			return "", "", usage(fmt.Sprintf("--root: %v", err), "")
		}
		if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
			return "", "", usage(fmt.Sprintf("--root %s is not a directory", f.Root), "")
		}
	}
	return root, remote, nil
}

// verifyMode is the verification pass --verify asks for.
func (r *runner) verifyMode() exec.VerifyMode {
	switch r.f.Verify {
	case "all":
		return exec.VerifyAll
	case "transferred":
		return exec.VerifyTransferred
	}
	return exec.VerifyOff
}

// quickCheck is the quick check of a local DEST, or nil where there is none: asked off,
// or not safe with the options, or a DEST on a network filesystem. There each lstat of
// DEST waits a round trip, and the rsyncs' own checks, chunk by chunk side by side, came
// first. An sshfs DEST with a 2 ms round trip, 1,000 changed of 20,000 (bench scenario 2,
// medians of 3 side by side): the check read about 1,000 paths a second, and the copy
// took 28.0 s with it, 16.9 s without (GNU parallel -N 2000: 17.4 s at -j 8, 13.5 s at
// -j 16). With the listing (destLister), the check still lost: the changed paths it let
// through came in bursts, into chunks too few and too long (22 to 30 s, against 12.6 s).
func (r *runner) quickCheck() *splitter.QuickCheck {
	f := &r.f
	if f.Dest == "" || rsync.IsRemote(f.Dest) || f.NoQuickCheck || f.Verify == "all" || f.NoArchive || f.Sizes || r.srcRemote != "" || !rsync.QuickCheckSafe(f.RsyncArgs) {
		return nil
	}
	abs, err := filepath.Abs(f.Dest)
	if err != nil || splitter.NetworkFS(abs) {
		return nil
	}
	return &splitter.QuickCheck{Dest: abs, Owner: os.Geteuid() == 0}
}

// destLister lists a local DEST's directories ahead of the rsyncs when DEST is on a
// network filesystem: the rsyncs' lstats of DEST find the attributes the listing brought
// (splitter: "Listing a network DEST"). Nil otherwise.
func (r *runner) destLister() *splitter.Lister {
	f := &r.f
	if f.Dest == "" || rsync.IsRemote(f.Dest) {
		return nil
	}
	abs, err := filepath.Abs(f.Dest)
	if err != nil || !splitter.NetworkFS(abs) {
		return nil
	}
	return splitter.NewLister(abs)
}

// rsyncEnv is the environment of every rsync: nil for prsync's own, or with an empty
// RSYNC_PASSWORD for a daemon when no password is given. Without one rsync asks for it on
// stdin, which holds the chunk's list: an empty one makes a module that wants one fail
// its login instead.
func (r *runner) rsyncEnv() []string {
	if (rsync.IsDaemon(r.f.Dest) || rsync.IsDaemon(r.srcRemote)) && !passwordGiven(r.f.RsyncArgs) {
		return append(os.Environ(), "RSYNC_PASSWORD=")
	}
	return nil
}

// anchors reports whether a pull's rsyncs read their lists with the chunks' directories
// among the paths (rsync.Anchor): the client checks the sender's names (rsync 3.2.5 and
// later, without --trust-sender), and the options copy a listed directory as itself.
func (r *runner) anchors() bool {
	return r.srcRemote != "" && r.rsyncVersion.AtLeast(3, 2, 5) && rsync.AnchorsApply(r.args)
}

// confirmMode is how the paths of a chunk are proven after rsync exits non-zero.
func (r *runner) confirmMode() exec.ConfirmMode {
	f := &r.f
	switch {
	case f.DryRun:
		return exec.ConfirmNothing
	case !rsync.IsRemote(f.Dest) && r.srcRemote == "" && rsync.StatConfirmable(!f.NoArchive, f.RsyncArgs):
		return exec.ConfirmStat
	}
	return exec.ConfirmDryRun
}

// stats reports whether prsync lstats the paths itself, for tuneRuntime.
func (r *runner) stats() bool {
	return splitter.Config{Sizes: r.f.Sizes, RemoteSrc: r.srcRemote, HardLinks: rsync.HardLinks(r.args), Quick: r.quickCheck()}.Stats()
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
