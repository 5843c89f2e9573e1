package throttle

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// nsBook finds the far end of an rsync's connection in the other network namespaces of
// this machine: a daemon in a container, or in a namespace joined to prsync's by a veth
// pair (bench scenario 5), whose end of the connection is in its namespace's TCP table,
// not in /proc/net/tcp. Without it, such a daemon's CPU was other load, and paused the
// copy it served (issue 23: three runs in five of scenario 5 paused about 1 s of a 2 s
// copy).
//
// Each namespace's table is /proc/PID/net/tcp and tcp6 of a process in it (the link
// /proc/PID/ns/net names the namespace). Reading one costs milliseconds, and a machine
// may hold hundreds of namespaces, so a connection's remote address is searched for in
// all of them once: where its far end was found, only that namespace is read for the
// next connection to that address, and an address found in none is remote (another
// machine) for the rest of the run. Only a connection without address translation
// pairs this way: one through a NAT (a container's published port) or a proxy has a
// far end whose addresses differ, and stays other load, as does a namespace whose
// processes this user cannot inspect.
type nsBook struct {
	procDir string
	self    string               // the link of /proc/self/ns/net ("net:[N]"); "" when unknown, and no search
	where   map[string]nsHolder  // a remote address (hex, no port) → the namespace that holds it; "" ns: none
	reads   int                  // tables read, for the tests
	tables  map[string]*tcpTable // this scan's tables, by namespace: read once per scan
	others  []nsHolder           // this scan's other namespaces; nil until looked for
}

// nsHolder is a namespace and a process in it, whose /proc/PID/net is its table.
type nsHolder struct {
	ns string
	id taskID
}

func newNSBook(procDir string) *nsBook {
	b := &nsBook{procDir: procDir, where: map[string]nsHolder{}}
	if l, err := os.Readlink(filepath.Join(procDir, "self", "ns", "net")); err == nil {
		b.self = l
	}
	return b
}

// scan starts a scan of /proc: the tables read before are stale.
func (b *nsBook) scan() { b.tables, b.others = nil, nil }

// farEnd returns the inode of the other end of the connection whose end r is, when it is
// in another network namespace of this machine; 0 and true when it is in none (a remote
// host), or false when it is there but not accepted yet, to be asked again.
func (b *nsBook) farEnd(r tcpRow, procs []procEntry, ours map[int]bool, self int) (uint64, bool) {
	if b.self == "" {
		return 0, true
	}
	addr, _, _ := strings.Cut(r.remote, ":")
	h, searched := b.where[addr]
	if searched {
		if h.ns == "" {
			return 0, true // searched: on no namespace of this machine
		}
		if b.holds(h, procs) {
			if peer, known, found := b.table(h).farEnd(r, 0); found {
				return peer, known
			}
		}
	}
	// search every namespace but prsync's
	for _, other := range b.namespaces(procs, ours, self) {
		if peer, known, found := b.table(other).farEnd(r, 0); found {
			b.where[addr] = other
			return peer, known
		}
	}
	if !searched {
		b.where[addr] = nsHolder{} // in no namespace here: a remote host
	} // one found before stays where it was: this connection may have ended
	return 0, true
}

// holds reports whether h's process is alive and still in h's namespace.
func (b *nsBook) holds(h nsHolder, procs []procEntry) bool {
	for _, p := range procs {
		if p.pid == h.id.pid {
			ns, ok := b.netns(p.pid)
			return p.start == h.id.start && ok && ns == h.ns
		}
	}
	return false
}

// namespaces returns the network namespaces of procs but prsync's, a process in each,
// found once per scan.
func (b *nsBook) namespaces(procs []procEntry, ours map[int]bool, self int) []nsHolder {
	if b.others != nil {
		return b.others
	}
	b.others = []nsHolder{}
	seen := map[string]bool{b.self: true}
	for _, p := range procs {
		if ours[p.pid] || p.pid == self {
			continue
		}
		if ns, ok := b.netns(p.pid); ok && !seen[ns] {
			seen[ns] = true
			b.others = append(b.others, nsHolder{ns, taskID{p.pid, p.start}})
		}
	}
	return b.others
}

// netns returns the link /proc/PID/ns/net of process pid ("net:[N]"); false when it
// cannot be read (gone, or another user's).
func (b *nsBook) netns(pid int) (string, bool) {
	ns, err := os.Readlink(filepath.Join(b.procDir, strconv.Itoa(pid), "ns", "net"))
	return ns, err == nil
}

// table returns the TCP table of h's namespace, read once per scan.
func (b *nsBook) table(h nsHolder) *tcpTable {
	if t, ok := b.tables[h.ns]; ok {
		return t
	}
	if b.tables == nil {
		b.tables = map[string]*tcpTable{}
	}
	b.reads++
	t := readTCP(filepath.Join(b.procDir, strconv.Itoa(h.id.pid)))
	b.tables[h.ns] = t
	return t
}
