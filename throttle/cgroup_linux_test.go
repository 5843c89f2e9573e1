package throttle

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prsync/prsync/internal/cmdline"
)

// The test binary runs as a helper child when helperEnv is set; see
// cgroupSamplerHelper.
const (
	helperEnv      = "PRSYNC_THROTTLE_TEST_HELPER"
	helperProcsEnv = "PRSYNC_THROTTLE_TEST_CGROUP_PROCS" // cgroup.procs to join
	helperOwnEnv   = "PRSYNC_THROTTLE_TEST_OWN_BUSY"     // "1": run a busy loop as prsync's own rsync group
	helperSamples  = 10
	helperInterval = 500 * time.Millisecond
)

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "cgroup-sampler" {
		os.Exit(cgroupSamplerHelper())
	}
	os.Exit(m.Run())
}

// cgroupSamplerHelper moves this process into the cgroup whose cgroup.procs
// helperProcsEnv names, builds a SystemSampler and prints, as JSON lines,
// its Source and then helperSamples samples, one every helperInterval. With
// helperOwnEnv set it first starts a busy loop in its own process group (in
// the cgroup, like the rsyncs prsync starts) and lists it as prsync's own.
func cgroupSamplerHelper() int {
	if err := os.WriteFile(os.Getenv(helperProcsEnv), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "helper: join the cgroup:", err)
		return 2
	}
	var groups func() []int
	if os.Getenv(helperOwnEnv) == "1" {
		busy := exec.Command("sh", "-c", "while :; do :; done")
		busy.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := busy.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			return 2
		}
		defer func() {
			busy.Process.Kill()
			busy.Wait()
		}()
		pgid := busy.Process.Pid
		groups = func() []int { return []int{pgid} }
	}
	s := NewSystemSampler(Policy{Suspend: 80, Resume: 60}, cmdline.Warner(os.Stderr), groups)
	enc := json.NewEncoder(os.Stdout)
	if err := enc.Encode(s.Source()); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 2
	}
	for range helperSamples {
		time.Sleep(helperInterval)
		smp, err := s.Sample(context.Background())
		if err == nil {
			err = enc.Encode(smp)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			return 2
		}
	}
	return 0
}

// testCgroup is a cgroup with a CPU quota of half a CPU that a test made.
type testCgroup struct {
	name   string // its directory's name, unique to this test run
	dir    string
	parent string // where leftover tasks go back to
}

var cgroupSeq atomic.Int32

// newTestCgroup makes a cgroup with a 0.5-CPU quota: with cpu.max under
// /sys/fs/cgroup on cgroup v2, else with cpu.cfs_quota_us under
// /sys/fs/cgroup/cpu (cgroup v1). It skips the test, with the reason, if it
// cannot. Its weight is the highest there is (cpu.weight, cpu.shares), so that
// on a busy host its tasks still get the half CPU the quota allows: the quota,
// not the host's other load, is what limits them. t.Cleanup kills by PID whatever is left in it (only this test's
// processes can be, since only this test knows its name), moves what remains
// back to the parent and removes it.
func newTestCgroup(t *testing.T) *testCgroup {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("making a cgroup needs root")
	}
	cg := &testCgroup{name: fmt.Sprintf("prsync-test-%d-%d", os.Getpid(), cgroupSeq.Add(1))}
	var limit map[string]string
	if ctrls, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		if !slices.Contains(strings.Fields(string(ctrls)), "cpu") {
			t.Skipf("cgroup v2 without the cpu controller (cgroup.controllers: %q)", strings.TrimSpace(string(ctrls)))
		}
		cg.parent = "/sys/fs/cgroup"
		sub, err := os.ReadFile("/sys/fs/cgroup/cgroup.subtree_control")
		if err != nil {
			t.Skipf("cgroup v2: %v", err)
		}
		if !slices.Contains(strings.Fields(string(sub)), "cpu") {
			if err := os.WriteFile("/sys/fs/cgroup/cgroup.subtree_control", []byte("+cpu"), 0o644); err != nil {
				t.Skipf("cgroup v2: cannot enable the cpu controller for child cgroups: %v", err)
			}
		}
		limit = map[string]string{"cpu.max": "50000 100000", "cpu.weight": "10000"}
	} else {
		cg.parent = "/sys/fs/cgroup/cpu"
		if _, err := os.Stat(filepath.Join(cg.parent, "cpu.cfs_quota_us")); err != nil {
			t.Skipf("no cgroup v2 (/sys/fs/cgroup/cgroup.controllers) and no cgroup v1 cpu controller: %v", err)
		}
		limit = map[string]string{"cpu.cfs_period_us": "100000", "cpu.cfs_quota_us": "50000", "cpu.shares": "262144"}
	}
	cg.dir = filepath.Join(cg.parent, cg.name)
	if err := os.Mkdir(cg.dir, 0o755); err != nil {
		t.Skipf("cannot make a cgroup: %v", err)
	}
	t.Cleanup(func() { cg.remove(t) })
	for _, f := range []string{"cpu.max", "cpu.cfs_period_us", "cpu.cfs_quota_us", "cpu.weight", "cpu.shares"} {
		if v, ok := limit[f]; ok {
			if err := os.WriteFile(filepath.Join(cg.dir, f), []byte(v), 0o644); err != nil {
				t.Skipf("cannot set %s of %s: %v", f, cg.dir, err)
			}
		}
	}
	return cg
}

func (cg *testCgroup) procs() []int {
	b, err := os.ReadFile(filepath.Join(cg.dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	pids, _ := parseProcs(b)
	return pids
}

// add moves the process pid into the cgroup.
func (cg *testCgroup) add(t *testing.T, pid int) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(cg.dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
		t.Fatalf("move %d into %s: %v", pid, cg.dir, err)
	}
}

func (cg *testCgroup) remove(t *testing.T) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		pids := cg.procs()
		if len(pids) == 0 {
			break
		}
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL) // by PID: only this test's processes
			os.WriteFile(filepath.Join(cg.parent, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644)
		}
		if time.Now().After(deadline) {
			t.Errorf("cgroup %s still has tasks %v", cg.dir, pids)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	for {
		err := syscall.Rmdir(cg.dir)
		if err == nil || errors.Is(err, syscall.ENOENT) {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("remove cgroup %s: %v", cg.dir, err)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startBusy starts a shell busy loop, killed and reaped by PID in t.Cleanup.
func startBusy(t *testing.T) *exec.Cmd {
	t.Helper()
	c := exec.Command("sh", "-c", "while :; do :; done")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Process.Kill()
		c.Wait()
	})
	return c
}

// runSamplerHelper runs the helper in cg and returns its Source and samples.
func runSamplerHelper(t *testing.T, cg *testCgroup, own bool) (CgroupInfo, []Sample) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	c.Env = append(os.Environ(), helperEnv+"=cgroup-sampler", helperProcsEnv+"="+filepath.Join(cg.dir, "cgroup.procs"))
	if own {
		c.Env = append(c.Env, helperOwnEnv+"=1")
	}
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	if err := c.Run(); err != nil {
		t.Fatalf("helper: %v\n%s", err, stderr.String())
	}
	if stderr.Len() > 0 {
		t.Logf("helper stderr: %s", stderr.String())
	}
	sc := bufio.NewScanner(&stdout)
	var info CgroupInfo
	var samples []Sample
	for i := 0; sc.Scan(); i++ {
		var err error
		if i == 0 {
			err = json.Unmarshal(sc.Bytes(), &info)
		} else {
			var s Sample
			err = json.Unmarshal(sc.Bytes(), &s)
			samples = append(samples, s)
		}
		if err != nil {
			t.Fatalf("helper line %q: %v", sc.Text(), err)
		}
	}
	t.Logf("source: %+v", info)
	for i, s := range samples {
		t.Logf("sample %d: cpu %.1f%% own %.1f%% | cgroup %.1f%% of %.2g CPUs, own %.1f%%, throttled %.2f, has cgroup %v",
			i, s.CPU, s.Own, s.CgroupCPU, s.CgroupCPUs, s.CgroupOwn, s.Throttled, s.HasCgroup)
	}
	if !strings.HasSuffix(info.Path, "/"+cg.name) || info.CPUs != 0.5 || info.LimitDir == "" || info.Usage == "" {
		t.Fatalf("the helper found %+v, want cgroup .../%s with 0.5 CPUs", info, cg.name)
	}
	if len(samples) != helperSamples {
		t.Fatalf("%d samples, want %d", len(samples), helperSamples)
	}
	for i, s := range samples {
		if !s.HasCgroup || s.CgroupCPUs != 0.5 {
			t.Fatalf("sample %d has no cgroup figures: %+v", i, s)
		}
	}
	return info, samples
}

// medianSample returns the median of each figure of samples, with the Has
// fields of the last one.
func medianSample(samples []Sample) Sample {
	med := func(f func(Sample) float64) float64 {
		v := make([]float64, len(samples))
		for i, s := range samples {
			v[i] = f(s)
		}
		slices.Sort(v)
		if n := len(v); n%2 == 0 {
			return (v[n/2-1] + v[n/2]) / 2
		}
		return v[len(v)/2]
	}
	m := samples[len(samples)-1]
	m.CPU = med(func(s Sample) float64 { return s.CPU })
	m.Own = med(func(s Sample) float64 { return s.Own })
	m.CgroupCPU = med(func(s Sample) float64 { return s.CgroupCPU })
	m.CgroupOwn = med(func(s Sample) float64 { return s.CgroupOwn })
	m.Throttled = med(func(s Sample) float64 { return s.Throttled })
	return m
}

var (
	quotaPolicy = Policy{Suspend: 80, Resume: 60}
	quotaState  = State{Running: 1, GateOpen: true}
)

// hostOnly is s without its cgroup figures: what prsync saw before it knew
// about cgroups.
func hostOnly(s Sample) Sample { return Sample{CPU: s.CPU, Own: s.Own, HasOwn: s.HasOwn} }

// quietSamples returns the samples, after the first (whose interval includes
// the helper's start), in which the host figure alone would not suspend. On
// a busy machine other load pushes the host over the threshold; those samples
// cannot tell a full cgroup from a busy host. It returns nil, with a note, if
// fewer than half of them are left: the test then judges the cgroup's figures
// alone (cgroupOnly), which a busy host does not change.
func quietSamples(t *testing.T, samples []Sample) []Sample {
	t.Helper()
	var quiet []Sample
	for _, s := range samples[1:] {
		if Decide(quotaPolicy, quotaState, hostOnly(s)).Action != Suspend {
			quiet = append(quiet, s)
		}
	}
	if len(quiet) < len(samples)/2 {
		t.Logf("the host is busy: only %d of %d samples have the host's cpu below the threshold; the decisions are judged on the cgroup's figures alone", len(quiet), len(samples)-1)
		return nil
	}
	return quiet
}

// cgroupOnly is s with a quiet host: what Decide makes of the cgroup's figures alone.
func cgroupOnly(s Sample) Sample {
	s.CPU, s.Own, s.Kernel = 0, 0, 0
	return s
}

// TestCgroupQuotaReal runs a sampler in a real cgroup with half a CPU, on
// the test binary re-run as a helper that moves itself into the cgroup.
func TestCgroupQuotaReal(t *testing.T) {
	t.Run("busy loop inside", func(t *testing.T) {
		cg := newTestCgroup(t)
		cg.add(t, startBusy(t).Process.Pid)
		_, samples := runSamplerHelper(t, cg, false)
		all := medianSample(samples[1:])
		t.Logf("median: cpu %.1f%%, cgroup %.1f%%, throttled %.2f", all.CPU, all.CgroupCPU, all.Throttled)
		if all.CgroupCPU < 85 {
			t.Errorf("median cgroup cpu %.1f%% of the budget, want near 100%%", all.CgroupCPU)
		}
		if all.Throttled < 0.5 {
			t.Errorf("median throttled fraction %.2f, want most periods throttled", all.Throttled)
		}
		if d := Decide(quotaPolicy, quotaState, cgroupOnly(all)); d != (Decision{Suspend, false, ReasonCgroupCPU}) {
			t.Errorf("Decide(median cgroup figures alone) = %+v, want a cgroup-cpu suspend", d)
		}
		if quiet := quietSamples(t, samples); quiet != nil {
			med := medianSample(quiet)
			t.Logf("median of the samples with room on the host: cpu %.1f%%, cgroup %.1f%%", med.CPU, med.CgroupCPU)
			if d := Decide(quotaPolicy, quotaState, med); d != (Decision{Suspend, false, ReasonCgroupCPU}) {
				t.Errorf("Decide(median) = %+v, want a cgroup-cpu suspend", d)
			}
			if d := Decide(quotaPolicy, quotaState, hostOnly(med)); d.Action == Suspend {
				t.Errorf("Decide(median host figure alone) = %+v, want no suspend", d)
			}
		}
	})

	t.Run("busy loop outside", func(t *testing.T) {
		cg := newTestCgroup(t)
		startBusy(t) // in this test's cgroup, not cg
		_, samples := runSamplerHelper(t, cg, false)
		all := medianSample(samples[1:])
		t.Logf("median: cpu %.1f%%, cgroup %.1f%%", all.CPU, all.CgroupCPU)
		if all.CgroupCPU > 20 {
			t.Errorf("median cgroup cpu %.1f%% with only the sampler in it, want little", all.CgroupCPU)
		}
		if d := Decide(quotaPolicy, quotaState, cgroupOnly(all)); d.Action == Suspend {
			t.Errorf("Decide(median cgroup figures alone) = %+v, want no suspend", d)
		}
		if quiet := quietSamples(t, samples); quiet != nil {
			if d := Decide(quotaPolicy, quotaState, medianSample(quiet)); d.Action == Suspend {
				t.Errorf("Decide(median) = %+v, want no suspend", d)
			}
		}
	})

	t.Run("own rsync inside", func(t *testing.T) {
		cg := newTestCgroup(t)
		_, samples := runSamplerHelper(t, cg, true)
		all := medianSample(samples[1:])
		t.Logf("median: cpu %.1f%% (own %.1f%%), cgroup %.1f%% (own %.1f%%)", all.CPU, all.Own, all.CgroupCPU, all.CgroupOwn)
		if !all.HasOwn {
			t.Fatal("HasOwn = false on Linux")
		}
		if all.CgroupCPU < 85 || all.CgroupOwn < 70 {
			t.Errorf("median cgroup cpu %.1f%%, own %.1f%%; want near 100%% and most of it own", all.CgroupCPU, all.CgroupOwn)
		}
		med := cgroupOnly(all)
		if quiet := quietSamples(t, samples); quiet != nil {
			med = medianSample(quiet)
		}
		if d := Decide(quotaPolicy, quotaState, med); d.Action == Suspend {
			t.Errorf("Decide(median) = %+v: prsync paused itself", d)
		}
		noOwn := med
		noOwn.HasOwn = false
		if d := Decide(quotaPolicy, quotaState, noOwn); d.Action != Suspend {
			t.Errorf("Decide(median without own) = %+v, want a suspend", d)
		}
	})
}
