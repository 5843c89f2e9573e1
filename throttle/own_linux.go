package throttle

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// ownCPUSource returns the function that reads prsync's own CPU time and the
// kernel threads'. It keeps the book of the rsyncs' peers on this machine
// (see peerBook), so each sampler gets its own. served returns the ports of the
// rsync daemons on this machine that the copy talks to (peerBook.ports), and the
// FUSE filesystems it copies to or from (peerBook.fuse).
func ownCPUSource(served func() ([]int, []FUSEMount)) func([]int) (cpuTimes, error) {
	peers := newPeerBook("/proc")
	return func(pgids []int) (cpuTimes, error) {
		ports, fuse := served()
		if len(fuse) != len(peers.fuse) {
			peers.fuseSearches = 0 // a mount given since: looked for anew
		}
		peers.ports, peers.fuse = ports, fuse
		return readOwnCPU(pgids, peers)
	}
}

// readOwnCPU returns, in seconds, the CPU time (user and system) of this
// process, of its reaped children, and of every live process in one of the
// process groups pgids, including the children those processes reaped: all the
// CPU the run uses, prsync's own included, so that none of it can make prsync
// pause itself. It also returns the CPU time of the processes on this machine
// that serve the rsyncs over TCP (see peerBook), and of the kernel's threads,
// which count neither as prsync's nor as other load (see Sample.Kernel).
//
// The own sum only grows as processes end: a group member's time moves into its
// parent's cutime and cstime when the parent reaps it, and a leader's into
// our RUSAGE_CHILDREN when we reap it. A leader reaped while /proc is being scanned
// would be counted twice (scanned, then reaped) or not at all (reaped before the scan
// reached it, but after RUSAGE_CHILDREN was read); its whole CPU then falls into one
// interval's other load, enough to pause a copy that runs alone. So RUSAGE_CHILDREN is
// read before and after the scan, and the scan is done again when a reap came between.
func readOwnCPU(pgids []int, peers *peerBook) (cpuTimes, error) {
	t, scan, err := ownCPU(pgids, selfCPU, childrenCPU, func(pgids []int) (procScan, error) { return scanProc("/proc", pgids) })
	if err != nil {
		return cpuTimes{}, err
	}
	ours := map[int]bool{}
	for _, p := range scan.procs {
		if scan.want[p.pgrp] {
			ours[p.pid] = true
		}
	}
	t.peer = float64(peers.update(scan.procs, ours)) / float64(clockTicks())
	return t, nil
}

// ownCPU is readOwnCPU without the peers, with its sources given: self and
// children return RUSAGE_SELF's and RUSAGE_CHILDREN's seconds, scan the groups'
// and the kernel threads' ticks. It also returns the last scan.
func ownCPU(pgids []int, self, children func() (float64, error), scan func([]int) (procScan, error)) (cpuTimes, procScan, error) {
	me, err := self()
	if err != nil {
		return cpuTimes{}, procScan{}, err
	}
	before, err := children()
	if err != nil {
		return cpuTimes{}, procScan{}, err
	}
	var sc procScan
	after := before
	for try := 0; try < 4; try++ {
		if sc, err = scan(pgids); err != nil {
			return cpuTimes{}, procScan{}, err
		}
		if after, err = children(); err != nil {
			return cpuTimes{}, procScan{}, err
		}
		if after == before {
			break // no reap during the scan
		}
		before = after
	}
	hz := float64(clockTicks())
	return cpuTimes{own: me + after + float64(sc.group)/hz, kernel: float64(sc.kernel) / hz}, sc, nil
}

func selfCPU() (float64, error)     { return rusageSeconds(syscall.RUSAGE_SELF) }
func childrenCPU() (float64, error) { return rusageSeconds(syscall.RUSAGE_CHILDREN) }

// rusageSeconds returns the user and system seconds getrusage(who) reports.
func rusageSeconds(who int) (float64, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return timevalSeconds(ru.Utime) + timevalSeconds(ru.Stime), nil
}

func timevalSeconds(tv syscall.Timeval) float64 {
	return float64(tv.Sec) + float64(tv.Usec)/1e6
}

// pfKthread is PF_KTHREAD of the flags field of /proc/PID/stat: a kernel thread.
const pfKthread = 0x00200000

// procScan is one scan of /proc.
type procScan struct {
	// group is the sum of utime, stime, cutime and cstime, in clock ticks, of
	// the processes whose process group is in want; kernel the sum of utime and
	// stime of the kernel's threads (writeback, I/O completion, ksoftirqd, a loop
	// device's worker).
	group, kernel uint64
	want          map[int]bool
	procs         []procEntry // every process but the kernel's threads
}

// procTicks returns the group and kernel ticks of scanProc.
func procTicks(procDir string, pgids []int) (group, kernel uint64, err error) {
	sc, err := scanProc(procDir, pgids)
	return sc.group, sc.kernel, err
}

// scanProc reads the stat file of every process under procDir. Processes that
// end during the scan are skipped.
func scanProc(procDir string, pgids []int) (procScan, error) {
	sc := procScan{want: make(map[int]bool, len(pgids))}
	for _, g := range pgids {
		if g > 0 {
			sc.want[g] = true
		}
	}
	d, err := os.Open(procDir)
	if err != nil {
		return procScan{}, err
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return procScan{}, fmt.Errorf("read %s: %w", procDir, err)
	}
	var buf [1024]byte // fields 1 to 22 fit: comm is at most 64 bytes
	for _, name := range names {
		if !isDigits(name) {
			continue
		}
		b, ok := readHead(filepath.Join(procDir, name, "stat"), buf[:])
		if !ok {
			continue
		}
		st, ok := parseStat(b)
		switch {
		case !ok:
			continue
		case st.flags&pfKthread != 0:
			sc.kernel += st.ticks // a kernel thread reaps no children: only its own time
			continue
		case sc.want[st.pgrp]:
			sc.group += st.ticks
		}
		sc.procs = append(sc.procs, st.procEntry)
	}
	return sc, nil
}

// readHead reads the start of a file into buf with one read. It uses the system calls
// directly: an os.File would also try to register each /proc file with the poller and
// set a finalizer, once per process per sample.
func readHead(path string, buf []byte) ([]byte, bool) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, false
	}
	defer syscall.Close(fd)
	for {
		n, err := syscall.Read(fd, buf)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || n < 0 {
			return nil, false
		}
		return buf[:n], true
	}
}

// statHead is what parseStat reads of a /proc/PID/stat line.
type statHead struct {
	procEntry        // pid (field 1), rsync (comm, 2), ppid (4), pgrp (5), starttime (22), ticks (14 to 17)
	flags     uint64 // field 9
}

// parseStat parses a /proc/PID/stat line, or its start up to field 17 (the
// start time is then 0). It parses after the last ')' because comm (field 2)
// may contain spaces and parentheses.
func parseStat(b []byte) (st statHead, ok bool) {
	i, j := bytes.LastIndexByte(b, ')'), bytes.IndexByte(b, '(')
	if i < 0 || j < 0 || j > i {
		return statHead{}, false
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b[:j])))
	if err != nil {
		return statHead{}, false
	}
	// fields[k] is field k+3: state, ppid, pgrp, ...
	fields := bytes.Fields(b[i+1:])
	if len(fields) < 15 {
		return statHead{}, false
	}
	ppid, err1 := strconv.Atoi(string(fields[1]))
	g, err2 := strconv.Atoi(string(fields[2]))
	flags, err3 := strconv.ParseUint(string(fields[6]), 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return statHead{}, false
	}
	st = statHead{procEntry: procEntry{pid: pid, ppid: ppid, pgrp: g, rsync: string(b[j+1:i]) == "rsync"}, flags: flags}
	for _, f := range fields[11:15] {
		// cutime and cstime are signed in the kernel's format, never
		// negative in practice
		v, err := strconv.ParseInt(string(f), 10, 64)
		if err != nil {
			return statHead{}, false
		}
		if v > 0 {
			st.ticks += uint64(v)
		}
	}
	if len(fields) > 19 {
		if start, err := strconv.ParseUint(string(fields[19]), 10, 64); err == nil {
			st.start = start
		}
	}
	return st, true
}

// atClkTck is AT_CLKTCK of the ELF auxiliary vector: the kernel's USER_HZ,
// the unit of the times in /proc/PID/stat.
const atClkTck = 17

// clockTicks returns the clock ticks per second of /proc/PID/stat, as
// sysconf(_SC_CLK_TCK) would, read without cgo from the auxiliary vector;
// it falls back to 100, USER_HZ on every common Linux architecture.
var clockTicks = sync.OnceValue(func() uint64 {
	if auxv, err := unix.Auxv(); err == nil {
		for _, kv := range auxv {
			if kv[0] == atClkTck && kv[1] > 0 {
				return uint64(kv[1])
			}
		}
	}
	return 100
})
