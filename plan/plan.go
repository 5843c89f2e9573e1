// Package plan decides how big each chunk is, when it is cut, which starts next and how many rsyncs run at once.
package plan

import (
	"sync"
	"time"

	"github.com/prsync/prsync/chunksize"
	"github.com/prsync/prsync/tune"
)

// # One owner
//
// The Planner is the one owner of the policy of a copy: how big each chunk is and when it
// is cut (the cost model of package chunksize, learnt from the chunks that ended), the
// opening (a probe, then the first wave), the tail (the last paths shared by the slots, and
// a waiting chunk cut for slots that would idle), the root that goes last, and the number of
// rsyncs (-j: pinned, lowered by the far side's refusals and climbing back; or -j auto's
// tuner). It is pure: it starts no goroutine and reads no clock. Time comes in with the
// events and the questions, so that tests drive it with a fake clock.
//
// It is fed by events:
//
//   - from the splitter: a chunk cut (Cut), with what the input holds when it asks (Input:
//     the records read and placed, whether the input's end has been read);
//   - from the pool: a chunk's rsync started (Started), its lines logged while it is
//     watched (Logged), its end with its figures (Ended), a session the far side refused
//     (Refused) or accepted (Accepted), a session's end (SessionEnded);
//   - from the sampler (-j auto): what the copy moved and the CPU it used (Sampled).
//
// It answers the splitter (Next: the budget of the chunk to cut, or to hold the paths read
// while the opening is not decided, and until when), and the pool (Pick: which waiting chunk
// starts next; TailCuts: how to cut one for slots that would idle; MayStart, Limit, Climb:
// whether a slot is open). Where an answer waits for an event, the Planner says when to ask
// again (a deadline) and signals the events that may change it on Wake: no one polls.
//
// The Planner locks itself: the splitter, the pool's goroutines and the sampler call it
// from their own goroutines. It never calls out.

// Config is what a Planner is set up with.
type Config struct {
	// Target is the duration of rsync work a chunk aims at (--chunk-time); 0 cuts chunks at
	// Files paths or Bytes bytes exactly, with no opening and no tail.
	Target time.Duration
	// Files and Bytes bound a chunk (--chunk-files, --chunk-bytes).
	Files int
	Bytes int64
	// Wait is --chunk-wait: a chunk is sent when no path came for this long. The first
	// chunk waits at most this long (and EndWait) for the input's end.
	Wait time.Duration
	// EndWait is how long the first chunk waits for the end of an input still being read;
	// 0 means DefaultEndWait.
	EndWait time.Duration
	// Jobs is the number of rsyncs at the start (-j), MaxJobs the most live control or -j
	// auto may set (0: Jobs).
	Jobs, MaxJobs int
	// Auto, when set, is -j auto's tuner: it sets the number of rsyncs from the windows
	// Sampled measures. Without it, -j is pinned: only the far side's refusals lower it,
	// and it climbs back.
	Auto *tune.Tuner
	// CPUs is how many CPUs the copy may use: a cgroup's quota (0.5 for half a CPU) when
	// below the machine's CPUs, or those; 0: not known, which turns the CPU rules of the
	// opening and of the probe off.
	CPUs float64
	// Tick is how often Sampled is called (-j auto); 0 means tune.Window / 4.
	Tick time.Duration
}

// Planner is the policy of a copy; see the package's comment.
type Planner struct {
	mu   sync.Mutex
	cfg  Config
	est  *chunksize.Estimator // nil: chunks cut by count and bytes alone
	pol  chunksize.Policy
	open opening
	cut  cutting
	jobs jobs
	wake chan struct{}
}

// New returns a Planner for cfg.
func New(cfg Config) *Planner {
	cfg.Files = max(cfg.Files, 1)
	if cfg.Bytes <= 0 {
		cfg.Bytes = 1 << 62
	}
	if cfg.EndWait <= 0 {
		cfg.EndWait = DefaultEndWait
	}
	if cfg.Tick <= 0 {
		cfg.Tick = tune.Window / 4
	}
	p := &Planner{cfg: cfg, wake: make(chan struct{}, 1)}
	if cfg.Target > 0 {
		p.pol = chunksize.DefaultPolicy(cfg.Target, cfg.Files, cfg.Bytes)
		p.est = chunksize.New(p.pol)
	} else {
		p.open.phase = phaseRun
	}
	p.jobs.init(cfg)
	return p
}

// Timed reports whether chunks are sized by time (Config.Target), with an opening and a
// tail.
func (p *Planner) Timed() bool { return p.est != nil }

// Wake signals, once for any number of them, that an event came that may change an answer
// the splitter waits for: the probe started, logged its first line or ended, or the limit
// changed.
func (p *Planner) Wake() <-chan struct{} { return p.wake }

// poke signals Wake; the caller holds p.mu.
func (p *Planner) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// End is a chunk's rsync that ended, with its figures.
type End struct {
	ID      int
	Attempt int
	Files   int
	Bytes   int64
	Seconds float64 // how long its rsync ran
	First   float64 // seconds from its start to its first logged line; 0: none
	CPU     float64 // CPU seconds of its processes; 0: not known
	// Paused: its group was stopped a while (throttle, Ctrl-Z): its time is not its work
	Paused bool
	// OK: it settled every path, copied, up to date or vanished (not refused, failed,
	// cancelled or retrying)
	OK bool
	// Settled: it was the chunk's last run, with every path's outcome; false for a run
	// whose chunk is tried again
	Settled bool
}

// Ended learns from a chunk's rsync that ended: the cost model takes the first attempt of a
// chunk that settled every path without a pause, and the opening takes its probe's first
// end, whatever it was. With -j auto, a probe that was CPU work all along caps the number
// of rsyncs at the CPUs at once (what bounds the copy is known from it); the change is
// returned.
func (p *Planner) Ended(now time.Time, e End) (Change, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.est != nil && e.Attempt == 1 && e.Settled && !e.Paused && e.OK {
		p.est.Observe(chunksize.Sample{Files: e.Files, Bytes: e.Bytes, Seconds: e.Seconds, First: e.First})
	}
	// after Observe: once the opening sees the probe's end, the budget has learnt from it
	first := p.open.end == nil
	p.open.ended(e)
	p.poke()
	if pr := p.open.end; first && pr != nil {
		return p.probeBound(*pr)
	}
	return Change{}, false
}

// Fit returns the cost model as fitted so far (zero when chunks are not sized by time).
func (p *Planner) Fit() chunksize.Fit {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.est == nil {
		return chunksize.Fit{}
	}
	return p.est.Fit()
}
