package tests

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prsync/prsync/internal/netnstest"
	"golang.org/x/sys/unix"
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

// Run is one prsync run.
type Run struct {
	Code   int
	Stdout string
	Stderr string
	Events []map[string]any
}

// Summary returns the summary event; the test fails if it is missing or not last.
func (r *Run) Summary(t testing.TB) map[string]any {
	t.Helper()
	if len(r.Events) == 0 {
		t.Fatalf("no events; stderr:\n%s", r.Stderr)
	}
	last := r.Events[len(r.Events)-1]
	if last["type"] != "summary" {
		t.Fatalf("last event is %v, want summary", last["type"])
	}
	return last
}

// OfType returns the events of one type.
func (r *Run) OfType(typ string) []map[string]any {
	var out []map[string]any
	for _, e := range r.Events {
		if e["type"] == typ {
			out = append(out, e)
		}
	}
	return out
}

// num reads a JSON number field.
func num(m map[string]any, k string) int64 {
	v, _ := m[k].(float64)
	return int64(v)
}

// checkIdentity asserts the accounting identity of a summary, and that files == want (if want >= 0).
func checkIdentity(t testing.TB, s map[string]any, want int64) {
	t.Helper()
	sum := num(s, "files_transferred") + num(s, "files_up_to_date") + num(s, "files_vanished") +
		num(s, "files_failed") + num(s, "files_not_done")
	if sum != num(s, "files") {
		t.Errorf("accounting: transferred+up_to_date+vanished+failed+not_done = %d, files = %d (%v)", sum, num(s, "files"), s)
	}
	if want >= 0 && num(s, "files") != want {
		t.Errorf("summary files = %d, want %d", num(s, "files"), want)
	}
}

// runPrsync runs prsync with stdin, in dir (or the test's cwd when ""), to its end.
func runPrsync(t testing.TB, dir string, stdin []byte, args ...string) *Run {
	t.Helper()
	return start(t, startOpts{dir: dir, stdin: bytes.NewReader(stdin)}, args...).wait(10 * time.Minute)
}

// proc is a prsync (or a wrapper around it) started by a test, with its stdout
// parsed into events as they arrive, so the test can act on them mid-run.
type proc struct {
	t       testing.TB
	cmd     *exec.Cmd
	started time.Time

	onLine   func([]byte)
	mu       sync.Mutex
	out      bytes.Buffer
	events   []map[string]any
	parseErr error
	stderr   lockedBuf

	readDone chan struct{}
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

// startOpts say how to start prsync.
type startOpts struct {
	dir   string    // working directory ("" for the test's)
	stdin io.Reader // nil for empty
	env   []string  // added to the test's environment, which loses every PRSYNC_* variable
	wrap  []string  // run prsync under this command (runuser ...), or nil
	bin   string    // the prsync binary ("" for the race-built one)
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

// start starts prsync with args and reads its events as they arrive. It is the one way
// the integration tests run prsync. The process is killed by PID if the test ends first.
func start(t testing.TB, o startOpts, args ...string) *proc {
	t.Helper()
	in := o.stdin
	if in == nil {
		in = bytes.NewReader(nil)
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
	p := &proc{t: t, cmd: cmd, onLine: o.onLine, readDone: make(chan struct{}), waitErr: make(chan error, 1)}
	cmd.Stderr = &p.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.started = time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", argv[0], err)
	}
	go p.read(stdout)
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
		select {
		case <-p.readDone:
			p.mu.Lock()
			defer p.mu.Unlock()
			for _, e := range p.events {
				if pred(e) {
					return e
				}
			}
			return nil
		default:
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
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.parseErr != nil {
		p.t.Fatal(p.parseErr)
	}
	p.run = &Run{Code: p.cmd.ProcessState.ExitCode(), Stdout: p.out.String(), Stderr: p.stderr.String(), Events: p.events}
	// the same checks as runPrsync's parser (time stamps, type)
	parseEvents(p.t, p.out.Bytes())
	return p.run
}

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

// nul joins paths with NUL terminators.
func nul(paths ...string) []byte {
	var b []byte
	for _, p := range paths {
		b = append(b, p...)
		b = append(b, 0)
	}
	return b
}

// listTree returns every file and symlink under dir, NUL-separated, absolute (find -print0).
func listTree(t testing.TB, dir string) ([]byte, int) {
	t.Helper()
	var b []byte
	n := 0
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			b = append(append(b, p...), 0)
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b, n
}

func writeFile(t testing.TB, p string, data string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

// oddNames are file names that break naive tools.
var oddNames = []string{
	"new\nline", "-e touch PWNED", "--remove-source-files", "#hash.db", ";semi", " lead space",
	"trail space ", `back\slash`, "host:file", "bad\xffutf8", `\#012literal`, "cr\r", "plain.db",
}

// makeOddTree writes files with odd names, nested dirs and a symlink under dir.
func makeOddTree(t testing.TB, dir string) {
	t.Helper()
	for i, n := range oddNames {
		writeFile(t, filepath.Join(dir, n), fmt.Sprintf("content %d of %q\n", i, n), 0o644)
		writeFile(t, filepath.Join(dir, "nested", "deeper", n), strings.Repeat("x", i*100), 0o640)
	}
	writeFile(t, filepath.Join(dir, "exec.sh"), "#!/bin/sh\n", 0o755)
	if err := os.Symlink("plain.db", filepath.Join(dir, "link-to-plain")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/nonexistent/target", filepath.Join(dir, "nested", "dangling")); err != nil {
		t.Fatal(err)
	}
}

// sameTree fails the test unless dst holds exactly src's files: names, contents, modes, symlinks.
// destHasRootAttrs checks that DEST itself got the source root's permissions and mtime.
func destHasRootAttrs(t testing.TB, dst string, perm os.FileMode, mtime time.Time) {
	t.Helper()
	fi, err := os.Stat(dst)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != perm || !fi.ModTime().Equal(mtime) {
		t.Errorf("DEST itself: mode %v, mtime %v; want the root's, %v and %v", fi.Mode().Perm(), fi.ModTime(), perm, mtime)
	}
}

func sameTree(t testing.TB, src, dst string) {
	t.Helper()
	a, b := snapshot(t, src), snapshot(t, dst)
	for k, v := range a {
		if w, ok := b[k]; !ok {
			t.Errorf("missing in %s: %q", dst, k)
		} else if v != w {
			t.Errorf("differs: %q: %s vs %s", k, v, w)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			t.Errorf("extra in %s: %q", dst, k)
		}
	}
}

func snapshot(t testing.TB, root string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			tgt, _ := os.Readlink(p)
			m[rel] = "link:" + tgt
		case fi.IsDir():
			m[rel] = "dir"
		default:
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			m[rel] = fmt.Sprintf("file %v %x", fi.Mode().Perm(), sha256.Sum256(data)) // a digest: hex of MBs under -race takes seconds
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// procsMentioning returns the PIDs of live processes whose command line contains s,
// with their state letter (R, S, T, Z …).
func procsMentioning(s string) map[int]string {
	out := map[int]string{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cl, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(cl, []byte(s)) {
			continue
		}
		st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		if i := bytes.LastIndexByte(st, ')'); i > 0 && len(st) > i+2 {
			out[pid] = string(st[i+2])
		}
	}
	return out
}

// noProcsLeft fails unless, within a second, no process mentions marker (zombies aside).
func noProcsLeft(t testing.TB, marker string) {
	t.Helper()
	var left map[int]string
	for i := 0; i < 40; i++ {
		left = procsMentioning(marker)
		for pid, st := range left {
			if st == "Z" {
				delete(left, pid)
			}
		}
		if len(left) == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	for pid := range left {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	t.Errorf("processes left behind: %v", left)
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Daemon is an rsync daemon started by a test, on 127.0.0.1 or in a network namespace the
// test made.
type Daemon struct {
	Port int
	Dir  string // the module's path
	Addr string // 127.0.0.1, or the namespace's address
	ns   *netnstest.NS
	conf string
	cmd  *exec.Cmd
}

// PID returns the daemon's PID, which leads its process group.
func (d *Daemon) PID() int { return d.cmd.Process.Pid }

// URL returns rsync://ADDR:PORT/mod/ .
func (d *Daemon) URL() string { return fmt.Sprintf("rsync://%s:%d/mod/", d.Addr, d.Port) }

// DaemonLog is what a daemon's log file says of the sessions it served.
type DaemonLog struct {
	// Most is the most sessions the daemon served at once, by the order of its log's lines:
	// a session counts from its "rsync to MODULE" (or "rsync on") line, which its process
	// writes once it holds a slot of max connections, to its "sent … total size" line,
	// written before the process exits and frees the slot. The lines of the daemon's
	// processes reach the file in the order they were written, so Most is never more than
	// the slots the daemon had taken at once, however late any process ran.
	Most int
	// Accepted counts the sessions that held a slot, Refused those refused for max
	// connections.
	Accepted, Refused int
}

var daemonLogLine = regexp.MustCompile(`^\S+ \S+ \[(\d+)\] (.*)$`)

// Log reads the daemon's log file (see DaemonLog).
func (d *Daemon) Log(t testing.TB) DaemonLog { return d.LogSince(t, 0) }

// LogMark returns where the daemon's log file ends now, for LogSince.
func (d *Daemon) LogMark(t testing.TB) int64 {
	t.Helper()
	fi, err := os.Stat(filepath.Join(filepath.Dir(d.conf), "log"))
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// LogSince reads the daemon's log file from mark (LogMark) on: the sessions that took a
// slot after mark, refusals after mark.
func (d *Daemon) LogSince(t testing.TB, mark int64) DaemonLog {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(filepath.Dir(d.conf), "log"))
	if err != nil {
		t.Fatal(err)
	}
	var l DaemonLog
	serving := map[string]bool{}
	for _, line := range strings.Split(string(b[min(mark, int64(len(b))):]), "\n") {
		m := daemonLogLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		pid, msg := m[1], m[2]
		switch {
		case strings.HasPrefix(msg, "rsync to ") || strings.HasPrefix(msg, "rsync on "):
			serving[pid] = true
			l.Accepted++
			l.Most = max(l.Most, len(serving))
		case strings.HasPrefix(msg, "sent ") && strings.Contains(msg, " total size "):
			delete(serving, pid)
		case strings.HasPrefix(msg, "max connections ("):
			l.Refused++
		}
	}
	return l
}

// spreadFiles writes n files of size bytes under dir, the i-th named d<i%dirs>/f<i> and
// filled with the digit i%10, and returns their names in order.
func spreadFiles(t testing.TB, dir string, n, dirs, size int) []string {
	t.Helper()
	names := make([]string, 0, n)
	for i := range n {
		name := fmt.Sprintf("d%d/f%03d", i%dirs, i)
		writeFile(t, filepath.Join(dir, name), strings.Repeat(fmt.Sprint(i%10), size), 0o644)
		names = append(names, name)
	}
	return names
}

// rootModule returns the module lines with which a daemon the tests start as root writes
// as root ("uid = root", "gid = root"; rsync --daemon run by root is nobody otherwise), and
// "" when they do not run as root.
func rootModule() string {
	if isRoot() {
		return "uid = root\ngid = root\n"
	}
	return ""
}

// startDaemon starts `rsync --daemon --no-detach` on a free port with a module "mod"
// writing into dir. It is stopped by PID when the test ends.
func startDaemon(t testing.TB, dir string, port int) *Daemon {
	t.Helper()
	user := rootModule()
	return startDaemonConf(t, dir, port, user)
}

// startDaemonConf starts a daemon whose module "mod" (path dir, read only = no) has the
// extra lines of module config, such as "max connections = 2" or "uid = nobody".
func startDaemonConf(t testing.TB, dir string, port int, module string) *Daemon {
	t.Helper()
	return startDaemonIn(t, nil, dir, port, module)
}

// startDaemonIn starts, as startDaemonConf, a daemon in network namespace ns (on
// 127.0.0.1 when ns is nil).
func startDaemonIn(t testing.TB, ns *netnstest.NS, dir string, port int, module string) *Daemon {
	t.Helper()
	needRsync(t)
	if port == 0 {
		port = freePort(t)
	}
	cd := t.TempDir()
	conf := filepath.Join(cd, "rsyncd.conf")
	cfg := fmt.Sprintf("pid file = %s/pid\nlog file = %s/log\nlock file = %s/lock\nuse chroot = no\nmunge symlinks = no\n[mod]\npath = %s\nread only = no\n%s\n",
		cd, cd, cd, dir, module)
	if err := os.WriteFile(conf, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	d := &Daemon{Port: port, Dir: dir, Addr: "127.0.0.1", ns: ns, conf: conf}
	if ns != nil {
		d.Addr = ns.Addr
	}
	d.start(t)
	t.Cleanup(func() { d.Stop() })
	return d
}

func (d *Daemon) start(t testing.TB) {
	t.Helper()
	args := []string{"--daemon", "--no-detach", "--config=" + d.conf, "--address=" + d.Addr, "--port=" + strconv.Itoa(d.Port)}
	d.cmd = exec.Command("rsync", args...)
	if d.ns != nil {
		d.cmd = d.ns.Command("rsync", args...) // ip netns exec: the PID is rsync's
	}
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		c, err := net.Dial("tcp", net.JoinHostPort(d.Addr, strconv.Itoa(d.Port)))
		if err == nil {
			c.Close()
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	d.Stop()
	t.Fatalf("rsync daemon did not listen on %s:%d", d.Addr, d.Port)
}

// Stop kills the daemon's process group (the daemon and its session children), by PID,
// and waits until every process of the group is gone: a session child still exiting
// holds its module directory, and a tmpfs there could not be unmounted yet
// (TestOneBadDaemonFullDest failed its cleanup once with every CPU busy).
func (d *Daemon) Stop() {
	if d.cmd == nil || d.cmd.Process == nil {
		return
	}
	pgid := d.cmd.Process.Pid
	syscall.Kill(-pgid, syscall.SIGKILL)
	d.cmd.Wait()
	d.cmd = nil
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if syscall.Kill(-pgid, 0) == syscall.ESRCH {
			return
		}
	}
}

// fakeRsync acts as rsync for faults a real one cannot be made to produce on demand.
// PRSYNC_TEST_FAKE_RSYNC holds the behaviour; "--version" always answers like rsync.
// "version:V" answers --version as rsync V and runs the real rsync otherwise.
func fakeRsync() int {
	mode := os.Getenv("PRSYNC_TEST_FAKE_RSYNC")
	ver, isVer := strings.CutPrefix(mode, "version:")
	for _, a := range os.Args[1:] {
		if a == "--version" {
			if !isVer {
				ver = "3.5.0"
			}
			fmt.Printf("rsync  version %s  protocol version 30\n", ver)
			return 0
		}
	}
	if isVer {
		return execRealRsync()
	}
	if code, ok := strings.CutPrefix(mode, "list-only-fails:"); ok {
		// the real rsync, but a --list-only run (prsync's listing of the far side) fails
		// as when the far side is gone
		if !strings.Contains(strings.Join(os.Args[1:], "\x00")+"\x00", "--list-only\x00") {
			return execRealRsync()
		}
		fmt.Fprintln(os.Stderr, "rsync: failed to connect to 127.0.0.1 (127.0.0.1): Connection refused (111)")
		fmt.Fprintf(os.Stderr, "rsync error: error in socket IO (code %s) at clientserver.c(139) [Receiver=3.5.0]\n", code)
		n, _ := strconv.Atoi(code)
		return n
	}
	// count invocations in a file, so a test can fail the first N and pass the rest
	state := os.Getenv("PRSYNC_TEST_FAKE_STATE")
	n := 0
	if state != "" {
		b, _ := os.ReadFile(state)
		n, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		n++
		os.WriteFile(state, []byte(strconv.Itoa(n)), 0o644)
	}
	var code int
	if _, err := fmt.Sscanf(mode, "exit:%d", &code); err == nil {
		fmt.Fprintf(os.Stderr, "rsync: fake failure (code %d)\n", code)
		return code
	}
	if mode == "both-streams" {
		return fakeBothStreams()
	}
	if rest, ok := strings.CutPrefix(mode, "pathless:"); ok {
		return fakePathless(rest)
	}
	var first int
	if _, err := fmt.Sscanf(mode, "fail-first:%d:%d", &first, &code); err == nil {
		if n <= first {
			fmt.Fprintf(os.Stderr, "rsync: fake failure %d (code %d)\n", n, code)
			return code
		}
		return execRealRsync()
	}
	fmt.Fprintf(os.Stderr, "fake rsync: unknown mode %q\n", mode)
	return 2
}

// fakeBothStreams names every path of its list on both streams at once, from two
// goroutines: an out-format line on stdout (as a push sender logs a file) and a receiver's
// mkstemp failure on stderr, then exits 23, as rsync does when no file landed.
func fakeBothStreams() int {
	list, _ := io.ReadAll(os.Stdin)
	dest := strings.TrimSuffix(os.Args[len(os.Args)-1], "/")
	var names []string
	for _, e := range bytes.Split(list, []byte{0}) {
		if len(e) > 0 {
			names = append(names, string(e))
		}
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for _, n := range names {
			fmt.Fprintf(os.Stdout, ">f+++++++++|1|43|%s\n", n)
		}
	}()
	go func() {
		defer wg.Done()
		for _, n := range names {
			dir, base := filepath.Split(n)
			fmt.Fprintf(os.Stderr, "rsync: [receiver] mkstemp \"%s/%s.%s.AbCdEf\" failed: Operation not permitted (1)\n", dest, dir, base)
		}
	}()
	wg.Wait()
	fmt.Fprintln(os.Stderr, "rsync error: some files/attrs were not transferred (see previous errors) (code 23) at main.c(1394) [sender=3.5.0]")
	return 23
}

// fakePathless is the mode "pathless:CODE:P1|P2…": while one of the paths P is in its
// --files-from list (NUL-separated, on stdin), it fails at once with a line that names no
// path and exits CODE, as rsync does on a failure no message ties to a file (a sender
// that died, program diagnostics); otherwise it runs the real rsync over the same list.
// Run as the far side (--server, the pipe transport's), it is the real rsync.
// PRSYNC_TEST_FAKE_LOG, when set, gets one line per run: "fail" or "rsync", and the
// number of paths.
func fakePathless(arg string) int {
	if slices.Contains(os.Args[1:], "--server") {
		return execRealRsync() // the far side of a pipe transport: the list is the client's
	}
	c, paths, _ := strings.Cut(arg, ":")
	code, err := strconv.Atoi(c)
	if err != nil {
		fmt.Fprintf(os.Stderr, "fake rsync: bad mode pathless:%s\n", arg)
		return 2
	}
	list, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	bad := strings.Split(paths, "|")
	n, fail := 0, false
	for _, e := range bytes.Split(list, []byte{0}) {
		if len(e) > 0 {
			n++
			fail = fail || slices.Contains(bad, string(e))
		}
	}
	if log := os.Getenv("PRSYNC_TEST_FAKE_LOG"); log != "" {
		f, err := os.OpenFile(log, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			fmt.Fprintf(f, "%s %d\n", map[bool]string{true: "fail", false: "rsync"}[fail], n)
			f.Close()
		}
	}
	if fail {
		// the sender's fstat of an open file failing: rsync exits at once (sender.c)
		fmt.Fprintln(os.Stderr, "rsync: [sender] fstat failed: Input/output error (5)")
		fmt.Fprintf(os.Stderr, "rsync error: error in file IO (code %d) at sender.c(733) [sender=3.5.0]\n", code)
		return code
	}
	// the list goes back on stdin: an unlinked file, so any size fits and nothing is left
	f, err := os.CreateTemp("", "fake-rsync-list-")
	if err == nil {
		os.Remove(f.Name())
		_, err = f.Write(list)
	}
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err == nil {
		err = unix.Dup2(int(f.Fd()), 0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	return execRealRsync()
}

// execRealRsync replaces the fake with the real rsync, same arguments and stdin.
func execRealRsync() int {
	p, err := exec.LookPath("rsync")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 127
	}
	err = syscall.Exec(p, append([]string{"rsync"}, os.Args[1:]...), os.Environ())
	fmt.Fprintln(os.Stderr, err)
	return 127
}

// fakeRsyncPath returns a path to this test binary usable as --rsync, with the mode in env.
func fakeRsyncPath(t testing.TB) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return self
}

// fullSuite reports make test-full (PRSYNC_TEST_FULL=1): the randomised tests run more
// rounds, and the direct-transport pass runs every copy and fault test.
func fullSuite() bool { return os.Getenv("PRSYNC_TEST_FULL") != "" }

// oncePerSuite skips t in the suite's second pass, in the direct transport
// (PRSYNC_TEST_TRANSPORT=direct, which .ci/run adds): the transport is how a local copy's
// rsyncs run, and t copies to or from a remote side, the same in both passes.
func oncePerSuite(t testing.TB) {
	t.Helper()
	if os.Getenv("PRSYNC_TEST_TRANSPORT") == "direct" {
		t.Skip("a remote side runs the same in both transports: the suite's first pass ran this")
	}
}

func isRoot() bool { return os.Geteuid() == 0 }
