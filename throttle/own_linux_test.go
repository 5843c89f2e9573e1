package throttle

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// head is a statHead: pid, ppid, pgrp, flags, start time, ticks, and whether comm is rsync.
func head(pid, ppid, pgrp int, flags, start, ticks uint64, rsync bool) statHead {
	return statHead{procEntry: procEntry{pid: pid, ppid: ppid, pgrp: pgrp, start: start, ticks: ticks, rsync: rsync}, flags: flags}
}

func TestParseStat(t *testing.T) {
	tail := " 1 4242 4242 0 -1 4194304 100 0 0 0 250 50 7 3 20 0 1 0 12345 1000 100"
	tests := []struct {
		name      string
		in        string
		want      statHead
		wantParse bool
	}{
		{"plain", "4242 (rsync) S" + tail, head(4242, 1, 4242, 4194304, 12345, 310, true), true},
		{"spaces and parens in comm", "4243 (a) b (c)) R" + tail, head(4243, 1, 4242, 4194304, 12345, 310, false), true},
		{"empty comm", "4244 () S" + tail, head(4244, 1, 4242, 4194304, 12345, 310, false), true},
		{"up to field 17 only", "4245 (rsync) S 1 77 77 0 -1 0 0 0 0 0 1 2 3 4", head(4245, 1, 77, 0, 0, 10, true), true},
		{"negative cutime ignored", "4245 (rsync) S 1 77 77 0 -1 0 0 0 0 0 1 2 -3 4", head(4245, 1, 77, 0, 0, 7, true), true},
		{"kernel thread", "52 (kworker/u8:3-flush-7:0) I 2 0 0 0 -1 69238880 0 0 0 0 0 731 0 0", head(52, 2, 0, 69238880, 0, 731, false), true},
		{"rsync in a longer name", "4246 (rsyncd) S" + tail, head(4246, 1, 4242, 4194304, 12345, 310, false), true},
		{"too short", "4246 (rsync) S 1 77 77 0 -1 0 0 0 0 0 1 2 3", statHead{}, false},
		{"no paren", "4247 rsync S" + tail, statHead{}, false},
		{"bad pid", "x (rsync) S 1 77 77 0 -1 0 0 0 0 0 1 2 3 4", statHead{}, false},
		{"paren before pid", ") 4 (rsync S 1 77 77 0 -1 0 0 0 0 0 1 2 3 4", statHead{}, false},
		{"bad ppid", "4248 (rsync) S y 77 77 0 -1 0 0 0 0 0 1 2 3 4", statHead{}, false},
		{"bad pgrp", "4248 (rsync) S 1 x 77 0 -1 0 0 0 0 0 1 2 3 4", statHead{}, false},
		{"bad flags", "4248 (rsync) S 1 77 77 0 -1 -5 0 0 0 0 1 2 3 4", statHead{}, false},
		{"bad ticks", "4249 (rsync) S 1 77 77 0 -1 0 0 0 0 0 1 zz 3 4", statHead{}, false},
		{"empty", "", statHead{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := parseStat([]byte(tt.in))
			if ok != tt.wantParse || got != tt.want {
				t.Errorf("parseStat(%q) = %+v, %v; want %+v, %v", tt.in, got, ok, tt.want, tt.wantParse)
			}
		})
	}
}

func TestProcTicks(t *testing.T) {
	dir := t.TempDir()
	statFlags := func(pid, pgrp, flags, utime, stime, cutime, cstime string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(dir, pid), 0o755); err != nil {
			t.Fatal(err)
		}
		line := pid + " (r s)ync) S 1 " + pgrp + " " + pgrp + " 0 -1 " + flags + " 0 0 0 0 " + utime + " " + stime + " " + cutime + " " + cstime + " 20 0 1 0 5 6 7\n"
		if err := os.WriteFile(filepath.Join(dir, pid, "stat"), []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stat := func(pid, pgrp, utime, stime, cutime, cstime string) {
		t.Helper()
		statFlags(pid, pgrp, "4194560", utime, stime, cutime, cstime)
	}
	stat("10", "10", "100", "20", "5", "1") // leader of group 10
	stat("11", "10", "30", "4", "0", "0")   // its child
	stat("12", "12", "1000", "1000", "0", "0")
	stat("13", "20", "7", "0", "0", "0")
	os.MkdirAll(filepath.Join(dir, "14"), 0o755)           // ended: no stat
	statFlags("2", "0", "2129984", "3", "1", "0", "0")     // kthreadd
	statFlags("52", "0", "69238880", "400", "0", "0", "0") // a kworker, flags with PF_KTHREAD
	statFlags("53", "10", "2097152", "9", "0", "0", "0")   // PF_KTHREAD in group 10: kernel, not ours
	os.MkdirAll(filepath.Join(dir, "sys"), 0o755)
	os.WriteFile(filepath.Join(dir, "stat"), []byte("cpu 1 2 3\n"), 0o644)

	for _, tt := range []struct {
		pgids []int
		want  uint64
	}{
		{[]int{10}, 160},
		{[]int{10, 20}, 167},
		{[]int{20, 10, 10}, 167},
		{[]int{99}, 0},
		{nil, 0},
		{[]int{0, -1}, 0},
	} {
		got, kernel, err := procTicks(dir, tt.pgids)
		if err != nil || got != tt.want || kernel != 413 {
			t.Errorf("procTicks(%v) = %d, %d, %v; want %d, 413", tt.pgids, got, kernel, err, tt.want)
		}
	}
	if _, _, err := procTicks(filepath.Join(dir, "missing"), []int{10}); err == nil {
		t.Error("procTicks on a missing directory: no error")
	}
}

func TestClockTicks(t *testing.T) {
	if hz := clockTicks(); hz < 1 || hz > 10000 {
		t.Errorf("clockTicks() = %d", hz)
	}
	t.Logf("clock ticks per second: %d", clockTicks())
}

// busyGroup starts a shell busy loop leading its own process group.
func busyGroup(t *testing.T) *exec.Cmd {
	t.Helper()
	c := exec.Command("sh", "-c", "while :; do :; done")
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if c.ProcessState == nil {
			c.Process.Kill()
			c.Wait()
		}
	})
	return c
}

// groupList is a groups function for NewSystemSampler that a test changes.
type groupList struct {
	mu    sync.Mutex
	pgids []int
}

func (g *groupList) set(pgids ...int) { g.mu.Lock(); g.pgids = pgids; g.mu.Unlock() }
func (g *groupList) get() []int       { g.mu.Lock(); defer g.mu.Unlock(); return g.pgids }

// TestOwnCPUOfRealGroup measures a real busy process group, then checks that
// reaping it does not count its CPU time a second time. The loop's CPU is what
// it got, read from /proc, not a share of a core assumed of a quiet machine: on
// a busy one it gets less, and the test waits until it has had enough.
func TestOwnCPUOfRealGroup(t *testing.T) {
	hog := busyGroup(t)
	pid := hog.Process.Pid
	var groups groupList
	groups.set(pid)
	hz := float64(clockTicks())
	ticks := func() float64 {
		n, _, err := procTicks("/proc", []int{pid})
		if err != nil {
			t.Fatal(err)
		}
		return float64(n)
	}
	s := NewSystemSampler(Policy{Suspend: 80, Resume: 60}, nil, groups.get)
	c0, t0 := ticks(), time.Now()
	ncpu := float64(s.ncpu)

	// at least 500 ms, and until the loop has had 25 ticks of CPU (at most 30 s)
	for time.Since(t0) < 500*time.Millisecond || (ticks()-c0 < 25 && time.Since(t0) < 30*time.Second) {
		time.Sleep(50 * time.Millisecond)
	}
	s1, err := s.Sample(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	got, elapsed := (ticks()-c0)/hz, time.Since(t0).Seconds()
	t.Logf("busy group listed: %+v (%v CPUs); the loop had %.2fs of CPU in %.2fs", s1, ncpu, got, elapsed)
	if !s1.HasOwn {
		t.Fatal("HasOwn = false on Linux")
	}
	if own := s1.Own / 100 * ncpu * elapsed; own < 0.8*got-2/hz || s1.Own > s1.CPU {
		t.Errorf("Own = %.1f%% of the machine (%.2f CPU-seconds), CPU %.1f%%; want at least the loop's %.2fs and at most CPU",
			s1.Own, own, s1.CPU, got)
	}

	// Kill and reap the leader: its whole CPU time moves into our
	// RUSAGE_CHILDREN, but only the little it ran since s1 is new.
	t1 := time.Now()
	hog.Process.Kill()
	hog.Wait()
	whole := (hog.ProcessState.UserTime() + hog.ProcessState.SystemTime()).Seconds()
	time.Sleep(300 * time.Millisecond)
	s2, err := s.Sample(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	own2 := s2.Own / 100 * ncpu * time.Since(t1).Seconds()
	t.Logf("after reaping: %+v; %.3f CPU-seconds, the loop's whole life %.2fs", s2, own2, whole)
	if !s2.HasOwn || own2 > whole/2 {
		t.Errorf("Own = %.1f%% of the machine (%.3f CPU-seconds) after reaping, want well below the loop's %.2fs: counted again",
			s2.Own, own2, whole)
	}
}

// TestOwnCPUWithoutGroups: with no group listed, Own counts only reaped
// children: an unlisted busy group is left out, a child that ran and was
// reaped in the interval is counted.
func TestOwnCPUWithoutGroups(t *testing.T) {
	busyGroup(t) // unlisted
	s := NewSystemSampler(Policy{Suspend: 80, Resume: 60}, nil, func() []int { return nil })
	t0 := time.Now()
	ncpu := float64(s.ncpu)

	burn := exec.Command("sh", "-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done")
	if err := burn.Run(); err != nil {
		t.Fatal(err)
	}
	burned := (burn.ProcessState.UserTime() + burn.ProcessState.SystemTime()).Seconds()
	if d := 500*time.Millisecond - time.Since(t0); d > 0 {
		time.Sleep(d)
	}
	elapsed := time.Since(t0).Seconds()
	got, err := s.Sample(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ownSecs := got.Own / 100 * ncpu * elapsed
	t.Logf("sample %+v; child burned %.3fs, Own is %.3fs over %.3fs", got, burned, ownSecs, elapsed)
	if !got.HasOwn {
		t.Fatal("HasOwn = false on Linux")
	}
	if got.Own < got.CPU && (ownSecs < burned*0.8-0.02 || ownSecs > burned*1.2+0.02) {
		t.Errorf("Own is %.3f CPU-seconds, want about the %.3fs of the reaped child", ownSecs, burned)
	}
}

// TestProcTicksRealKernelThreads: on this machine's /proc, kernel threads are told
// apart from processes (kthreadd, PID 2, is a kernel thread outside a PID namespace).
func TestProcTicksRealKernelThreads(t *testing.T) {
	b, err := os.ReadFile("/proc/2/stat")
	if err != nil {
		t.Skipf("no PID 2 here (a PID namespace): %v", err)
	}
	st, ok := parseStat(b)
	if !ok || st.flags&pfKthread == 0 {
		t.Skipf("PID 2 is no kernel thread here: %q", b)
	}
	self, _ := parseStat(must(os.ReadFile("/proc/self/stat")))
	if self.flags&pfKthread != 0 {
		t.Fatalf("this test process has PF_KTHREAD: %+v", self)
	}
	hog := busyGroup(t)
	time.Sleep(300 * time.Millisecond)
	group, kernel, err := procTicks("/proc", []int{hog.Process.Pid})
	if err != nil {
		t.Fatal(err)
	}
	if group == 0 {
		t.Errorf("a busy loop's group: %d ticks", group)
	}
	t.Logf("group %d ticks, kernel threads %d ticks", group, kernel)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// BenchmarkGroupTicks: one sample of the own rsyncs' CPU on this machine's /proc.
func BenchmarkGroupTicks(b *testing.B) {
	pgids := []int{syscall.Getpgrp()}
	for b.Loop() {
		if _, _, err := procTicks("/proc", pgids); err != nil {
			b.Fatal(err)
		}
	}
}

// TestOwnCPUReapDuringScan: a group reaped while /proc is scanned is counted once, from
// RUSAGE_CHILDREN, whether the scan had seen it or had not reached it yet; a scan with no
// reap is not repeated, and reaps that never stop do not loop.
func TestOwnCPUReapDuringScan(t *testing.T) {
	hz := float64(clockTicks())
	tests := []struct {
		name     string
		children []float64 // RUSAGE_CHILDREN at each read
		scans    []uint64  // the groups' ticks at each scan
		want     float64   // own, less self (2 s)
		wantScan int
	}{
		{"no reap", []float64{1, 1}, []uint64{50}, 1 + 50/hz, 1},
		{"reaped before the scan reached it", []float64{1, 1.5, 1.5}, []uint64{0, 0}, 1.5, 2},
		{"reaped after the scan saw it", []float64{1, 1.5, 1.5}, []uint64{50, 0}, 1.5, 2},
		{"reaps all along", []float64{1, 2, 3, 4, 5, 6}, []uint64{9, 8, 7, 6, 5}, 5 + 6/hz, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ci, si := 0, 0
			children := func() (float64, error) {
				v := tt.children[min(ci, len(tt.children)-1)]
				ci++
				return v, nil
			}
			scan := func([]int) (procScan, error) {
				v := tt.scans[min(si, len(tt.scans)-1)]
				si++
				return procScan{group: v, kernel: 3}, nil
			}
			self := func() (float64, error) { return 2, nil }
			got, _, err := ownCPU([]int{7}, self, children, scan)
			if err != nil {
				t.Fatal(err)
			}
			if d := got.own - 2 - tt.want; d > 1e-9 || d < -1e-9 {
				t.Errorf("own %.4f, want %.4f", got.own-2, tt.want)
			}
			if si != tt.wantScan {
				t.Errorf("%d scans, want %d", si, tt.wantScan)
			}
			if got.kernel != 3/hz {
				t.Errorf("kernel %v", got.kernel)
			}
		})
	}
}
