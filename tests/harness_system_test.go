package tests

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prsync/prsync/internal/netnstest"
)

func isRoot() bool { return os.Geteuid() == 0 }

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

// need skips the test when what is missing (ok is false), or fails it when the suite was
// asked to install what it needs (PRSYNC_TEST_INSTALL: scripts/test.sh installs it).
func need(t testing.TB, what string, ok bool) {
	t.Helper()
	if ok {
		return
	}
	if os.Getenv("PRSYNC_TEST_INSTALL") != "" {
		t.Fatalf("%s is not installed (PRSYNC_TEST_INSTALL is set: scripts/test.sh installs it)", what)
	}
	t.Skipf("%s is not installed", what)
}

// needProg returns the path of the program prog, found on PATH, as need does: pkg is the
// Debian package that has it.
func needProg(t testing.TB, prog, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(prog)
	need(t, fmt.Sprintf("%s (Debian's %s)", prog, pkg), err == nil)
	return p
}

// ---------------------------------------------------------------- rsync daemons

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago, for a server the
// test starts next. It is taken below the kernel's ephemeral range (32768 and up), in turn
// from a random start, and never twice in one run: a port from the ephemeral range could
// be given to a client's connection before the server bound it, and the server then
// failed, while its client reached whoever held the port (TestPullSSH: "Bind to port
// 42905 on 127.0.0.1 failed: Address already in use", ssh's "Connection closed by remote
// host").
func freePort(t testing.TB) int {
	t.Helper()
	for range portSpan {
		p := portBase + int(nextPort.Add(1)%portSpan)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue // in use
		}
		l.Close()
		return p
	}
	t.Fatalf("no free port in %d-%d", portBase, portBase+portSpan-1)
	return 0
}

const (
	portBase = 20000
	portSpan = 12000 // up to 31999
)

// nextPort is the last port freePort handed out, less portBase: it starts at random, so
// that two test processes at once seldom try the same ports.
var nextPort atomic.Int64

func init() { nextPort.Store(rand.Int64N(portSpan)) }

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

// startDaemon starts `rsync --daemon --no-detach` on a free port of 127.0.0.1 with a module
// "mod" (path dir, made if missing; read only = no) and the lines of module config given,
// such as "max connections = 2" or "uid = nobody". A test run as root writes as root
// (uid = root, gid = root: an rsync daemon run by root is nobody otherwise) unless the
// lines say the uid. The daemon is stopped by PID when the test ends.
func startDaemon(t testing.TB, dir string, module ...string) *Daemon {
	t.Helper()
	return startDaemonIn(t, nil, dir, module...)
}

// startDaemonIn starts, as startDaemon, a daemon in network namespace ns (on 127.0.0.1
// when ns is nil).
func startDaemonIn(t testing.TB, ns *netnstest.NS, dir string, module ...string) *Daemon {
	t.Helper()
	needRsync(t)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	lines := strings.Join(module, "\n")
	if isRoot() && !regexp.MustCompile(`(?m)^uid\s*=`).MatchString(lines) {
		lines = "uid = root\ngid = root\n" + lines
	}
	cd := t.TempDir()
	conf := filepath.Join(cd, "rsyncd.conf")
	cfg := fmt.Sprintf("pid file = %s/pid\nlog file = %s/log\nlock file = %s/lock\nuse chroot = no\nmunge symlinks = no\n[mod]\npath = %s\nread only = no\n%s\n",
		cd, cd, cd, dir, lines)
	if err := os.WriteFile(conf, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	d := &Daemon{Port: freePort(t), Dir: dir, Addr: "127.0.0.1", ns: ns, conf: conf}
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

// SetModule rewrites the module's config, old for new (rsync --daemon reads it for each
// connection).
func (d *Daemon) SetModule(t testing.TB, old, new string) {
	t.Helper()
	conf := mustRead(t, d.conf)
	if !bytes.Contains(conf, []byte(old)) {
		t.Fatalf("the daemon's config has no %q:\n%s", old, conf)
	}
	if err := os.WriteFile(d.conf, bytes.Replace(conf, []byte(old), []byte(new), 1), 0o644); err != nil {
		t.Fatal(err)
	}
}

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
	b := mustRead(t, filepath.Join(filepath.Dir(d.conf), "log"))
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

// ---------------------------------------------------------------- processes

// procState returns the state letter of a process (R, S, T, Z …), or "" when it is gone.
func procState(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	if i := bytes.LastIndexByte(b, ')'); i > 0 && len(b) > i+2 {
		return string(b[i+2])
	}
	return ""
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
		if st := procState(pid); st != "" {
			out[pid] = st
		}
	}
	return out
}

// children returns the PIDs of pid's children.
func children(pid int) []int {
	var out []int
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, task := range tasks {
		c, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, task.Name()))
		for _, s := range strings.Fields(string(c)) {
			if n, err := strconv.Atoi(s); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// killTree kills pid and every process below it, each by its PID and its process group
// (prsync's rsyncs lead their own), and waits up to 10 s until they are gone. It stops pid
// first, so that it starts no child between the reading of its children and its death.
func killTree(t testing.TB, pid int) {
	t.Helper()
	syscall.Kill(pid, syscall.SIGSTOP)
	all := []int{pid}
	for i := 0; i < len(all); i++ {
		all = append(all, children(all[i])...)
	}
	syscall.Kill(pid, syscall.SIGKILL)
	for _, p := range all[1:] {
		syscall.Kill(-p, syscall.SIGKILL)
		syscall.Kill(p, syscall.SIGKILL)
	}
	settle(t, "the killed processes", func() bool {
		for _, p := range all {
			if st := procState(p); st != "" && st != "Z" {
				return false
			}
		}
		return true
	})
}

// settle waits up to 10 s for done, and fails the test if it never holds.
func settle(t testing.TB, what string, done func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !done(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: still there after 10 s", what)
		}
	}
}

// stoppedProcs returns how many processes mentioning marker are stopped (state T or t).
func stoppedProcs(marker string) int {
	n := 0
	for _, st := range procsMentioning(marker) {
		if st == "T" || st == "t" {
			n++
		}
	}
	return n
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

// ---------------------------------------------------------------- load

// busyLoop keeps one CPU busy in the test's own process until the func it returns is
// called.
func busyLoop() (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			for i := 0; i < 1e5; i++ {
				_ = i * i
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done); wg.Wait() }) }
}

// startBusy starts n busy loops, processes of their own run under prefix (nil: none),
// stopped by PID when the test ends, or earlier by the func it returns.
func startBusy(t testing.TB, n int, prefix []string) (stop func()) {
	t.Helper()
	var cmds []*exec.Cmd
	var once sync.Once
	stop = func() {
		once.Do(func() {
			for _, c := range cmds {
				c.Process.Kill()
				c.Wait()
			}
		})
	}
	t.Cleanup(stop)
	for range n {
		argv := append(append([]string(nil), prefix...), "sh", "-c", "while :; do :; done")
		c := exec.Command(argv[0], argv[1:]...)
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, c)
	}
	return stop
}

// startHog keeps every core busy (startBusy) until stopped.
func startHog(t testing.TB) (stop func()) {
	t.Helper()
	return startBusy(t, runtime.NumCPU(), nil)
}

// hostCPU returns the machine's CPU use in percent over d, from /proc/stat (everything but
// idle and iowait), and false where there is no /proc/stat. Tests whose point is timing
// measure the load they run under with it, before they add their own: on a machine kept
// busy by others (a shared CI runner, make test-busy) some effects cannot be seen.
func hostCPU(t testing.TB, d time.Duration) (float64, bool) {
	t.Helper()
	read := func() (busy, total float64, ok bool) {
		b, err := os.ReadFile("/proc/stat")
		if err != nil {
			return 0, 0, false
		}
		line, _, _ := bytes.Cut(b, []byte{'\n'})
		f := bytes.Fields(line)
		if len(f) < 6 || string(f[0]) != "cpu" {
			return 0, 0, false
		}
		for i, v := range f[1:] {
			if i >= 8 { // guest and guest_nice are counted in user and nice already
				break
			}
			n, err := strconv.ParseFloat(string(v), 64)
			if err != nil {
				return 0, 0, false
			}
			total += n
			if i != 3 && i != 4 { // idle, iowait
				busy += n
			}
		}
		return busy, total, true
	}
	b0, t0, ok := read()
	if !ok {
		return 0, false
	}
	time.Sleep(d)
	b1, t1, ok := read()
	if !ok || t1 <= t0 {
		return 0, false
	}
	return 100 * (b1 - b0) / (t1 - t0), true
}

// ---------------------------------------------------------------- mounts and users

// mounted is a file system a test mounted (root only); it is unmounted when the test ends.
type mounted struct {
	t    testing.TB
	dir  string
	on   bool
	lazy bool // unmounted with umount -l, as a network mount whose link died goes
}

// mountTmpfs mounts a tmpfs with the options opts ("size=2m", "size=1m,ro") at dir, made
// when missing. The test is skipped where it cannot mount (not root).
func mountTmpfs(t testing.TB, dir, opts string) *mounted {
	t.Helper()
	return mount(t, dir, "-t", "tmpfs", "-o", opts, "tmpfs", dir)
}

// mountBind binds the directory store at dir, as mountTmpfs mounts a tmpfs.
func mountBind(t testing.TB, store, dir string) *mounted {
	t.Helper()
	return mount(t, dir, "--bind", store, dir)
}

func mount(t testing.TB, dir string, args ...string) *mounted {
	t.Helper()
	if !isRoot() {
		t.Skip("mounting needs root")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", args...).CombinedOutput(); err != nil {
		t.Skipf("mount %v: %v: %s", args, err, out)
	}
	m := &mounted{t: t, dir: dir, on: true}
	t.Cleanup(m.Unmount)
	return m
}

// Remount mounts it again with opts ("remount,ro").
func (m *mounted) Remount(opts string) {
	m.t.Helper()
	if out, err := exec.Command("mount", "-o", opts, m.dir).CombinedOutput(); err != nil {
		m.t.Fatalf("mount -o %s %s: %v: %s", opts, m.dir, err, out)
	}
}

// Unmount unmounts it (lazily when lazy is set); when umount fails, the test fails and the
// mount is detached (umount -l).
func (m *mounted) Unmount() {
	m.t.Helper()
	if !m.on {
		return
	}
	m.on = false
	if !m.lazy {
		// a process that is ending may still hold it for a moment (a daemon's session child,
		// on a busy machine): tried again for 5 s, and the holders named if it stays busy
		var out []byte
		var err error
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if out, err = exec.Command("umount", m.dir).CombinedOutput(); err == nil {
				return
			}
			if !bytes.Contains(out, []byte("busy")) || time.Now().After(deadline) {
				break
			}
		}
		m.t.Errorf("umount %s: %v %s; held by: %s", m.dir, err, out, holders(m.dir))
	}
	if out, err := exec.Command("umount", "-l", m.dir).CombinedOutput(); err != nil {
		m.t.Errorf("umount -l %s: %v %s", m.dir, err, out)
	}
}

// holders describes the processes whose working directory, root or open files lie under
// dir, for a message.
func holders(dir string) string {
	var found []string
	pids, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range pids {
		links := []string{filepath.Join(p, "cwd"), filepath.Join(p, "root")}
		fds, _ := filepath.Glob(filepath.Join(p, "fd", "*"))
		for _, l := range append(links, fds...) {
			if target, err := os.Readlink(l); err == nil && (target == dir || strings.HasPrefix(target, dir+"/")) {
				cmd, _ := os.ReadFile(filepath.Join(p, "cmdline"))
				found = append(found, fmt.Sprintf("%s (%s) %s", filepath.Base(p), strings.ReplaceAll(strings.TrimRight(string(cmd), "\x00"), "\x00", " "), target))
				break
			}
		}
	}
	if len(found) == 0 {
		return "no process found"
	}
	return strings.Join(found, "; ")
}

// openUp makes dir and its parents up to the temp root traversable by other users, so an
// unprivileged rsync can reach the test's files.
func openUp(t testing.TB, dir string) {
	t.Helper()
	root := filepath.Clean(os.TempDir())
	for d := dir; d != root && d != "/" && d != "."; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// asNobody returns how to start prsync as user nobody (root only, with runuser): a copy of
// the prsync binary nobody can run, in base, which is opened up.
func asNobody(t testing.TB, base string) startOpts {
	t.Helper()
	if !isRoot() {
		t.Skip("needs root to run rsync as an unprivileged user")
	}
	ru, err := exec.LookPath("runuser")
	if err != nil {
		t.Skip("runuser not found")
	}
	p := filepath.Join(base, "prsync")
	if err := os.WriteFile(p, mustRead(t, bin(t)), 0o755); err != nil {
		t.Fatal(err)
	}
	openUp(t, base)
	return startOpts{wrap: []string{ru, "-u", "nobody", "--"}, bin: p}
}

// nobodysDir makes dir, owned by nobody.
func nobodysDir(t testing.TB, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
}
