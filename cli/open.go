package cli

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/prsync/prsync/exec"
	"github.com/prsync/prsync/internal/cmdline"
	"github.com/prsync/prsync/rsync"
)

// Open does what must be done before the first rsync starts, once Validate has passed,
// in this order: it asks rsync to check the options (rsync OPTIONS --version), checks DEST
// and creates a missing local one, picks the transport, asks a remote DEST whether it takes
// the deletion pass, opens --from and --failed, writes the --metrics-file a first time,
// then builds the pipeline, opens the control socket and routes the signals to the run. Its warnings are written as they arise. An
// error ends the run before it starts; either way, Close releases what Open opened.
func (r *runner) Open() error {
	f := &r.f
	ver, err := r.probeRsync()
	if err != nil {
		return err
	}
	if err := r.checkDest(ver); err != nil {
		return err
	}
	r.pickTransport(ver)
	if f.DryRun && r.verify != exec.VerifyOff {
		cmdline.Warnf(r.stderr, "--verify checks nothing in a dry run (-n): nothing is copied")
	}
	if o := rsync.SkipOption(f.RsyncArgs); o != "" {
		// rsync exits 0 over a chunk whose paths its own rules left out: prsync fails
		// those (exec.Pool.LeftOut), which a user who meant to leave them out may not expect
		cmdline.Warnf(r.stderr, "with %s after --, rsync may leave listed paths out; prsync counts those as failed unless DEST already holds them; filter the list instead (find ... ! -name PATTERN)", o)
	}
	if f.Delete && rsync.IsRemote(f.Dest) {
		if err := r.probeDelete(); err != nil {
			return err
		}
	}

	r.input = io.NopCloser(r.stdin)
	if f.From != "" && f.From != "-" {
		fh, err := os.Open(f.From)
		if err != nil {
			return &cmdline.Error{Code: ExitInput, Msg: fmt.Sprintf("--from: %v", err)}
		}
		r.input = fh
	}
	if f.Failed != "" {
		if from := r.failedIsInput(); from != "" {
			return usage(fmt.Sprintf("--failed %s is the list prsync reads (%s): it would be emptied before it is read", f.Failed, from),
				fmt.Sprintf("write the new list to another file, then move it over the old one: --failed %s.next", f.Failed))
		}
		fh, err := os.OpenFile(f.Failed, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return usage(fmt.Sprintf("--failed: %v", err), "")
		}
		r.failed = fh // the reporter closes it with its list
	}
	if f.MetricsFile != "" {
		r.metrics = newMetrics(f.MetricsFile, r.stderr)
		if err := r.metrics.open(); err != nil {
			return usage(fmt.Sprintf("--metrics-file %s: %v", f.MetricsFile, err), "")
		}
	}

	r.p = r.newPipeline()
	r.closeControl = r.p.startControl()
	r.sig.attach(r.p.pool, func() { r.p.rep.in <- statusRequest{by: "signal"} })
	return nil
}

// Close releases what Open opened, in this order: it continues every rsync group that is
// stopped (none may be left so, whatever happened), closes the control socket (no request
// may reach the reporter once it stops), stops routing the signals to the run, and closes
// the input. Run calls it once the rsyncs are done, before the reporter stops; run defers
// it for a run that fails or panics before. Later calls do nothing.
func (r *runner) Close() {
	if r.closed {
		return
	}
	r.closed = true
	if r.p != nil {
		r.p.pool.ContinueAll()
	}
	if r.closeControl != nil {
		r.closeControl()
	}
	r.sig.detach()
	if r.input != nil {
		r.input.Close()
	}
}

// probeRsync runs rsync with the options and --version: rsync rejects options it does not
// know, and says its version.
func (r *runner) probeRsync() (rsync.Version, error) {
	out, err := osexec.Command(r.rsync, append(append([]string(nil), r.args...), "--version")...).CombinedOutput()
	if err != nil {
		var ee *osexec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == 1 {
			return rsync.Version{}, usage("rsync rejected the options: "+firstLine(out), "check the options after --")
		}
		return rsync.Version{}, &cmdline.Error{Code: ExitNoRsync, Msg: fmt.Sprintf("run %s --version: %v: %s", r.rsync, err, firstLine(out))}
	}
	ver, ok := rsync.ParseVersion(out)
	if !ok {
		return rsync.Version{}, &cmdline.Error{Code: ExitNoRsync, Msg: fmt.Sprintf("%s does not look like rsync: %s", r.rsync, firstLine(out))}
	}
	r.rsyncVersion = ver
	if !ver.AtLeast(3, 1, 0) {
		cmdline.Warnf(r.stderr, "rsync %s is older than 3.1; upgrade if copies fail", ver)
	}
	return ver, nil
}

// checkDest fails fast on a local DEST that cannot work, and creates its missing parents.
func (r *runner) checkDest(ver rsync.Version) error {
	dest := r.f.Dest
	if dest == "" {
		return usage("DEST is empty", "")
	}
	if rsync.IsRemote(dest) {
		if ver.AtLeast(3, 2, 3) {
			r.args = append(r.args, "--mkpath")
		}
		return nil
	}
	fi, err := os.Stat(dest)
	switch {
	case err == nil && !fi.IsDir():
		return &cmdline.Error{Code: ExitDest, Msg: fmt.Sprintf("destination %s is not a directory", dest), Hint: "DEST must be a directory (it is created when missing)"}
	case err == nil:
		if syscall.Access(dest, 2|1) != nil { // W_OK|X_OK
			return &cmdline.Error{Code: ExitDest, Msg: fmt.Sprintf("destination %s is not writable", dest)}
		}
	case errors.Is(err, os.ErrNotExist):
		if r.f.DryRun {
			return nil
		}
		if err := os.MkdirAll(dest, 0o755); err != nil {
			return &cmdline.Error{Code: ExitDest, Msg: fmt.Sprintf("create destination: %v", err)}
		}
	default:
		return &cmdline.Error{Code: ExitDest, Msg: fmt.Sprintf("destination: %v", err)}
	}
	r.destPaths = r.localDestPaths(dest)
	return nil
}

// insideDestHint is the hint for a list that holds a local DEST's own files: leave DEST out
// of the list, with the find test that does it, named as find prints DEST's path when DEST
// lies below the working directory.
func (r *runner) insideDestHint() string {
	if len(r.destPaths) == 0 {
		return ""
	}
	d := r.destPaths[0]
	if rel, err := filepath.Rel(r.cwd, d); err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, "../") {
		d = "./" + rel
		return fmt.Sprintf("the list holds DEST %s and what is in it, and those paths failed; leave DEST out of the list: find . -path %s -prune -o -print0", d, shellQuote(d))
	}
	return fmt.Sprintf("the list holds DEST %s and what is in it, and those paths failed; leave DEST out of the list with find's -path DEST -prune, DEST as find prints it", d)
}

// shellQuote quotes s for a POSIX shell, when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./-+=:,@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// localDestPaths returns where a local DEST lies, as the splitter sees source paths:
// absolute and clean as given, with its symlinks resolved, and, when it lies below the
// source base (--root, else the working directory) once both are resolved, below the base
// as given. A source path there is DEST's own and is not copied into it. Nil for a remote
// source.
func (r *runner) localDestPaths(dest string) []string {
	if r.srcRemote != "" {
		return nil
	}
	abs, err := filepath.Abs(dest)
	if err != nil {
		return nil
	}
	paths := []string{abs}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return paths // a dry run's DEST that does not exist yet
	}
	if real != abs {
		paths = append(paths, real)
	}
	base := cmp.Or(r.root, r.cwd)
	if rb, err := filepath.EvalSymlinks(base); err == nil && rb != base {
		if rel, err := filepath.Rel(rb, real); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
			paths = append(paths, filepath.Join(base, rel))
		}
	}
	return paths
}

// failedIsInput says where prsync reads the file --failed names ("--from" or "stdin"), or
// "" when it does not: truncated for the new list, the file of a retry loop (prsync
// --failed failed.list < failed.list) would be empty before a path was read, and its
// paths lost. A list piped in through another program cannot be told apart.
func (r *runner) failedIsInput() string {
	out, err := os.Stat(r.f.Failed)
	if err != nil || !out.Mode().IsRegular() {
		return "" // a device, such as /dev/null, loses nothing
	}
	if in, ok := r.input.(*os.File); ok {
		if st, err := in.Stat(); err == nil && os.SameFile(st, out) {
			return "--from"
		}
	}
	if in, ok := r.stdin.(*os.File); ok && (r.f.From == "" || r.f.From == "-") {
		if st, err := in.Stat(); err == nil && os.SameFile(st, out) {
			return "stdin"
		}
	}
	return ""
}

// pickTransport takes --transport pipe where it can work, and says so when it cannot and
// was asked for.
func (r *runner) pickTransport(ver rsync.Version) {
	f := &r.f
	r.transport = exec.Direct
	if f.Transport != string(exec.Pipe) {
		return
	}
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
		var err error
		if r.helper, err = exec.PipeCommand(r.rsync); err != nil {
			ok, why = false, err.Error()
		}
	}
	switch {
	case ok:
		r.transport = exec.Pipe
	case transportGiven(r.argv):
		cmdline.Warnf(r.stderr, "--transport pipe cannot be used with %s; using direct", why)
	}
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
