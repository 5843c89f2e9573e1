package splitter

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"testing/iotest"
	"time"
)

// TestRunKeepsOrder: however the input arrives and however many workers examine it,
// every path is applied once and in input order: the quick check's fresh paths in order,
// the others in chunks in order, with ascending chunk IDs.
func TestRunKeepsOrder(t *testing.T) {
	src, dest := t.TempDir(), t.TempDir()
	mtime := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	var paths []string
	fresh := map[string]bool{}
	for d := range 20 {
		for f := range 60 {
			rel := fmt.Sprintf("d%02d/f%02d", d, f)
			paths = append(paths, "./"+rel)
			write := func(root string, size int) {
				p := filepath.Join(root, rel)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, make([]byte, size), 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Chtimes(p, mtime, mtime); err != nil {
					t.Fatal(err)
				}
			}
			write(src, f)
			switch f % 3 {
			case 0: // up to date
				write(dest, f)
				fresh["./"+rel] = true
			case 1: // another size
				write(dest, f+1)
			} // 2: missing in DEST
		}
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(paths), func(i, j int) { paths[i], paths[j] = paths[j], paths[i] })
	var input []byte
	var wantFresh, wantSent []string
	for _, p := range paths {
		input = append(append(input, p...), 0)
		if fresh[p] {
			wantFresh = append(wantFresh, p)
		} else {
			wantSent = append(wantSent, p)
		}
	}
	readers := map[string]func() io.Reader{
		"whole":    func() io.Reader { return bytes.NewReader(input) },
		"one byte": func() io.Reader { return iotest.OneByteReader(bytes.NewReader(input)) },
		"halves":   func() io.Reader { return iotest.HalfReader(bytes.NewReader(input)) },
		"data+EOF": func() io.Reader { return iotest.DataErrReader(bytes.NewReader(input)) },
	}
	for name, reader := range readers {
		for _, workers := range []int{1, 3, 8} {
			for _, block := range []int{7, 4096, 0} {
				t.Run(fmt.Sprintf("%s/%d workers/block %d", name, workers, block), func(t *testing.T) {
					var gotFresh []string
					s := New(Config{Sep: 0, Cwd: src, ChunkFiles: 13, StatWorkers: workers, BlockSize: block,
						Quick: &QuickCheck{Dest: dest}}, Hooks{
						Fresh: func(in []byte, _ int64) { gotFresh = append(gotFresh, string(in)) },
					})
					out := make(chan *Chunk, len(paths))
					if err := s.Run(context.Background(), reader(), out); err != nil {
						t.Fatal(err)
					}
					close(out)
					var gotSent []string
					id := 0
					for c := range out {
						if c.ID <= id {
							t.Fatalf("chunk %d after chunk %d", c.ID, id)
						}
						id = c.ID
						for _, in := range c.Inputs {
							gotSent = append(gotSent, string(in))
						}
					}
					if !slices.Equal(gotFresh, wantFresh) {
						t.Errorf("fresh paths out of order or lost: %d of %d", len(gotFresh), len(wantFresh))
					}
					if !slices.Equal(gotSent, wantSent) {
						t.Errorf("chunked paths out of order or lost: %d of %d", len(gotSent), len(wantSent))
					}
				})
			}
		}
	}
}

// TestRunCancelStopsWorkers: a cancel while units wait for the workers returns at once
// with the chunk being built unsent, and Run returns only once no worker can touch the
// source tree's descriptor any more.
func TestRunCancelStopsWorkers(t *testing.T) {
	src := t.TempDir()
	var input []byte
	for i := range 5000 {
		p := filepath.Join(src, fmt.Sprintf("f%d", i%50))
		if i < 50 {
			os.WriteFile(p, nil, 0o644)
		}
		input = append(append(input, p...), '\n')
	}
	for range 20 {
		ctx, cancel := context.WithCancel(context.Background())
		var accepted, unsent int
		s := New(Config{Sep: '\n', Root: src, Cwd: "/", ChunkFiles: 1 << 20, StatWorkers: 4}, Hooks{
			Accepted: func(int64) {
				if accepted++; accepted == 100 {
					cancel()
				}
			},
			Unsent: func(in [][]byte) { unsent += len(in) },
		})
		err := s.Run(ctx, bytes.NewReader(input), make(chan *Chunk))
		if err != context.Canceled {
			t.Fatalf("Run = %v, want context.Canceled", err)
		}
		if unsent != accepted {
			t.Fatalf("%d accepted, %d unsent", accepted, unsent)
		}
		if s.srcRef.fd != -1 {
			t.Fatal("the source descriptor is still open after Run")
		}
	}
}

// TestExamined: the Examined hook is called once, when every record has been examined
// and before the last chunk is sent; a read that fails never calls it.
func TestExamined(t *testing.T) {
	src := t.TempDir()
	var input []byte
	for i := range 500 {
		p := filepath.Join(src, fmt.Sprintf("f%03d", i))
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		input = append(append(input, p...), '\n')
	}
	for _, tt := range []struct {
		name      string
		r         func() io.Reader
		wantCalls int
	}{
		{"whole", func() io.Reader { return bytes.NewReader(input) }, 1},
		{"one byte", func() io.Reader { return iotest.OneByteReader(bytes.NewReader(input)) }, 1},
		{"read error", func() io.Reader { return iotest.TimeoutReader(iotest.HalfReader(bytes.NewReader(input))) }, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var calls, accepted, atCall int
			s := New(Config{Sep: '\n', Cwd: "/", ChunkFiles: 64, StatWorkers: 4}, Hooks{
				Accepted: func(int64) { accepted++ },
				Examined: func() { calls++; atCall = accepted },
			})
			out := make(chan *Chunk)
			sent := make(chan int)
			go func() {
				n, last := 0, -1
				for c := range out {
					n += c.Len()
					if n == 500 {
						last = calls // calls is written before the last chunk is sent
					}
				}
				sent <- last
			}()
			err := s.Run(context.Background(), tt.r(), out)
			close(out)
			last := <-sent
			if (err != nil) != (tt.wantCalls == 0) {
				t.Fatalf("Run = %v", err)
			}
			if calls != tt.wantCalls {
				t.Fatalf("Examined called %d times, want %d", calls, tt.wantCalls)
			}
			if tt.wantCalls == 1 && (atCall != 500 || last != 1) {
				t.Errorf("at the call %d of 500 paths were accepted; the last chunk was sent after %d calls, want 1", atCall, last)
			}
		})
	}
}
