// Package cli is prsync's command line: flags, wiring, signals and exit codes.
package cli

import (
	"errors"
	"io"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/mattn/go-isatty"

	"github.com/prsync/prsync/exec"
	"github.com/prsync/prsync/internal/cmdline"
	"github.com/prsync/prsync/rsync"
	"github.com/prsync/prsync/throttle"
	"github.com/prsync/prsync/tune"
)

// Main is prsync as a process: args are its arguments after the program's name, and stdin,
// stdout and stderr its streams. It routes the process's signals to the run, for as long as
// the process lives, so that a signal after the summary cannot change the outcome, and
// tunes its Go runtime (tuneRuntime). It returns the exit code.
//
// The signals are routed first, before the flags are parsed, the runtime tuned or the
// CPU profile opened: a SIGINT that arrives while prsync starts ends the run with code 20
// and every path not done, it does not kill prsync. Only what precedes Main (the Go
// runtime's start and the packages' initialization, tens of milliseconds) is left to the
// default handler. The pipe helper and prsync ctl keep the default handlers: the helper
// becomes rsync, which SIGTERM must end as it would end rsync, and Ctrl-C ends a ctl.
// So kong's command tree chooses the command first (chosen: a trace, which parses nothing
// into the flags and has no side effects), and only the copy's signals are routed before
// its parse.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if PipeHelper(args) {
		return cmdline.Fail(stderr, exec.PipeHelper(args[1:]), 1) // the -e program of the pipe transport
	}
	cmd := chosen(args) // kong's command tree: the copy, doctor, ctl or report
	if cmd != copyName {
		return run(nil, nil, cmd, args, stdin, stdout, stderr)
	}
	sig := notifySignals()
	defer startProfile()()
	return run(sig, tuneRuntime, cmd, args, stdin, stdout, stderr)
}

// PipeHelper reports whether args, after the program's name, make prsync the pipe
// transport's helper.
func PipeHelper(args []string) bool { return len(args) > 0 && args[0] == exec.PipeHelperArg }

// Run runs prsync with no signal handling and the Go runtime as it is, for tests and
// embedding.
func Run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return run(nil, nil, chosen(args), args, stdin, stdout, stderr)
}

// run is one life of prsync as cmd, the command kong's tree chose for args (chosen): parse
// the command line with the tree, then run the command. The copy's words are parsed in
// its own node, after its name.
func run(sig *signals, tune func(stats bool) (examined func()), cmd string, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	s := &session{stdin: stdin, stdout: stdout, stderr: stderr, sig: sig, tune: tune, started: time.Now()} // --max-duration counts from started
	var g commandLine
	parser, err := newCommandLine(&g, stdout, stderr, cmdline.Exit)
	if err != nil {
		panic(err)
	}
	args, words := commandWords(cmd, args)
	if cmd == copyName {
		s.argv = args
	}
	kctx, err := cmdline.Parse(parser, words)
	if err != nil {
		if code, ok := cmdline.Exited(err); ok {
			return code // after --help or --version
		}
		if errors.Is(err, syscall.EPIPE) {
			return 0 // prsync --help | head: the reader had what it wanted
		}
		return fail(stderr, parseError(err, args, "see prsync --help"))
	}
	if err := kctx.Run(s); err != nil {
		panic(err) // the commands' Run report their failures in s.code
	}
	return s.code
}

// life is the copy's life after its parse: Validate it, tune the process (if tune is not
// nil), Open what the run needs, Run it, and Close.
func (r *runner) life(tune func(stats bool) (examined func())) int {
	if err := r.Validate(); err != nil {
		return fail(r.stderr, err)
	}
	r.derive()
	if tune != nil {
		r.examined = tune(r.stats())
	}
	defer r.Close()
	if err := r.Open(); err != nil {
		return fail(r.stderr, err)
	}
	return r.Run()
}

// runner is one run of prsync.
type runner struct {
	f              Flags
	stdin          io.Reader
	stdout, stderr io.Writer

	sig     *signals
	started time.Time // when prsync started: --max-duration counts from then

	rsync        string
	rsyncVersion rsync.Version
	args         []string
	root, cwd    string
	destPaths    []string // a local DEST, as the splitter matches source paths against it
	destMissing  bool     // a local DEST that does not exist yet: create makes it
	input        io.ReadCloser
	failed       *os.File
	pathsLog     *os.File // --paths-log
	metrics      *metrics // --metrics-file, written once by Open
	policy       throttle.Policy
	srcRemote    string // a remote --root, as rsync's source; "" for a local one
	jobs         int    // rsyncs at once when the run starts
	maxJobs      int    // the most that -j auto or live control may set
	tuner        *tune.Tuner
	transport    exec.Transport
	helper       string // the -e value of the pipe transport
	argv         []string
	examined     func() // called once the splitter examined every path (tuneRuntime); nil: none

	// what Open opened, and Close releases
	p            *pipeline
	closeControl func()
	closed       bool
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
