package exec

import (
	"fmt"
	"os"
	"strings"
	"syscall"

	"github.com/prsync/prsync/rsync"
)

// Transport is how a local copy's rsync runs.
type Transport string

const (
	// Direct runs rsync in push form, SRC/ DEST/: the client is the sender, which reads
	// --files-from one byte per read(2) and logs a file before the receiver writes it.
	Direct Transport = "direct"
	// Pipe runs the same rsync in pull form over a local pipe, -e HELPER localhost:SRC/
	// DEST/, where HELPER is prsync itself, exec'ing the server rsync asked for. The
	// client forwards the list to the sender in blocks and, as the receiver, logs a file
	// after it has written it. It copies changed files whole, as rsync's local copies do.
	Pipe Transport = "pipe"
)

// PipeHelperArg is the first argument that makes prsync the -e program of the pipe
// transport: rsync runs it as `prsync --rsync-pipe-helper localhost RSYNC --server ...`.
const PipeHelperArg = "--rsync-pipe-helper"

// pipeRsyncEnv names the rsync binary the pipe helper may run; prsync sets it in the
// environment of the rsyncs it starts, which pass it on to their -e program.
const pipeRsyncEnv = "PRSYNC_PIPE_RSYNC"

// PipeHelper is prsync in its helper role. It execs the rsync server that the client
// asked for, and nothing else: args must be "localhost", then the rsync binary prsync
// named in the environment, then "--server" and "--sender". It returns only on a refusal
// (exit code 1) or a failed exec (127), with an error that carries its exit code.
func PipeHelper(args []string) error {
	want := os.Getenv(pipeRsyncEnv)
	switch {
	case want == "":
		return &HelperError{"the rsync pipe helper runs only under prsync's own rsyncs", 1}
	case len(args) < 4 || args[0] != "localhost" || args[1] != want || args[2] != "--server" || !contains(args[3:], "--sender"):
		return &HelperError{fmt.Sprintf("the rsync pipe helper runs only the rsync server for %s, not %q", want, args), 1}
	}
	err := syscall.Exec(want, args[1:], os.Environ())
	return &HelperError{fmt.Sprintf("pipe helper: exec %s: %v", want, err), 127}
}

// HelperError is why the pipe helper did not become rsync, and its exit code.
type HelperError struct {
	Msg  string
	Code int
}

func (e *HelperError) Error() string { return e.Msg }

// ExitCode is the helper's exit code: 1 for a refusal, 127 for a failed exec.
func (e *HelperError) ExitCode() int { return e.Code }

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// PipeCommand returns the -e value that runs this prsync as the pipe helper, or an error
// when the transport cannot be used: rsync splits -e on spaces and keeps quoted parts, so
// the path of prsync must be quotable, and the rsync path must be a plain word.
func PipeCommand(rsync string) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find prsync's own binary: %w", err)
	}
	if strings.ContainsAny(rsync, " \t\n'\"\\") {
		return "", fmt.Errorf("the rsync path %q holds a space or a quote", rsync)
	}
	q, err := rshQuote(self)
	if err != nil {
		return "", err
	}
	return q + " " + PipeHelperArg, nil
}

// rshQuote quotes a word for rsync's -e splitting, which knows single and double quotes
// but not backslashes.
func rshQuote(s string) (string, error) {
	switch {
	case !strings.ContainsAny(s, " \t\n'\"\\"):
		return s, nil
	case !strings.ContainsAny(s, "'\\\n"):
		return "'" + s + "'", nil
	case !strings.ContainsAny(s, "\"\\\n"):
		return `"` + s + `"`, nil
	}
	return "", fmt.Errorf("prsync's path %q cannot be quoted for rsync -e", s)
}

// pipeOptions are rsync options with which prsync keeps the direct transport: they set
// the remote shell or the server's command line themselves, or undo -s.
var pipeOptions = []string{"-e", "--rsh", "--rsync-path", "--old-args", "--no-secluded-args",
	"--no-protect-args", "--no-s", "-M", "--remote-option", "--server", "--daemon", "--sender"}

// PipeUsable reports whether the pipe transport can carry a local copy with these rsync
// options; when it cannot, it says which option is in the way.
func PipeUsable(args []string) (bool, string) {
	for _, a := range args {
		name, _, _ := strings.Cut(a, "=")
		if contains(pipeOptions, name) {
			return false, name
		}
		for _, c := range rsync.ShortFlags(a) {
			if c == 'e' || c == 'M' {
				return false, "-" + string(c)
			}
		}
	}
	return true, ""
}

// pipeArgs returns the options, the source argument and the environment of an rsync in
// the pipe transport.
func (p *Pool) pipeArgs(src string) (opts []string, srcArg string, env []string) {
	env = p.Env
	if env == nil {
		env = os.Environ()
	}
	env = append(append([]string(nil), env...), pipeRsyncEnv+"="+p.Rsync)
	// -s sends the paths through the protocol rather than the server's command line,
	// which rsync would escape for a shell the helper does not run
	opts = []string{"-e", p.Helper, "--rsync-path=" + p.Rsync, "-s"}
	// a local copy is whole-file in rsync unless the options choose; in pull form it
	// would not be (see rsync.WholeFile)
	opts = append(opts, rsync.LocalWholeFile(p.Args)...)
	if p.TrustSender {
		// Since 3.2.5 a pulling client turns every --files-from name into an implied
		// include rule and matches each name the sender lists against all of them: per
		// chunk, paths × paths wildcard matches (one rsync over 24,700 paths: 1.2 s of
		// user time, 0.15 s without). They guard against a malicious remote sender; this
		// one is the rsync server that the helper exec'd from the same binary on the
		// local SRC.
		opts = append(opts, "--trust-sender")
	}
	return opts, "localhost:" + src, env
}
