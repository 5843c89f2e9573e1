package splitter

import (
	"container/heap"
	"context"
)

// BiggestFirst passes chunks from in to the returned channel, holding up to window of them
// while the consumer is busy and handing over the one with the most bytes first. Chunks
// flow straight through when the consumer keeps up, so streaming is not delayed; when it
// does not, big chunks start early and the small ones fill the tail, which balances the
// last minutes of a copy. The returned channel is closed after in is closed and drained.
// When ctx ends, held chunks go to unsent.
func BiggestFirst(ctx context.Context, in <-chan *Chunk, window int, unsent func(*Chunk)) <-chan *Chunk {
	out := make(chan *Chunk)
	go func() {
		defer close(out)
		h := &chunkHeap{}
		for in != nil || h.Len() > 0 {
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
