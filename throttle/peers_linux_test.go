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
// machine, and their descendants, are counted from their start (or from when first seen,
// if older than prsync), each with its own utime and stime only, and keep their count
// once they end. Nothing else is: the daemon's listener, a process with a connection
// elsewhere, a local copy's socketpair, a connection not yet established.
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
	procs := func(childTicks, grandTicks, proxyTicks uint64, grandAlive bool) []procEntry {
		ps := []procEntry{
			{pid: rsync, ppid: 1, pgrp: rsync, start: 1100, ticks: 999},
			{pid: rsync2, ppid: 1, pgrp: rsync2, start: 1100, ticks: 999},
			{pid: pending, ppid: 1, pgrp: pending, start: 1100, ticks: 999},
			{pid: listener, ppid: 1, pgrp: listener, start: 10, ticks: 5000},
			{pid: child, ppid: listener, pgrp: listener, start: 1200, ticks: childTicks},
			{pid: stranger, ppid: 1, pgrp: stranger, start: 20, ticks: 7000},
			{pid: oldProxy, ppid: 1, pgrp: oldProxy, start: 30, ticks: proxyTicks},
		}
		if grandAlive {
			ps = append(ps, procEntry{pid: grand, ppid: child, pgrp: listener, start: 1250, ticks: grandTicks})
		}
		return ps
	}
	b := newPeerBook(p.dir)
	if b.since != since {
		t.Fatalf("since = %d, want %d", b.since, since)
	}
	steps := []struct {
		name                string
		child, grand, proxy uint64
		grandAlive          bool
		want                uint64
	}{
		{"first seen: the child and its child from their start, the old server from now", 10, 5, 9000, true, 15},
		{"all grow", 30, 8, 9040, true, 30 + 8 + 40},
		{"the grandchild ended and was reaped: it keeps its 8", 50, 0, 9040, false, 50 + 8 + 40},
		{"a figure that goes back counts as none", 45, 0, 9040, false, 50 + 8 + 40},
	}
	for _, st := range steps {
		got := b.update(procs(st.child, st.grand, st.proxy, st.grandAlive), ours)
		if got != st.want {
			t.Errorf("%s: %d ticks, want %d", st.name, got, st.want)
		}
	}
	for id := range b.tracked {
		switch id.pid {
		case child, oldProxy:
		default:
			t.Errorf("tracked pid %d; want only the child %d and the old server %d", id.pid, child, oldProxy)
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

	// the connect completes: the pending rsync's peer is found then
	p.conn("0100007F:0369", "0100007F:A002", "01", 620)
	p.tcp[6] = strings.Replace(p.tcp[6], " 02 ", " 01 ", 1)
	p.write("net/tcp", "header\n"+strings.Join(p.tcp, "\n")+"\n")
	p.fd(child+50, 3, "socket:[620]")
	ps := append(procs(50, 0, 9040, false), procEntry{pid: child + 50, ppid: listener, pgrp: listener, start: 1300, ticks: 7})
	if got, want := b.update(ps, ours), uint64(50+8+40+7); got != want {
		t.Errorf("after the connect: %d ticks, want %d", got, want)
	}

	// every peer ends: the sum stays
	if got, want := b.update(procs(0, 0, 0, false)[:4], ours), uint64(50+8+40+7); got != want {
		t.Errorf("after the peers ended: %d ticks, want %d", got, want)
	}
	if len(b.tracked) != 0 {
		t.Errorf("still tracked: %v", b.tracked)
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

// TestPeerBookRealDaemon: a real rsync daemon on 127.0.0.1 serves a real rsync in its
// own process group; the book finds the daemon's child for the connection, and counts
// exactly the CPU that child has had (it started during the test, after the book).
func TestPeerBookRealDaemon(t *testing.T) {
	rsyncBin, err := exec.LookPath("rsync")
	if err != nil {
		t.Skip("no rsync")
	}
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
	os.WriteFile(conf, []byte(fmt.Sprintf("use chroot = no\npid file = %s/pid\n[m]\npath = %s/dst\nread only = no\n", dir, dir)), 0o644)
	daemon := exec.Command(rsyncBin, "--daemon", "--no-detach", "--address=127.0.0.1", "--port="+strconv.Itoa(port), "--config="+conf)
	daemon.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-daemon.Process.Pid, syscall.SIGKILL); daemon.Wait() })
	for i := 0; ; i++ {
		c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
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
	client := exec.Command(rsyncBin, "-a", "--bwlimit=1m", filepath.Join(dir, "src")+"/", fmt.Sprintf("rsync://127.0.0.1:%d/m/", port))
	client.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := client.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-client.Process.Pid, syscall.SIGKILL); client.Wait() })
	pg := client.Process.Pid

	deadline := time.Now().Add(20 * time.Second)
	for {
		sc, err := scanProc("/proc", []int{pg})
		if err != nil {
			t.Fatal(err)
		}
		ours := map[int]bool{}
		for _, p := range sc.procs {
			if p.pgrp == pg {
				ours[p.pid] = true
			}
		}
		got := book.update(sc.procs, ours)
		var served []procEntry
		for _, p := range sc.procs {
			if p.ppid == daemon.Process.Pid {
				served = append(served, p)
			}
		}
		if len(served) == 1 && len(book.tracked) > 0 {
			id := taskID{served[0].pid, served[0].start}
			if _, ok := book.tracked[id]; !ok {
				t.Fatalf("tracked %v, not the daemon's child %d", book.tracked, served[0].pid)
			}
			for tid := range book.tracked {
				if tid != id && !isDescendant(sc.procs, tid.pid, served[0].pid) {
					t.Errorf("tracked %d, neither the daemon's child %d nor its descendant", tid.pid, served[0].pid)
				}
			}
			if want := sumTicks(sc.procs, book.tracked); got != want {
				t.Errorf("counted %d ticks, the tracked tasks had %d", got, want)
			}
			if served[0].ticks > 0 && got == 0 {
				t.Errorf("the daemon's child had %d ticks; none counted", served[0].ticks)
			}
			t.Logf("the daemon's child %d: %d ticks, counted %d", served[0].pid, served[0].ticks, got)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no peer found in 20 s; the daemon's children %v, tracked %v", served, book.tracked)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, p := range []int{daemon.Process.Pid} {
		if _, ok := book.tracked[taskID{p, 0}]; ok {
			t.Error("the listening daemon is tracked")
		}
	}
}

func isDescendant(procs []procEntry, pid, of int) bool {
	parent := map[int]int{}
	for _, p := range procs {
		parent[p.pid] = p.ppid
	}
	for i := 0; i < 64 && pid > 1; i++ {
		if pid = parent[pid]; pid == of {
			return true
		}
	}
	return false
}

func sumTicks(procs []procEntry, tracked map[taskID]peerTask) uint64 {
	var n uint64
	for _, p := range procs {
		if t, ok := tracked[taskID{p.pid, p.start}]; ok {
			n += p.ticks - t.base
		}
	}
	return n
}
