package cli

import (
	"os"
	"strings"
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
