// Package cli is prsync's command line: flags, wiring, signals and exit codes.
package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	osexec "os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/mattn/go-isatty"

	"github.com/prsync/prsync/bw"
	"github.com/prsync/prsync/control"
	"github.com/prsync/prsync/exec"
	"github.com/prsync/prsync/rsync"
	"github.com/prsync/prsync/splitter"
	"github.com/prsync/prsync/throttle"
	"github.com/prsync/prsync/tune"
)

// Exit codes. They follow rsync's where the meaning matches.
const (
	ExitOK          = 0
	ExitUsage       = 1
	ExitInput       = 2
	ExitDest        = 3
	ExitInterrupted = 20
	ExitPartial     = 23
	ExitVanished    = 24
	ExitNoRsync     = 127
)

// usageError is a bad command line: exit 1.
type usageError struct{ msg, hint string }

func (e usageError) Error() string { return e.msg }

// exitError carries an exit code, a message and a hint.
type exitError struct {
	code      int
	msg, hint string
}

func (e *exitError) Error() string { return e.msg }

// exitCode picks the exit code for an error that ended the run before it started.
func exitCode(err error) int {
	var ue usageError
	var ee *exitError
	switch {
	case errors.As(err, &ue):
		return ExitUsage
	case errors.As(err, &ee):
		return ee.code
	}
	return ExitUsage
}

func hintOf(err error) string {
	var ue usageError
	var ee *exitError
	switch {
	case errors.As(err, &ue):
		return ue.hint
	case errors.As(err, &ee):
		return ee.hint
	}
	return ""
}

type kongExit struct{ code int }

// Main runs prsync with the process's arguments, streams and signals, and returns the
// exit code. The signal handlers stay until the process exits, so that a signal after the
// summary cannot change the outcome.
func Main() int {
	if PipeHelper(os.Args) {
		return exec.PipeHelper(os.Args[2:], os.Stderr) // the -e program of the pipe transport
	}
	if len(os.Args) > 1 && os.Args[1] == "ctl" {
		return control.Main(os.Args[2:], os.Stdout, os.Stderr) // live control of a running prsync
	}
	capProcs = true
	return run(notifySignals(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
}

// capProcs is set by Main: the process is prsync's own, so its Go runtime may be tuned.
var capProcs bool

// goProcs returns how many CPUs (Ps) prsync's Go code may use at once, of the n the
// runtime would use. stats says whether prsync lstats paths itself.
//
// When it does, it gets at least one P per stat worker. A worker whose lstat waits on a
// cold inode keeps its P until the runtime's monitor takes it back, tens of microseconds
// to milliseconds later, and with fewer Ps than workers the others wait for it while a
// CPU idles: on 2 CPUs, 8 Ps made a cold re-run of 200,000 files 9 % faster (pairs,
// median) than 2 Ps, and left a fresh copy's wall time and prsync's CPU as they were
// (bench/RESULTS.md). The kernel still runs the workers' threads on the CPUs there are.
//
// When it does not (--sizes, or a remote source), a quarter, at least one. Its work is then
// parsing rsync's output, a twentieth of its rsyncs' CPU, and every extra P is a thread that
// spins and polls when it finds nothing to do: on 2 CPUs one P cut prsync's own CPU by 13 %
// on a fresh copy with --sizes, wall time unchanged.
func goProcs(n int, stats bool) int {
	if stats {
		return max(n, splitter.DefaultStatWorkers)
	}
	return max(1, n/4)
}

// PipeHelper reports whether argv makes prsync the pipe transport's helper.
func PipeHelper(argv []string) bool { return len(argv) > 1 && argv[1] == exec.PipeHelperArg }

// Run runs prsync with no signal handling, for tests and embedding.
func Run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return run(nil, args, stdin, stdout, stderr)
}

func run(sig *signals, args []string, stdin io.Reader, stdout, stderr io.Writer) (code int) {
	if _, ok := os.LookupEnv("GOGC"); !ok {
		// prsync's live heap is a few MiB: at Go's default it collects every few MiB
		// allocated, a tenth of its CPU on a fresh copy; this trades a little memory for it
		debug.SetGCPercent(300)
	}
	var f Flags
	parser, err := newParser(&f, stdout, stderr, func(c int) { panic(kongExit{c}) })
	if err != nil {
		panic(err)
	}
	defer func() {
		if r := recover(); r != nil {
			ke, ok := r.(kongExit)
			if !ok {
				panic(r)
			}
			code = ke.code
			if code == 80 {
				code = ExitUsage
			}
		}
	}()
	args = verifyArgs(args)
	if _, err := parser.Parse(args); err != nil {
		if errors.Is(err, syscall.EPIPE) {
			return 0 // prsync --help | head: the reader had what it wanted
		}
		fmt.Fprintf(stderr, "prsync: error: %s\n", err)
		fmt.Fprintln(stderr, "prsync: hint: see prsync --help")
		return ExitUsage
	}
	if len(f.RsyncArgs) > 0 && !containsDashDash(args) {
		return fail(stderr, usageError{msg: fmt.Sprintf("unexpected argument %q", f.RsyncArgs[0]), hint: "put rsync options after --, as in: prsync DEST -- --bwlimit=10m"})
	}
	if f.Shard == "" && emptyShardGiven(args) {
		return fail(stderr, usageError{msg: "empty --shard (or PRSYNC_SHARD)", hint: "write --shard K/N with 0 <= K < N; an array job must set the task index"})
	}
	r := &runner{f: f, stdin: stdin, stdout: stdout, stderr: stderr, sig: sig, argv: args}
	if err := r.prepare(); err != nil {
		return fail(stderr, err)
	}
	if _, set := os.LookupEnv("GOMAXPROCS"); capProcs && !set {
		stats := splitter.Config{Sizes: f.Sizes, RemoteSrc: r.srcRemote, HardLinks: rsync.HardLinks(r.args), Quick: r.quick}.Stats()
		runtime.GOMAXPROCS(goProcs(runtime.GOMAXPROCS(0), stats))
	}
	return r.run()
}

// verifyArgs gives a bare --verify its value: --verify=all, or the mode that follows it
// (--verify transferred).
func verifyArgs(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		if a == "--verify" {
			if i+1 < len(args) && (args[i+1] == "all" || args[i+1] == "transferred" || args[i+1] == "off") {
				a = "--verify=" + args[i+1]
				i++
			} else {
				a = "--verify=all"
			}
		}
		out = append(out, a)
	}
	return out
}

// emptyShardGiven reports an explicitly empty shard spec, such as an unset array index.
func emptyShardGiven(args []string) bool {
	if v, ok := os.LookupEnv("PRSYNC_SHARD"); ok && v == "" {
		return true
	}
	for i, a := range args {
		if a == "--" {
			break
		}
		if a == "--shard=" || (a == "--shard" && i+1 < len(args) && args[i+1] == "") {
			return true
		}
	}
	return false
}

func containsDashDash(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return true
		}
	}
	return false
}

func fail(stderr io.Writer, err error) int {
	fmt.Fprintf(stderr, "prsync: error: %s\n", err)
	if h := hintOf(err); h != "" {
		fmt.Fprintf(stderr, "prsync: hint: %s\n", h)
	}
	return exitCode(err)
}

// runner is one run of prsync.
type runner struct {
	f              Flags
	stdin          io.Reader
	stdout, stderr io.Writer

	sig *signals

	rsync        string
	rsyncVersion rsync.Version
	args         []string
	root, cwd    string
	input        io.ReadCloser
	failed       *os.File
	policy       throttle.Policy
	quick        *splitter.QuickCheck
	confirm      exec.ConfirmMode
	srcRemote    string // a remote --root, as rsync's source; "" for a local one
	jobs         int    // rsyncs at once when the run starts
	maxJobs      int    // the most that -j auto or live control may set
	tuner        *tune.Tuner
	env          []string // the rsyncs' environment; nil: prsync's
	transport    exec.Transport
	helper       string // the -e value of the pipe transport
	verify       exec.VerifyMode
	argv         []string
}

// transportGiven reports whether --transport (or PRSYNC_TRANSPORT) was set explicitly.
func transportGiven(argv []string) bool {
	if _, ok := os.LookupEnv("PRSYNC_TRANSPORT"); ok {
		return true
	}
	for _, a := range argv {
		if a == "--" {
			break
		}
		if a == "--transport" || strings.HasPrefix(a, "--transport=") {
			return true
		}
	}
	return false
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

// prepare checks everything that can be checked before the first rsync starts.
func (r *runner) prepare() error {
	f := &r.f
	if err := rsync.CheckOptions(f.RsyncArgs, f.NoThrottle); err != nil {
		var oe *rsync.OptionError
		if errors.As(err, &oe) {
			return usageError{msg: oe.Error(), hint: oe.Hint}
		}
		return usageError{msg: err.Error()}
	}
	var err error
	if f.shard, f.shards, err = parseShard(f.Shard); err != nil {
		return err
	}
	if f.MaxJobs < 0 {
		return usageError{msg: fmt.Sprintf("--max-jobs %d: want at least 1 (0: 4 x CPUs, at least 32)", f.MaxJobs)}
	}
	r.maxJobs = f.MaxJobs
	if r.maxJobs == 0 {
		r.maxJobs = defaultMaxJobs()
	}
	switch {
	case f.Jobs.Auto:
		pol := tune.DefaultPolicy(runtime.NumCPU())
		pol.Max = r.maxJobs
		pol.Start = min(pol.Start, pol.Max)
		if r.tuner, err = tune.New(pol); err != nil {
			return usageError{msg: fmt.Sprintf("-j auto: %v", err)}
		}
		r.jobs = pol.Start
	case f.Jobs.N == 0:
		r.jobs = defaultJobs()
	default:
		r.jobs = f.Jobs.N
	}
	r.maxJobs = max(r.maxJobs, r.jobs)
	if f.ChunkFiles < 1 {
		return usageError{msg: fmt.Sprintf("--chunk-files %d: want at least 1", f.ChunkFiles)}
	}
	if f.Retries < 0 {
		return usageError{msg: fmt.Sprintf("--retries %d: want 0 or more", f.Retries)}
	}
	if f.RetryDelay < 0 {
		return usageError{msg: fmt.Sprintf("--retry-delay %v: want 0 or more", f.RetryDelay)}
	}
	if f.ThrottleInterval <= 0 {
		return usageError{msg: "--throttle-interval must be positive"}
	}
	if _, err := bw.ParseSchedule(orOff(f.BWLimit)); err != nil {
		return usageError{msg: err.Error(), hint: `write a rate such as 20M (a bare number is KiB/s), or a timetable such as --bwlimit "08:00,20M 19:00,200M 23:00,off"`}
	}
	if f.MaxSuspend < 0 {
		return usageError{msg: "--max-suspend must be 0 or positive"}
	}
	switch f.Verify {
	case "all":
		r.verify = exec.VerifyAll
	case "transferred":
		r.verify = exec.VerifyTransferred
	}
	if f.DeleteAfterErrors && !f.Delete {
		return usageError{msg: "--delete-after-errors without --delete", hint: "add --delete, or drop --delete-after-errors"}
	}
	r.policy = throttle.Policy{Suspend: f.SuspendThreshold, Resume: f.ResumeThreshold, MaxLoad: f.MaxLoad,
		MaxIOPressure: f.MaxIOPressure, MaxCPUPressure: f.MaxCPUPressure, MaxSuspend: f.MaxSuspend}
	if err := r.policy.Validate(); err != nil {
		return usageError{msg: err.Error()}
	}
	if r.cwd, err = os.Getwd(); err != nil {
		return &exitError{code: ExitInput, msg: fmt.Sprintf("working directory: %v", err)}
	}
	if f.Root != "" && rsync.IsRemote(f.Root) {
		if rsync.IsRemote(f.Dest) {
			return usageError{msg: fmt.Sprintf("a remote --root %s and a remote DEST %s", f.Root, f.Dest),
				hint: "rsync copies from one host to another only through a local side: run prsync on one of them"}
		}
		r.srcRemote = trimSlashes(f.Root)
		if p, _ := rsync.EndpointPath(r.srcRemote); filepath.IsAbs(p) {
			r.root = filepath.Clean(p)
		}
	} else if f.Root != "" {
		root, err := filepath.Abs(f.Root)
		if err != nil {
			return usageError{msg: fmt.Sprintf("--root: %v", err)}
		}
		if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
			return usageError{msg: fmt.Sprintf("--root %s is not a directory", f.Root)}
		}
		r.root = root
	}

	// rsync: found, runnable, and happy with the options
	path, err := osexec.LookPath(f.Rsync)
	if err != nil {
		return &exitError{code: ExitNoRsync, msg: fmt.Sprintf("rsync not found: %v", err), hint: "install rsync 3.1 or newer (apt-get install rsync, brew install rsync), or pass --rsync PATH"}
	}
	r.rsync = path
	if !f.NoArchive {
		r.args = append(r.args, "--archive")
	}
	if f.Compress {
		r.args = append(r.args, "--compress")
	}
	if f.DryRun {
		r.args = append(r.args, "--dry-run")
	}
	r.args = append(r.args, f.RsyncArgs...)
	out, err := osexec.Command(path, append(append([]string(nil), r.args...), "--version")...).CombinedOutput()
	if err != nil {
		var ee *osexec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == 1 {
			return usageError{msg: "rsync rejected the options: " + firstLine(out), hint: "check the options after --"}
		}
		return &exitError{code: ExitNoRsync, msg: fmt.Sprintf("run %s --version: %v: %s", path, err, firstLine(out))}
	}
	ver, ok := rsync.ParseVersion(out)
	if !ok {
		return &exitError{code: ExitNoRsync, msg: fmt.Sprintf("%s does not look like rsync: %s", path, firstLine(out))}
	}
	r.rsyncVersion = ver
	if !ver.AtLeast(3, 1, 0) {
		fmt.Fprintf(r.stderr, "prsync: warning: rsync %s is older than 3.1; upgrade if copies fail\n", ver)
	}

	if err := r.checkDest(ver); err != nil {
		return err
	}
	r.transport = exec.Direct
	if f.Transport == string(exec.Pipe) {
		ok, why := exec.PipeUsable(f.RsyncArgs)
		if ok && !ver.AtLeast(3, 1, 0) {
			ok, why = false, "rsync "+ver.String()+" (it needs 3.1 or later)"
		}
		if ok && rsync.IsRemote(f.Dest) {
			ok, why = false, "a remote DEST"
		}
		if ok && r.srcRemote != "" {
			ok, why = false, "a remote --root"
		}
		if ok {
			if r.helper, err = exec.PipeCommand(path); err != nil {
				ok, why = false, err.Error()
			}
		}
		switch {
		case ok:
			r.transport = exec.Pipe
		case transportGiven(r.argv):
			fmt.Fprintf(r.stderr, "prsync: warning: --transport pipe cannot be used with %s; using direct\n", why)
		}
	}
	if (rsync.IsDaemon(f.Dest) || rsync.IsDaemon(r.srcRemote)) && !passwordGiven(f.RsyncArgs) {
		// Without a password, rsync asks for one on stdin, which holds the chunk's list:
		// an empty RSYNC_PASSWORD makes a module that wants one fail its login instead.
		r.env = append(os.Environ(), "RSYNC_PASSWORD=")
	}
	if f.DryRun && r.verify != exec.VerifyOff {
		fmt.Fprintln(r.stderr, "prsync: warning: --verify checks nothing in a dry run (-n): nothing is copied")
	}
	if o := rsync.SkipOption(f.RsyncArgs); o != "" {
		// rsync exits 0 over a chunk whose paths its own rules left out: prsync fails
		// those (exec.Pool.LeftOut), which a user who meant to leave them out may not expect
		fmt.Fprintf(r.stderr, "prsync: warning: with %s after --, rsync may leave listed paths out; prsync counts those as failed unless DEST already holds them; filter the list instead (find ... ! -name PATTERN)\n", o)
	}
	if f.Delete && rsync.IsRemote(f.Dest) {
		if err := r.probeDelete(); err != nil {
			return err
		}
	}
	switch {
	case f.DryRun:
		r.confirm = exec.ConfirmNothing
	case !rsync.IsRemote(f.Dest) && r.srcRemote == "" && rsync.StatConfirmable(!f.NoArchive, f.RsyncArgs):
		r.confirm = exec.ConfirmStat
	default:
		r.confirm = exec.ConfirmDryRun
	}

	// input
	r.input = io.NopCloser(r.stdin)
	if f.From != "" && f.From != "-" {
		fh, err := os.Open(f.From)
		if err != nil {
			return &exitError{code: ExitInput, msg: fmt.Sprintf("--from: %v", err)}
		}
		r.input = fh
	}
	if f.Failed != "" {
		fh, err := os.OpenFile(f.Failed, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return usageError{msg: fmt.Sprintf("--failed: %v", err)}
		}
		r.failed = fh
	}
	return nil
}

// checkDest fails fast on a local DEST that cannot work, and creates its missing parents.
func (r *runner) checkDest(ver rsync.Version) error {
	dest := r.f.Dest
	if dest == "" {
		return usageError{msg: "DEST is empty"}
	}
	if rsync.IsRemote(dest) {
		if ver.AtLeast(3, 2, 3) {
			r.args = append(r.args, "--mkpath")
		}
		return nil
	}
	if !r.f.NoQuickCheck && r.f.Verify != "all" && !r.f.NoArchive && !r.f.Sizes && r.srcRemote == "" && rsync.QuickCheckSafe(r.f.RsyncArgs) {
		if abs, err := filepath.Abs(dest); err == nil {
			r.quick = &splitter.QuickCheck{Dest: abs, Owner: os.Geteuid() == 0}
		}
	}
	fi, err := os.Stat(dest)
	switch {
	case err == nil && !fi.IsDir():
		return &exitError{code: ExitDest, msg: fmt.Sprintf("destination %s is not a directory", dest), hint: "DEST must be a directory (it is created when missing)"}
	case err == nil:
		if syscall.Access(dest, 2|1) != nil { // W_OK|X_OK
			return &exitError{code: ExitDest, msg: fmt.Sprintf("destination %s is not writable", dest)}
		}
	case errors.Is(err, os.ErrNotExist):
		if r.f.DryRun {
			return nil
		}
		if err := os.MkdirAll(dest, 0o755); err != nil {
			return &exitError{code: ExitDest, msg: fmt.Sprintf("create destination: %v", err)}
		}
	default:
		return &exitError{code: ExitDest, msg: fmt.Sprintf("destination: %v", err)}
	}
	return nil
}

// trimSlashes drops the trailing slashes of a remote source, keeping a lone "/".
func trimSlashes(s string) string {
	for len(s) > 1 && strings.HasSuffix(s, "/") && !strings.HasSuffix(s, ":/") && !strings.HasSuffix(s, "//") {
		s = s[:len(s)-1]
	}
	return s
}

func firstLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

func (r *runner) showProgress() bool {
	switch {
	case r.f.NoProgress:
		return false
	case r.f.Progress:
		return true
	}
	if fh, ok := r.stderr.(*os.File); ok {
		return isatty.IsTerminal(fh.Fd()) || isatty.IsCygwinTerminal(fh.Fd())
	}
	return false
}

// cpuSeconds returns user+system CPU time of prsync itself or of its reaped children.
func cpuSeconds(who int) float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(who, &ru) != nil {
		return 0
	}
	return float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
}

func round1(v float64) float64 { return float64(int64(v*10+0.5)) / 10 }
func round3(v float64) float64 { return float64(int64(v*1000+0.5)) / 1000 }
