package cli

import (
	"math"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/prsync/prsync/chunksize"
	"github.com/prsync/prsync/exec"
	"github.com/prsync/prsync/splitter"
)

// chunkTarget is the duration chunks aim at (--chunk-time), or 0 when they are cut by
// --chunk-files and --chunk-bytes alone: --chunk-time 0, or either bound given (on the
// command line or in the environment) without --chunk-time, which keeps their meaning
// from before chunks were sized by time.
func (r *runner) chunkTarget() time.Duration {
	f := &r.f
	if flagGiven(r.argv, "chunk-time") {
		return f.ChunkTime
	}
	if flagGiven(r.argv, "chunk-files") || flagGiven(r.argv, "chunk-bytes") {
		return 0
	}
	return f.ChunkTime
}

// sizer returns the chunk sizer of the run, or nil when chunks are cut by count and bytes.
func (r *runner) sizer() *chunksize.Sizer {
	t := r.chunkTarget()
	if t <= 0 {
		return nil
	}
	return chunksize.NewSizer(chunksize.DefaultPolicy(t, r.f.ChunkFiles, int64(r.f.ChunkBytes)))
}

// flagGiven reports whether --name was given before "--", or PRSYNC_NAME is set.
func flagGiven(args []string, name string) bool {
	if _, ok := os.LookupEnv("PRSYNC_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))); ok {
		return true
	}
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "--"+name || strings.HasPrefix(a, "--"+name+"=") {
			return true
		}
	}
	return false
}

// observe hands a chunk's first rsync, when it settled every path, to the sizer: how long
// it took for its paths and bytes. It runs in the pool's goroutines; the sizer locks.
func (p *pipeline) observe(m exec.Report) {
	if p.sizer == nil {
		return
	}
	e, ok := m.(exec.ChunkEnded)
	if !ok {
		return
	}
	if e.Attempt == 1 && e.Outcomes != nil && !e.Paused && (e.Status == exec.ChunkOK || e.Status == exec.ChunkVanished) {
		p.sizer.Observe(chunksize.Sample{Files: e.Chunk.Len(), Bytes: e.Chunk.Bytes, Seconds: e.Seconds, First: e.FirstLine})
	}
	// after Observe: once Opening sees the probe's end, the budget has learnt from it
	p.probe.ended(e)
}

// tail is how the chunks that wait once the input has ended are cut (no lonely tail).
func (p *pipeline) tail(sp *splitter.Splitter) splitter.Tail {
	if p.sizer == nil {
		return splitter.Tail{}
	}
	return splitter.Tail{
		Free: p.pool.FreeAfter,
		Split: func(c *splitter.Chunk, queued, free int) []*splitter.Chunk {
			if c.Sizes == nil {
				return nil
			}
			return sp.Split(c, p.sizer.Split(c.Sizes, c.Bytes, queued, free))
		},
	}
}

// probeBox holds how the first attempt of the run's first chunk ended: the probe chunk
// (splitter.Config.Opening), when there is one. It keeps it whether or not Opening has been
// asked yet: a probe may end before the first path after it is read.
type probeBox struct {
	mu  sync.Mutex
	end *chunksize.Probe
}

// probeID is the ID of the probe chunk: the first chunk cut.
const probeID = 1

func (b *probeBox) ended(e exec.ChunkEnded) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e.Chunk.ID != probeID || b.end != nil {
		return
	}
	pr := chunksize.Probe{Files: e.Chunk.Len(), First: e.FirstLine, Elapsed: e.Seconds, CPU: e.CPUSeconds, Ended: true}
	// refused, failed or paused: its time says nothing of what its paths cost
	pr.Failed = e.Attempt != 1 || e.Paused || e.Status != exec.ChunkOK && e.Status != exec.ChunkVanished
	b.end = &pr
}

// openingFunc returns the splitter's Opening: asked while the paths after the probe chunk
// wait (a short list's rest, or the first wave of a list still streaming), it says into how
// many parts to cut them once the probe has shown what a start and a path cost
// (chunksize.Policy.OpeningParts). The wait is at most the chunk target from the first
// question; then the rest is cut for every slot, as without a probe. The splitter asks
// again every few milliseconds and ends the wait itself when the run ends.
func (p *pipeline) openingFunc() func(*splitter.Chunk, int) (int, bool) {
	if p.sizer == nil {
		return nil
	}
	var quota float64
	if p.sampler != nil {
		quota = p.sampler.Source().CPUs
	}
	cpus := usableCPUs(runtime.NumCPU(), quota)
	var deadline time.Time
	return func(probe *splitter.Chunk, rest int) (int, bool) {
		now := time.Now()
		if deadline.IsZero() {
			deadline = now.Add(p.sizer.Target())
		}
		slots := p.pool.Limit()
		p.probe.mu.Lock()
		end := p.probe.end
		p.probe.mu.Unlock()
		pr := chunksize.Probe{Files: probe.Len()}
		if end != nil && probe.ID == probeID {
			pr = *end
		} else if started, first, lines, ok := p.pool.Running(probe.ID); ok {
			pr.Elapsed, pr.Logged = now.Sub(started).Seconds(), int(lines)
			if !first.IsZero() {
				pr.First = max(first.Sub(started).Seconds(), 1e-6)
			}
		}
		if n, known := p.sizer.OpeningParts(rest, pr, slots, cpus); known {
			return n, true
		}
		if now.After(deadline) {
			return max(slots-1, 1), true // the probe, silent, holds a slot
		}
		return 0, false
	}
}

// usableCPUs returns the CPUs prsync's rsyncs may really use on a machine of cpus CPUs: a
// cgroup's CPU quota (quota CPUs, 0 for none), rounded up, when it is lower.
func usableCPUs(cpus int, quota float64) int {
	if quota > 0 && int(math.Ceil(quota)) < cpus {
		return max(int(math.Ceil(quota)), 1)
	}
	return cpus
}
