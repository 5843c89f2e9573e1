package throttle

import (
	"bytes"
	"context"
	"errors"
	"math"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prsync/prsync/internal/cmdline"
	"github.com/shirou/gopsutil/v4/cpu"
)

func TestParsePSI(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    float64
		wantErr bool
	}{
		{"kernel format", "some avg10=1.23 avg60=0.50 avg300=0.10 total=123456\nfull avg10=0.80 avg60=0.40 avg300=0.05 total=99999\n", 1.23, false},
		{"idle", "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n", 0, false},
		{"saturated", "some avg10=100.00 avg60=99.00 avg300=90.00 total=1\n", 100, false},
		{"full line first", "full avg10=9.00 avg60=0 avg300=0 total=0\nsome avg10=4.50 avg60=0 avg300=0 total=0\n", 4.5, false},
		{"fields reordered", "some avg60=1.00 avg10=2.50 total=7\n", 2.5, false},
		{"no trailing newline", "some avg10=3.00 avg60=0 avg300=0 total=0", 3, false},
		{"extra spaces", "  some   avg10=7.25  avg60=0\n", 7.25, false},
		{"empty", "", 0, true},
		{"no some line", "full avg10=1.00 avg60=0 avg300=0 total=0\n", 0, true},
		{"no avg10", "some avg60=1.00 avg300=0 total=0\n", 0, true},
		{"bad number", "some avg10=abc avg60=0\n", 0, true},
		{"empty number", "some avg10= avg60=0\n", 0, true},
		{"negative", "some avg10=-1.00 avg60=0\n", 0, true},
		{"over 100", "some avg10=100.01 avg60=0\n", 0, true},
		{"NaN", "some avg10=NaN avg60=0\n", 0, true},
		{"prefix is not some", "something avg10=1.00\n", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parsePSI(strings.NewReader(tt.in))
			if (err != nil) != tt.wantErr {
				t.Fatalf("parsePSI(%q) error = %v, wantErr %v", tt.in, err, tt.wantErr)
			}
			if got != tt.want {
				t.Fatalf("parsePSI(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

// fakeSources counts calls to the sampler's sources and returns set values.
type fakeSources struct {
	cpu, load, io, cpup             float64
	cpuErr, loadErr, ioErr, cpupErr error
	loadCalls, ioCalls, cpupCalls   int
}

func (f *fakeSources) sampler(p Policy, warn *bytes.Buffer) *SystemSampler {
	return &SystemSampler{
		warn:     cmdline.Warner(warn),
		wantLoad: p.MaxLoad > 0,
		wantIO:   p.MaxIOPressure > 0,

		wantCPUPressure: p.MaxCPUPressure > 0,
		cpuPercent: func(context.Context) (float64, error) {
			return f.cpu, f.cpuErr
		},
		loadAverage: func(context.Context) (float64, error) {
			f.loadCalls++
			return f.load, f.loadErr
		},
		ioPressure: func() (float64, error) {
			f.ioCalls++
			return f.io, f.ioErr
		},
		cpuPressure: func() (float64, error) {
			f.cpupCalls++
			return f.cpup, f.cpupErr
		},
	}
}

func TestSystemSamplerLimitsOff(t *testing.T) {
	f := &fakeSources{cpu: 42, load: 3, io: 5}
	var warn bytes.Buffer
	s := f.sampler(Policy{Suspend: 80, Resume: 60}, &warn)
	got, err := s.Sample(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if want := (Sample{CPU: 42}); got != want {
		t.Errorf("Sample() = %+v, want %+v", got, want)
	}
	if f.loadCalls != 0 || f.ioCalls != 0 {
		t.Errorf("read load %d times and io %d times, want 0 and 0", f.loadCalls, f.ioCalls)
	}
	if warn.Len() != 0 {
		t.Errorf("warned %q", warn.String())
	}
}

func TestSystemSamplerLimitsOn(t *testing.T) {
	f := &fakeSources{cpu: 42, load: 3, io: 5}
	var warn bytes.Buffer
	s := f.sampler(Policy{Suspend: 80, Resume: 60, MaxLoad: 4, MaxIOPressure: 10}, &warn)
	got, err := s.Sample(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := Sample{CPU: 42, Load: 3, IOPressure: 5, HasLoad: true, HasIO: true}
	if got != want {
		t.Errorf("Sample() = %+v, want %+v", got, want)
	}
	if warn.Len() != 0 {
		t.Errorf("warned %q", warn.String())
	}
}

func TestSystemSamplerWarnsOnce(t *testing.T) {
	f := &fakeSources{
		cpu:     12,
		loadErr: errors.New("load average unavailable: nope"),
		ioErr:   errors.New("/proc/pressure/io is missing"),
	}
	var warn bytes.Buffer
	s := f.sampler(Policy{Suspend: 80, Resume: 60, MaxLoad: 4, MaxIOPressure: 10}, &warn)
	for range 3 {
		got, err := s.Sample(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if want := (Sample{CPU: 12}); got != want {
			t.Errorf("Sample() = %+v, want %+v", got, want)
		}
	}
	wantWarn := "prsync: warning: --max-load: load average unavailable: nope; ignoring it\n" +
		"prsync: warning: --max-io-pressure: /proc/pressure/io is missing; ignoring it\n"
	if warn.String() != wantWarn {
		t.Errorf("warnings:\n%s\nwant:\n%s", warn.String(), wantWarn)
	}
	if f.loadCalls != 1 || f.ioCalls != 1 {
		t.Errorf("read load %d times and io %d times, want 1 and 1", f.loadCalls, f.ioCalls)
	}
}

func TestSystemSamplerCPUPressure(t *testing.T) {
	f := &fakeSources{cpu: 30, cpup: 12.5, io: 4}
	var warn bytes.Buffer
	s := f.sampler(Policy{Suspend: 80, Resume: 60, MaxCPUPressure: 20, MaxIOPressure: 10}, &warn)
	got, err := s.Sample(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if want := (Sample{CPU: 30, CPUPressure: 12.5, HasCPUPressure: true, IOPressure: 4, HasIO: true}); got != want {
		t.Errorf("Sample() = %+v, want %+v", got, want)
	}
	f.cpupErr = errors.New("/sys/fs/cgroup/g/cpu.pressure is missing")
	for range 2 {
		got, err := s.Sample(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if want := (Sample{CPU: 30, IOPressure: 4, HasIO: true}); got != want {
			t.Errorf("Sample() = %+v, want %+v", got, want)
		}
	}
	if want := "prsync: warning: --max-cpu-pressure: /sys/fs/cgroup/g/cpu.pressure is missing; ignoring it\n"; warn.String() != want {
		t.Errorf("warnings %q, want %q", warn.String(), want)
	}
	if f.cpupCalls != 2 {
		t.Errorf("read cpu pressure %d times, want 2", f.cpupCalls)
	}

	f = &fakeSources{cpu: 30, cpup: 99}
	s = f.sampler(Policy{Suspend: 80, Resume: 60}, &warn)
	if got, _ := s.Sample(t.Context()); got.HasCPUPressure || f.cpupCalls != 0 {
		t.Errorf("cpu pressure read with the limit off: %+v, %d calls", got, f.cpupCalls)
	}
}

func TestSystemSamplerCPUError(t *testing.T) {
	f := &fakeSources{cpuErr: errors.New("no /proc/stat")}
	s := f.sampler(Policy{Suspend: 80, Resume: 60}, new(bytes.Buffer))
	if _, err := s.Sample(t.Context()); err == nil || !strings.Contains(err.Error(), "no /proc/stat") {
		t.Fatalf("Sample() error = %v, want the cpu error", err)
	}
}

func TestSystemSamplerCancelledLoadDoesNotDisable(t *testing.T) {
	f := &fakeSources{loadErr: context.Canceled}
	var warn bytes.Buffer
	s := f.sampler(Policy{Suspend: 80, Resume: 60, MaxLoad: 4}, &warn)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.Sample(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sample() error = %v, want context.Canceled", err)
	}
	if warn.Len() != 0 || !s.wantLoad {
		t.Errorf("a cancelled context disabled --max-load (warned %q)", warn.String())
	}
}

// TestNewSystemSampler reads the real machine.
func TestNewSystemSampler(t *testing.T) {
	var warn bytes.Buffer
	s := NewSystemSampler(Policy{Suspend: 80, Resume: 60, MaxLoad: 1000, MaxIOPressure: 50, MaxCPUPressure: 50}, cmdline.Warner(&warn), nil)
	t.Logf("source: %+v", s.Source())
	for range 2 {
		got, err := s.Sample(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if got.CPU < 0 || got.CPU > 100 {
			t.Errorf("CPU = %v, want 0..100", got.CPU)
		}
		if got.HasLoad && got.Load < 0 {
			t.Errorf("Load = %v, want >= 0", got.Load)
		}
		if got.HasIO && (got.IOPressure < 0 || got.IOPressure > 100) {
			t.Errorf("IOPressure = %v, want 0..100", got.IOPressure)
		}
		if !got.HasIO && !strings.Contains(warn.String(), "--max-io-pressure") {
			t.Errorf("no io pressure and no warning (warned %q)", warn.String())
		}
		if got.HasCPUPressure && (got.CPUPressure < 0 || got.CPUPressure > 100) {
			t.Errorf("CPUPressure = %v, want 0..100", got.CPUPressure)
		}
		if !got.HasCPUPressure && !strings.Contains(warn.String(), "--max-cpu-pressure") {
			t.Errorf("no cpu pressure and no warning (warned %q)", warn.String())
		}
		if got.HasCgroup && (got.CgroupCPU < 0 || got.CgroupCPU > 100 || got.CgroupCPUs <= 0 || got.Throttled < 0 || got.Throttled > 1) {
			t.Errorf("cgroup figures out of range: %+v", got)
		}
		if runtime.GOOS != "linux" && (got.HasIO || got.HasCPUPressure || got.HasCgroup) {
			t.Errorf("HasIO, HasCPUPressure or HasCgroup on %s", runtime.GOOS)
		}
	}
	if n := strings.Count(warn.String(), "\n"); n > 3 {
		t.Errorf("warned %d lines, want at most one per limit:\n%s", n, warn.String())
	}
	t.Logf("warnings: %q", warn.String())
}

// TestSystemSamplerOwn feeds scripted own CPU totals and clock readings.
func TestSystemSamplerOwn(t *testing.T) {
	f := &fakeSources{cpu: 80}
	var warn bytes.Buffer
	s := f.sampler(Policy{Suspend: 80, Resume: 60}, &warn)
	totals := []float64{10, 11, 14, 13, 13.5}
	var errAt = len(totals)
	var calls int
	var gotGroups [][]int
	s.groups = func() []int { return []int{100, 200} }
	s.ownTime = func(g []int) (cpuTimes, error) {
		gotGroups = append(gotGroups, g)
		defer func() { calls++ }()
		if calls >= errAt {
			return cpuTimes{}, errors.New("/proc is gone")
		}
		return cpuTimes{own: totals[calls]}, nil
	}
	s.ncpu = 2
	t0 := time.Unix(1000, 0)
	s.now = func() time.Time { return t0.Add(time.Duration(calls) * time.Second) }

	want := []Sample{
		{CPU: 80},                        // no previous reading
		{CPU: 80, Own: 50, HasOwn: true}, // 1 CPU-second in 1 s on 2 CPUs
		{CPU: 80, Own: 80, HasOwn: true}, // 150% clamped to CPU
		{CPU: 80, Own: 0, HasOwn: true},  // a decrease clamps to 0
		{CPU: 80, Own: 25, HasOwn: true}, // 0.5 CPU-second
		{CPU: 80},                        // the error turns Own off
		{CPU: 80},                        // and it stays off
	}
	for i, w := range want {
		got, err := s.Sample(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if got != w {
			t.Errorf("sample %d = %+v, want %+v", i, got, w)
		}
	}
	if calls != len(totals)+1 {
		t.Errorf("read own cpu %d times, want %d", calls, len(totals)+1)
	}
	for _, g := range gotGroups {
		if len(g) != 2 || g[0] != 100 || g[1] != 200 {
			t.Errorf("ownTime got groups %v, want [100 200]", g)
		}
	}
	wantWarn := "prsync: warning: cannot measure the cpu use of prsync's rsyncs: /proc is gone; counting it as other load\n"
	if warn.String() != wantWarn {
		t.Errorf("warnings %q, want %q", warn.String(), wantWarn)
	}
}

// TestSystemSamplerKernel: the kernel threads' and the peers' shares, from scripted totals.
func TestSystemSamplerKernel(t *testing.T) {
	f := &fakeSources{cpu: 90}
	s := f.sampler(Policy{Suspend: 80, Resume: 60}, new(bytes.Buffer))
	totals := []cpuTimes{
		{own: 10, kernel: 100}, {own: 11, kernel: 100.2}, {own: 12, kernel: 100.1}, {own: 12.2, kernel: 102},
		{own: 12.4, peer: 0.4, kernel: 102}, // a daemon serving the rsyncs: 0.4 CPU-s, counted as prsync's
		{own: 12.4, peer: 0.3, kernel: 102}, // never a negative share
	}
	var calls int
	s.groups = func() []int { return []int{100} }
	s.ownTime = func([]int) (cpuTimes, error) { defer func() { calls++ }(); return totals[calls], nil }
	s.ncpu = 2
	t0 := time.Unix(1000, 0)
	s.now = func() time.Time { return t0.Add(time.Duration(calls) * time.Second) }
	want := []Sample{
		{CPU: 90},
		{CPU: 90, Own: 50, Kernel: 10, HasOwn: true}, // 0.2 CPU-s in 1 s on 2 CPUs
		{CPU: 90, Own: 50, Kernel: 0, HasOwn: true},  // a kworker that ended: no negative share
		{CPU: 90, Own: 10, Kernel: 80, HasOwn: true}, // 95 % clamped to CPU - Own
		{CPU: 90, Own: 30, Kernel: 0, HasOwn: true},  // 0.2 + 0.4 CPU-s in 1 s on 2 CPUs
		{CPU: 90, Own: 0, Kernel: 0, HasOwn: true},
	}
	for i, w := range want {
		got, err := s.Sample(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(got.Own-w.Own) > 1e-9 || math.Abs(got.Kernel-w.Kernel) > 1e-9 || got.HasOwn != w.HasOwn {
			t.Errorf("sample %d = %+v, want %+v", i, got, w)
		}
	}
}

// TestSystemSamplerOwnCPUSeconds: the CPU counted as prsync's own, its peers' with it, from
// the first reading (the sampler's, before the first rsync) to a reading of its own.
func TestSystemSamplerOwnCPUSeconds(t *testing.T) {
	f := &fakeSources{cpu: 90}
	s := f.sampler(Policy{Suspend: 80, Resume: 60}, new(bytes.Buffer))
	if _, ok := s.OwnCPUSeconds(); ok {
		t.Error("OwnCPUSeconds without Own measured: ok, want not")
	}
	totals := []cpuTimes{
		{own: 0.25, kernel: 100},              // prsync's start
		{own: 1.5, peer: 0.75, kernel: 101},   // a sample
		{own: 2.5, peer: 2, kernel: 103},      // the end
		{own: 2.5, peer: 2.25, kernel: 104.5}, // a daemon's child that ended late
	}
	var calls int
	s.groups = func() []int { return []int{100} }
	s.ownTime = func([]int) (cpuTimes, error) { defer func() { calls++ }(); return totals[calls], nil }
	s.ncpu = 2
	s.now = time.Now
	if _, ok := s.OwnCPUSeconds(); ok {
		t.Error("OwnCPUSeconds before the first reading: ok, want not")
	}
	s.sampleOwn() // the first reading, as NewSystemSampler takes it
	if _, err := s.Sample(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []float64{4.25, 4.5} { // 2.5 + 2 - 0.25, read anew each time
		if got, ok := s.OwnCPUSeconds(); !ok || math.Abs(got-want) > 1e-9 {
			t.Errorf("OwnCPUSeconds = %v, %v; want %v, true", got, ok, want)
		}
	}
}

// TestSystemSamplerOwnNaNCPU: a NaN CPU figure gives Own 0.
func TestSystemSamplerOwnNaNCPU(t *testing.T) {
	f := &fakeSources{cpu: math.NaN()}
	s := f.sampler(Policy{Suspend: 80, Resume: 60}, new(bytes.Buffer))
	var total float64
	s.groups = func() []int { return nil }
	s.ownTime = func([]int) (cpuTimes, error) { total++; return cpuTimes{own: total}, nil }
	s.ncpu = 1
	t0 := time.Now()
	s.now = func() time.Time { return t0.Add(time.Duration(total) * time.Second) }
	for range 2 {
		got, err := s.Sample(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if got.Own != 0 {
			t.Errorf("Own = %v, want 0", got.Own)
		}
	}
}

type procList []Proc

func (l procList) Procs() []Proc { return l }

func TestGroupsOf(t *testing.T) {
	got := GroupsOf(procList{{Chunk: 1, PID: 300}, {Chunk: 2, PID: 301, Paused: true}})()
	if len(got) != 2 || got[0] != 300 || got[1] != 301 {
		t.Errorf("GroupsOf() = %v, want [300 301]", got)
	}
	if got := GroupsOf(procList{})(); len(got) != 0 {
		t.Errorf("GroupsOf(empty) = %v, want []", got)
	}
}

// TestBusyPercent: the host's CPU use counts user, nice, system, irq and softirq time over all
// of it; idle, iowait and the hypervisor's steal are not use.
func TestBusyPercent(t *testing.T) {
	base := cpu.TimesStat{User: 100, System: 50, Idle: 1000, Iowait: 10, Steal: 5}
	for _, tc := range []struct {
		name string
		d    cpu.TimesStat // added to base
		want float64
	}{
		{"half busy", cpu.TimesStat{User: 50, System: 50, Idle: 100}, 50},
		{"iowait is idle", cpu.TimesStat{User: 50, Iowait: 150}, 25},
		{"steal is not use", cpu.TimesStat{User: 100, System: 40, Steal: 60}, 70},
		{"irq and softirq are", cpu.TimesStat{Irq: 10, Softirq: 10, Nice: 20, Idle: 160}, 20},
		{"guest is in user already", cpu.TimesStat{User: 100, Guest: 100, Idle: 100}, 50},
		{"no time passed", cpu.TimesStat{}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := base
			b.User += tc.d.User
			b.Nice += tc.d.Nice
			b.System += tc.d.System
			b.Idle += tc.d.Idle
			b.Iowait += tc.d.Iowait
			b.Irq += tc.d.Irq
			b.Softirq += tc.d.Softirq
			b.Steal += tc.d.Steal
			b.Guest += tc.d.Guest
			if got := busyPercent(base, b); math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("busyPercent = %v, want %v", got, tc.want)
			}
		})
	}
}
