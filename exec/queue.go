package exec

import (
	"github.com/prsync/prsync/plan"
	"github.com/prsync/prsync/splitter"
)

// waitingChunks are the chunks Run took from the input and has not started, in the order
// they came; the planner says which starts next (plan.Pick).
type waitingChunks struct {
	chunks []*splitter.Chunk
	view   []plan.Waiting
}

func (q *waitingChunks) len() int { return len(q.chunks) }

func (q *waitingChunks) add(c *splitter.Chunk) { q.chunks = append(q.chunks, c) }

// remove takes the chunk at i out.
func (q *waitingChunks) remove(i int) *splitter.Chunk {
	c := q.chunks[i]
	q.chunks = append(q.chunks[:i], q.chunks[i+1:]...)
	return c
}

// views returns the chunks as the planner sees them.
func (q *waitingChunks) views() []plan.Waiting {
	q.view = q.view[:0]
	for _, c := range q.chunks {
		q.view = append(q.view, plan.Waiting{ID: c.ID, Bytes: c.Bytes, Root: c.Root})
	}
	return q.view
}

// copies counts the chunks that are not a root's.
func (q *waitingChunks) copies() int {
	n := 0
	for _, c := range q.chunks {
		if !c.Root {
			n++
		}
	}
	return n
}

// biggest returns the index of the biggest chunk that is not a root's, the first among
// equals; -1 when there is none.
func (q *waitingChunks) biggest() int {
	b := -1
	for i, c := range q.chunks {
		if !c.Root && (b < 0 || c.Bytes > q.chunks[b].Bytes) {
			b = i
		}
	}
	return b
}
