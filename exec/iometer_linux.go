package exec

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"sync"
)

// written is what one process has written so far, and its process group.
type written struct {
	pgid  int
	bytes uint64
}

// groupWrites returns, for every live process in one of the process groups pgids, the
// bytes its main thread has written so far (wchar: to files, pipes and sockets alike;
// rsync's processes have one thread). Each group is the one its leader, an rsync the pool
// started, made: its processes are the leader and its descendants, read from each
// process's list of children where the kernel keeps one, which costs a few reads a group
// where a scan of /proc costs a few per process on the machine. The sampler asks twice a
// second.
func groupWrites(pgids map[int]bool) map[int]written {
	if childrenListed() {
		return writesOfTrees(pgids)
	}
	return writesByScan(pgids)
}

// writesOfTrees is groupWrites from each leader's tree of children.
func writesOfTrees(pgids map[int]bool) map[int]written {
	out := map[int]written{}
	for g := range pgids {
		pids := []string{strconv.Itoa(g)}
		for len(pids) > 0 && len(pids) < 1024 { // a bound, were a reused PID to make a loop
			pid := pids[len(pids)-1]
			pids = pids[:len(pids)-1]
			readWritten(out, pid, g)
			b, err := os.ReadFile("/proc/" + pid + "/task/" + pid + "/children")
			if err == nil {
				pids = append(pids, strings.Fields(string(b))...)
			}
		}
	}
	return out
}

// writesByScan is groupWrites from a scan of /proc, where the kernel keeps no list of
// children (CONFIG_PROC_CHILDREN).
func writesByScan(pgids map[int]bool) map[int]written {
	out := map[int]written{}
	if len(pgids) == 0 {
		return out
	}
	eachProc(func(name, _ string, g int) bool {
		if pgids[g] {
			readWritten(out, name, g)
		}
		return true
	})
	return out
}

// readWritten adds to out what process pid of group g has written, if it is still there.
func readWritten(out map[int]written, pid string, g int) {
	// the task's own counters: /proc/PID/io adds those of the children it reaped, and the
	// rsync client reaps its receiver and the pipe's server
	io, err := os.ReadFile("/proc/" + pid + "/task/" + pid + "/io")
	if err != nil {
		return
	}
	if j := bytes.Index(io, []byte("wchar: ")); j >= 0 {
		rest := io[j+7:]
		if k := bytes.IndexByte(rest, '\n'); k >= 0 {
			rest = rest[:k]
		}
		if v, err := strconv.ParseUint(string(rest), 10, 64); err == nil {
			n, _ := strconv.Atoi(pid)
			out[n] = written{g, v}
		}
	}
}

// childrenListed says whether the kernel lists each task's children in /proc.
var childrenListed = sync.OnceValue(func() bool {
	me := strconv.Itoa(os.Getpid())
	_, err := os.Stat("/proc/" + me + "/task/" + me + "/children")
	return err == nil
})

// ioMeasured says whether groupWrites measures anything here.
const ioMeasured = true

// IOMeasured reports whether the pool can see what each rsync group writes (Linux).
func IOMeasured() bool { return ioMeasured }
