package throttle

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// procEntry is one process of a /proc scan.
type procEntry struct {
	pid, ppid, pgrp int
	start           uint64 // starttime, in clock ticks since boot
	ticks           uint64 // utime+stime+cutime+cstime: with the children it reaped
	rsync           bool   // its command name is rsync
}

// peerBook counts, as prsync's own, the CPU time of the processes that serve its
// rsyncs on this machine: an rsync daemon that an rsync pushes to or pulls from,
// with every child it forks, or an sshd session at the far end of an rsync's ssh,
// with the rsync it started. Their work is the copy's: without this, a copy to or
// from a daemon or sshd on the same machine counts the far side as other load and
// pauses itself (issue 23: every prsync run of bench scenarios 6 and 7 had one
// rsync paused about 1 s).
//
// The far end is found the way ss(8) pairs the two ends of a local connection: an
// rsync's socket inode (a link socket:[N] in /proc/PID/fd) is looked up in
// /proc/net/tcp and tcp6 for its two addresses; the row with them swapped is the
// other end's socket, and the process holding that inode is the peer. When the row
// is in no other socket of this network namespace, the machine's other namespaces
// are searched (nsBook): a daemon in a container or behind a veth pair. A daemon
// reached through a NAT or a proxy stays other load, as does one whose /proc/PID/fd
// this user cannot read (a daemon run as root by a copy run as a user).
//
// A peer is the root of a tree of processes counted whole, or, when its parent is
// an rsync (a daemon's listener, which forks a child per connection), that parent
// is: the topmost rsync it descends from (a daemon's child for a push forks the
// receiver, which holds the connection too, and is counted once, in the listener's
// tree). A daemon's children often live less than a sample's second, so each is
// seldom seen; its listener reaps them all, so the listener's tree, counted from
// prsync's first scan (before its first rsync; from when it was first seen if it
// started later, or if that scan came too late), has their CPU: the listener's utime, stime, cutime and
// cstime, and those of its live descendants (a process that ends moves from the
// second sum into the first when its parent reaps it). Another client of the same
// daemon is then counted as prsync's too. A tree's count only grows, and a tree
// that ends keeps it.
//
// The processes that write prsync's standard input, when it is a pipe, are counted
// the same way, from when first seen: the find (or fd, or git ls-files) piped into
// prsync is the copy's work. A producer that works hard (a find over a cold network
// filesystem, a sort of the list) was other load, and paused the copy it fed
// (TestFeederOwnCPU).
//
// So are the processes that serve a FUSE filesystem that DEST or the source lies on: an
// sshfs, with the ssh it runs, does the copy's work on this machine as an rsync daemon
// does, and as other load it paused the copy it served. Such a server is found by the
// /dev/fuse it holds (see servesFUSE), and the far ends of its connections on this machine
// as those of the rsyncs are: an sshd serving the mount from this machine. One that this
// user cannot see (an sshfs of root's, for a copy run as a user) stays other load.
type peerBook struct {
	procDir string
	since   uint64 // prsync's start time, clock ticks since boot; 0 if unknown

	far     map[uint64]uint64   // an rsync's socket inode → its peer's socket inode, 0 for none here
	holders map[uint64][]taskID // a peer socket inode → the tasks that hold it
	// misses counts the searches that found no holder of a peer inode: it is searched again
	// up to maxPeerSearches times, since a connection just made may be held by no one yet
	// (in the listener's accept queue) or by a child forked after the scan of processes
	misses map[uint64]int
	trees  map[taskID]peerTree // by root
	gone   uint64              // ticks counted of trees whose root ended
	// atStart holds, from the first scan when no rsync of prsync's ran yet (the sampler
	// primes itself before the first starts), the tree ticks of every rsync process then
	// running: a daemon's listener among them. A tree whose root is in it is counted from
	// there, so what the listener's children did and ended before the tree was first seen
	// (at the first sample, a second in) counts as the copy's too: without it, that
	// second's daemon work was other load, and paused the copy for the next second
	// (issue 23: about 1 s of each 2 s copy to a daemon with max connections = 3).
	atStart map[taskID]uint64
	// firstTrees holds the tree ticks of every process at the first scan: a list's producer
	// or a FUSE server found later (CountFUSE is given the mounts after the sampler's first
	// reading) is counted from there, not from when found, so that what it did in between
	// is not other load
	firstTrees map[taskID]uint64
	started    bool // the first scan was taken in

	// stdin is the link of prsync's standard input when it is a pipe ("pipe:[N]"): the
	// processes that hold it, but prsync, feed it the list (a find piped into prsync), and
	// are counted as its own with their trees, from when first seen. Looked for at up to
	// maxPeerSearches scans until one is found; "" when stdin is no pipe.
	stdin        string
	feedSearches int

	// fuse are the FUSE filesystems that DEST or the source lies on (SystemSampler.CountFUSE):
	// the processes that serve them (an sshfs, with the ssh it runs) are the copy's work, and
	// are counted as its own with their trees, from when first seen. Looked for at up to
	// maxPeerSearches scans, until each has been found.
	fuse         []FUSEMount
	fuseSearches int
	unixPeer     func(ino uint64) (uint64, bool) // the other end of a Unix socket: unixPeer
	// served are the FUSE servers found, and the ssh each runs: their connections' far ends
	// on this machine (an sshd serving the mount) are counted as our rsyncs' are
	served map[taskID]bool

	// listens holds the inodes of the listening sockets that our rsyncs connected to on this
	// machine: their holders are counted only when they are rsyncs (a daemon's listener; an
	// sshd's is the machine's logins too)
	listens map[uint64]bool
	// ports are those of the rsync daemons on this machine that the copy talks to
	// (SystemSampler.CountDaemon): their listening sockets are looked for at each scan, up
	// to maxPeerSearches times
	ports        []int
	portSearches int

	tcpReads int // the reads of /proc/net/tcp and tcp6 made, for the tests
	ns       *nsBook
}

// maxPeerSearches is how many scans of every process's fds may look for the holder of a
// peer socket before it is taken for one this user cannot see. A first search found none
// in about one run of six of TestPeerBookRealDaemon: the daemon's child for the
// connection was forked after the scan of processes that the search looked through.
const maxPeerSearches = 10

// peerTree is a tree counted: the root's tree's ticks when counting began, and the
// ticks counted so far.
type peerTree struct{ base, counted uint64 }

func newPeerBook(procDir string) *peerBook {
	b := &peerBook{
		procDir:  procDir,
		far:      map[uint64]uint64{},
		holders:  map[uint64][]taskID{},
		misses:   map[uint64]int{},
		trees:    map[taskID]peerTree{},
		listens:  map[uint64]bool{},
		ns:       newNSBook(procDir),
		unixPeer: unixPeer,
		served:   map[taskID]bool{},
	}
	if t, err := os.Readlink(filepath.Join(procDir, "self", "fd", "0")); err == nil && strings.HasPrefix(t, "pipe:[") {
		b.stdin = t
	}
	if line, ok := readHead(filepath.Join(procDir, "self", "stat"), make([]byte, 1024)); ok {
		if st, ok := parseStat(line); ok {
			b.since = st.start
		}
	}
	return b
}

// update takes one scan of /proc and the PIDs of prsync's rsync groups, and
// returns the peers' CPU ticks counted so far.
func (b *peerBook) update(procs []procEntry, ours map[int]bool) uint64 {
	self := os.Getpid()
	b.ns.scan()
	children := map[int][]int{}
	byPID := make(map[int]procEntry, len(procs))
	for _, p := range procs {
		children[p.ppid] = append(children[p.ppid], p.pid)
		byPID[p.pid] = p
	}
	alive := func(id taskID) bool { p, ok := byPID[id.pid]; return ok && p.start == id.start }
	// tree is the ticks of the tree under pid, each process once (seen is shared)
	seen := map[int]bool{}
	var tree func(pid int) uint64
	tree = func(pid int) uint64 {
		if seen[pid] || ours[pid] || pid == self {
			return 0
		}
		seen[pid] = true
		n := byPID[pid].ticks
		for _, c := range children[pid] {
			n += tree(c)
		}
		return n
	}
	if !b.started {
		// the sampler's first reading, before the first rsync starts (with rsyncs
		// running already, no snapshot: trees are counted from their first sighting)
		b.started = true
		b.firstTrees = subtrees(procs, ours, self)
		if len(ours) == 0 {
			b.atStart = map[taskID]uint64{}
			for _, p := range procs {
				if p.rsync && p.pid != self {
					clear(seen)
					b.atStart[taskID{p.pid, p.start}] = tree(p.pid)
				}
			}
		}
	}

	// the writers of prsync's stdin (the list's producer) and the servers of the FUSE
	// filesystems it copies to or from: the copy's work, counted from when first seen
	b.searchServers(procs, ours, self, func(p procEntry, fuse bool) {
		id := taskID{p.pid, p.start}
		if fuse {
			b.served[id] = true
		}
		if _, counted := b.trees[id]; counted {
			return
		}
		base, ok := b.firstTrees[id] // there at the first reading: counted from it
		if !ok {
			clear(seen)
			base = tree(p.pid)
		}
		b.trees[id] = peerTree{base: base}
	})

	// the far ends of the rsyncs' sockets, and who holds them
	var fresh []uint64 // peer inodes whose holders are not known yet
	inFresh := map[uint64]bool{}
	search := func(ino uint64) {
		if ids, searched := b.holders[ino]; !inFresh[ino] && (!searched || len(ids) == 0 && b.misses[ino] < maxPeerSearches) {
			b.holders[ino] = []taskID{}
			inFresh[ino] = true
			fresh = append(fresh, ino)
		}
	}
	var rows *tcpTable
	if len(b.ports) > 0 && b.portSearches < maxPeerSearches {
		b.portSearches++
		rows = b.tcpRows()
		for ino, r := range rows.byIno {
			if r.state == tcpListen && slices.Contains(b.ports, localPort(r.local)) {
				b.listens[ino] = true
				search(ino)
			}
		}
	}
	// the sockets of our rsyncs, and of the FUSE servers found (the ssh of an sshfs, whose
	// sshd may be on this machine too)
	from := make([]int, 0, len(ours)+len(b.served))
	for pid := range ours {
		from = append(from, pid)
	}
	for id := range b.served {
		if alive(id) {
			from = append(from, id.pid)
		} else {
			delete(b.served, id)
		}
	}
	for _, pid := range from {
		for _, sock := range b.sockets(pid) {
			ino := sock.ino
			peer, known := b.far[ino]
			if !known && !mayBeTCP(sock.fd) {
				b.far[ino], known = 0, true // a socketpair: no peer, and no read of tcp rows
			}
			if !known {
				if rows == nil {
					rows = b.tcpRows()
				}
				var away *tcpRow
				peer, known, away = pair(rows, ino)
				if away == nil && (peer != 0 || !known) {
					// the far end is on this machine: the socket that listens at the
					// address it connected to is an rsync daemon's listener's, held
					// all along, where the connection's own end may be held by a
					// child forked after the scan of processes, or not yet accepted
					if l := rows.listener(ino); l != 0 {
						b.listens[l] = true
						search(l)
					}
				}
				if away != nil {
					peer, known = b.ns.farEnd(*away, procs, ours, self)
				}
				if !known {
					continue // not established yet: try again next scan
				}
				b.far[ino] = peer
			}
			if peer != 0 {
				search(peer)
			}
		}
	}
	if len(fresh) > 0 {
		b.findHolders(fresh, procs, ours, self)
		for _, peer := range fresh {
			if len(b.holders[peer]) == 0 {
				b.misses[peer]++ // another user's, or not held yet: searched again next time
			}
		}
	}

	// new trees: a holder's, or, when it is an rsync daemon's, the daemon's: the topmost of
	// the rsyncs it descends from. A daemon's child for a push forks the receiver, and both
	// hold the connection: rooted at its parent, the receiver's tree was counted a second
	// time inside the listener's (a push of 6,000 files counted 3.0 CPU-s of a daemon that
	// used 2.1)
	for peer, ids := range b.holders {
		held := false
		for _, id := range ids {
			if !alive(id) {
				continue
			}
			held = true
			h := byPID[id.pid]
			root, below := h, h // below: root's child on the way to h (h itself when root is h's parent)
			for range 32 {
				p, ok := byPID[root.ppid]
				// up through rsyncs, and through the holders of the same socket: sshd's
				// monitor holds a session's connection as well as the session, its child,
				// and counted as two trees, one inside the other, it was counted twice
				holds := slices.ContainsFunc(ids, func(o taskID) bool { return o.pid == p.pid && o.start == p.start })
				if !ok || !(p.rsync || holds) || p.pid <= 1 || ours[p.pid] || p.pid == self || p.pid == root.pid {
					break
				}
				root, below = p, root
			}
			rid := taskID{root.pid, root.start}
			if _, ok := b.trees[rid]; ok {
				continue
			}
			var base uint64 // a tree started during the run is counted whole
			if n, ok := b.atStart[rid]; ok {
				// running at the first scan, before the first rsync: counted from then,
				// with the children it reaped since
				base = n
			} else if n, ok := b.firstTrees[rid]; ok && !root.rsync {
				// another server there at the first scan (an sshd session serving an
				// sshfs DEST, found through the sshfs, which is known only after it):
				// counted from then too
				base = n
			} else if b.since == 0 || root.start < b.since {
				// an older one from now, but for its children started during the run
				// (a daemon's children for the other rsyncs started meanwhile), or, with
				// the start unknown, but for the child the holder is or descends from
				clear(seen)
				base = tree(root.pid)
				for _, c := range children[root.pid] {
					if c == below.pid || (b.since != 0 && byPID[c].start >= b.since) {
						clear(seen)
						base -= min(base, tree(c))
					}
				}
			}
			b.trees[rid] = peerTree{base: base}
		}
		if !held && len(ids) > 0 {
			delete(b.holders, peer)
		}
	}

	clear(seen)
	var sum uint64
	for rid, t := range b.trees {
		if !alive(rid) {
			b.gone += t.counted
			delete(b.trees, rid)
			continue
		}
		if n := tree(rid.pid); n > t.base && n-t.base > t.counted {
			t.counted = n - t.base // less than before: a child reaped between reads
			b.trees[rid] = t
		}
		sum += t.counted
	}
	if len(b.far) > 4096 {
		clear(b.far) // sockets of ended rsyncs; the live ones are paired again
		clear(b.misses)
		for peer, ids := range b.holders {
			if len(ids) == 0 {
				delete(b.holders, peer) // not found (another user's): searched again if still there
			}
		}
	}
	return b.gone + sum
}

// searchServers looks, while its searches last, for the processes that write prsync's
// standard input and those that serve b.fuse (with the ssh an sshfs runs), and hands each
// to count, fuse telling a FUSE server or its ssh from a producer of the list.
func (b *peerBook) searchServers(procs []procEntry, ours map[int]bool, self int, count func(p procEntry, fuse bool)) {
	feed := b.stdin != "" && b.feedSearches < maxPeerSearches
	fuse := len(b.fuse) > 0 && b.fuseSearches < maxPeerSearches
	if !feed && !fuse {
		return
	}
	if feed {
		b.feedSearches++
	}
	if fuse {
		b.fuseSearches++
	}
	served := make([]bool, len(b.fuse))
	var servers [][]fdLink             // the fds of each FUSE server found
	stdins := map[string][]procEntry{} // a socket → the processes whose standard input it is
	for _, p := range procs {
		if ours[p.pid] || p.pid == self {
			continue
		}
		links := b.fdLinks(p.pid)
		var feeds, serves bool
		for _, l := range links {
			if feed && l.target == b.stdin && writes(l) {
				b.feedSearches = maxPeerSearches // found: no more searches
				feeds = true
			}
			if fuse && l.target == "/dev/fuse" {
				if i := b.servesFUSE(l); i >= 0 {
					served[i], serves = true, true
					servers = append(servers, links)
				}
			}
			if fuse && filepath.Base(l.path) == "0" && strings.HasPrefix(l.target, "socket:[") {
				stdins[l.target] = append(stdins[l.target], p)
			}
		}
		if feeds || serves {
			count(p, serves)
		}
	}
	// sshfs double-forks the ssh it runs, so that it is no child of sshfs's: it is the
	// process whose standard input is the other end of a socketpair that sshfs holds
	for _, links := range servers {
		for _, l := range links {
			if ino, ok := socketInode(l.target); ok {
				if peer, ok := b.unixPeer(ino); ok {
					for _, p := range stdins[fmt.Sprintf("socket:[%d]", peer)] {
						count(p, true)
					}
				}
			}
		}
	}
	if fuse && !slices.Contains(served, false) {
		b.fuseSearches = maxPeerSearches // each found: no more searches
	}
}

// servesFUSE returns which of b.fuse the process whose fd l is open on /dev/fuse serves
// through it, or -1 for none. The fd's fdinfo names its connection (fuse_connection, Linux
// 6.x), which is the minor number of the filesystem's device. Where it does not, the
// process is taken for the server of a mount point that one of its arguments names
// (relative ones from its working directory): sshfs, rclone mount and s3fs are started so.
func (b *peerBook) servesFUSE(l fdLink) int {
	if v, ok := l.info("fuse_connection"); ok {
		c, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return -1
		}
		return slices.IndexFunc(b.fuse, func(m FUSEMount) bool {
			return unix.Major(m.Dev) == 0 && uint64(unix.Minor(m.Dev)) == c
		})
	}
	procDir := l.procDir()
	cmd, err := os.ReadFile(filepath.Join(procDir, "cmdline"))
	if err != nil {
		return -1
	}
	cwd, _ := os.Readlink(filepath.Join(procDir, "cwd"))
	args := strings.Split(strings.TrimRight(string(cmd), "\x00"), "\x00")
	for _, a := range args[min(1, len(args)):] {
		if a == "" {
			continue
		}
		if !filepath.IsAbs(a) {
			if cwd == "" {
				continue
			}
			a = filepath.Join(cwd, a)
		}
		a = filepath.Clean(a)
		if i := slices.IndexFunc(b.fuse, func(m FUSEMount) bool { return m.Point != "" && m.Point == a }); i >= 0 {
			return i
		}
	}
	return -1
}

// subtrees returns the ticks of the tree under each process of procs, as update's tree
// counts them (without ours and self, and what is under them).
func subtrees(procs []procEntry, ours map[int]bool, self int) map[taskID]uint64 {
	children := map[int][]int{}
	byPID := make(map[int]procEntry, len(procs))
	for _, p := range procs {
		children[p.ppid] = append(children[p.ppid], p.pid)
		byPID[p.pid] = p
	}
	sums := make(map[int]uint64, len(procs))
	var sum func(pid, depth int) uint64
	sum = func(pid, depth int) uint64 {
		if ours[pid] || pid == self || depth > 64 {
			return 0
		}
		if n, ok := sums[pid]; ok {
			return n
		}
		sums[pid] = 0 // a cycle (a PID reused mid-scan) ends here
		n := byPID[pid].ticks
		for _, c := range children[pid] {
			n += sum(c, depth+1)
		}
		sums[pid] = n
		return n
	}
	out := make(map[taskID]uint64, len(procs))
	for _, p := range procs {
		out[taskID{p.pid, p.start}] = sum(p.pid, 0)
	}
	return out
}

// fdLink is one fd of a process: its path in /proc and what it links to
// (socket:[N], pipe:[N], a path).
type fdLink struct{ path, target string }

// writes reports whether fd l is open for writing, by the flags of its fdinfo; true when
// they cannot be read. Both ends of a pipe link to the same pipe:[N]: a process that holds
// the read end of prsync's stdin (the program that made the pipe and started prsync on it,
// a Go test among them) writes no list, and its work was counted as the copy's.
func writes(l fdLink) bool {
	v, ok := l.info("flags")
	if !ok {
		return true
	}
	flags, err := strconv.ParseUint(v, 8, 64)
	return err != nil || flags&(unix.O_WRONLY|unix.O_RDWR) != 0
}

// procDir returns the /proc directory of the process that holds fd l (/proc/PID).
func (l fdLink) procDir() string {
	return filepath.Dir(filepath.Dir(l.path))
}

// info returns the value of field key of fd l's fdinfo ("flags", "fuse_connection"),
// trimmed; false when the fdinfo cannot be read or has no such field.
func (l fdLink) info(key string) (string, bool) {
	b, err := os.ReadFile(filepath.Join(l.procDir(), "fdinfo", filepath.Base(l.path)))
	if err != nil {
		return "", false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}

// fdLinks returns the fds of process pid; nil when they cannot be read.
func (b *peerBook) fdLinks(pid int) []fdLink {
	dir := filepath.Join(b.procDir, strconv.Itoa(pid), "fd")
	d, err := os.Open(dir)
	if err != nil {
		return nil
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	links := make([]fdLink, 0, len(names))
	for _, n := range names {
		p := filepath.Join(dir, n)
		if t, err := os.Readlink(p); err == nil {
			links = append(links, fdLink{p, t})
		}
	}
	return links
}

// socket is a socket a process holds: its inode and its fd's path in /proc.
type socket struct {
	ino uint64
	fd  string
}

// sockets returns the sockets process pid holds.
func (b *peerBook) sockets(pid int) []socket {
	var socks []socket
	for _, l := range b.fdLinks(pid) {
		if ino, ok := socketInode(l.target); ok {
			socks = append(socks, socket{ino, l.path})
		}
	}
	return socks
}

// mayBeTCP reports whether the socket whose fd is at path fd (/proc/PID/fd/N)
// may be a TCP socket, to be looked up in /proc/net/tcp: false only when its
// system.sockprotoname attribute names another protocol (UNIX for a local
// copy's socketpair). The attribute costs a microsecond; a read of tcp and
// tcp6 costs milliseconds whatever they hold, as the kernel walks its whole
// hash of connections, and was made for every new rsync's sockets (in a local
// copy of 9 chunks, 40 ms of prsync's CPU went to the sampler's reads). When
// the attribute cannot be read, the answer is true.
func mayBeTCP(fd string) bool {
	buf := make([]byte, 32)
	n, err := unix.Getxattr(fd, "system.sockprotoname", buf)
	if err != nil {
		return true
	}
	return strings.HasPrefix(string(buf[:n]), "TCP")
}

// socketInode returns N of a link target socket:[N].
func socketInode(t string) (uint64, bool) {
	if !strings.HasPrefix(t, "socket:[") || !strings.HasSuffix(t, "]") {
		return 0, false
	}
	n, err := strconv.ParseUint(t[len("socket:["):len(t)-1], 10, 64)
	return n, err == nil
}

// tcpRow is one socket of /proc/net/tcp or tcp6.
type tcpRow struct {
	local, remote string // hex address:port, as the file writes them
	state         string // 01 is ESTABLISHED
}

// tcpEstablished is the state of a connected socket in /proc/net/tcp.
const tcpEstablished = "01"

// pair returns, from rows, the inode of the socket at the other end of socket
// ino, 0 if ino is no TCP socket (a local copy's socketpair) or its other end
// is in no socket of rows, and false if ino is a TCP socket not connected yet, or
// whose far end its listener has not accepted yet, to be asked again. away is ino's
// row when it is connected and its far end is in no socket of rows: that end may be
// in another network namespace of this machine (netns).
func pair(rows *tcpTable, ino uint64) (peer uint64, known bool, away *tcpRow) {
	r, ok := rows.byIno[ino]
	if !ok {
		return 0, true, nil
	}
	if r.state != tcpEstablished {
		return 0, false, nil
	}
	if peer, known, found := rows.farEnd(r, ino); found {
		return peer, known, nil
	}
	return 0, true, &r
}

// farEnd looks in t for the other end of the connection whose end r is (the socket
// self, or 0 when r is another namespace's): its inode, or known false when it is there
// but not accepted yet; found is false when it is not in t.
func (t *tcpTable) farEnd(r tcpRow, self uint64) (peer uint64, known, found bool) {
	for ino, o := range t.byIno {
		if ino != self && o.local == r.remote && o.remote == r.local {
			return ino, true, true
		}
	}
	if t.unaccepted[[2]string{r.remote, r.local}] {
		return 0, false, true // the far end waits in its listener's queue: paired once accepted
	}
	return 0, true, false
}

// tcpListen is the state of a listening socket in /proc/net/tcp.
const tcpListen = "0A"

// listener returns the inode of the socket that listens at the address the connected
// socket ino connected to, 0 if none does here: one bound to that address, or to the
// wildcard address at its port.
func (t *tcpTable) listener(ino uint64) uint64 {
	r, ok := t.byIno[ino]
	if !ok || r.state != tcpEstablished {
		return 0
	}
	i := strings.LastIndexByte(r.remote, ':')
	if i < 0 {
		return 0
	}
	port := r.remote[i:]
	for l, o := range t.byIno {
		if o.state == tcpListen && (o.local == r.remote || o.local == strings.Repeat("0", 8)+port || o.local == strings.Repeat("0", 32)+port) {
			return l
		}
	}
	return 0
}

// localPort returns the port of a tcp address, hex ADDR:PORT; -1 if it has none.
func localPort(a string) int {
	i := strings.LastIndexByte(a, ':')
	if i < 0 {
		return -1
	}
	n, err := strconv.ParseUint(a[i+1:], 16, 16)
	if err != nil {
		return -1
	}
	return int(n)
}

// tcpTable is /proc/net/tcp and tcp6: the sockets by inode, and the established ones that
// have no inode yet, by their local and remote addresses: connections a listener has not
// accepted yet (its daemon busy, or not scheduled). Taken for a remote peer, such a
// connection's socket was never paired again, and a daemon on this machine went uncounted
// (TestPeerBookRealDaemon failed 1 run in 20 with every CPU busy).
type tcpTable struct {
	byIno      map[uint64]tcpRow
	unaccepted map[[2]string]bool
}

// tcpRows reads /proc/net/tcp and tcp6 of this network namespace, by inode.
func (b *peerBook) tcpRows() *tcpTable {
	b.tcpReads++
	return readTCP(b.procDir)
}

// readTCP reads dir/net/tcp and tcp6: dir is /proc for this network namespace, or
// /proc/PID for PID's.
func readTCP(dir string) *tcpTable {
	rows := &tcpTable{byIno: map[uint64]tcpRow{}, unaccepted: map[[2]string]bool{}}
	for _, name := range []string{"tcp", "tcp6"} {
		f, err := os.Open(filepath.Join(dir, "net", name))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Scan() // the header
		for sc.Scan() {
			fs := bytes.Fields(sc.Bytes())
			if len(fs) < 10 {
				continue
			}
			ino, err := strconv.ParseUint(string(fs[9]), 10, 64)
			local, remote, state := v4Mapped(string(fs[1])), v4Mapped(string(fs[2])), string(fs[3])
			switch {
			case err != nil:
			case ino != 0:
				rows.byIno[ino] = tcpRow{local: local, remote: remote, state: state}
			case state == tcpEstablished || state == tcpSynRecv:
				rows.unaccepted[[2]string{local, remote}] = true
			} // else a socket in TIME_WAIT, which has no inode
		}
		f.Close()
	}
	return rows
}

// tcpSynRecv is the state of a listener's end of a connection whose handshake has not
// completed on its side yet (the client's last ACK in flight), in the table with no inode.
const tcpSynRecv = "03"

// v4Mapped returns a tcp6 address:port of an IPv4-mapped address (::ffff:a.b.c.d, a
// dual-stack listener's end of an IPv4 connection) as tcp writes it, so that the two
// ends of one connection compare equal; any other address as it is.
func v4Mapped(a string) string {
	const prefix = "0000000000000000FFFF0000"
	if len(a) == 32+1+4 && strings.HasPrefix(a, prefix) {
		return a[len(prefix):]
	}
	return a
}

// findHolders looks through the fds of every process but prsync's for the peer
// inodes, and records their holders.
func (b *peerBook) findHolders(peers []uint64, procs []procEntry, ours map[int]bool, self int) {
	want := make(map[uint64]bool, len(peers))
	for _, p := range peers {
		want[p] = true
	}
	for _, p := range procs {
		if ours[p.pid] || p.pid == self {
			continue
		}
		for _, sock := range b.sockets(p.pid) {
			if want[sock.ino] && (p.rsync || !b.listens[sock.ino]) {
				b.holders[sock.ino] = append(b.holders[sock.ino], taskID{p.pid, p.start})
			}
		}
	}
}
