package splitter

import (
	"container/heap"
	"context"
)

// Tail cuts the chunks that wait to start once the input has ended, when fewer wait than
// slots are free, so that no slot idles while one rsync copies a long last chunk.
type Tail struct {
	// Free returns the slots free now (rsyncs that could start at once), given that sent
	// chunks have been handed to the consumer in all: those it has not counted yet take a
	// slot each.
	Free func(sent int64) int
	// Split returns the parts of c, when queued chunks wait (c among them) and free slots
	// are free, or nil to leave c whole.
	Split func(c *Chunk, queued, free int) []*Chunk
}

// split cuts the biggest waiting chunk while fewer chunks wait than slots are free. sent
// is how many chunks were handed over: a chunk the consumer took but has not counted yet
// would otherwise leave its slot counted free, and one part too many wait for a slot, to
// end last (bench scenario 1: 73 paths that started 2.6 s late, when the input's end was
// read right after a chunk was handed over).
func (t Tail) split(h *chunkHeap, sent int64) {
	if t.Free == nil || t.Split == nil {
		return
	}
	for h.Len() > 0 {
		free := t.Free(sent)
		if h.Len() >= free {
			return
		}
		parts := t.Split((*h)[0], h.Len(), free)
		if len(parts) < 2 {
			return
		}
		heap.Pop(h)
		for _, c := range parts {
			heap.Push(h, c)
		}
	}
}

// BiggestFirstTail passes chunks from in to the returned channel, holding up to window of
// them while the consumer is busy and handing over the one with the most bytes first.
// Chunks flow straight through when the consumer keeps up, so streaming is not delayed;
// when it does not, big chunks start early and the small ones fill the tail, which
// balances the last minutes of a copy. Once in is closed, it cuts the chunks it holds as
// tail says whenever fewer of them wait than slots are free (a zero Tail cuts none). The
// returned channel is closed after in is closed and drained. When ctx ends, held chunks
// go to unsent.
func BiggestFirstTail(ctx context.Context, in <-chan *Chunk, window int, unsent func(*Chunk), tail Tail) <-chan *Chunk {
	out := make(chan *Chunk)
	go func() {
		defer close(out)
		h := &chunkHeap{}
		var sent int64
		for in != nil || h.Len() > 0 {
			if in == nil {
				tail.split(h, sent)
			}
			var send chan<- *Chunk
			var top *Chunk
			if h.Len() > 0 {
				send, top = out, (*h)[0]
			}
			recv := in
			if h.Len() >= window {
				recv = nil
			}
			select {
			case c, ok := <-recv:
				if !ok {
					in = nil
					continue
				}
				heap.Push(h, c)
			case send <- top:
				heap.Pop(h)
				sent++
			case <-ctx.Done():
				for h.Len() > 0 {
					unsent(heap.Pop(h).(*Chunk))
				}
				if in != nil {
					for c := range in {
						unsent(c)
					}
				}
				return
			}
		}
	}()
	return out
}

// chunkHeap is a max-heap of chunks by bytes; among equals the older (smaller ID) first.
type chunkHeap []*Chunk

func (h chunkHeap) Len() int { return len(h) }
func (h chunkHeap) Less(i, j int) bool {
	if h[i].Bytes != h[j].Bytes {
		return h[i].Bytes > h[j].Bytes
	}
	return h[i].ID < h[j].ID
}
func (h chunkHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *chunkHeap) Push(x any)   { *h = append(*h, x.(*Chunk)) }
func (h *chunkHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}
