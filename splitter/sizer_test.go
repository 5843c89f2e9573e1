package splitter

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prsync/prsync/plan"
	"github.com/prsync/prsync/tune"
)

// newPlanner returns the planner of a copy with chunks sized by time (a 2 s target) over
// slots rsyncs at once, within files paths a chunk.
func newPlanner(slots, files int, bytes int64) *plan.Planner {
	return plan.New(plan.Config{Target: 2 * time.Second, Files: files, Bytes: bytes, Wait: 10 * time.Second, Jobs: slots, CPUs: probeCPUs})
}

// probeCPUs is the CPUs the planners of the tests may use: answerProbe's figures make the
// CPU rule cut the paths after the probe into the parts it says.
const probeCPUs = 64

// answerProbe tells p that chunk id (the probe) ended with figures that cut the paths
// after it into n parts (fewer if the slots or the paths are fewer): a path costs far more
// than a start, and the CPUs' worth (tune.DefaultPerCPU rsyncs a CPU) is n such rsyncs. The cost model does not learn
// from it (its run is not the chunk's last), so that the budget after the wave is the
// test's to set; n 0 says the probe failed: every slot a part.
func answerProbe(p *plan.Planner, id, n int) {
	e := plan.End{ID: id, Attempt: 1, Files: plan.ProbeFiles, Seconds: 1, First: 0.01, OK: n > 0}
	if n > 0 {
		e.CPU = probeCPUs * tune.DefaultPerCPU / (float64(n) + 0.5) // the CPUs' worth: 4 rsyncs a CPU
	}
	p.Ended(time.Now(), e)
}

// learn has p's cost model learn chunks of seconds per path after a start of 40 ms.
func learn(p *plan.Planner, perPath float64) {
	for i, n := range []int{32, 64, 128, 256} {
		p.Ended(time.Now(), plan.End{ID: 1000 + i, Attempt: 1, Files: n, Seconds: 0.04 + perPath*float64(n), OK: true, Settled: true})
	}
}

// cutAll runs s over r and returns the chunks it cut. parts > 0 (or -1, a failed probe)
// answers the probe, the first chunk, once it has come (answerProbe).
func cutAll(t *testing.T, s *Splitter, pl *plan.Planner, r io.Reader, parts int) []*Chunk {
	t.Helper()
	out := make(chan *Chunk)
	done := make(chan error, 1)
	go func() {
		done <- s.Run(context.Background(), r, out)
		close(out)
	}()
	var cs []*Chunk
	for c := range out {
		if len(cs) == 0 && parts != 0 {
			answerProbe(pl, c.ID, max(parts, 0))
		}
		cs = append(cs, c)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return cs
}

// Chunks sized by time: a list whose end is read before its first chunk is cut is probed,
// and the rest cut into the parts the probe's figures say; once rates are known, the list
// is shared by the slots, one part each, but none shorter than MinPart; without a target,
// --chunk-files stays exact; Split cuts a chunk and keeps its paths, in order, once.
func TestSizedChunks(t *testing.T) {
	dir := t.TempDir()
	var paths []string
	for i := range 300 {
		p := filepath.Join(dir, fmt.Sprintf("f%03d", i))
		if err := os.WriteFile(p, make([]byte, 100), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	in := strings.Join(paths, "\n") + "\n"
	learnt := func(perPath float64) *plan.Planner {
		p := newPlanner(8, 2000, 128<<20)
		learn(p, perPath)
		return p
	}
	tests := []struct {
		name  string
		plan  *plan.Planner // nil: cut by --chunk-files
		files int           // --chunk-files without a planner
		n     int           // paths in the list; 0: 300
		probe int           // the parts the probe's figures say; -1: it failed
		want  string
	}{
		// the list ends with rates known: every slot a part, none shorter than MinPart (a
		// part of 38 paths at 0.2 ms each would be mostly its start)
		{"rates known, paths cheap: one part", learnt(0.0002), 0, 0, 0, "300/30000"},
		{"rates known, paths dear: every slot", learnt(0.01), 0, 0, 0,
			"38/3800 38/3800 38/3800 38/3800 38/3800 38/3800 38/3800 34/3400"},
		{"rates known, between: 3 parts", learnt(0.0025), 0, 0, 0, "100/10000 100/10000 100/10000"},
		// a short list probed first: 16 paths, then the rest in the parts the probe says
		{"probed, one part", newPlanner(8, 2000, 128<<20), 0, 0, 1, "16/1600 284/28400"},
		{"probed, 3 parts", newPlanner(8, 2000, 128<<20), 0, 0, 3, "16/1600 95/9500 95/9500 94/9400"},
		{"probed, a failed probe: every slot", newPlanner(8, 2000, 128<<20), 0, 0, -1,
			"16/1600 36/3600 36/3600 36/3600 36/3600 36/3600 36/3600 36/3600 32/3200"},
		{"probed, --chunk-files 100 bounds the parts", newPlanner(8, 100, 128<<20), 0, 0, 1,
			"16/1600 95/9500 95/9500 94/9400"},
		{"not short: 300 paths fill 2 slots of 100", newPlanner(2, 100, 128<<20), 0, 0, 0, "100/10000 100/10000 100/10000"},
		// too short to probe: shared by the slots at once
		{"64 paths over 8 slots", newPlanner(8, 2000, 128<<20), 0, 64, 0, "8/800 8/800 8/800 8/800 8/800 8/800 8/800 8/800"},
		{"--chunk-files exact: one chunk", nil, 2000, 0, 0, "300/30000"},
		{"--chunk-files 128 exact", nil, 128, 0, 0, "128/12800 128/12800 44/4400"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Sep: '\n', Cwd: "/", Plan: tc.plan, ChunkFiles: tc.files, ChunkBytes: 128 << 20, ChunkWait: 10 * time.Second}
			list := in
			if tc.n > 0 {
				list = strings.Join(paths[:tc.n], "\n") + "\n"
			}
			// the list's end comes with its last bytes, as it may from a pipe: here always,
			// so that the end is known before the first chunk is cut
			s := New(cfg, Hooks{})
			cs := cutAll(t, s, tc.plan, &lastRead{b: []byte(list)}, tc.probe)
			if got := sizes(cs); got != tc.want {
				t.Errorf("chunks %q, want %q", got, tc.want)
			}
		})
	}

	// Split: parts with new IDs, the same paths in the same order, bytes summed
	pl := plan.New(plan.Config{Target: 2 * time.Second, Files: 2000, Bytes: 1 << 30, Jobs: 1})
	learn(pl, 0.0001) // a chunk with sizes, and no probe
	s := New(Config{Sep: '\n', Cwd: "/", Plan: pl}, Hooks{})
	c := cutAll(t, s, pl, strings.NewReader(in), 0)[0]
	n := s.Chunks()
	parts := s.Split(c, []int{10, 20})
	if len(parts) != 3 || parts[0].Len() != 10 || parts[1].Len() != 10 || parts[2].Len() != c.Len()-20 {
		t.Fatalf("split %d paths at 10, 20: %d parts", c.Len(), len(parts))
	}
	var got []string
	var bytes int64
	for i, p := range parts {
		if p.ID != n+i+1 || p.Src != c.Src {
			t.Errorf("part %d: ID %d src %q, want %d %q", i, p.ID, p.Src, n+i+1, c.Src)
		}
		for _, in := range p.Inputs {
			got = append(got, string(in))
		}
		bytes += p.Bytes
	}
	var want []string
	for _, in := range c.Inputs {
		want = append(want, string(in))
	}
	if strings.Join(got, ",") != strings.Join(want, ",") || bytes != c.Bytes {
		t.Errorf("the parts hold other paths or bytes than the chunk: %d bytes of %d", bytes, c.Bytes)
	}
	if s.Split(&Chunk{Inputs: c.Inputs}, []int{1}) != nil {
		t.Error("a chunk without sizes (-H) was split")
	}
}

// lastRead returns all of b, and io.EOF, in its first Read.
type lastRead struct{ b []byte }

func (r *lastRead) Read(p []byte) (int, error) {
	n := copy(p, r.b)
	r.b = r.b[n:]
	if len(r.b) == 0 {
		return n, io.EOF
	}
	return n, nil
}

// TestIdleAfterHold: a few paths of a list still streaming, held while the first chunk waits
// for the input's end, go into a chunk once the wait runs out, and that chunk is sent after
// --chunk-wait without a path, as any chunk is (it was never sent: TestStreaming).
func TestIdleAfterHold(t *testing.T) {
	dir := t.TempDir()
	var in []byte
	for i := range 3 {
		p := filepath.Join(dir, fmt.Sprint(i))
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		in = append(in, p+"\n"...)
	}
	pl := plan.New(plan.Config{Target: 2 * time.Second, Files: 2000, Wait: 200 * time.Millisecond, Jobs: 8})
	s := New(Config{Sep: '\n', Cwd: "/", Plan: pl, ChunkWait: 200 * time.Millisecond}, Hooks{})
	pr, pw := io.Pipe()
	defer pw.Close()
	go pw.Write(in) // and the input stays open
	out := make(chan *Chunk, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Run(ctx, pr, out)
	select {
	case c := <-out:
		if c.Len() != 3 {
			t.Errorf("a chunk of %d paths, want the 3", c.Len())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no chunk within 10 s of 3 paths and an input still open")
	}
}
