package throttle

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// nsProc adds network namespaces to a fakeProc: each process's ns/net link, and each
// namespace's TCP table at /proc/PID/net/tcp (or tcp6) of the processes in it.
type nsProc struct {
	*fakeProc
	rows map[string][]string // by PID/net/tcp or tcp6
}

func (p *nsProc) netns(pid int, ns string) {
	dir := "self"
	if pid != 0 {
		dir = strconv.Itoa(pid)
	}
	p.mkdir(dir + "/ns")
	if err := os.Symlink(ns, filepath.Join(p.dir, dir, "ns", "net")); err != nil {
		p.t.Fatal(err)
	}
}

// connIn adds a row to the table file (tcp or tcp6) of process pid's namespace.
func (p *nsProc) connIn(pid int, file, local, remote, state string, ino uint64) {
	rel := fmt.Sprintf("%d/net/%s", pid, file)
	p.rows[rel] = append(p.rows[rel], fmt.Sprintf("   %d: %s %s %s 00000000:00000000 00:00000000 00000000  1000        0 %d 1 0000000000000000 20 4 30 10 -1",
		len(p.rows[rel]), local, remote, state, ino))
	p.mkdir(fmt.Sprintf("%d/net", pid))
	p.write(rel, "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"+strings.Join(p.rows[rel], "\n")+"\n")
}

// TestPeerBookOtherNetns: an rsync's far end in another network namespace of this machine
// (a daemon behind a veth pair, or in a container) is found in that namespace's table and
// counted as the copy's; a dual-stack listener's IPv4-mapped end pairs with the IPv4 end;
// one not accepted yet is asked again; an address in no namespace is remote, and searched
// for once.
func TestPeerBookOtherNetns(t *testing.T) {
	const (
		rsync    = 100 // ours, in prsync's namespace net:[1]
		rsync2   = 110 // ours, a second connection to the same daemon
		rsync3   = 120 // ours, to another host
		listener = 150 // the daemon, in net:[2]
		child    = 200 // its child for our connection
		child2   = 210
		neighbor = 300 // a process in net:[3], another container
	)
	const (
		us     = "0100000A" // 10.0.0.1
		daemon = "0200000A" // 10.0.0.2
		far    = "0900000A" // 10.0.0.9, another host
	)
	for _, tc := range []struct {
		name      string
		file      string // the daemon's namespace's table: tcp, or tcp6 for a dual-stack listener
		daemonEnd string // how that table writes the daemon's address
	}{
		{"IPv4", "tcp", daemon + ":0369"},
		{"IPv4-mapped", "tcp6", "0000000000000000FFFF0000" + daemon + ":0369"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mapped := func(a string) string { // an address as the daemon's table writes it
				if tc.file == "tcp6" {
					return "0000000000000000FFFF0000" + a
				}
				return a
			}
			p := &nsProc{newFakeProc(t, 1000), map[string][]string{}}
			p.netns(0, "net:[1]")
			for pid, ns := range map[int]string{rsync: "net:[1]", rsync2: "net:[1]", rsync3: "net:[1]", listener: "net:[2]", child: "net:[2]", child2: "net:[2]", neighbor: "net:[3]"} {
				p.netns(pid, ns)
			}
			p.conn(us+":A000", daemon+":0369", "01", 500)
			p.conn(us+":A001", far+":0016", "01", 520)
			p.fd(rsync, 3, "socket:[500]")
			p.fd(rsync3, 3, "socket:[520]")
			p.connIn(listener, tc.file, tc.daemonEnd, mapped("00000000:0000"), "0A", 700)
			p.connIn(listener, tc.file, tc.daemonEnd, mapped(us+":A000"), "01", 0) // not accepted yet
			p.connIn(neighbor, "tcp", "0300000A:0050", "00000000:0000", "0A", 900)
			p.fd(listener, 3, "socket:[700]")
			p.fd(neighbor, 3, "socket:[900]")
			procs := []procEntry{
				{pid: rsync, ppid: 1, pgrp: rsync, start: 1100, ticks: 5, rsync: true},
				{pid: rsync3, ppid: 1, pgrp: rsync3, start: 1100, ticks: 5, rsync: true},
				{pid: listener, ppid: 1, pgrp: listener, start: 10, ticks: 4000, rsync: true},
				{pid: neighbor, ppid: 1, pgrp: neighbor, start: 10, ticks: 8000},
			}
			ours := map[int]bool{rsync: true, rsync3: true}
			b := newPeerBook(p.dir)
			if got := b.update(procs, ours); got != 0 {
				t.Fatalf("not accepted yet: %d ticks", got)
			}
			if _, known := b.far[500]; known {
				t.Fatal("a far end not accepted yet was taken as known: it would never be asked again")
			}
			if peer, known := b.far[520]; !known || peer != 0 {
				t.Fatalf("the connection to another host: far %d, %v; want 0, known", peer, known)
			}
			if b.ns.reads != 2 {
				t.Errorf("%d tables read; want 2, the two other namespaces once each", b.ns.reads)
			}

			// accepted: the daemon's child holds its end
			p.rows[strconv.Itoa(listener)+"/net/"+tc.file][1] = strings.Replace(p.rows[strconv.Itoa(listener)+"/net/"+tc.file][1], " 0 1 0000", " 600 1 0000", 1)
			p.connIn(listener, tc.file, tc.daemonEnd, mapped("00000000:0000"), "0A", 701) // rewrites the file
			p.fd(child, 3, "socket:[600]")
			procs = append(procs, procEntry{pid: child, ppid: listener, pgrp: listener, start: 1200, ticks: 12, rsync: true})
			reads := b.ns.reads
			if got := b.update(procs, ours); got != 12 {
				t.Errorf("accepted: %d ticks, want the daemon child's 12", got)
			}
			if b.far[500] != 600 {
				t.Errorf("paired 500 with %d, want 600", b.far[500])
			}
			if b.ns.reads != reads+1 {
				t.Errorf("%d tables read for a known address; want 1, the daemon's namespace", b.ns.reads-reads)
			}

			// a second rsync to the same daemon: its namespace alone is read
			p.conn(us+":A002", daemon+":0369", "01", 510)
			p.fd(rsync2, 3, "socket:[510]")
			p.connIn(listener, tc.file, tc.daemonEnd, mapped(us+":A002"), "01", 610)
			p.fd(child2, 3, "socket:[610]")
			procs = append(procs,
				procEntry{pid: rsync2, ppid: 1, pgrp: rsync2, start: 1300, ticks: 5, rsync: true},
				procEntry{pid: child2, ppid: listener, pgrp: listener, start: 1300, ticks: 7, rsync: true})
			ours[rsync2] = true
			reads = b.ns.reads
			if got := b.update(procs, ours); got != 12+7 {
				t.Errorf("two children: %d ticks, want 19", got)
			}
			if b.ns.reads != reads+1 {
				t.Errorf("%d tables read for a second connection to the daemon; want 1", b.ns.reads-reads)
			}
			// the other host is not searched for again
			p.conn(us+":A003", far+":0016", "01", 530)
			p.fd(rsync3, 4, "socket:[530]")
			reads = b.ns.reads
			b.update(procs, ours)
			if b.ns.reads != reads {
				t.Errorf("%d tables read for another connection to a remote host; want none", b.ns.reads-reads)
			}
			if len(b.trees) != 1 {
				t.Errorf("trees %v; want the daemon listener's alone", b.trees)
			}
		})
	}
}

// TestPeerBookNetnsUnknown: without the link /proc/self/ns/net (a kernel without network
// namespaces, or a /proc that hides it), no other namespace is searched.
func TestPeerBookNetnsUnknown(t *testing.T) {
	p := &nsProc{newFakeProc(t, 1000), map[string][]string{}}
	p.netns(150, "net:[2]")
	p.conn("0100000A:A000", "0200000A:0369", "01", 500)
	p.fd(100, 3, "socket:[500]")
	p.connIn(150, "tcp", "0200000A:0369", "0100000A:A000", "01", 600)
	p.fd(150, 3, "socket:[600]")
	b := newPeerBook(p.dir)
	procs := []procEntry{
		{pid: 100, ppid: 1, pgrp: 100, start: 1100, ticks: 5, rsync: true},
		{pid: 150, ppid: 1, pgrp: 150, start: 1100, ticks: 40, rsync: true},
	}
	if got := b.update(procs, map[int]bool{100: true}); got != 0 || b.ns.reads != 0 {
		t.Errorf("%d ticks, %d tables read; want none", got, b.ns.reads)
	}
}
