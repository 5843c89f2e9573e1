package tests

// The harness of the integration tests, in five files: harness_run_test.go starts prsync
// and reads its events as they come; harness_checks_test.go checks a finished run (its exit
// code, summary, --failed list, and DEST walked against it); harness_tree_test.go writes
// trees and lists and walks directories; harness_system_test.go starts rsync daemons and
// busy loops, mounts, and watches processes; harness_fake_test.go is the fake rsync that
// tests run in place of the real one for faults it cannot be made to produce.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The prsync binaries built for the tests: race-enabled for every test of behaviour, and
// a plain one for the tests that measure memory (the race detector multiplies it).
var (
	raceBin, plainBin build
)

type build struct {
	once sync.Once
	path string
	err  error
}

func TestMain(m *testing.M) {
	if os.Getenv("PRSYNC_TEST_FAKE_RSYNC") != "" {
		os.Exit(fakeRsync())
	}
	os.Exit(cleanupM{m}.Run())
}

// cleanupM removes the prsync builds when the tests are done.
type cleanupM struct{ m *testing.M }

func (c cleanupM) Run() int {
	code := c.m.Run()
	for _, b := range []*build{&raceBin, &plainBin} {
		if b.path != "" {
			os.RemoveAll(filepath.Dir(b.path))
		}
	}
	return code
}

// bin builds the race-enabled prsync once per test binary run.
func bin(t testing.TB) string { return raceBin.get(t, "-race") }

// plainPrsync builds prsync without the race detector, for memory measurements.
func plainPrsync(t testing.TB) string { return plainBin.get(t) }

func (b *build) get(t testing.TB, flags ...string) string {
	t.Helper()
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "prsync-bin-")
		if err != nil {
			b.err = err
			return
		}
		os.Chmod(dir, 0o755) // tests run it as an unprivileged user too
		p := filepath.Join(dir, "prsync")
		args := append(append([]string{"build"}, flags...), "-o", p, "..")
		if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
			b.err = fmt.Errorf("build prsync: %v\n%s", err, out)
			return
		}
		b.path = p
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

func needRsync(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("rsync"); err != nil {
		t.Skip("rsync is not installed")
	}
}

// startOpts say how to start prsync.
type startOpts struct {
	dir   string    // working directory ("" for the test's)
	in    []byte    // the input, when stdin is nil
	stdin io.Reader // nil for in
	env   []string  // added to the test's environment, which loses every PRSYNC_* variable
	wrap  []string  // run prsync under this command (runuser ...), or nil
	bin   string    // the prsync binary ("" for the race-built one)
	// tty puts prsync's stderr on a pseudo-terminal (the test is skipped where there is
	// none): the run's Stderr is what the terminal showed.
	tty bool
	// onLine, if set, gets every stdout line instead of the events being kept (a run of
	// millions of events).
	onLine func(line []byte)
}

// cleanEnv is the test's environment without PRSYNC_* (a variable set by whoever runs the
// tests must not leak into a test), with fast retries, plus extra. --max-suspend is 2 s, not
// 30: on a machine others keep busy every throttled run pauses, and a test that is not
// about the throttle need not wait 30 s for it (the throttle's tests give their own).
func cleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PRSYNC_") {
			env = append(env, kv)
		}
	}
	return append(append(env, "PRSYNC_RETRY_DELAY=10ms", "PRSYNC_MAX_SUSPEND=2s"), extra...)
}

// runPrsync runs prsync with stdin, in dir (or the test's cwd when ""), to its end.
func runPrsync(t testing.TB, dir string, stdin []byte, args ...string) *Run {
	t.Helper()
	return start(t, startOpts{dir: dir, in: stdin}, args...).wait(10 * time.Minute)
}

// listRun runs prsync -0 --root src --failed LIST --no-throttle ARGS DEST over rels (paths
// relative to src), to its end (listStart).
func listRun(t testing.TB, src, dest string, rels []string, args ...string) *Run {
	t.Helper()
	return listStart(t, src, dest, rels, args...).wait(5 * time.Minute)
}

// listStart starts prsync -0 --root src --failed LIST --no-throttle ARGS DEST over rels
// (paths relative to src): the args after "--" go after DEST, to rsync. The run's Failed
// reads the list.
func listStart(t testing.TB, src, dest string, rels []string, args ...string) *proc {
	t.Helper()
	failed := filepath.Join(t.TempDir(), "failed")
	cut := len(args)
	if i := slices.Index(args, "--"); i >= 0 {
		cut = i
	}
	all := append(append([]string{"-0", "--root", src, "--failed", failed, "--no-throttle"}, args[:cut]...), dest)
	return start(t, startOpts{in: nul(rels...)}, append(all, args[cut:]...)...)
}

// proc is a prsync (or a wrapper around it) started by a test, with its stdout
// parsed into events as they arrive, so the test can act on them mid-run.
type proc struct {
	t       testing.TB
	cmd     *exec.Cmd
	args    []string // prsync's
	dir     string
	started time.Time

	onLine   func([]byte)
	mu       sync.Mutex
	out      bytes.Buffer
	events   []map[string]any
	parseErr error
	stderr   lockedBuf

	readDone chan struct{}
	ttyDone  chan struct{} // the terminal's reader is done (closed at once without one)
	waitOnce sync.Once
	waitErr  chan error
	run      *Run
}

// lockedBuf is a bytes.Buffer safe for a writer goroutine and a reader.
type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// start starts prsync with args and reads its events as they arrive. It is the one way
// the integration tests run prsync. The process is killed by PID if the test ends first.
func start(t testing.TB, o startOpts, args ...string) *proc {
	t.Helper()
	in := o.stdin
	if in == nil {
		in = bytes.NewReader(o.in)
	}
	b := o.bin
	if b == "" {
		b = bin(t)
	}
	argv := append(append(append([]string(nil), o.wrap...), b), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = o.dir
	cmd.Stdin = in
	env := o.env
	if tr := os.Getenv("PRSYNC_TEST_TRANSPORT"); tr != "" {
		env = append([]string{"PRSYNC_TRANSPORT=" + tr}, env...) // the whole suite in one transport
	}
	cmd.Env = cleanEnv(env...)
	p := &proc{t: t, cmd: cmd, args: args, dir: o.dir, onLine: o.onLine, readDone: make(chan struct{}),
		ttyDone: make(chan struct{}), waitErr: make(chan error, 1)}
	cmd.Stderr = &p.stderr
	var master, slave *os.File
	if o.tty {
		var err error
		if master, slave, err = openPTY(); err != nil {
			t.Skipf("no pseudo-terminal: %v", err)
		}
		t.Cleanup(func() { master.Close() })
		cmd.Stderr = slave
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.started = time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", argv[0], err)
	}
	go p.read(stdout)
	if o.tty {
		slave.Close()
		go func() {
			defer close(p.ttyDone)
			io.Copy(&p.stderr, master) // until EIO, once prsync, the last writer, has gone
		}()
	} else {
		close(p.ttyDone)
	}
	t.Cleanup(func() {
		select {
		case <-p.readDone:
		default:
			cmd.Process.Kill() // only our own child, by PID
		}
		p.reap()
	})
	return p
}

func (p *proc) read(r io.Reader) {
	defer close(p.readDone)
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		line, err := br.ReadBytes('\n')
		if p.onLine != nil && len(line) > 0 {
			p.onLine(bytes.TrimSuffix(line, []byte("\n")))
		} else if len(bytes.TrimSpace(line)) > 0 {
			var m map[string]any
			jerr := json.Unmarshal(line, &m)
			p.mu.Lock()
			p.out.Write(line)
			if jerr != nil && p.parseErr == nil {
				p.parseErr = fmt.Errorf("stdout line is not JSON: %q: %v", line, jerr)
			} else if jerr == nil {
				p.events = append(p.events, m)
			}
			p.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// reap waits for the process once (after its stdout is drained) and keeps the result.
func (p *proc) reap() {
	p.waitOnce.Do(func() {
		go func() {
			<-p.readDone
			p.waitErr <- p.cmd.Wait()
		}()
	})
}

// pid is the started process's.
func (p *proc) pid() int { return p.cmd.Process.Pid }

// ended reports whether prsync has closed its stdout (it is exiting).
func (p *proc) ended() bool {
	select {
	case <-p.readDone:
		return true
	default:
		return false
	}
}

func (p *proc) signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		p.t.Fatalf("signal %v: %v", sig, err)
	}
}

// waitFor returns the first event that pred accepts, waiting up to timeout; nil if none
// came (or the process ended first).
func (p *proc) waitFor(timeout time.Duration, pred func(map[string]any) bool) map[string]any {
	deadline := time.Now().Add(timeout)
	for {
		p.mu.Lock()
		for _, e := range p.events {
			if pred(e) {
				p.mu.Unlock()
				return e
			}
		}
		p.mu.Unlock()
		if p.ended() {
			p.mu.Lock()
			defer p.mu.Unlock()
			for _, e := range p.events {
				if pred(e) {
					return e
				}
			}
			return nil
		}
		if time.Now().After(deadline) {
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// mustWaitFor is waitFor that fails the test on a timeout.
func (p *proc) mustWaitFor(what string, timeout time.Duration, pred func(map[string]any) bool) map[string]any {
	p.t.Helper()
	e := p.waitFor(timeout, pred)
	if e == nil {
		p.t.Fatalf("no %s event within %v; stdout:\n%s\nstderr:\n%s", what, timeout, p.stdout(), p.stderr.String())
	}
	return e
}

// waitStderr waits up to timeout for a line of p's stderr that re matches, and returns it;
// the test fails when none came.
func (p *proc) waitStderr(what string, re *regexp.Regexp, timeout time.Duration) string {
	p.t.Helper()
	for deadline := time.Now().Add(timeout); ; time.Sleep(50 * time.Millisecond) {
		for _, l := range strings.Split(p.stderr.String(), "\n") {
			if re.MatchString(l) {
				return l
			}
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("no %s on stderr within %v; stderr:\n%s", what, timeout, p.stderr.String())
		}
	}
}

// waitTemp waits until an rsync temp file exists under dir (rsync is mid-file) and
// returns it; the test fails when none came within timeout.
func (p *proc) waitTemp(dir string, timeout time.Duration) string {
	p.t.Helper()
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if tf := tempFiles(dir); len(tf) > 0 {
			return tf[0]
		}
	}
	p.t.Fatalf("no rsync temp file appeared in %s within %v; stdout:\n%s\nstderr:\n%s", dir, timeout, p.stdout(), p.stderr.String())
	return ""
}

// midFile waits for the first chunk_start event and then for an rsync temp file under dir
// (up to 10 s each): an rsync is writing a file there. It returns the chunk_start event.
func (p *proc) midFile(dir string) map[string]any {
	p.t.Helper()
	cs := p.mustWaitFor("chunk_start", 10*time.Second, is("chunk_start"))
	p.waitTemp(dir, 10*time.Second)
	return cs
}

func (p *proc) stdout() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// wait waits for the process to end (killing it after timeout) and returns the run.
func (p *proc) wait(timeout time.Duration) *Run {
	p.t.Helper()
	if p.run != nil {
		return p.run
	}
	p.reap()
	var err error
	select {
	case err = <-p.waitErr:
	case <-time.After(timeout):
		p.cmd.Process.Kill()
		<-p.waitErr
		p.t.Fatalf("prsync did not end within %v; stdout:\n%s\nstderr:\n%s", timeout, p.stdout(), p.stderr.String())
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		p.t.Fatalf("wait: %v", err)
	}
	<-p.ttyDone
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.parseErr != nil {
		p.t.Fatal(p.parseErr)
	}
	p.run = &Run{Code: p.cmd.ProcessState.ExitCode(), Stdout: p.out.String(), Stderr: p.stderr.String(), Events: p.events,
		Args: p.args, Dir: p.dir}
	// the same checks as runPrsync's parser (time stamps, type)
	parseEvents(p.t, p.out.Bytes())
	return p.run
}

// parseEvents parses JSON lines of events; each must have a type and an RFC 3339 time.
func parseEvents(t testing.TB, b []byte) []map[string]any {
	t.Helper()
	var evs []map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("stdout line is not JSON: %q: %v", line, err)
		}
		if _, ok := m["type"]; !ok {
			t.Fatalf("event without type: %s", line)
		}
		if _, err := time.Parse(time.RFC3339Nano, fmt.Sprint(m["time"])); err != nil {
			t.Fatalf("event time %v: %v", m["time"], err)
		}
		evs = append(evs, m)
	}
	return evs
}
