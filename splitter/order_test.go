package splitter

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

func TestBiggestFirst(t *testing.T) {
	in := make(chan *Chunk, 10)
	for i, b := range []int64{10, 500, 20, 300, 300, 5} {
		in <- &Chunk{ID: i + 1, Bytes: b}
	}
	close(in)
	// a consumer that was busy while all six arrived sees them biggest first, and among
	// equals the older first
	out := BiggestFirstTail(context.Background(), in, 10, nil, Tail{})
	time.Sleep(100 * time.Millisecond)
	var got []int
	for c := range out {
		got = append(got, c.ID)
	}
	if fmt.Sprint(got) != "[2 4 5 3 1 6]" {
		t.Errorf("chunk order %v, want [2 4 5 3 1 6] (500, 300, 300, 20, 10, 5 bytes)", got)
	}
}

func TestBiggestFirstOrder(t *testing.T) {
	in := make(chan *Chunk, 5)
	for i, b := range []int64{10, 500, 20, 300, 7} {
		in <- &Chunk{ID: i + 1, Bytes: b}
	}
	close(in)
	out := BiggestFirstTail(context.Background(), in, 4, nil, Tail{})
	time.Sleep(100 * time.Millisecond) // a busy consumer: the window fills with 4 chunks
	var got []int64
	for c := range out {
		got = append(got, c.Bytes)
	}
	if fmt.Sprint(got) != "[500 300 20 10 7]" {
		t.Errorf("order %v, want [500 300 20 10 7]", got)
	}
}

func TestBiggestFirstCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	in := make(chan *Chunk, 3)
	for i := 0; i < 3; i++ {
		in <- &Chunk{ID: i + 1, Bytes: int64(i)}
	}
	close(in)
	var unsent int
	out := BiggestFirstTail(ctx, in, 10, func(*Chunk) { unsent++ }, Tail{})
	time.Sleep(50 * time.Millisecond) // in is drained and closed before ctx ends
	cancel()
	n := 0
	for range out {
		n++
	}
	if n+unsent != 3 {
		t.Errorf("%d sent + %d unsent, want 3", n, unsent)
	}
}

// The tail split: once the input has ended, a chunk waiting while more slots are free is
// cut for them; while no slot is free, it waits whole.
func TestBiggestFirstTail(t *testing.T) {
	mk := func(id, n int) *Chunk {
		c := &Chunk{ID: id}
		for i := range n {
			c.Inputs = append(c.Inputs, []byte(fmt.Sprint(id, "/", i)))
			c.Entries = append(c.Entries, c.Inputs[i])
			c.Sizes = append(c.Sizes, 10)
			c.Bytes += 10
		}
		return c
	}
	sp := New(Config{}, Hooks{})
	sp.nextID.Store(2)
	split := func(c *Chunk, queued, free int) []*Chunk {
		parts := free - queued + 1
		var cuts []int
		for k := 1; k < parts; k++ {
			cuts = append(cuts, k*c.Len()/parts)
		}
		return sp.Split(c, cuts)
	}
	tests := []struct {
		name string
		free int
		want string
	}{
		{"no slot free: whole", 0, "[40 20]"},
		{"one slot free a chunk: whole", 2, "[40 20]"},
		{"four free: the biggest cut in three", 4, "[20 14 13 13]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := make(chan *Chunk, 2)
			in <- mk(1, 40)
			in <- mk(2, 20)
			close(in)
			// a consumer's free slots: each chunk it takes takes one
			free := func(sent int64) int { return max(0, tc.free-int(sent)) }
			out := BiggestFirstTail(context.Background(), in, 10, nil, Tail{Free: free, Split: split})
			time.Sleep(50 * time.Millisecond)
			var got []int
			seen := map[string]bool{}
			for c := range out {
				got = append(got, c.Len())
				for _, p := range c.Inputs {
					if seen[string(p)] {
						t.Errorf("path %s twice", p)
					}
					seen[string(p)] = true
				}
			}
			if fmt.Sprint(got) != tc.want || len(seen) != 60 {
				t.Errorf("chunks of %v paths (%d in all), want %s", got, len(seen), tc.want)
			}
		})
	}
}

// TestTailInFlight: a chunk the consumer took but has not counted yet takes a slot. The
// input's end read right after a chunk was handed over left that chunk's slot counted
// free, and the last chunk was cut for it: one part too many, which waited for a slot.
func TestTailInFlight(t *testing.T) {
	sp := New(Config{}, Hooks{})
	sp.nextID.Store(2)
	mk := func(id int) *Chunk {
		c := &Chunk{ID: id}
		for i := range 20 {
			c.Inputs = append(c.Inputs, []byte(fmt.Sprint(id, "/", i)))
			c.Entries = append(c.Entries, c.Inputs[i])
			c.Sizes = append(c.Sizes, 10)
			c.Bytes += 10
		}
		return c
	}
	split := func(c *Chunk, queued, free int) []*Chunk {
		return sp.Split(c, []int{c.Len() / 2}) // in two whenever asked
	}
	// a consumer of 2 slots that counts the chunk it took only later
	var mu sync.Mutex
	counted := 0
	free := func(sent int64) int {
		mu.Lock()
		defer mu.Unlock()
		return max(0, 2-counted-int(sent-int64(counted)))
	}
	in := make(chan *Chunk)
	out := BiggestFirstTail(context.Background(), in, 10, nil, Tail{Free: free, Split: split})
	in <- mk(1)
	first := <-out // taken, not counted yet
	in <- mk(2)
	close(in)
	time.Sleep(50 * time.Millisecond) // the stage sees the end before the count
	mu.Lock()
	counted++
	mu.Unlock()
	var got []int
	for c := range out {
		got = append(got, c.Len())
	}
	if first.Len() != 20 || fmt.Sprint(got) != "[20]" {
		t.Errorf("after the first chunk, chunks of %v paths; want the last whole: [20]", got)
	}
}
