package cli

import (
	"context"
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
	if ok {
		p.probe.ended(e)
	}
	if !ok || e.Attempt != 1 || e.Outcomes == nil || e.Paused || e.Status != "ok" && e.Status != "vanished" {
		return
	}
	p.sizer.Observe(chunksize.Sample{Files: e.Chunk.Len(), Bytes: e.Chunk.Bytes, Seconds: e.Seconds})
}

// tail is how the chunks that wait once the input has ended are cut (no lonely tail).
func (p *pipeline) tail(sp *splitter.Splitter) splitter.Tail {
	if p.sizer == nil {
		return splitter.Tail{}
	}
	return splitter.Tail{
		Free: p.pool.Free,
		Split: func(c *splitter.Chunk, queued, free int) []*splitter.Chunk {
			if c.Sizes == nil {
				return nil
			}
			return sp.Split(c, p.sizer.Split(c.Sizes, c.Bytes, queued, free))
		},
	}
}

// probeBox holds the probe chunk of a short list (splitter.Config.Opening) and how its
// first attempt ended.
type probeBox struct {
	mu    sync.Mutex
	chunk *splitter.Chunk
	end   *chunksize.Probe
}

func (b *probeBox) ended(e exec.ChunkEnded) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.chunk == nil || e.Chunk != b.chunk || b.end != nil {
		return
	}
	pr := chunksize.Probe{Files: e.Chunk.Len(), First: e.FirstLine, Elapsed: e.Seconds, CPU: e.CPUSeconds, Ended: true}
	// refused, failed or paused: its time says nothing of what its paths cost
	pr.Failed = e.Attempt != 1 || e.Paused || e.Status != "ok" && e.Status != "vanished"
	b.end = &pr
}

// openingPoll is how often opening looks at the probe.
const openingPoll = 5 * time.Millisecond

// openingFunc returns the splitter's Opening: it waits for the probe chunk of a short list
// to show what a start and a path cost, and says into how many parts to cut the rest
// (chunksize.Policy.OpeningParts). It waits at most the chunk target; then, or when the
// run ends, the rest is cut for every slot, as without a probe.
func (p *pipeline) openingFunc() func(context.Context, *splitter.Chunk, int) int {
	if p.sizer == nil {
		return nil
	}
	return func(ctx context.Context, probe *splitter.Chunk, rest int) int {
		p.probe.mu.Lock()
		p.probe.chunk = probe
		p.probe.mu.Unlock()
		deadline := time.Now().Add(p.sizer.Target())
		t := time.NewTicker(openingPoll)
		defer t.Stop()
		for {
			slots := p.pool.Limit()
			p.probe.mu.Lock()
			end := p.probe.end
			p.probe.mu.Unlock()
			pr := chunksize.Probe{Files: probe.Len()}
			if end != nil {
				pr = *end
			} else if started, first, ok := p.pool.Running(probe.ID); ok {
				now := time.Now()
				pr.Elapsed = now.Sub(started).Seconds()
				if !first.IsZero() {
					pr.First = max(first.Sub(started).Seconds(), 1e-6)
				}
			}
			if n, known := p.sizer.OpeningParts(rest, pr, slots, runtime.NumCPU()); known {
				return n
			}
			select {
			case <-ctx.Done():
				return slots
			case now := <-t.C:
				if now.After(deadline) {
					return slots
				}
			}
		}
	}
}
