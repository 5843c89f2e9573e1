package exec

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/prsync/prsync/rsync"
	"github.com/prsync/prsync/splitter"
)

// TestLiveLimit: lowering and raising the limit while chunks run never loses or repeats
// a chunk, and never starts an rsync beyond the highest limit set. The "rsync" is a shell
// that reads its list and sleeps a little.
func TestLiveLimit(t *testing.T) {
	const n = 60
	var mu sync.Mutex
	starts := map[int]int{}
	ends := map[int]int{}
	maxRunning, maxLimit := 0, 0
	p := &Pool{
		Rsync: "/bin/sh", Args: []string{"-c", "cat >/dev/null; sleep 0.0$(($$ % 5))", "sh"},
		Dest: t.TempDir(), Jobs: 3, MaxJobs: 8, Grace: time.Second, Confirm: ConfirmNothing,
	}
	p.Reports = func(r Report) {
		mu.Lock()
		defer mu.Unlock()
		switch r := r.(type) {
		case ChunkStarted:
			starts[r.Chunk.ID]++
			running, _ := p.Counts()
			maxRunning = max(maxRunning, running)
		case ChunkEnded:
			if r.Outcomes != nil {
				ends[r.Chunk.ID]++
				for _, o := range r.Outcomes {
					if o.Status != rsync.UpToDate {
						t.Errorf("chunk %d: %s %s", r.Chunk.ID, o.Status, o.Reason)
					}
				}
			}
		case ChunkDropped:
			t.Errorf("chunk %d dropped: %s", r.Chunk.ID, r.Reason)
		}
	}
	chunks := make(chan *splitter.Chunk)
	go func() {
		for i := 1; i <= n; i++ {
			chunks <- &splitter.Chunk{ID: i, Src: "/", Inputs: [][]byte{[]byte(fmt.Sprint(i))}, Entries: [][]byte{[]byte(fmt.Sprint(i))}}
		}
		close(chunks)
	}()
	stop := make(chan struct{})
	go func() {
		rng := rand.New(rand.NewPCG(1, 2))
		for {
			select {
			case <-stop:
				return
			case <-time.After(7 * time.Millisecond):
			}
			l := 1 + rng.IntN(8)
			mu.Lock()
			maxLimit = max(maxLimit, l)
			mu.Unlock()
			p.SetLimit(l, "test", "", 0)
		}
	}()
	mu.Lock()
	maxLimit = 3
	mu.Unlock()
	if err := p.Run(context.Background(), context.Background(), chunks); err != nil {
		t.Fatal(err)
	}
	close(stop)
	mu.Lock()
	defer mu.Unlock()
	for i := 1; i <= n; i++ {
		if starts[i] != 1 || ends[i] != 1 {
			t.Errorf("chunk %d: %d starts, %d ends; want 1 and 1", i, starts[i], ends[i])
		}
	}
	if maxRunning > maxLimit {
		t.Errorf("%d rsyncs ran at once, above the highest limit %d", maxRunning, maxLimit)
	}
	if p.Limit() < 1 || p.Limit() > 8 {
		t.Errorf("limit %d outside 1..8", p.Limit())
	}
}
