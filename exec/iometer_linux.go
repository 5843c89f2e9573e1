package exec

import (
	"bytes"
	"os"
	"strconv"
)

// written is what one process has written so far, and its process group.
type written struct {
	pgid  int
	bytes uint64
}

// groupWrites returns, for every live process in one of the process groups pgids, the
// bytes its main thread has written so far (wchar: to files, pipes and sockets alike;
// rsync's processes have one thread).
func groupWrites(pgids map[int]bool) map[int]written {
	out := map[int]written{}
	if len(pgids) == 0 {
		return out
	}
	eachProc(func(name, _ string, g int) bool {
		if !pgids[g] {
			return true
		}
		// the task's own counters: /proc/PID/io adds those of the children it reaped,
		// and the rsync client reaps its receiver and the pipe's server
		io, err := os.ReadFile("/proc/" + name + "/task/" + name + "/io")
		if err != nil {
			return true
		}
		if j := bytes.Index(io, []byte("wchar: ")); j >= 0 {
			rest := io[j+7:]
			if k := bytes.IndexByte(rest, '\n'); k >= 0 {
				rest = rest[:k]
			}
			if v, err := strconv.ParseUint(string(rest), 10, 64); err == nil {
				pid, _ := strconv.Atoi(name)
				out[pid] = written{g, v}
			}
		}
		return true
	})
	return out
}

// ioMeasured says whether groupWrites measures anything here.
const ioMeasured = true

// IOMeasured reports whether the pool can see what each rsync group writes (Linux).
func IOMeasured() bool { return ioMeasured }
