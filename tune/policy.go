// Package tune picks the number of concurrent rsyncs from the throughput measured while copying.
package tune

import (
	"fmt"
	"math"
	"time"
)

// Window is the length of the measurement window that the default Policy is
// tuned for. The Tuner itself has no clock: every count in
// Policy is in windows, and the caller calls Observe once per window.
//
// 2 s is a compromise. A shorter window mostly measures rsyncs starting
// (ssh handshake, file list) and finishing, so its rate swings more; a
// longer one leaves fewer windows in the 30 s in which the search should
// settle. With 2 s windows the search has 15 of them, enough to reach 20
// streams from Start and to average the last, small steps.
const Window = 2 * time.Second

// Policy holds the limits and the constants of the search for the number of
// concurrent rsyncs.
//
// # The utility
//
// The Tuner maximises Falcon's utility (Arifuzzaman and Arslan, SC'21):
//
//	U(n) = rate(n) / K^n
//
// where rate is bytes/s + FileCost × files/s finished with n rsyncs. With K
// = 1.02 each extra stream has to bring 2 % more rate to be worth its
// memory, its CPU and its share of the far side, so the search does not grab
// streams for a 1 % gain, and a plateau of the rate has a best point, its
// left edge, instead of being a range the limit could wander along. Even a
// workload that scales linearly stops paying at 1/ln K ≈ 50 streams. The
// price is paid on curves that keep rising slowly: there the Tuner stops
// where the next streams bring less than 2 % each, which can be 10 % to
// 20 % below the rate at Max.
//
// # Windows and steps
//
// The Settle windows after each change of the limit are skipped: the new
// rsyncs are still connecting, or the old ones still finishing, so they
// belong to neither limit. A probe of a search is judged on 1 to MaxWindows
// windows, a periodic probe on MinWindows to MaxWindows. Hold is how long
// the Tuner stays at its best limit after a search or a lost periodic probe;
// each further loss doubles it, up to MaxHold. Ceiling windows after a
// refusal, the far side's ceiling rises by one step. A ceiling that a refusal
// brought below what the far side accepted at an earlier refusal rises back
// sooner: a step after Recover windows, a wait that doubles each time such a
// step is refused, up to Ceiling.
//
// The smallest move at a limit n is StepAt(n) = max(1, round(Step × n)): at
// 30 streams a move of 1 changes the rate by about 3 %, which 2 s windows
// on a noisy machine cannot tell from noise, while 10 % can be told apart
// in a few windows.
type Policy struct {
	Min   int // lowest limit, at least 1
	Max   int // highest limit: --max-jobs
	Start int // the limit of the first window

	K float64 // per-stream penalty of the utility, at least 1; 1 turns it off
	// FileCost is what one finished file counts for in the rate, in bytes;
	// 0 counts bytes only. Only its order of magnitude matters: it makes a
	// window of small files comparable with one of big files. The default,
	// 128 KiB, lies between what a file's own work (stat, create, rename,
	// a round trip of the protocol) cost on the bench machine: about 13 KB
	// of data on the 2 Gbit/s link and 200 KB on the local disk.
	FileCost float64
	Step     float64 // smallest move, as a fraction of the limit, in (0, 1]
	// PerCPU is how many rsyncs a copy the CPUs bound runs per CPU it may use: the CPU
	// rule's cap is PerCPU × those CPUs (see Tuner, CPU-bound copies).
	PerCPU float64

	Z      float64 // standard errors a periodic probe, or a search's probe downwards, must gain to win
	ClimbZ float64 // standard errors a search's probe upwards must gain to win at once
	Noise  float64 // standard deviation of one window's log rate, until it is measured

	Settle      int // windows skipped after each change of the limit
	BaseWindows int // windows measured at the best limit before a search probes away from it
	MinWindows  int // windows a periodic probe needs before it can win
	MaxWindows  int // windows after which a probe is judged, convincing or not
	Hold        int // windows at the best limit before the first periodic probe
	MaxHold     int // bound of the hold as it doubles after each lost periodic probe
	Ceiling     int // windows without a refusal before the far side's ceiling rises a step
	Recover     int // windows without a refusal before a ceiling below what the far side accepted before rises a step
}

// DefaultPerCPU is how many rsyncs a CPU runs in a copy the CPUs bound, by default: an
// rsync is a pipeline of processes that wait on each other (sender, generator, receiver,
// and a daemon's on the same machine), so 2 saturate 2 CPUs and 8 still move more (H59 to
// H61: on 2 CPUs -j 4 took 1.10 × and -j 2 1.35 × the time of -j 8). The opening's CPU rule
// (package plan) uses it too.
const DefaultPerCPU = 4

// DefaultPolicy returns the Policy for a machine with cpus CPUs.
//
// Max is 4 × cpus, at least 32: rsync mostly waits on disks and the
// network, so a 2-CPU VM can still drive 20 streams of a fast link, and the
// penalty keeps the search from going beyond what helps.
//
// Start is 4 (or Max if that is lower). It is small enough for a 2-CPU
// machine copying locally, where 2 to 4 rsyncs are best (bench/README.md),
// and for an rsync daemon's "max connections" or sshd's MaxStartups of 10,
// which refuse above a handful; and large enough that doubling it and then
// growing by half per won probe (4, 8, 12, 18) reaches 20 streams in four
// moves. From 2 it would take five, and the first windows at 2 say little
// about a link that wants 20.
//
// The other values are those the simulated scenarios of sim_test.go pass
// with, on ±20 % noise per window. Z = 2 with MinWindows = 3 keeps a
// periodic probe from winning on noise, so the limit holds on a plateau,
// and keeps a search from dropping streams on noise; ClimbZ = 0.75 lets a
// search climb on one or two windows while the gains are large;
// MaxWindows = 4 bounds a probe to 10 s with its settle window; Hold = 4
// and MaxHold = 8 probe every 10 to 20 s, often enough to find a change
// the rate at the limit does not show; Ceiling = 15 keeps a refusal's
// ceiling for 30 s before trying one step more; Recover = 2 brings a
// ceiling that a refusal cut below what the far side took before back a
// step 4 s later, as a fixed -j climbs back 3 s after a refusal; and the
// Noise prior, 0.1, is about what ±20 % per window is, until 30 pairs of
// windows measure it.
func DefaultPolicy(cpus int) Policy {
	maxJobs := max(4*cpus, 32)
	return Policy{
		Min:         1,
		Max:         maxJobs,
		Start:       min(4, maxJobs),
		K:           1.02,
		FileCost:    128 << 10,
		Step:        0.1,
		PerCPU:      DefaultPerCPU,
		Z:           2,
		ClimbZ:      0.75,
		Noise:       0.1,
		Settle:      1,
		BaseWindows: 2,
		MinWindows:  3,
		MaxWindows:  4,
		Hold:        4,
		MaxHold:     8,
		Ceiling:     15,
		Recover:     2,
	}
}

// Validate reports whether p is usable.
func (p Policy) Validate() error {
	switch {
	case p.Min < 1:
		return fmt.Errorf("min %d must be at least 1", p.Min)
	case p.Max < p.Min:
		return fmt.Errorf("max %d must be at least min %d", p.Max, p.Min)
	case p.Start < p.Min || p.Start > p.Max:
		return fmt.Errorf("start %d must be between min %d and max %d", p.Start, p.Min, p.Max)
	case !(p.K >= 1 && p.K < 2):
		return fmt.Errorf("penalty %g must be at least 1 and below 2", p.K)
	case !(p.FileCost >= 0) || math.IsInf(p.FileCost, 1):
		return fmt.Errorf("file cost %g must be 0 or a positive number", p.FileCost)
	case !(p.Step > 0 && p.Step <= 1):
		return fmt.Errorf("step %g must be above 0 and at most 1", p.Step)
	case !(p.PerCPU > 0) || math.IsInf(p.PerCPU, 1):
		return fmt.Errorf("rsyncs per CPU %g must be a positive number", p.PerCPU)
	case !(p.Z > 0) || math.IsInf(p.Z, 1):
		return fmt.Errorf("significance %g must be a positive number", p.Z)
	case !(p.ClimbZ > 0) || math.IsInf(p.ClimbZ, 1):
		return fmt.Errorf("climb significance %g must be a positive number", p.ClimbZ)
	case !(p.Noise > 0 && p.Noise < 1):
		return fmt.Errorf("noise %g must be above 0 and below 1", p.Noise)
	case p.Settle < 0:
		return fmt.Errorf("settle %d must be 0 or more windows", p.Settle)
	case p.BaseWindows < 1 || p.BaseWindows > ringSize:
		return fmt.Errorf("base windows %d must be between 1 and %d", p.BaseWindows, ringSize)
	case p.MinWindows < 1 || p.MinWindows > ringSize:
		return fmt.Errorf("min windows %d must be between 1 and %d", p.MinWindows, ringSize)
	case p.MaxWindows < p.MinWindows || p.MaxWindows > ringSize:
		return fmt.Errorf("max windows %d must be between min windows %d and %d", p.MaxWindows, p.MinWindows, ringSize)
	case p.Hold < 1:
		return fmt.Errorf("hold %d must be at least 1 window", p.Hold)
	case p.MaxHold < p.Hold:
		return fmt.Errorf("max hold %d must be at least hold %d", p.MaxHold, p.Hold)
	case p.Ceiling < 1:
		return fmt.Errorf("ceiling %d must be at least 1 window", p.Ceiling)
	case p.Recover < 1 || p.Recover > p.Ceiling:
		return fmt.Errorf("recover %d must be between 1 window and ceiling %d", p.Recover, p.Ceiling)
	}
	return nil
}

// StepAt returns the smallest move of the limit at n: Step × n rounded, at
// least 1.
func (p Policy) StepAt(n int) int {
	return max(1, int(math.Round(p.Step*float64(n))))
}
