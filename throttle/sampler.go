package throttle

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

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
// It uses gopsutil's process-wide "since the last call" CPU state, so other
// callers of cpu.Percent with a zero interval would shorten its intervals.
func NewSystemSampler(p Policy, warn io.Writer) Sampler {
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
	// Prime the CPU counters: the first call has no previous call to
	// compare with.
	_, _ = s.cpuPercent(context.Background())
	return s
}

type systemSampler struct {
	warn io.Writer

	cpuPercent  func(context.Context) (float64, error)
	loadAverage func(context.Context) (float64, error)
	ioPressure  func() (float64, error)

	mu       sync.Mutex
	wantLoad bool // MaxLoad is set and the load average was readable so far
	wantIO   bool // MaxIOPressure is set and PSI was readable so far
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
