package throttle

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prsync/prsync/internal/netnstest"
	"golang.org/x/sys/unix"
)

// fakeProc is a /proc of sockets: fd links and net/tcp rows, written by a test.
type fakeProc struct {
	t   *testing.T
	dir string
	tcp []string
}

func newFakeProc(t *testing.T, selfStart uint64) *fakeProc {
	p := &fakeProc{t: t, dir: t.TempDir()}
	p.mkdir("self")
	p.write("self/stat", fmt.Sprintf("1 (prsync) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 %d 0 0\n", selfStart))
	return p
}

func (p *fakeProc) mkdir(rel string) {
	if err := os.MkdirAll(filepath.Join(p.dir, rel), 0o755); err != nil {
		p.t.Fatal(err)
	}
}

func (p *fakeProc) write(rel, s string) {
	if err := os.WriteFile(filepath.Join(p.dir, rel), []byte(s), 0o644); err != nil {
		p.t.Fatal(err)
	}
}

// fd gives process pid a link fd/n to target.
func (p *fakeProc) fd(pid, n int, target string) {
	p.mkdir(fmt.Sprintf("%d/fd", pid))
	if err := os.Symlink(target, filepath.Join(p.dir, strconv.Itoa(pid), "fd", strconv.Itoa(n))); err != nil {
		p.t.Fatal(err)
	}
}

// conn adds a row to net/tcp.
func (p *fakeProc) conn(local, remote, state string, ino uint64) {
	p.tcp = append(p.tcp, fmt.Sprintf("   %d: %s %s %s 00000000:00000000 00:00000000 00000000  1000        0 %d 1 0000000000000000 20 4 30 10 -1",
		len(p.tcp), local, remote, state, ino))
	p.mkdir("net")
	p.write("net/tcp", "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"+strings.Join(p.tcp, "\n")+"\n")
}

// TestPeerBook: the processes at the far end of the rsyncs' TCP connections on this
// machine are counted with their trees; a daemon's child, with the daemon's listener's
// tree, from when the listener was first seen but for what its new child used before;
// an older server from when it was first seen. A tree's count never goes back, and stays
// once its root ends. Nothing else is counted: a process with a connection elsewhere, a
// local copy's socketpair, a connection not yet established.
func TestPeerBook(t *testing.T) {
	const (
		since    = 1000
		rsync    = 100 // our rsync, its own group
		listener = 150 // the daemon, listening
		child    = 200 // the daemon's child for our connection
		grand    = 201 // a process the child started
		stranger = 300 // a process with a connection to another host
		oldProxy = 400 // a server older than prsync at the far end of a second rsync
		rsync2   = 110
		pending  = 120 // an rsync whose connect has not completed
		second   = 250 // the daemon's child for the pending rsync, once connected
	)
	p := newFakeProc(t, since)
	p.conn("0100007F:A000", "0100007F:0369", "01", 500) // our rsync → daemon
	p.conn("0100007F:0369", "0100007F:A000", "01", 600) // the daemon's end
	p.conn("0100007F:0369", "00000000:0000", "0A", 700) // the daemon listening on 127.0.0.1
	p.conn("0A000001:B000", "0A000002:0016", "01", 800) // a stranger's connection elsewhere
	p.conn("0100007F:A001", "0100007F:1F90", "01", 510) // rsync2 → an old server
	p.conn("0100007F:1F90", "0100007F:A001", "01", 610)
	p.conn("0100007F:A002", "0100007F:0369", "02", 520) // SYN_SENT
	p.fd(rsync, 0, "pipe:[1]")
	p.fd(rsync, 3, "socket:[500]")
	p.fd(rsync, 4, "socket:[501]") // a socketpair, in no tcp table
	p.fd(rsync2, 3, "socket:[510]")
	p.fd(pending, 3, "socket:[520]")
	p.fd(listener, 3, "socket:[700]")
	p.fd(child, 0, "/dev/null")
	p.fd(child, 3, "socket:[600]")
	p.fd(stranger, 3, "socket:[800]")
	p.fd(oldProxy, 5, "socket:[610]")
	p.mkdir(strconv.Itoa(grand) + "/fd")

	ours := map[int]bool{rsync: true, rsync2: true, pending: true}
	type step struct {
		name                          string
		listener, child, grand, proxy uint64 // ticks; 0: ended
		extra                         []procEntry
		want                          uint64
	}
	procs := func(st step) []procEntry {
		ps := []procEntry{
			{pid: rsync, ppid: 1, pgrp: rsync, start: 1100, ticks: 999, rsync: true},
			{pid: rsync2, ppid: 1, pgrp: rsync2, start: 1100, ticks: 999, rsync: true},
			{pid: pending, ppid: 1, pgrp: pending, start: 1100, ticks: 999, rsync: true},
			{pid: stranger, ppid: 1, pgrp: stranger, start: 20, ticks: 7000},
		}
		add := func(e procEntry, ticks uint64) {
			if ticks > 0 {
				e.ticks = ticks
				ps = append(ps, e)
			}
		}
		add(procEntry{pid: listener, ppid: 1, pgrp: listener, start: 10, rsync: true}, st.listener)
		add(procEntry{pid: child, ppid: listener, pgrp: listener, start: 1200, rsync: true}, st.child)
		add(procEntry{pid: grand, ppid: child, pgrp: listener, start: 1250}, st.grand)
		add(procEntry{pid: oldProxy, ppid: 1, pgrp: oldProxy, start: 30}, st.proxy)
		return append(ps, st.extra...)
	}
	b := newPeerBook(p.dir)
	if b.since != since {
		t.Fatalf("since = %d, want %d", b.since, since)
	}
	for _, st := range []step{
		{name: "first seen: the child and its child from their start, the old server from now",
			listener: 5000, child: 10, grand: 5, proxy: 9000, want: 15},
		{name: "all grow", listener: 5000, child: 30, grand: 8, proxy: 9040, want: 30 + 8 + 40},
		{name: "the grandchild ended and was reaped: in the child's cutime",
			listener: 5000, child: 50 + 8, proxy: 9040, want: 50 + 8 + 40},
		{name: "a figure that goes back counts as none", listener: 5000, child: 53, proxy: 9040, want: 50 + 8 + 40},
		{name: "the child ended, and the listener reaped it", listener: 5000 + 60, proxy: 9040, want: 60 + 40},
		{name: "the listener's next child, for another client, counts too", listener: 5060, proxy: 9040,
			extra: []procEntry{{pid: 260, ppid: listener, pgrp: listener, start: 1400, ticks: 9, rsync: true}}, want: 60 + 9 + 40},
	} {
		if got := b.update(procs(st), ours); got != st.want {
			t.Errorf("%s: %d ticks, want %d", st.name, got, st.want)
		}
	}
	for id := range b.trees {
		if id.pid != listener && id.pid != oldProxy {
			t.Errorf("a tree rooted at %d; want only the listener %d and the old server %d", id.pid, listener, oldProxy)
		}
	}
	if b.far[500] != 600 || b.far[510] != 610 {
		t.Errorf("paired 500 with %d and 510 with %d; want 600 and 610", b.far[500], b.far[510])
	}
	if _, ok := b.far[520]; ok {
		t.Error("a connection not yet established was paired: it would never be asked again")
	}
	if peer := b.far[501]; peer != 0 {
		t.Errorf("a socketpair paired with %d", peer)
	}

	// the pending connect completes: its child is the same listener's, counted once
	p.tcp[6] = strings.Replace(p.tcp[6], " 02 ", " 01 ", 1)
	p.conn("0100007F:0369", "0100007F:A002", "01", 620)
	p.fd(second, 3, "socket:[620]")
	st := step{listener: 5069, proxy: 9050, extra: []procEntry{{pid: second, ppid: listener, pgrp: listener, start: 1500, ticks: 7, rsync: true}}}
	if got, want := b.update(procs(st), ours), uint64(69+7+50); got != want {
		t.Errorf("after the connect: %d ticks, want %d", got, want)
	}
	if _, ok := b.far[520]; !ok {
		t.Error("the connection, once established, was not paired")
	}

	// the servers end: their counts stay
	if got, want := b.update(procs(step{}), ours), uint64(69+7+50); got != want {
		t.Errorf("after the servers ended: %d ticks, want %d", got, want)
	}
	if len(b.trees) != 0 {
		t.Errorf("trees left: %v", b.trees)
	}
}

// TestPeerBookNoSockets: without TCP tables (a /proc without net, or no socket at all),
// nothing is counted and nothing fails.
func TestPeerBookNoSockets(t *testing.T) {
	p := newFakeProc(t, 5)
	p.fd(10, 1, "socket:[42]")
	b := newPeerBook(p.dir)
	if got := b.update([]procEntry{{pid: 10, pgrp: 10, start: 6, ticks: 3}}, map[int]bool{10: true}); got != 0 {
		t.Errorf("%d ticks, want 0", got)
	}
}

// TestPeerBookRealDaemon: a real rsync daemon serves a real rsync in its own process
// group; the book finds the daemon's child for the connection, and counts exactly the CPU
// that child has had (it started during the test, after the book). The daemon listens on
// 127.0.0.1, or in another network namespace, behind a veth pair (a container's daemon).
func TestPeerBookRealDaemon(t *testing.T) {
	rsyncBin, err := exec.LookPath("rsync")
	if err != nil {
		t.Skip("no rsync")
	}
	t.Run("this namespace", func(t *testing.T) { realDaemon(t, rsyncBin, nil) })
	t.Run("another namespace", func(t *testing.T) { realDaemon(t, rsyncBin, netnstest.New(t)) })
}

// realDaemon runs TestPeerBookRealDaemon with the daemon in ns, or on 127.0.0.1 when ns is
// nil.
func realDaemon(t *testing.T, rsyncBin string, ns *netnstest.NS) {
	dir := t.TempDir()
	for _, d := range []string{"src", "dst"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	big := bytes.Repeat([]byte("prsync peer "), 400_000) // 4.8 MB
	if err := os.WriteFile(filepath.Join(dir, "src", "big"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	conf := filepath.Join(dir, "rsyncd.conf")
	os.WriteFile(conf, []byte(fmt.Sprintf("use chroot = no\npid file = %s/pid\nuid = %d\ngid = %d\n[m]\npath = %s/dst\nread only = no\n",
		dir, os.Getuid(), os.Getgid(), dir)), 0o644)
	addr := "127.0.0.1"
	args := []string{"--daemon", "--no-detach", "--address=" + addr, "--port=" + strconv.Itoa(port), "--config=" + conf}
	daemon := exec.Command(rsyncBin, args...)
	if ns != nil {
		addr = ns.Addr
		args[2] = "--address=" + addr
		daemon = ns.Command(rsyncBin, args...)
	}
	daemon.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-daemon.Process.Pid, syscall.SIGKILL); daemon.Wait() })
	for i := 0; ; i++ {
		c, err := net.Dial("tcp", net.JoinHostPort(addr, strconv.Itoa(port)))
		if err == nil {
			c.Close()
			break
		}
		if i > 100 {
			t.Fatalf("daemon not listening: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}

	book := newPeerBook("/proc")
	client := exec.Command(rsyncBin, "-a", "--bwlimit=2m", filepath.Join(dir, "src")+"/", fmt.Sprintf("rsync://%s:%d/m/", addr, port))
	client.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := client.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- client.Wait() }()
	t.Cleanup(func() { syscall.Kill(-client.Process.Pid, syscall.SIGKILL); <-done })
	pg := client.Process.Pid

	// scan while the client runs, then until the daemon has reaped its child
	var got, childMax uint64
	scan := func() []procEntry {
		sc, err := scanProc("/proc", []int{pg})
		if err != nil {
			t.Fatal(err)
		}
		ours := map[int]bool{}
		for _, p := range sc.procs {
			if p.pgrp == pg {
				ours[p.pid] = true
			}
			if p.ppid == daemon.Process.Pid {
				childMax = max(childMax, p.ticks)
			}
		}
		got = book.update(sc.procs, ours)
		return sc.procs
	}
	deadline := time.Now().Add(60 * time.Second)
wait:
	for {
		scan()
		select {
		case err := <-done:
			done <- err // for the cleanup
			if err != nil {
				t.Fatalf("rsync: %v", err)
			}
			break wait
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("the copy took more than 60 s")
		}
	}
	var procs []procEntry
	for i := 0; i < 100; i++ {
		if procs = scan(); !hasChild(procs, daemon.Process.Pid) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(book.trees) != 1 {
		t.Fatalf("trees %v; want the daemon's, rooted at %d", book.trees, daemon.Process.Pid)
	}
	for id, tr := range book.trees {
		if id.pid != daemon.Process.Pid {
			t.Errorf("a tree rooted at %d, not at the daemon %d", id.pid, daemon.Process.Pid)
		}
		var now uint64
		for _, p := range procs {
			if p.pid == id.pid {
				now = p.ticks
			}
		}
		if got != tr.counted || now-tr.base != got {
			t.Errorf("counted %d (tree %+v); the daemon has %d ticks now, so want %d", got, tr, now, now-tr.base)
		}
	}
	if got < childMax {
		t.Errorf("counted %d ticks; the daemon's child was seen with %d", got, childMax)
	}
	t.Logf("the daemon's child was seen with up to %d ticks; counted %d", childMax, got)
}

func hasChild(procs []procEntry, pid int) bool {
	for _, p := range procs {
		if p.ppid == pid {
			return true
		}
	}
	return false
}

// TestPeerBookDaemonFirstSeen: when a daemon older than prsync is first seen through one
// connection, its other children started during the run (for rsyncs not paired yet) are
// counted whole too, its older ones (another client's, from before) only from now.
func TestPeerBookDaemonFirstSeen(t *testing.T) {
	p := newFakeProc(t, 1000)
	p.conn("0100007F:A000", "0100007F:0369", "01", 500)
	p.conn("0100007F:0369", "0100007F:A000", "01", 600)
	p.fd(100, 3, "socket:[500]")
	p.fd(200, 3, "socket:[600]")
	procs := []procEntry{
		{pid: 100, ppid: 1, pgrp: 100, start: 1100, ticks: 50, rsync: true},   // our rsync
		{pid: 150, ppid: 1, pgrp: 150, start: 10, ticks: 5000, rsync: true},   // the daemon
		{pid: 200, ppid: 150, pgrp: 150, start: 1200, ticks: 10, rsync: true}, // its child for our rsync
		{pid: 210, ppid: 150, pgrp: 150, start: 1150, ticks: 20, rsync: true}, // for another of ours
		{pid: 211, ppid: 210, pgrp: 150, start: 1160, ticks: 3, rsync: true},  // and its own child
		{pid: 220, ppid: 150, pgrp: 150, start: 500, ticks: 70, rsync: true},  // older than prsync
	}
	b := newPeerBook(p.dir)
	if got, want := b.update(procs, map[int]bool{100: true}), uint64(10+20+3); got != want {
		t.Errorf("first seen: %d ticks, want %d", got, want)
	}
	procs[5].ticks = 75
	if got, want := b.update(procs, map[int]bool{100: true}), uint64(10+20+3+5); got != want {
		t.Errorf("then: %d ticks, want %d", got, want)
	}
}

// TestPeerBookDaemonReceiver: a daemon's child for a push forks the receiver, and both
// hold the connection; their CPU is counted once, in the listener's tree (it was counted
// twice: the receiver's parent, an rsync, was taken for the root of a second tree).
func TestPeerBookDaemonReceiver(t *testing.T) {
	p := newFakeProc(t, 1000)
	p.conn("0100007F:A000", "0100007F:0369", "01", 500)
	p.conn("0100007F:0369", "0100007F:A000", "01", 600)
	p.fd(100, 3, "socket:[500]")
	p.fd(200, 0, "socket:[600]")
	p.fd(201, 0, "socket:[600]")
	procs := []procEntry{
		{pid: 100, ppid: 1, pgrp: 100, start: 1100, ticks: 50, rsync: true},   // our rsync
		{pid: 150, ppid: 1, pgrp: 150, start: 10, ticks: 5000, rsync: true},   // the daemon
		{pid: 200, ppid: 150, pgrp: 150, start: 1200, ticks: 10, rsync: true}, // its child: the generator
		{pid: 201, ppid: 200, pgrp: 150, start: 1201, ticks: 40, rsync: true}, // and the receiver
	}
	ours := map[int]bool{100: true}
	b := newPeerBook(p.dir)
	if got, want := b.update(procs, ours), uint64(10+40); got != want {
		t.Errorf("first seen: %d ticks, want %d", got, want)
	}
	for id := range b.trees {
		if id.pid != 150 {
			t.Errorf("a tree rooted at %d; want only the listener 150", id.pid)
		}
	}
	procs[2].ticks, procs[3].ticks = 15, 60
	if got, want := b.update(procs, ours), uint64(15+60); got != want {
		t.Errorf("then: %d ticks, want %d", got, want)
	}
	procs = []procEntry{procs[0], {pid: 150, ppid: 1, pgrp: 150, start: 10, ticks: 5000 + 15 + 65, rsync: true}}
	if got, want := b.update(procs, ours), uint64(80); got != want {
		t.Errorf("the session ended and was reaped: %d ticks, want %d", got, want)
	}
}

// TestPeerBookLateHolder: a connection whose far end no process holds yet (in the daemon's
// accept queue, or held by a child forked after the scan of processes) is searched again at
// the next samples, up to maxPeerSearches, and then left alone.
func TestPeerBookLateHolder(t *testing.T) {
	const (
		rsync    = 100
		listener = 150
		child    = 200
		rsync2   = 110 // its far end is never found: another user's, say
	)
	p := newFakeProc(t, 1000)
	p.conn("0100007F:A000", "0100007F:0369", "01", 500)
	p.conn("0100007F:0369", "0100007F:A000", "01", 600)
	p.conn("0100007F:A001", "0100007F:0369", "01", 510)
	p.conn("0100007F:0369", "0100007F:A001", "01", 610)
	p.fd(rsync, 3, "socket:[500]")
	p.fd(rsync2, 3, "socket:[510]")
	p.mkdir(strconv.Itoa(listener) + "/fd")
	ours := map[int]bool{rsync: true, rsync2: true}
	procs := []procEntry{
		{pid: rsync, ppid: 1, pgrp: rsync, start: 1100, ticks: 5, rsync: true},
		{pid: rsync2, ppid: 1, pgrp: rsync2, start: 1100, ticks: 5, rsync: true},
		{pid: listener, ppid: 1, pgrp: listener, start: 10, ticks: 4000, rsync: true},
	}
	b := newPeerBook(p.dir)
	if got := b.update(procs, ours); got != 0 || len(b.trees) != 0 {
		t.Fatalf("no holder yet: %d ticks, trees %v", got, b.trees)
	}
	// the child holds the far end now
	p.fd(child, 3, "socket:[600]")
	procs = append(procs, procEntry{pid: child, ppid: listener, pgrp: listener, start: 1200, ticks: 12, rsync: true})
	if got := b.update(procs, ours); got != 12 {
		t.Errorf("once the child holds it: %d ticks, want its 12", got)
	}
	if len(b.trees) != 1 {
		t.Errorf("trees %v, want the listener's", b.trees)
	}
	for range 2 * maxPeerSearches {
		b.update(procs, ours)
	}
	if n := b.misses[610]; n != maxPeerSearches {
		t.Errorf("the far end no one holds was searched %d times, want %d", n, maxPeerSearches)
	}
}

// TestPeerBookNotAccepted: a connection that the daemon's listener has not accepted yet
// (its end is established, in the listen queue, and has no inode) is not taken for one
// whose far end is elsewhere: it is paired at a later sample, once accepted, and the
// daemon's tree is counted. Taken for elsewhere before, it was never looked up again, and
// a busy machine lost the daemon's CPU now and then (TestPeerBookRealDaemon).
func TestPeerBookNotAccepted(t *testing.T) {
	const (
		rsync    = 100
		listener = 150
		child    = 200
	)
	p := newFakeProc(t, 1000)
	p.conn("0100007F:A000", "0100007F:0369", "01", 500)
	p.conn("0100007F:0369", "0100007F:A000", "01", 0) // in the listener's queue
	p.fd(rsync, 3, "socket:[500]")
	ours := map[int]bool{rsync: true}
	procs := []procEntry{
		{pid: rsync, ppid: 1, pgrp: rsync, start: 1100, ticks: 5, rsync: true},
		{pid: listener, ppid: 1, pgrp: listener, start: 10, ticks: 4000, rsync: true},
	}
	b := newPeerBook(p.dir)
	if got := b.update(procs, ours); got != 0 || len(b.trees) != 0 {
		t.Fatalf("not accepted yet: %d ticks, trees %v", got, b.trees)
	}
	if peer, known := b.far[500]; known {
		t.Fatalf("the socket's far end taken as known (%d) before the daemon accepted it", peer)
	}
	// accepted: the daemon's child holds its end
	p.tcp[1] = strings.Replace(p.tcp[1], " 0 1 0000", " 600 1 0000", 1)
	p.write("net/tcp", "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"+strings.Join(p.tcp, "\n")+"\n")
	p.fd(child, 3, "socket:[600]")
	procs = append(procs, procEntry{pid: child, ppid: listener, pgrp: listener, start: 1200, ticks: 12, rsync: true})
	if got := b.update(procs, ours); got != 12 || len(b.trees) != 1 {
		t.Errorf("once accepted: %d ticks, trees %v; want the listener's, 12", got, b.trees)
	}
}

// TestPeerBookFromStart: a daemon running when prsync starts is counted from prsync's first
// scan (before its first rsync), so children it forked for the copy and reaped before the
// tree was first seen (their ticks now in the listener's cutime) count as the copy's.
func TestPeerBookFromStart(t *testing.T) {
	const (
		rsync    = 100
		listener = 150
		child    = 200
	)
	for _, tc := range []struct {
		name     string
		atStart  bool // the first scan is made before any rsync of ours runs
		want     uint64
		wantNote string
	}{
		{"first scan before the first rsync", true, 100 + 12, "the reaped children's 100 and the child's 12"},
		{"first scan with rsyncs running", false, 12, "only the child's 12: no snapshot taken"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newFakeProc(t, 1000)
			p.conn("0100007F:A000", "0100007F:0369", "01", 500)
			p.conn("0100007F:0369", "0100007F:A000", "01", 600)
			p.fd(rsync, 3, "socket:[500]")
			p.mkdir(strconv.Itoa(listener) + "/fd")
			ours := map[int]bool{rsync: true}
			b := newPeerBook(p.dir)
			if tc.atStart {
				procs := []procEntry{{pid: listener, ppid: 1, pgrp: listener, start: 10, ticks: 4000, rsync: true}}
				if got := b.update(procs, map[int]bool{}); got != 0 {
					t.Fatalf("before any rsync: %d ticks", got)
				}
			} else {
				procs := []procEntry{
					{pid: rsync, ppid: 1, pgrp: rsync, start: 1100, ticks: 5, rsync: true},
					{pid: listener, ppid: 1, pgrp: listener, start: 10, ticks: 4000, rsync: true},
				}
				b.update(procs, ours)
			}
			// children for the copy came and went (reaped: +100 in the listener's
			// cutime); now one holds our rsync's far end
			p.fd(child, 3, "socket:[600]")
			procs := []procEntry{
				{pid: rsync, ppid: 1, pgrp: rsync, start: 1100, ticks: 5, rsync: true},
				{pid: listener, ppid: 1, pgrp: listener, start: 10, ticks: 4100, rsync: true},
				{pid: child, ppid: listener, pgrp: listener, start: 1200, ticks: 12, rsync: true},
			}
			if got := b.update(procs, ours); got != tc.want {
				t.Errorf("%d ticks, want %d (%s)", got, tc.want, tc.wantNote)
			}
		})
	}
}

// TestPeerBookFeeder: the processes that write prsync's stdin, a pipe, count as its own from
// when first seen (searched again while none is found); a process with another pipe does not.
func TestPeerBookFeeder(t *testing.T) {
	const (
		find  = 300 // writes prsync's stdin
		other = 310 // writes another pipe
	)
	for _, tc := range []struct {
		name  string
		stdin string // prsync's fd 0
		late  bool   // the feeder is not there at the first scan
		want  uint64
	}{
		{"a pipe", "pipe:[77]", false, 30},
		{"a pipe, its writer seen late", "pipe:[77]", true, 20},
		{"a file", "/home/u/list", false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newFakeProc(t, 1000)
			p.mkdir("self/fd")
			if err := os.Symlink(tc.stdin, filepath.Join(p.dir, "self", "fd", "0")); err != nil {
				t.Fatal(err)
			}
			p.fd(other, 1, "pipe:[78]")
			procs := []procEntry{{pid: other, ppid: 1, pgrp: other, start: 990, ticks: 500}}
			if !tc.late {
				p.fd(find, 1, tc.stdin)
				procs = append(procs, procEntry{pid: find, ppid: 1, pgrp: find, start: 999, ticks: 50})
			}
			b := newPeerBook(p.dir)
			if got := b.update(procs, map[int]bool{}); got != 0 {
				t.Fatalf("first scan: %d ticks, want 0", got)
			}
			if tc.late {
				p.fd(find, 1, tc.stdin)
				procs = append(procs, procEntry{pid: find, ppid: 1, pgrp: find, start: 1010, ticks: 60})
				b.update(procs, map[int]bool{})
			}
			procs[0].ticks = 900 // the other pipe's writer: other load
			procs[len(procs)-1].ticks += 30
			if tc.late {
				procs[len(procs)-1].ticks -= 10
			}
			if got := b.update(procs, map[int]bool{}); got != tc.want {
				t.Errorf("%d ticks, want %d", got, tc.want)
			}
		})
	}
}

// TestPeerBookFeederReadEnd: a process that holds the read end of prsync's stdin (the
// program that made the pipe and started prsync on it) is no producer of the list; its
// writer, and one whose fdinfo cannot be read, are.
func TestPeerBookFeederReadEnd(t *testing.T) {
	const (
		maker  = 300 // made the pipe, holds its read end: flags 0 (O_RDONLY)
		writer = 310 // holds the write end: O_WRONLY
		rw     = 320 // opened it read-write (a fifo): counts
		blind  = 330 // no fdinfo: counts, as before
	)
	p := newFakeProc(t, 1000)
	p.mkdir("self/fd")
	if err := os.Symlink("pipe:[77]", filepath.Join(p.dir, "self", "fd", "0")); err != nil {
		t.Fatal(err)
	}
	var procs []procEntry
	for _, f := range []struct {
		pid   int
		flags string
	}{{maker, "0100000"}, {writer, "01"}, {rw, "0100002"}, {blind, ""}} {
		p.fd(f.pid, 4, "pipe:[77]")
		if f.flags != "" {
			p.mkdir(fmt.Sprintf("%d/fdinfo", f.pid))
			p.write(fmt.Sprintf("%d/fdinfo/4", f.pid), "pos:\t0\nflags:\t"+f.flags+"\nmnt_id:\t16\nino:\t77\n")
		}
		procs = append(procs, procEntry{pid: f.pid, ppid: 1, pgrp: f.pid, start: 999, ticks: 100})
	}
	b := newPeerBook(p.dir)
	b.update(procs, map[int]bool{})
	for i := range procs {
		procs[i].ticks += uint64(1 + i) // 1, 2, 3, 4
	}
	if got, want := b.update(procs, map[int]bool{}), uint64(2+3+4); got != want {
		t.Errorf("%d ticks, want %d: the writer's, the read-write one's and the unreadable one's", got, want)
	}
	for id := range b.trees {
		if id.pid == maker {
			t.Error("the holder of the read end is counted as a producer")
		}
	}
}

// TestPeerBookSocketKind: on the real /proc, an rsync that holds only a socketpair (a
// local copy's) is known to have no peer without a read of /proc/net/tcp, which costs
// milliseconds each time; one that holds a TCP connection to this machine is paired
// with its far end from one read.
func TestPeerBookSocketKind(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	tests := []struct {
		name      string
		open      func(t *testing.T) *os.File // the fd the child holds
		wantReads int
		wantPeer  bool
	}{
		{"socketpair", func(t *testing.T) *os.File {
			fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { syscall.Close(fds[1]) })
			return os.NewFile(uintptr(fds[0]), "pair")
		}, 0, false},
		{"tcp", func(t *testing.T) *os.File {
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			s, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close(); s.Close() })
			f, err := c.(*net.TCPConn).File()
			if err != nil {
				t.Fatal(err)
			}
			return f
		}, 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := tt.open(t)
			cmd := exec.Command(sleep, "30")
			cmd.ExtraFiles = []*os.File{f}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			f.Close()
			t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
			pid := cmd.Process.Pid
			b := newPeerBook("/proc")
			socks := b.sockets(pid)
			// until the exec, the child holds the fds the fork copied too
			for end := time.Now().Add(10 * time.Second); len(socks) != 1 && time.Now().Before(end); socks = b.sockets(pid) {
				time.Sleep(5 * time.Millisecond)
			}
			if len(socks) != 1 {
				t.Fatalf("child holds %d sockets, want 1: %v", len(socks), b.fdLinks(pid))
			}
			b.update([]procEntry{{pid: pid, ppid: os.Getpid(), pgrp: pid}}, map[int]bool{pid: true})
			peer, known := b.far[socks[0].ino]
			if !known || (peer != 0) != tt.wantPeer {
				t.Errorf("far end %d (known %v), want a peer: %v", peer, known, tt.wantPeer)
			}
			if b.tcpReads != tt.wantReads {
				t.Errorf("%d reads of /proc/net/tcp, want %d", b.tcpReads, tt.wantReads)
			}
		})
	}
}

// TestPeerBookListener: a daemon on this machine is found by the socket it listens on, at
// the address an rsync of ours connected to, when the connection's own far end has no
// holder yet (not accepted, or held by a child forked after the scan of processes): its
// listener's tree is counted, from prsync's first scan. A copy too short for a second
// sample lost the daemon's CPU in 2 runs of 10 (TestDaemonOwnCPU). The listener is
// counted only when it is an rsync (an sshd's is every login's), and only for a
// connection whose far end is here: a listener at the same port on this machine is not
// the one a connection to another machine reached.
func TestPeerBookListener(t *testing.T) {
	const (
		rsync    = 100
		listener = 150
	)
	for _, tc := range []struct {
		name    string
		listen  string // the listening socket's address
		isRsync bool   // the listener is an rsync
		farHere bool   // the connection's far end is in this machine's table (in the queue)
		want    uint64
	}{
		{"loopback", "0100007F:0369", true, true, 100},
		{"wildcard", "00000000:0369", true, true, 100},
		{"wildcard v6", strings.Repeat("0", 32) + ":0369", true, true, 100},
		{"another port", "0100007F:036A", true, true, 0},
		{"an sshd", "0100007F:0369", false, true, 0},
		{"far end elsewhere", "00000000:0369", true, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newFakeProc(t, 1000)
			p.conn(tc.listen, "00000000:0000", "0A", 700)
			p.conn("0100007F:A000", "0100007F:0369", "01", 500)
			if tc.farHere {
				p.conn("0100007F:0369", "0100007F:A000", "01", 0) // in the listener's queue
			}
			p.fd(rsync, 3, "socket:[500]")
			p.fd(listener, 4, "socket:[700]")
			ours := map[int]bool{rsync: true}
			b := newPeerBook(p.dir)
			b.update([]procEntry{{pid: listener, ppid: 1, pgrp: listener, start: 10, ticks: 4000, rsync: tc.isRsync}}, map[int]bool{})
			// the listener's children served the copy and were reaped: +100 in its cutime
			procs := []procEntry{
				{pid: rsync, ppid: 1, pgrp: rsync, start: 1100, ticks: 5, rsync: true},
				{pid: listener, ppid: 1, pgrp: listener, start: 10, ticks: 4100, rsync: tc.isRsync},
			}
			if got := b.update(procs, ours); got != tc.want {
				t.Errorf("%d ticks, want %d", got, tc.want)
			}
		})
	}
}

// TestPeerBookDaemonPort: the rsync daemon listening at a port CountDaemon gave is counted
// from prsync's first scan, with the children it reaped, though no rsync of ours runs at
// any scan (a copy of short chunks); a listener at another port, or one that is no rsync,
// is not.
func TestPeerBookDaemonPort(t *testing.T) {
	const listener = 150
	for _, tc := range []struct {
		name    string
		listen  string
		isRsync bool
		want    uint64
	}{
		{"the daemon", "0100007F:0369", true, 100},
		{"on every address", "00000000:0369", true, 100},
		{"another port", "0100007F:036A", true, 0},
		{"no rsync", "0100007F:0369", false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newFakeProc(t, 1000)
			p.conn(tc.listen, "00000000:0000", "0A", 700)
			p.fd(listener, 4, "socket:[700]")
			b := newPeerBook(p.dir)
			b.update([]procEntry{{pid: listener, ppid: 1, pgrp: listener, start: 10, ticks: 4000, rsync: tc.isRsync}}, map[int]bool{})
			b.ports = []int{873}
			// the children that served the copy came and went: +100 in the listener's cutime
			procs := []procEntry{{pid: listener, ppid: 1, pgrp: listener, start: 10, ticks: 4100, rsync: tc.isRsync}}
			if got := b.update(procs, map[int]bool{}); got != tc.want {
				t.Errorf("%d ticks, want %d", got, tc.want)
			}
		})
	}
}

// TestPeerBookFUSE: the process that serves a FUSE filesystem CountFUSE gave (an sshfs), with
// the ssh it runs (double-forked: found as the process whose standard input is the other end
// of a socketpair sshfs holds), counts as the copy's own from when first seen: found by the
// connection its /dev/fuse fd names, or, where fdinfo does not name one, by an argument that
// is the mount point (relative ones from its working directory). A FUSE server of another
// mount, a process that names the mount point but holds no /dev/fuse, and one found by
// neither are other load.
func TestPeerBookFUSE(t *testing.T) {
	const (
		sshfs = 400 // the server: holds /dev/fuse
		ssh   = 401 // its child
		other = 410 // another FUSE server, or a shell in the mount point
	)
	mnt := FUSEMount{Dev: unix.Mkdev(0, 42), Point: "/mnt/nas"}
	for _, tc := range []struct {
		name      string
		info      string // the fdinfo of sshfs's fd 3; "" for none
		cmdline   string // NUL-separated
		cwd       string
		otherFUSE bool // other holds /dev/fuse too (with connection 43), or not
		want      uint64
	}{
		{"its connection", "pos:\t0\nflags:\t02100002\nmnt_id:\t24\nino:\t89\nfuse_connection:\t42\n", "sshfs\x00nas:/x\x00elsewhere\x00", "/", true, 30},
		{"another connection", "pos:\t0\nflags:\t02100002\nfuse_connection:\t43\n", "sshfs\x00nas:/x\x00/mnt/nas\x00", "/", true, 0},
		{"no connection in fdinfo: the mount point", "pos:\t0\nflags:\t02100002\n", "sshfs\x00nas:/x\x00/mnt/nas/\x00", "/", false, 30},
		{"no fdinfo: a relative mount point", "", "sshfs\x00nas:/x\x00nas\x00-f\x00", "/mnt", false, 30},
		{"no connection, another mount point", "pos:\t0\n", "sshfs\x00nas:/x\x00/mnt/other\x00", "/", false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newFakeProc(t, 1000)
			p.fd(sshfs, 3, "/dev/fuse")
			if tc.info != "" {
				p.mkdir(fmt.Sprintf("%d/fdinfo", sshfs))
				p.write(fmt.Sprintf("%d/fdinfo/3", sshfs), tc.info)
			}
			p.write(fmt.Sprintf("%d/cmdline", sshfs), tc.cmdline)
			p.fd(sshfs, 4, "socket:[566]") // its end of the socketpair to ssh
			p.fd(ssh, 0, "socket:[567]")   // ssh's standard input and output: the other end
			p.fd(ssh, 1, "socket:[567]")
			p.fd(other, 5, "socket:[568]")
			if err := os.Symlink(tc.cwd, filepath.Join(p.dir, strconv.Itoa(sshfs), "cwd")); err != nil {
				t.Fatal(err)
			}
			if tc.otherFUSE {
				p.fd(other, 3, "/dev/fuse")
				p.mkdir(fmt.Sprintf("%d/fdinfo", other))
				p.write(fmt.Sprintf("%d/fdinfo/3", other), "fuse_connection:\t43\n")
			} else {
				p.fd(other, 0, "/dev/pts/0") // a shell whose arguments name the mount point
			}
			p.write(fmt.Sprintf("%d/cmdline", other), "ls\x00/mnt/nas\x00")
			procs := []procEntry{
				{pid: sshfs, ppid: 1, pgrp: sshfs, start: 10, ticks: 500},
				{pid: ssh, ppid: 1, pgrp: ssh, start: 11, ticks: 700}, // double-forked: no child of sshfs
				{pid: other, ppid: 1, pgrp: other, start: 12, ticks: 900},
			}
			b := newPeerBook(p.dir)
			b.fuse = []FUSEMount{mnt}
			b.unixPeer = func(ino uint64) (uint64, bool) {
				peers := map[uint64]uint64{566: 567, 567: 566}
				peer, ok := peers[ino]
				return peer, ok
			}
			if got := b.update(procs, map[int]bool{}); got != 0 {
				t.Fatalf("first scan: %d ticks, want 0 (counted from when first seen)", got)
			}
			procs[0].ticks += 10
			procs[1].ticks += 20
			procs[2].ticks += 400
			if got := b.update(procs, map[int]bool{}); got != tc.want {
				t.Errorf("%d ticks, want %d", got, tc.want)
			}
		})
	}
}

// TestPeerBookFUSELate: a FUSE server not there at the first scans (sshfs remounted) is
// still found, and the searches stop once each mount's server is.
func TestPeerBookFUSELate(t *testing.T) {
	p := newFakeProc(t, 1000)
	b := newPeerBook(p.dir)
	b.fuse = []FUSEMount{{Dev: unix.Mkdev(0, 42), Point: "/mnt/nas"}}
	for range 3 {
		b.update(nil, map[int]bool{})
	}
	p.fd(400, 3, "/dev/fuse")
	p.mkdir("400/fdinfo")
	p.write("400/fdinfo/3", "fuse_connection:\t42\n")
	procs := []procEntry{{pid: 400, ppid: 1, pgrp: 400, start: 10, ticks: 500}}
	b.update(procs, map[int]bool{})
	if b.fuseSearches != maxPeerSearches {
		t.Errorf("searches %d after the server was found, want %d (no more)", b.fuseSearches, maxPeerSearches)
	}
	procs[0].ticks = 560
	if got := b.update(procs, map[int]bool{}); got != 60 {
		t.Errorf("%d ticks, want 60", got)
	}
}

// TestPeerBookFUSEGivenLate: a FUSE mount given after the first scan (the CLI learns DEST's
// mounts after the sampler's first reading) has its server, there all along, counted from
// that first scan, not from when it was found: what it did in between is the copy's too.
func TestPeerBookFUSEGivenLate(t *testing.T) {
	p := newFakeProc(t, 1000)
	p.fd(400, 3, "/dev/fuse")
	p.mkdir("400/fdinfo")
	p.write("400/fdinfo/3", "fuse_connection:\t42\n")
	procs := []procEntry{{pid: 400, ppid: 1, pgrp: 400, start: 10, ticks: 500}}
	b := newPeerBook(p.dir)
	b.update(procs, map[int]bool{})
	b.fuse = []FUSEMount{{Dev: unix.Mkdev(0, 42), Point: "/mnt/nas"}}
	procs[0].ticks = 560
	if got := b.update(procs, map[int]bool{}); got != 60 {
		t.Errorf("%d ticks, want 60: from the first scan", got)
	}
}

// TestPeerBookNestedHolders: when a process and its child both hold the far end of a
// connection (sshd's privilege-separation monitor and the session it forked), the tree is
// counted once, from the topmost holder. As two trees, one inside the other, the child's
// growth was counted in both whenever the order of the sum let it (3.1 CPU-s counted of
// 2.2 used in a copy to an sshfs mount served by an sshd on the same machine).
func TestPeerBookNestedHolders(t *testing.T) {
	const (
		ssh     = 100 // the client end: one of the processes counted from the start
		monitor = 150 // sshd: root [priv]
		session = 160 // sshd: root@internal-sftp, the monitor's child
	)
	p := newFakeProc(t, 1000)
	p.conn("0100007F:A000", "0100007F:0016", "01", 500)
	p.conn("0100007F:0016", "0100007F:A000", "01", 600)
	p.fd(ssh, 3, "socket:[500]")
	p.fd(monitor, 4, "socket:[600]")
	p.fd(session, 4, "socket:[600]")
	ours := map[int]bool{ssh: true}
	procs := []procEntry{
		{pid: ssh, ppid: 1, pgrp: ssh, start: 1100, ticks: 5},
		{pid: monitor, ppid: 1, pgrp: monitor, start: 1050, ticks: 10},
		{pid: session, ppid: monitor, pgrp: monitor, start: 1051, ticks: 20},
	}
	b := newPeerBook(p.dir)
	b.update(procs, ours)
	for i := range 20 { // the map's order changes from scan to scan
		procs[1].ticks += 1
		procs[2].ticks += 2
		if got, want := b.update(procs, ours), uint64(3*(i+1)); got != want {
			t.Fatalf("scan %d: %d ticks, want %d (the monitor's tree, once)", i+1, got, want)
		}
	}
	if len(b.trees) != 1 {
		t.Errorf("trees %v, want only the monitor's", b.trees)
	}
}
