package throttle

import (
	"context"
	"errors"
	"fmt"
	"io"
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

// NewSystemSampler returns a Sampler that measures the whole machine.
//
// CPU use is the system-wide percentage since the previous call. The
// 1-minute load average is read only if p.MaxLoad > 0, and Linux PSI io
// pressure only if p.MaxIOPressure > 0. If either cannot be read, the sampler
// writes one warning line to warn (which may be nil) and stops reading it, so
// that limit is ignored from then on.
//
// groups, if not nil, returns the process group ids of prsync's running
// rsyncs (see GroupsOf); it is called once per Sample, and once here. On
// Linux the sampler then also measures Own, the CPU those rsyncs used: the
// growth over the interval of this process's reaped children's CPU time
// (getrusage RUSAGE_CHILDREN; rsync waits for its own children, so they are
// included once the leader is reaped) plus the CPU time of every live
// process in one of the groups, its own and that of the children it has
// reaped (utime, stime, cutime and cstime of /proc/PID/stat, found by one
// scan of /proc per call). Own is a percentage of the whole machine, like
// CPU, clamped to [0, CPU]. If /proc cannot be scanned, it warns once and
// stops measuring Own. On other systems, or with a nil groups, HasOwn is
// false, so prsync's own rsyncs count toward the CPU thresholds (on macOS,
// for instance).
//
// It uses gopsutil's process-wide "since the last call" CPU state, so other
// callers of cpu.Percent with a zero interval would shorten its intervals.
func NewSystemSampler(p Policy, warn io.Writer, groups func() []int) Sampler {
	if warn == nil {
		warn = io.Discard
	}
	s := &systemSampler{
		warn:        warn,
		wantLoad:    p.MaxLoad > 0,
		wantIO:      p.MaxIOPressure > 0,
		cpuPercent:  cpuPercent,
		loadAverage: loadAverage,
		ioPressure:  readIOPressure,
	}
	if groups != nil {
		s.groups = groups
		s.ownTime = ownCPUSource()
		s.ncpu = machineCPUs()
		s.now = time.Now
	}
	// Prime the CPU counters: the first call has no previous call to
	// compare with.
	_, _ = s.cpuPercent(context.Background())
	s.sampleOwn(0)
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

type systemSampler struct {
	warn io.Writer

	cpuPercent  func(context.Context) (float64, error)
	loadAverage func(context.Context) (float64, error)
	ioPressure  func() (float64, error)

	// Own CPU: all nil or zero unless measured.
	groups  func() []int                 // pgids of the rsync groups
	ownTime func([]int) (float64, error) // cumulative CPU seconds of reaped children and live groups
	ncpu    int                          // CPUs of the machine, the scale of CPU
	now     func() time.Time

	mu       sync.Mutex
	wantLoad bool // MaxLoad is set and the load average was readable so far
	wantIO   bool // MaxIOPressure is set and PSI was readable so far
	ownOK    bool // ownLast and ownAt hold a previous reading
	ownLast  float64
	ownAt    time.Time
}

func (s *systemSampler) Sample(ctx context.Context) (Sample, error) {
	s.mu.Lock()
	defer s.mu.Unlock()

	var out Sample
	c, err := s.cpuPercent(ctx)
	if err != nil {
		return Sample{}, fmt.Errorf("cpu usage: %w", err)
	}
	out.CPU = c
	out.Own, out.HasOwn = s.sampleOwn(c)

	if s.wantLoad {
		l, err := s.loadAverage(ctx)
		if err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return Sample{}, ctxErr
			}
			s.wantLoad = false
			fmt.Fprintf(s.warn, "prsync: warning: --max-load: %v; ignoring it\n", err)
		} else {
			out.Load, out.HasLoad = l, true
		}
	}

	if s.wantIO {
		p, err := s.ioPressure()
		if err != nil {
			s.wantIO = false
			fmt.Fprintf(s.warn, "prsync: warning: --max-io-pressure: %v; ignoring it\n", err)
		} else {
			out.IOPressure, out.HasIO = p, true
		}
	}
	return out, nil
}

// sampleOwn reads prsync's own CPU time and returns its growth since the
// previous reading as a percentage of the machine, clamped to [0, cpu]. It
// returns false if Own is not measured or there is no previous reading. The
// caller holds s.mu, or has s to itself.
func (s *systemSampler) sampleOwn(cpu float64) (float64, bool) {
	if s.ownTime == nil || s.groups == nil || s.ncpu <= 0 {
		return 0, false
	}
	total, err := s.ownTime(s.groups())
	if err != nil {
		s.ownTime = nil
		fmt.Fprintf(s.warn, "prsync: warning: cannot measure the cpu use of prsync's rsyncs: %v; counting it as other load\n", err)
		return 0, false
	}
	now := s.now()
	prev, prevAt, ok := s.ownLast, s.ownAt, s.ownOK
	s.ownLast, s.ownAt, s.ownOK = total, now, true
	dt := now.Sub(prevAt).Seconds()
	if !ok || !(dt > 0) {
		return 0, false
	}
	own := (total - prev) / (dt * float64(s.ncpu)) * 100
	if !(own <= cpu) {
		own = cpu
	}
	if !(own >= 0) {
		own = 0
	}
	return own, true
}

// machineCPUs returns the number of logical CPUs of the machine, which
// system-wide CPU use is a share of (not runtime.NumCPU, which is limited by
// this process's CPU affinity), or runtime.NumCPU if it cannot be read.
func machineCPUs() int {
	if n, err := cpu.Counts(true); err == nil && n > 0 {
		return n
	}
	return runtime.NumCPU()
}

func cpuPercent(ctx context.Context) (float64, error) {
	pct, err := cpu.PercentWithContext(ctx, 0, false)
	if err != nil {
		return 0, err
	}
	if len(pct) != 1 {
		return 0, errors.New("no system-wide cpu figure")
	}
	return pct[0], nil
}

func loadAverage(ctx context.Context) (float64, error) {
	avg, err := load.AvgWithContext(ctx)
	if err != nil {
		return 0, fmt.Errorf("load average unavailable: %w", err)
	}
	return avg.Load1, nil
}
