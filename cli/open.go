package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/prsync/prsync/exec"
	"github.com/prsync/prsync/internal/cmdline"
	"github.com/prsync/prsync/rsync"
)

// Open does what must be done before the first rsync starts, once Validate has passed. It
// checks everything first and creates nothing until every check has passed, so that a
// refused run leaves nothing behind (check): it asks rsync to check the options (rsync
// OPTIONS --version), checks DEST, picks the transport, opens --from, refuses an output
// that is an input or another output, or that cannot be written (checkOutputs), asks a
// remote DEST whether it takes the deletion pass, and reads the list's first record to
// refuse a list with CRLF line ends (peekCRLF). Then it creates a missing local DEST,
// opens --failed and writes the --metrics-file a first time (create), builds the
// pipeline, opens the control socket and routes the signals to the run. Its warnings are
// written as they arise. An error ends the run before it starts; either way, Close
// releases what Open opened.
func (r *runner) Open() error {
	if err := r.check(); err != nil {
		return err
	}
	if err := r.create(); err != nil {
		return err
	}
	r.p = r.newPipeline()
	r.closeControl = r.p.startControl()
	r.sig.attach(r.p.pool, func() { r.p.rep.in <- statusRequest{by: "signal"} })
	return nil
}

// check is Open's every check that can refuse the run, in order; it creates, truncates
// and writes nothing (it reads the list's first record).
func (r *runner) check() error {
	f := &r.f
	ver, err := r.probeRsync()
	if err != nil {
		return err
	}
	if err := r.checkDest(ver); err != nil {
		return err
	}
	r.pickTransport(ver)
	if f.DryRun && r.verifyMode() != exec.VerifyOff {
		cmdline.Warnf(r.stderr, "--verify checks nothing in a dry run (-n): nothing is copied")
	}
	if o := rsync.SkipOption(f.RsyncArgs); o != "" {
		// rsync exits 0 over a chunk whose paths its own rules left out: prsync fails
		// those (exec.Pool.LeftOut), which a user who meant to leave them out may not expect
		cmdline.Warnf(r.stderr, "with %s after --, rsync may leave listed paths out; prsync counts those as failed unless DEST already holds them; filter the list instead (find ... ! -name PATTERN)", o)
	}
	r.input = io.NopCloser(r.stdin)
	if f.From != "" && f.From != "-" {
		fh, err := os.Open(f.From)
		if err != nil {
			return &cmdline.Error{Code: ExitInput, Msg: fmt.Sprintf("--from: %v", err)}
		}
		r.input = fh
	} else if fh, ok := r.stdin.(*os.File); ok && isTerminal(fh) {
		// as GNU parallel does: a run that waits for a list no one types looks hung
		cmdline.Warnf(r.stderr, "reading paths from the terminal (stdin); end with Ctrl-D, or pipe a list in: find . -print0 | prsync -0 %s", shellQuote(f.Dest))
		r.input = io.NopCloser(ttyInput{f: fh})
	}
	if err := r.checkOutputs(); err != nil {
		return err
	}
	if f.Delete && rsync.IsRemote(f.Dest) {
		if err := r.probeDelete(); err != nil {
			return err
		}
	}
	return r.peekCRLF()
}

// create makes what the run writes, once check has passed: a missing local DEST, the
// --failed file and the --paths-log (emptied last, so that a step that fails leaves an
// old list as it was) and the --metrics-file's first write. When a step fails (something changed since the
// check), it removes what it created before it returns the error.
func (r *runner) create() (err error) {
	f := &r.f
	var made []string // created, in order: removed in reverse when a step fails
	defer func() {
		if err != nil {
			if r.failed != nil {
				r.failed.Close()
				r.failed = nil
			}
			if r.pathsLog != nil {
				r.pathsLog.Close()
				r.pathsLog = nil
			}
			for _, p := range slices.Backward(made) {
				os.Remove(p) // a directory only when empty: nothing was copied into it
			}
		}
	}()
	switch {
	case rsync.IsRemote(f.Dest):
	case !r.destMissing:
		r.destPaths = r.localDestPaths(f.Dest)
	case !f.DryRun:
		made = append(made, missingDirs(f.Dest)...)
		if err := os.MkdirAll(f.Dest, 0o755); err != nil {
			return &cmdline.Error{Code: ExitDest, Msg: fmt.Sprintf("create destination: %v", err)}
		}
		r.destPaths = r.localDestPaths(f.Dest)
	}
	if f.Failed != "" {
		fh, created, err := openOutput("--failed", f.Failed)
		if err != nil {
			return err
		}
		if created {
			made = append(made, f.Failed)
		}
		r.failed = fh // the reporter closes it with its list
	}
	if f.MetricsFile != "" {
		_, statErr := os.Lstat(f.MetricsFile)
		labels, _ := metricsLabels(f.MetricsLabel, f.Dest, f.shard, f.shards) // checked by Validate
		r.metrics = newMetrics(f.MetricsFile, labels, f.ThrottleInterval, r.stderr)
		if err := r.metrics.open(); err != nil {
			return usage(fmt.Sprintf("--metrics-file %s: %v", f.MetricsFile, err), "")
		}
		if errors.Is(statErr, fs.ErrNotExist) {
			made = append(made, f.MetricsFile)
		}
	}
	if f.PathsLog != "" {
		fh, created, err := openOutput("--paths-log", f.PathsLog)
		if err != nil {
			return err
		}
		if created {
			made = append(made, f.PathsLog)
		}
		r.pathsLog = fh // the reporter closes it with its record
	}
	if r.failed != nil {
		if fi, err := r.failed.Stat(); err == nil && fi.Mode().IsRegular() {
			if err := r.failed.Truncate(0); err != nil {
				return usage(fmt.Sprintf("--failed: %v", err), "")
			}
		}
	}
	if r.pathsLog != nil {
		if fi, err := r.pathsLog.Stat(); err == nil && fi.Mode().IsRegular() {
			if err := r.pathsLog.Truncate(0); err != nil {
				return usage(fmt.Sprintf("--paths-log: %v", err), "")
			}
		}
	}
	return nil
}

// missingDirs returns the directories that os.MkdirAll(dir) would create, the outermost
// first.
func missingDirs(dir string) []string {
	var missing []string
	for p := strings.TrimRight(dir, "/"); p != "" && p != "." && p != "/"; p = parentDir(p) {
		if _, err := os.Lstat(p); err == nil || !errors.Is(err, fs.ErrNotExist) {
			break
		}
		missing = append(missing, p)
	}
	slices.Reverse(missing)
	return missing
}

// openOutput opens path, which flag names, for writing, without emptying it (create does
// that last), and reports whether it created it.
func openOutput(flag, path string) (*os.File, bool, error) {
	_, statErr := os.Lstat(path)
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return nil, false, usage(fmt.Sprintf("%s: %v", flag, err), "")
	}
	return fh, errors.Is(statErr, fs.ErrNotExist), nil
}

// parentDir returns the directory part of p as os.MkdirAll takes it: the string before
// its last slash, uncleaned, so that a symlink followed by ".." resolves as the kernel
// resolves it.
func parentDir(p string) string {
	i := strings.LastIndexByte(p, '/')
	switch {
	case i < 0:
		return "."
	case i == 0:
		return "/"
	}
	return strings.TrimRight(p[:i], "/")
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

// probeRsync runs rsync with the options and --version (exec.Version), as prsync doctor
// does: rsync rejects options it does not know, and says what it is, which rsync.Judge
// judges: a fatal problem (openrsync, a known-bad release whose bug the options meet)
// refuses the run, a warning that applies to it (older than 3.1) is said.
func (r *runner) probeRsync() (rsync.Version, error) {
	v := exec.Version(context.Background(), r.rsync, r.args)
	switch {
	case v.Rejected():
		return rsync.Version{}, usage("rsync rejected the options: "+firstLine(v.Out), "check the options after --")
	case v.Err != nil:
		return rsync.Version{}, &cmdline.Error{Code: ExitNoRsync, Msg: fmt.Sprintf("run %s --version: %v: %s", r.rsync, v.Err, firstLine(v.Out))}
	}
	b, ok := rsync.ParseBanner(v.Out)
	if !ok {
		return rsync.Version{}, &cmdline.Error{Code: ExitNoRsync, Msg: fmt.Sprintf("%s does not look like rsync: %s", r.rsync, firstLine(v.Out))}
	}
	var fatal, fixes []string
	for _, p := range rsync.Judge(b, r.args) {
		switch {
		case p.Fatal:
			fatal = append(fatal, p.What)
			if !slices.Contains(fixes, p.Fix) {
				fixes = append(fixes, p.Fix)
			}
		case p.Applies:
			cmdline.Warnf(r.stderr, "%s is %s: %s; %s", r.rsync, b, p.What, p.Fix)
		}
	}
	if len(fatal) > 0 {
		return rsync.Version{}, &cmdline.Error{Code: ExitNoRsync, Msg: fmt.Sprintf("%s is %s: %s", r.rsync, b, strings.Join(fatal, "; ")),
			Hint: strings.Join(fixes, "; ") + " (prsync doctor checks the same)"}
	}
	r.rsyncVersion = b.Version
	return b.Version, nil
}

// checkDest fails fast on a local DEST that cannot work: a file, one that is not
// writable, or a missing one whose parents cannot be created. It creates nothing: a
// missing DEST is created by create, with its parents.
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
		r.destMissing = true
		if r.f.DryRun {
			return nil
		}
		if err := mkdirAllable(dest); err != nil {
			return &cmdline.Error{Code: ExitDest, Msg: fmt.Sprintf("create destination: %v", err)}
		}
	default:
		return &cmdline.Error{Code: ExitDest, Msg: fmt.Sprintf("destination: %v", err)}
	}
	return nil
}

// mkdirAllable returns the error os.MkdirAll(dir) would fail with, without creating
// anything: the deepest directory of dir that can be looked at must be a directory that
// may be written, and a file on the way fails.
func mkdirAllable(dir string) error {
	first := dir // the outermost directory MkdirAll would create
	for p := strings.TrimRight(dir, "/"); ; p = parentDir(p) {
		if p == "" {
			p = "/"
		}
		fi, err := os.Stat(p)
		switch {
		case err == nil && !fi.IsDir():
			return &fs.PathError{Op: "mkdir", Path: p, Err: syscall.ENOTDIR}
		case err == nil:
			if err := syscall.Access(p, 2|1); err != nil { // W_OK|X_OK
				return &fs.PathError{Op: "mkdir", Path: first, Err: err}
			}
			return nil
		case p == "/" || p == ".":
			return &fs.PathError{Op: "mkdir", Path: p, Err: bare(err)}
		}
		first = p
	}
}

// insideDestHint is the hint for a list that holds a local DEST's own files: leave DEST out
// of the list, with the find test that does it, separated as the list is (-print0 for -0,
// else -print). DEST is named as find prints it: ./rel when it lies below the working
// directory (find .), else its absolute path, under SRC (--root, or the directory listed)
// given absolute.
func (r *runner) insideDestHint() string {
	if len(r.destPaths) == 0 {
		return ""
	}
	print := "-print"
	if r.f.Null {
		print = "-print0"
	}
	d := r.destPaths[0]
	const what = "the list holds DEST %s and what is in it, and those paths failed; leave DEST out of the list: "
	if rel, err := filepath.Rel(r.cwd, d); err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, "../") {
		d = "./" + rel
		return fmt.Sprintf(what+"find . -path %s -prune -o %s", d, shellQuote(d), print)
	}
	if r.root != "" && strings.HasPrefix(d, r.root+"/") {
		return fmt.Sprintf(what+"find %s -path %s -prune -o %s", d, shellQuote(r.root), shellQuote(d), print)
	}
	return fmt.Sprintf(what+"find SRC -path %s -prune -o %s, SRC being the directory you listed, written absolute", d, shellQuote(d), print)
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
