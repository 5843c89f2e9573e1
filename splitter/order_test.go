package splitter

import (
	"context"
	"fmt"
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
	out := BiggestFirst(context.Background(), in, 10, nil)
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
	out := BiggestFirst(context.Background(), in, 4, nil)
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
	out := BiggestFirst(ctx, in, 10, func(*Chunk) { unsent++ })
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
