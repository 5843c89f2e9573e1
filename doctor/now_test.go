package doctor

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prsync/prsync/throttle"
)

// TestNow: the check warns when the run's throttle would pause at once, naming the limit
// with its figure and the fix; it shows the figures read either way.
func TestNow(t *testing.T) {
	def := throttle.Policy{Suspend: 80, Resume: 60, MaxSuspend: 30 * time.Second}
	load := def
	load.MaxLoad = 8
	busy := throttle.Sample{CPU: 97, Own: 1, HasOwn: true, Load: 9.1, HasLoad: true, IOPressure: 3.5, HasIO: true}
	tests := []struct {
		name   string
		f      NowFacts
		status Status
		want   []string // in the message, then (after "fix: ") in the fix
		fix    []string
	}{
		{"busy CPU", NowFacts{Sample: busy, Over: time.Second, Policy: def}, Warning,
			[]string{"the machine now (a 1s sample): CPU 97% (96% not prsync's), load 9.10, PSI io 3.5%: ",
				"the throttle would pause the run's rsyncs at once: the machine's CPU use is 97% (96% not the copy's), above --suspend-threshold 80"},
			[]string{"raise --suspend-threshold (at most 100)", "--max-suspend (30s", "--no-throttle", "quieter"}},
		{"a quiet CPU, a load above --max-load", NowFacts{Sample: throttle.Sample{CPU: 20, Load: 9.1, HasLoad: true}, Over: time.Second, Policy: load}, Warning,
			[]string{"the 1-minute load average is 9.10, above --max-load 8"}, []string{"raise --max-load (or drop it)"}},
		{"a high load, no --max-load", NowFacts{Sample: throttle.Sample{CPU: 20, Load: 9.1, HasLoad: true}, Over: time.Second, Policy: def}, OK,
			[]string{"CPU 20%, load 9.10: below every limit of the run (--suspend-threshold 80): the run's rsyncs would start at once"}, nil},
		{"between the thresholds", NowFacts{Sample: throttle.Sample{CPU: 70}, Over: time.Second, Policy: def}, OK,
			[]string{"would start, close to a limit: the machine's CPU use is 70%, not yet below --resume-threshold 60"}, nil},
		{"busy, --no-throttle", NowFacts{Sample: busy, Over: time.Second, Policy: def, Off: true}, OK,
			[]string{"CPU 97%", "--no-throttle: the run never pauses its rsyncs"}, nil},
		{"the copy's own CPU does not count", NowFacts{Sample: throttle.Sample{CPU: 97, Own: 90, HasOwn: true}, Over: time.Second, Policy: def}, OK,
			[]string{"CPU 97% (7% not prsync's)", "the run's rsyncs would start at once"}, nil},
		{"no sample", NowFacts{Err: errors.New("no /proc/stat"), Policy: def}, Warning, []string{"could not be measured (no /proc/stat)"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Now(tt.f)
			if c.Name != NameNow || c.Status != tt.status {
				t.Errorf("Now = %+v, want %s %v", c, NameNow, tt.status)
			}
			for _, w := range tt.want {
				if !strings.Contains(c.Message, w) {
					t.Errorf("message %q lacks %q", c.Message, w)
				}
			}
			for _, w := range tt.fix {
				if !strings.Contains(c.Fix, w) {
					t.Errorf("fix %q lacks %q", c.Fix, w)
				}
			}
		})
	}
}

// TestLookNow takes a real sample: it is a sample of about d, with the load average
// read whether or not --max-load is set; a cancelled context takes none.
func TestLookNow(t *testing.T) {
	start := time.Now()
	f := LookNow(context.Background(), throttle.Policy{Suspend: 80, Resume: 60}, false, 200*time.Millisecond)
	if f.Err != nil {
		t.Skipf("no CPU figures here: %v", f.Err)
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Errorf("sampled over %v, want at least 200ms", d)
	}
	if !(f.Sample.CPU >= 0 && f.Sample.CPU <= 100) {
		t.Errorf("CPU %v", f.Sample.CPU)
	}
	if !f.Sample.HasLoad && runtime.GOOS == "linux" {
		t.Errorf("no load average read: %+v", f.Sample)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if f := LookNow(ctx, throttle.Policy{Suspend: 80, Resume: 60}, false, time.Minute); !f.Skipped {
		t.Errorf("a cancelled doctor sampled: %+v", f)
	}
}
