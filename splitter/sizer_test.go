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

	"github.com/prsync/prsync/chunksize"
)

// Chunks sized by time: a list whose end is read before its first chunk is cut is shared
// by the slots, one chunk each; without a sizer, --chunk-files stays exact; Split cuts a
// chunk and keeps its paths, in order, once.
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
	sizer := func() *chunksize.Sizer {
		return chunksize.NewSizer(chunksize.DefaultPolicy(2*time.Second, 2000, 128<<20))
	}
	slots := func(n int) func() int { return func() int { return n } }
	// learnt is a sizer that has seen chunks of seconds per path after a start of 40 ms
	learnt := func(perPath float64) *chunksize.Sizer {
		s := sizer()
		for _, n := range []int{32, 64, 128, 256} {
			s.Observe(chunksize.Sample{Files: n, Seconds: 0.04 + perPath*float64(n)})
		}
		return s
	}
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"a short list over 8 slots", Config{Sizer: sizer(), Slots: slots(8)},
			"38/3800 38/3800 38/3800 38/3800 38/3800 38/3800 38/3800 34/3400"},
		{"over 3 slots", Config{Sizer: sizer(), Slots: slots(3)}, "100/10000 100/10000 100/10000"},
		// the list ends with rates known: every slot a part, none shorter than MinPart (a
		// part of 38 paths at 0.2 ms each would be mostly its start)
		{"rates known, paths cheap: one part", Config{Sizer: learnt(0.0002), Slots: slots(8)}, "300/30000"},
		{"rates known, paths dear: every slot", Config{Sizer: learnt(0.01), Slots: slots(8)},
			"38/3800 38/3800 38/3800 38/3800 38/3800 38/3800 38/3800 34/3400"},
		{"rates known, between: 3 parts", Config{Sizer: learnt(0.0025), Slots: slots(8)}, "100/10000 100/10000 100/10000"},
		{"no slots known: first chunks of 32", Config{Sizer: sizer()},
			"32/3200 32/3200 32/3200 32/3200 32/3200 32/3200 32/3200 32/3200 32/3200 12/1200"},
		// a short list probed first: 16 paths, then the rest in the parts Opening says
		{"probed, one part", Config{Sizer: sizer(), Slots: slots(8), Opening: opening(1)}, "16/1600 284/28400"},
		{"probed, 3 parts", Config{Sizer: sizer(), Slots: slots(8), Opening: opening(3)}, "16/1600 95/9500 95/9500 94/9400"},
		{"probed, every slot", Config{Sizer: sizer(), Slots: slots(8), Opening: opening(8)},
			"16/1600 36/3600 36/3600 36/3600 36/3600 36/3600 36/3600 36/3600 32/3200"},
		{"probed, --chunk-files 100 bounds the parts", Config{Sizer: sizer(), Slots: slots(8), Opening: opening(1), ChunkFiles: 100},
			"16/1600 95/9500 95/9500 94/9400"},
		{"not short: 300 paths fill 2 slots of 100", Config{Sizer: sizer(), Slots: slots(2), Opening: opening(1), ChunkFiles: 100},
			"100/10000 100/10000 100/10000"},
		{"--chunk-files exact: one chunk", Config{}, "300/30000"},
		{"--chunk-files 128 exact", Config{ChunkFiles: 128}, "128/12800 128/12800 44/4400"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Sep, cfg.Cwd = '\n', "/"
			if cfg.ChunkFiles == 0 {
				cfg.ChunkFiles = 2000
			}
			cfg.ChunkBytes = 128 << 20
			// the list's end comes with its last bytes, as it may from a pipe: here always,
			// so that the end is known before the first chunk is cut
			s := New(cfg, Hooks{})
			out := make(chan *Chunk, 1000)
			if err := s.Run(context.Background(), &lastRead{b: []byte(in)}, out); err != nil {
				t.Fatal(err)
			}
			close(out)
			var cs []*Chunk
			for c := range out {
				cs = append(cs, c)
			}
			if got := sizes(cs); got != tc.want {
				t.Errorf("chunks %q, want %q", got, tc.want)
			}
		})
	}

	// Split: parts with new IDs, the same paths in the same order, bytes summed
	s := New(Config{Sep: '\n', Cwd: "/", ChunkFiles: 2000, ChunkBytes: 1 << 30, Sizer: sizer()}, Hooks{})
	out := make(chan *Chunk, 100)
	if err := s.Run(context.Background(), strings.NewReader(in), out); err != nil {
		t.Fatal(err)
	}
	close(out)
	c := <-out
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

// opening returns an Opening that says n parts, and checks it is asked once, about the
// first chunk (the probe), with the paths after it.
func opening(n int) func(*Chunk, int) (int, bool) {
	asked := false
	return func(probe *Chunk, rest int) (int, bool) {
		if asked || probe.ID != 1 || probe.Len() != chunksize.ProbeFiles || rest != 300-chunksize.ProbeFiles {
			panic(fmt.Sprintf("Opening asked again (%v) or about chunk %d of %d paths, %d left", asked, probe.ID, probe.Len(), rest))
		}
		asked = true
		return n, true
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

// TestTailAfterWave: the paths left when the input ends are shared by the slots, a part
// each, but not into parts shorter than the Sizer's MinPart once rates are known, nor,
// while nothing is known, into parts smaller than those of a wave that took the slots
// (bench scenario 6: the 1,753 paths left after a wave of 8 × 1,042, against a daemon
// that took 3, went into 8 parts of 220, a session each).
func TestTailAfterWave(t *testing.T) {
	tests := []struct {
		name      string
		perPath   float64 // the rates the sizer learnt: seconds a path after a 40 ms start; 0: none
		waveFloor int
		left      int
		want      int // paths a part
	}{
		{"nothing known, no wave: every slot", 0, 0, 1753, 220},
		{"nothing known, after a wave: a wave part's", 0, 1042, 1753, 1042},
		{"nothing known, after a wave bigger than what is left", 0, 1042, 800, 1042},
		{"rates known, paths cheap: one part", 0.0002, 1042, 1753, 1753},
		{"rates known, paths dear: every slot, the wave aside", 0.01, 1042, 1753, 220},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sz := chunksize.NewSizer(chunksize.DefaultPolicy(2*time.Second, 2000, 128<<20))
			if tt.perPath > 0 {
				for _, n := range []int{32, 64, 128, 256} {
					sz.Observe(chunksize.Sample{Files: n, Seconds: 0.04 + tt.perPath*float64(n)})
				}
			}
			s := New(Config{Sizer: sz, Slots: func() int { return 8 }, ChunkFiles: 2000, Cwd: "/"}, Hooks{})
			s.waveFloor = tt.waveFloor
			s.nextID.Store(9) // the probe and the wave
			s.read.Store(int64(tt.left))
			s.applied = 1 // the record being applied, the first left, counts
			s.eof.Store(true)
			s.budget = sz.Budget()
			s.shareTail(context.Background())
			if s.tailFiles != tt.want {
				t.Errorf("parts of %d paths, want %d", s.tailFiles, tt.want)
			}
		})
	}
}
