package throttle

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/shirou/gopsutil/v4/cpu"
	"github.com/shirou/gopsutil/v4/load"
)

// Sampler measures how busy the machine is.
type Sampler interface {
	// Sample returns a measurement covering the time since the previous call.
	Sample(ctx context.Context) (Sample, error)
}

// NewSystemSampler returns a Sampler that measures the whole machine and,
// on Linux inside a cgroup with a CPU quota, the cgroup.
//
// CPU use is the system-wide percentage since the previous call. The
// 1-minute load average is read only if p.MaxLoad > 0, Linux PSI io pressure
// only if p.MaxIOPressure > 0, and PSI cpu pressure only if
// p.MaxCPUPressure > 0. The PSI files are those of this process's cgroup
// (v2) if it has them, else /proc/pressure's. If a figure cannot be read,
// the sampler gives warn (which may be nil) one warning and stops reading
// it, so that limit is ignored from then on. Warnings are given as they
// happen, here or in Sample, and are for the user to read: the CLI writes
// each as a "prsync: warning:" line.
//
// It detects this process's cgroup once, here, as DetectCgroup does; Source
// reports what it found. If the cgroup or one of its ancestors has a CPU
// limit, each Sample also measures the CPU use of the cgroup with the
// tightest limit as a percentage of that budget (Sample.CgroupCPU, with
// HasCgroup), from the source named by CgroupInfo.Usage, and the fraction
// of its periods throttled. If that cannot be read, it warns once and
// measures the host alone from then on.
//
// groups, if not nil, returns the process group ids of prsync's running
// rsyncs (see GroupsOf); it is called once per Sample, and once here. On
// Linux the sampler then also measures Own, the CPU those rsyncs used: the
// growth over the interval of this process's reaped children's CPU time
// (getrusage RUSAGE_CHILDREN; rsync waits for its own children, so they are
// included once the leader is reaped) plus the CPU time of every live
// process in one of the groups, its own and that of the children it has
// reaped (utime, stime, cutime and cstime of /proc/PID/stat, found by one
// scan of /proc per call), plus the CPU of the processes that serve those
// rsyncs over TCP on this machine (see peerBook). Own is a percentage of the whole machine, like
// CPU, clamped to [0, CPU]; the same CPU-seconds over the cgroup's budget
// give CgroupOwn, clamped to [0, CgroupCPU], without the peers'. If /proc cannot be scanned, it
// warns once and stops measuring Own. On other systems, or with a nil
// groups, HasOwn is false, so prsync's own rsyncs count toward the CPU
// thresholds (on macOS, for instance).
//
// CPU use leaves out the hypervisor's steal time (see busyPercent).
func NewSystemSampler(p Policy, warn func(error), groups func() []int) *SystemSampler {
	found, meter, err := hostCgroupMeter()
	return newSystemSampler(p, warn, groups, found, meter, err)
}

// newSystemSampler is NewSystemSampler with the cgroup detection done:
// found, its meter (nil for none) and the detection error.
func newSystemSampler(p Policy, warn func(error), groups func() []int, found cgroupFound, meter *cgroupMeter, cgErr error) *SystemSampler {
	if warn == nil {
		warn = func(error) {}
	}
	info := found.CgroupInfo
	s := &SystemSampler{
		warn:            warn,
		info:            info,
		wantLoad:        p.MaxLoad > 0,
		wantIO:          p.MaxIOPressure > 0,
		wantCPUPressure: p.MaxCPUPressure > 0,
		cpuPercent:      hostCPU(),
		loadAverage:     loadAverage,
		ioPressure:      func() (float64, error) { return readPressure(info.IOPressureFile) },
		cpuPressure:     func() (float64, error) { return readPressure(info.CPUPressureFile) },
		cgroup:          meter,
		now:             time.Now,
	}
	if cgErr != nil {
		warn(fmt.Errorf("cgroup: %v; using the host's cpu use only", cgErr))
	}
	if groups != nil {
		s.groups = groups
		s.ownTime = ownCPUSource(func() ([]int, []FUSEMount) { return s.daemonPorts, s.fuse }) // read under s.mu, as ownTime is
		s.ncpu = machineCPUs()
		if meter != nil && s.ownTime != nil {
			self := os.Getpid()
			meter.skip = func(pid, pgrp int) bool {
				if pid == self {
					return true
				}
				for _, g := range groups() {
					if g == pgrp {
						return true
					}
				}
				return false
			}
		}
	}
	// Prime the CPU counters: the first call has no previous call to
	// compare with.
	_, _ = s.cpuPercent(context.Background())
	s.sampleOwn()
	s.sampleCgroup()
	return s
}

// GroupsOf returns a function for NewSystemSampler that lists the process
// group ids of t's running rsyncs (their PIDs: each rsync leads its group).
func GroupsOf(t interface{ Procs() []Proc }) func() []int {
	return func() []int {
		procs := t.Procs()
		pgids := make([]int, 0, len(procs))
		for _, p := range procs {
			pgids = append(pgids, p.PID)
		}
		return pgids
	}
}

// SystemSampler is the Sampler of NewSystemSampler. Its methods are safe
// for concurrent use.
type SystemSampler struct {
	warn func(error)
	info CgroupInfo // what NewSystemSampler detected

	cpuPercent  func(context.Context) (float64, error)
	loadAverage func(context.Context) (float64, error)
	ioPressure  func() (float64, error)
	cpuPressure func() (float64, error)

	// Own CPU: all nil or zero unless measured.
	groups      func() []int                  // pgids of the rsync groups
	ownTime     func([]int) (cpuTimes, error) // cumulative CPU seconds: own (reaped children and live groups), kernel threads
	daemonPorts []int                         // CountDaemon's
	fuse        []FUSEMount                   // CountFUSE's
	ncpu        int                           // CPUs of the machine, the scale of CPU

	now func() time.Time // time.Now; nil means time.Now

	mu              sync.Mutex
	cgroup          *cgroupMeter // nil unless the cgroup has a CPU limit readable so far
	wantLoad        bool         // MaxLoad is set and the load average was readable so far
	wantIO          bool         // MaxIOPressure is set and PSI io was readable so far
	wantCPUPressure bool         // MaxCPUPressure is set and PSI cpu was readable so far
	ownOK           bool         // ownLast and ownAt hold a previous reading
	ownLast         cpuTimes
	ownAt           time.Time
	ownFirst        cpuTimes // the first reading, the start of OwnCPUSeconds
}

// cpuTimes are cumulative CPU seconds: prsync's own (itself, its reaped children and
// its live rsync groups), its rsyncs' peers' on this machine (see peerBook) and the
// kernel threads'.
type cpuTimes struct{ own, peer, kernel float64 }

// Source reports the cgroup and the files the sampler reads, as detected
// when it was made: the CLI shows it at the start of a run. It does not
// change when a figure that cannot be read is turned off later.
func (s *SystemSampler) Source() CgroupInfo { return s.info }

// Sample returns a measurement covering the time since the previous call.
func (s *SystemSampler) Sample(ctx context.Context) (Sample, error) {
	s.mu.Lock()
	defer s.mu.Unlock()

	var out Sample
	c, err := s.cpuPercent(ctx)
	if err != nil {
		return Sample{}, fmt.Errorf("cpu usage: %w", err)
	}
	out.CPU = c
	ownTimes, ownDT, ownOK := s.sampleOwn()
	ownSecs := ownTimes.own
	if ownOK {
		// the peers count on the host's scale only: a daemon or sshd serving the
		// rsyncs is seldom in prsync's cgroup, and its use is not the cgroup's
		out.Own, out.HasOwn = share(ownSecs+ownTimes.peer, ownDT, float64(s.ncpu), c), true
		out.Kernel = share(ownTimes.kernel, ownDT, float64(s.ncpu), c-out.Own)
	}

	if pct, throttled, ok := s.sampleCgroup(); ok {
		if s.cgroup.usage == UsageProcs && s.cgroup.skip != nil && ownOK {
			pct = min(100, pct+share(ownSecs, ownDT, s.cgroup.cpus, 100))
		}
		// the share of periods in which the quota ran out is a floor of its use: it
		// catches what a count of tasks misses (tasks that ended between readings)
		pct = max(pct, 100*s.cgroup.floor(throttled))
		out.CgroupCPU, out.CgroupCPUs, out.Throttled, out.HasCgroup = pct, s.cgroup.cpus, throttled, true
		if ownOK {
			out.CgroupOwn = share(ownSecs, ownDT, s.cgroup.cpus, pct)
		}
	}

	// a load average cut short by ctx fails the sample; the pressure files ignore it
	out.Load, out.HasLoad, err = s.optional(ctx, &s.wantLoad, "--max-load", func() (float64, error) { return s.loadAverage(ctx) })
	if err != nil {
		return Sample{}, err
	}
	out.CPUPressure, out.HasCPUPressure, _ = s.optional(context.Background(), &s.wantCPUPressure, "--max-cpu-pressure", s.cpuPressure)
	out.IOPressure, out.HasIO, _ = s.optional(context.Background(), &s.wantIO, "--max-io-pressure", s.ioPressure)
	return out, nil
}

// optional reads a figure only a limit needs, while *want says it is set and readable.
// A figure that cannot be read is a warning, and its limit is ignored from then on; a
// read that fails once ctx has ended returns ctx's error and changes nothing. The caller
// holds s.mu.
func (s *SystemSampler) optional(ctx context.Context, want *bool, flag string, read func() (float64, error)) (v float64, ok bool, err error) {
	if !*want {
		return 0, false, nil
	}
	v, err = read()
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return 0, false, ctxErr
		}
		*want = false
		s.warn(fmt.Errorf("%s: %v; ignoring it", flag, err))
		return 0, false, nil
	}
	return v, true, nil
}

// share returns secs CPU-seconds over dt seconds as a percentage of cpus
// CPUs, clamped to [0, upTo] (0 if upTo is NaN).
func share(secs, dt, cpus, upTo float64) float64 {
	pct := secs / (dt * cpus) * 100
	if !(pct <= upTo) {
		pct = upTo
	}
	if !(pct >= 0) {
		pct = 0
	}
	return pct
}

// sampleOwn reads prsync's own CPU time and the kernel threads' and returns
// their growth in CPU-seconds since the previous reading (a decrease, such as
// a kernel thread that ended, counts as none) and the seconds between the two.
// It returns false if Own is not measured or there is no previous reading.
// The caller holds s.mu, or has s to itself.
func (s *SystemSampler) sampleOwn() (d cpuTimes, dt float64, ok bool) {
	if s.ownTime == nil || s.groups == nil || s.ncpu <= 0 {
		return cpuTimes{}, 0, false
	}
	total, err := s.ownTime(s.groups())
	if err != nil {
		s.ownTime = nil
		s.warn(fmt.Errorf("cannot measure the cpu use of prsync's rsyncs: %v; counting it as other load", err))
		return cpuTimes{}, 0, false
	}
	now := s.clock()
	prev, prevAt, had := s.ownLast, s.ownAt, s.ownOK
	s.ownLast, s.ownAt, s.ownOK = total, now, true
	if !had {
		s.ownFirst = total
	}
	dt = now.Sub(prevAt).Seconds()
	if !had || !(dt > 0) {
		return cpuTimes{}, 0, false
	}
	return cpuTimes{own: total.own - prev.own, peer: max(0, total.peer-prev.peer), kernel: max(0, total.kernel-prev.kernel)}, dt, true
}

// CountDaemon counts the rsync daemon that listens at port on this machine as the copy's
// own, with the children it forks, from the sampler's first reading (its listener's
// socket is found at the next reading). The copy's rsyncs to it lead it there too, but
// only when one runs at a reading: a copy of short chunks could run none at any, and its
// daemon's work was other load (TestDaemonOwnCPU failed 2 runs in 10). The caller knows
// that the daemon is on this machine: its port on another is no one's here.
func (s *SystemSampler) CountDaemon(port int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.daemonPorts = append(s.daemonPorts, port)
}

// FUSEMount is a FUSE filesystem: its device (major 0, the minor the kernel's number of the
// connection) and its mount point.
type FUSEMount struct {
	Dev   uint64
	Point string
}

// CountFUSE counts the processes that serve the FUSE filesystem at mount point point,
// device dev, as the copy's own, with their children, from when first seen: the sshfs that
// DEST or the source is mounted with, and the ssh it runs, do the copy's work, and as other
// load they made the throttle pause the copy they served.
func (s *SystemSampler) CountFUSE(dev uint64, point string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fuse = append(s.fuse, FUSEMount{Dev: dev, Point: point})
}

// OwnCPUSeconds returns the CPU seconds counted as prsync's own (Own: itself, its rsyncs,
// their peers on this machine and the list's producer) from the sampler's first reading to
// now, read now; false where Own is not measured. A run's summary gives it, so that what
// Own counted can be checked against what those processes used.
func (s *SystemSampler) OwnCPUSeconds() (float64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ownTime == nil || s.groups == nil || !s.ownOK {
		return 0, false
	}
	total, err := s.ownTime(s.groups())
	if err != nil {
		return 0, false
	}
	return max(0, total.own+total.peer-s.ownFirst.own-s.ownFirst.peer), true
}

// sampleCgroup reads the cgroup's CPU use since the previous reading, in
// percent of its budget, and the fraction of periods throttled. It returns
// false if the cgroup is not measured or there is no previous reading. The
// caller holds s.mu, or has s to itself.
func (s *SystemSampler) sampleCgroup() (pct, throttled float64, ok bool) {
	if s.cgroup == nil {
		return 0, 0, false
	}
	pct, throttled, ok, err := s.cgroup.sample(s.clock())
	if err != nil {
		s.cgroup = nil
		s.warn(fmt.Errorf("cannot measure the cpu use of cgroup %s: %v; using the host's cpu use only", s.info.Path, err))
		return 0, 0, false
	}
	return pct, throttled, ok
}

func (s *SystemSampler) clock() time.Time {
	if s.now != nil {
		return s.now()
	}
	return time.Now()
}

// MachineCPUs returns the number of logical CPUs of the machine, which a Sample's CPU and
// Own are percentages of.
func MachineCPUs() int { return machineCPUs() }

// machineCPUs returns the number of logical CPUs of the machine, which
// system-wide CPU use is a share of (not runtime.NumCPU, which is limited by
// this process's CPU affinity), or runtime.NumCPU if it cannot be read.
func machineCPUs() int {
	if n, err := cpu.Counts(true); err == nil && n > 0 {
		return n
	}
	return runtime.NumCPU()
}

// hostCPU returns the function that gives the host's CPU use since its previous call, in
// percent (0 at the first call): see busyPercent.
func hostCPU() func(context.Context) (float64, error) {
	var last cpu.TimesStat
	had := false
	return func(ctx context.Context) (float64, error) {
		ts, err := cpu.TimesWithContext(ctx, false)
		if err != nil {
			return 0, err
		}
		if len(ts) != 1 {
			return 0, errors.New("no system-wide cpu figure")
		}
		prev, ok := last, had
		last, had = ts[0], true
		if !ok {
			return 0, nil
		}
		return busyPercent(prev, ts[0]), nil
	}
}

// busyPercent is the CPU time used between two readings of the host's times, in percent
// of all of it: user, nice, system, irq and softirq time (guest time is in user's). Idle
// and iowait are not used, and neither is steal: the time a virtual machine's CPUs were
// ready but the hypervisor ran another machine. Pausing rsyncs frees none of it for this
// machine's other work. Counted as use, as gopsutil's cpu.Percent counts it, steal was
// most of the other load (10 to 24 % of a 2-vCPU machine, against 0 to 3 % without it)
// that paused an rsync every other second during a copy of /usr (bench scenario 4).
func busyPercent(a, b cpu.TimesStat) float64 {
	all := func(t cpu.TimesStat) float64 {
		return t.User + t.Nice + t.System + t.Idle + t.Iowait + t.Irq + t.Softirq + t.Steal
	}
	used := func(t cpu.TimesStat) float64 { return t.User + t.Nice + t.System + t.Irq + t.Softirq }
	total := all(b) - all(a)
	if !(total > 0) {
		return 0
	}
	return min(100, max(0, 100*(used(b)-used(a))/total))
}

func loadAverage(ctx context.Context) (float64, error) {
	avg, err := load.AvgWithContext(ctx)
	if err != nil {
		return 0, fmt.Errorf("load average unavailable: %w", err)
	}
	return avg.Load1, nil
}
