package tests

// The own-CPU tests (issue 23) judged by what the machine's load cannot change. The
// throttle may pause a copy only for load that is not the copy's: on a machine others keep
// busy it pauses rightly, and a test asserting "never pauses" failed there (make test,
// load 6 to 12 on 2 CPUs: a pull from a local daemon paused itself in 2 runs of 3, its own
// 52 to 67 % of a machine 98 to 100 % busy, with the daemon counted). So each test
// measures, by PID, the CPU of the processes whose work is the copy's (the daemon, the
// list's producer, prsync with its rsyncs) and checks that prsync counted all of it as its
// own, and that each pause came with other load at the threshold's headroom.

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// cpuWatch polls, every 50 ms, the CPU time of processes and their descendants.
type cpuWatch struct {
	pids []int
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	at   []time.Time
	secs []float64
}

// watchCPU starts polling the CPU time of pids and their descendants; Stop (or the test's
// end) stops it.
func watchCPU(t testing.TB, pids ...int) *cpuWatch {
	t.Helper()
	w := &cpuWatch{pids: pids, stop: make(chan struct{}), done: make(chan struct{})}
	w.read()
	go func() {
		defer close(w.done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-tick.C:
				w.read()
			}
		}
	}()
	t.Cleanup(w.Stop)
	return w
}

// Stop stops the polling, after one last reading.
func (w *cpuWatch) Stop() {
	select {
	case <-w.stop:
		return
	default:
	}
	close(w.stop)
	<-w.done
	w.read()
}

func (w *cpuWatch) read() {
	var secs float64
	for _, pid := range w.pids {
		secs += treeCPU(pid)
	}
	w.mu.Lock()
	w.at, w.secs = append(w.at, time.Now()), append(w.secs, secs)
	w.mu.Unlock()
}

// Before returns the last reading taken at or before tm (the first reading if none was).
func (w *cpuWatch) Before(tm time.Time) float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	v := w.secs[0]
	for i, at := range w.at {
		if at.After(tm) {
			break
		}
		v = w.secs[i]
	}
	return v
}

// After returns the first reading taken at or after tm (the last reading if none was).
func (w *cpuWatch) After(tm time.Time) float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, at := range w.at {
		if !at.Before(tm) {
			return w.secs[i]
		}
	}
	return w.secs[len(w.secs)-1]
}

// treeCPU returns the CPU seconds (user and system) of process pid and its descendants,
// with the children each of them has reaped (utime, stime, cutime and cstime). It reads a
// parent before its children, so a child reaped between the two readings is missed rather
// than counted twice: the sum is at most what the processes used, never more.
func treeCPU(pid int) float64 {
	var ticks uint64
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			continue // gone
		}
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:])) // f[0] is field 3, the state
		if len(f) < 15 {
			continue
		}
		for _, s := range f[11:15] { // fields 14 to 17: utime, stime, cutime, cstime
			n, _ := strconv.ParseUint(s, 10, 64)
			ticks += n
		}
		tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", p))
		for _, task := range tasks {
			c, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", p, task.Name()))
			for _, s := range strings.Fields(string(c)) {
				if n, err := strconv.Atoi(s); err == nil {
					queue = append(queue, n)
				}
			}
		}
	}
	return float64(ticks) / clockTicks
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on every Linux port.
const clockTicks = 100

// checkOwnCPU checks a copy's own CPU against what the processes whose work is the copy's
// used, as w measured them: the daemon, the list's producer, or (ofPrsync) prsync itself
// with its rsyncs. what names them. It checks the copy's pauses against the load they came
// with.
//
//   - The summary's own_cpu_seconds (all that prsync counted as its own, from its first
//     reading of /proc to its end) holds all they used over the run, from the start event
//     to the summary: however busy the machine, none of their work was other load.
//   - It holds no more than they, prsync and its rsyncs used (its own figures from
//     getrusage), so nothing was counted twice, nor another's work. The list comes from a
//     file (listFile), so the test process that writes a pipe is no producer of the list.
//   - Each pause came with other load (cpu_percent less own_cpu_percent and
//     kernel_cpu_percent) at the threshold's headroom or more, as the throttle's rule says:
//     with the own CPU proven to hold the copy's, the pauses were for others' load, which a
//     busy machine gives any copy.
//
// The slack is /proc's resolution: CPU times in ticks of 10 ms, cut, for each of a few
// processes and fields in two readings.
func checkOwnCPU(t *testing.T, r *Run, w *cpuWatch, what string, ofPrsync bool, suspend float64) {
	t.Helper()
	w.Stop()
	const slack = 0.1
	s := r.Summary(t)
	own, ok := s["own_cpu_seconds"].(float64)
	if !ok {
		t.Fatalf("summary without own_cpu_seconds: %v", s)
	}
	start, end := at(t, r.Start(t)), at(t, s)
	used := w.Before(end) - w.After(start) // a reading within the run at each end: at most what they used
	if own < used-slack {
		t.Errorf("prsync counted %.2f CPU-s as its own; %s used %.2f in that time: the rest was other load (%s)\n%s", own, what, used, sampled(r), r.Stderr)
	}
	most := s["cpu_seconds"].(float64) + s["rsync_cpu_seconds"].(float64) // getrusage: all of prsync's, from its start
	if !ofPrsync {
		most += w.After(end) - w.Before(start) // a reading outside the run at each end: at least what they used
	}
	if own > most+slack {
		t.Errorf("prsync counted %.2f CPU-s as its own; %s, prsync and its rsyncs used %.2f at most: some was counted twice, or another's", own, what, most)
	}
	headroom := 100 - suspend
	if suspend < 50 {
		headroom = suspend
	}
	for _, e := range r.OfType("throttle") {
		if e["action"] != "suspend" {
			continue
		}
		total, mine, kernel := "cpu_percent", "own_cpu_percent", "kernel_cpu_percent"
		if e["reason"] == "cgroup-cpu" {
			total, mine, kernel = "cgroup_cpu_percent", "cgroup_own_cpu_percent", ""
		}
		cpu, _ := e[total].(float64)
		ownPct, hasOwn := e[mine].(float64)
		k, _ := e[kernel].(float64)
		if other := cpu - ownPct - k; !hasOwn || other < headroom-0.15 { // three figures rounded to 0.1
			t.Errorf("a pause with other load %.1f%%, under the headroom of %.0f%%: %v", other, headroom, e)
		}
	}
	t.Logf("%s used %.2f CPU-s; prsync counted %.2f as its own, of %.2f at most (itself %v, its rsyncs %v); %d pauses in %v s",
		what, used, own, most, s["cpu_seconds"], s["rsync_cpu_seconds"], num(s, "suspensions"), s["seconds"])
}

// sampled describes the CPU samples of r's progress events, for a message: how many
// measured the copy's own CPU, and the mean of cpu_percent and own_cpu_percent over them.
func sampled(r *Run) string {
	var n int
	var cpu, own float64
	progress := r.OfType("progress")
	for _, p := range progress {
		if v, ok := p["own_cpu_percent"].(float64); ok {
			n++
			own += v
			cpu += p["cpu_percent"].(float64)
		}
	}
	if n == 0 {
		return fmt.Sprintf("none of %d progress events measured its own CPU", len(progress))
	}
	return fmt.Sprintf("%d of %d progress events measured its own CPU: %.1f %% of %.1f %% on average", n, len(progress), own/float64(n), cpu/float64(n))
}

// listFile returns list in a file open for reading: prsync's stdin with no producer to count.
func listFile(t testing.TB, list []byte) *os.File {
	t.Helper()
	f, err := os.Open(writeList(t, t.TempDir(), list))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
