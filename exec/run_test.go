package exec

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prsync/prsync/plan"
	"github.com/prsync/prsync/splitter"
)

// chunkOf returns chunk id of n paths of 10 bytes each, with their sizes.
func chunkOf(id, n int) *splitter.Chunk {
	c := &splitter.Chunk{ID: id, Src: "/"}
	for i := range n {
		c.Inputs = append(c.Inputs, fmt.Appendf(nil, "%d-%d", id, i))
		c.Entries = append(c.Entries, c.Inputs[i])
		c.Sizes = append(c.Sizes, 10)
		c.Bytes += 10
	}
	return c
}

// runLog runs p over chunks, its gate closed until every chunk has come (Run holds them,
// up to Jobs), and returns the reports of chunks started and ended, in order: "start 3",
// "end 3".
func runLog(t *testing.T, p *Pool, chunks []*splitter.Chunk, limit int) []string {
	t.Helper()
	var mu sync.Mutex
	var log []string
	p.Rsync, p.Args = "/bin/sh", []string{"-c", "cat >/dev/null; sleep 0.05", "sh"}
	p.Dest, p.Grace, p.Confirm = t.TempDir(), time.Second, ConfirmNothing
	p.Reports = func(r Report) {
		mu.Lock()
		defer mu.Unlock()
		switch r := r.(type) {
		case ChunkStarted:
			log = append(log, fmt.Sprint("start ", r.Chunk.ID, "/", r.Chunk.Len()))
		case ChunkEnded:
			log = append(log, fmt.Sprint("end ", r.Chunk.ID))
		case ChunkDropped:
			t.Errorf("chunk %d dropped: %s", r.Chunk.ID, r.Reason)
		}
	}
	p.SetGate(false)
	in := make(chan *splitter.Chunk, len(chunks))
	for _, c := range chunks {
		in <- c
	}
	close(in)
	done := make(chan error, 1)
	go func() { done <- p.Run(context.Background(), context.Background(), in) }()
	time.Sleep(100 * time.Millisecond) // Run takes them while no slot is open
	p.SetLimit(limit, "test", "", 0)
	p.SetGate(true)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not end")
	}
	mu.Lock()
	defer mu.Unlock()
	return log
}

// starts returns the chunks started, in order, as "id/paths".
func starts(log []string) []string {
	var out []string
	for _, l := range log {
		if s, ok := strings.CutPrefix(l, "start "); ok {
			out = append(out, s)
		}
	}
	return out
}

// TestRunRootOneJob: at -j 1 a root's chunk that comes first does not take the one place
// Run holds a chunk in: it waits for the input's end, which Run must go on reading (it
// hung, holding the root, the input never read to its end).
func TestRunRootOneJob(t *testing.T) {
	p := &Pool{Jobs: 1}
	root := &splitter.Chunk{ID: 3, Src: "/", Root: true, Inputs: [][]byte{[]byte(".")}, Entries: [][]byte{[]byte(".")}}
	log := runLog(t, p, []*splitter.Chunk{root, chunkOf(1, 2), chunkOf(2, 1)}, 1)
	if got := fmt.Sprint(starts(log)); got != "[1/2 2/1 3/1]" {
		t.Errorf("started %s, want [1/2 2/1 3/1]: every chunk, the root last", got)
	}
}

// TestRunOrder: the chunks Run holds while no slot is free start as the planner picks them:
// the biggest first, the older among equals, a root's chunk last, once every other has
// ended. (Before, an order stage between the splitter and the pool held them, and the pool
// held the roots.)
func TestRunOrder(t *testing.T) {
	p := &Pool{Jobs: 8}
	cs := []*splitter.Chunk{chunkOf(1, 1), chunkOf(2, 50), chunkOf(3, 2), chunkOf(4, 30), chunkOf(5, 30), chunkOf(6, 1)}
	root := &splitter.Chunk{ID: 7, Src: "/", Root: true, Inputs: [][]byte{[]byte(".")}, Entries: [][]byte{[]byte(".")}}
	log := runLog(t, p, append([]*splitter.Chunk{root}, cs...), 1)
	if got := fmt.Sprint(starts(log)); got != "[2/50 4/30 5/30 3/2 1/1 6/1 7/1]" {
		t.Errorf("started %s, want [2/50 4/30 5/30 3/2 1/1 6/1 7/1]: the biggest first, the root last", got)
	}
	rootAt := slices.Index(log, "start 7/1")
	for _, c := range cs {
		if end := slices.Index(log, fmt.Sprint("end ", c.ID)); end < 0 || end > rootAt {
			t.Errorf("chunk %d ended at %d, the root started at %d: want the root after every other", c.ID, end, rootAt)
		}
	}
}

// TestRunTail: once the input has ended, a chunk that waits while more slots are free is
// cut for them, where the planner says (TailCuts: every slot a part while nothing is known);
// with no slot to spare, it starts whole.
func TestRunTail(t *testing.T) {
	for _, tc := range []struct {
		name  string
		limit int
		want  string
	}{
		{"four slots free: cut in four", 4, "[10 10 10 10]"},
		{"one slot: whole", 1, "[40]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp := splitter.New(splitter.Config{}, splitter.Hooks{})
			pl := plan.New(plan.Config{Target: 2 * time.Second, Files: 2000, Jobs: 4})
			p := &Pool{Jobs: 4, Plan: pl, Split: sp.Split}
			log := runLog(t, p, []*splitter.Chunk{chunkOf(1, 40)}, tc.limit)
			var paths []string
			for _, s := range starts(log) {
				var id, n int
				fmt.Sscanf(s, "%d/%d", &id, &n)
				paths = append(paths, fmt.Sprint(n))
			}
			if got := fmt.Sprint(paths); got != tc.want {
				t.Errorf("chunks of %s paths started, want %s", got, tc.want)
			}
		})
	}
}

// TestWatchLines: while the planner watches a chunk's rsync (the probe of the opening), the
// pool tells it of the lines logged as they come: it sees the probe's start, its first line
// and its lines so far, and works out its parts from them without asking the pool.
func TestWatchLines(t *testing.T) {
	pl := plan.New(plan.Config{Target: 2 * time.Second, Files: 2000, Wait: time.Second, Jobs: 4})
	// a short list of 100 paths: the first chunk is the probe
	if st := pl.Next(time.Now(), plan.Input{Read: 100, EOF: true, Left: 100}); st.Do != plan.Cut || st.Budget.Files != plan.ProbeFiles {
		t.Fatalf("the first chunk of a short list: %+v, want a probe", st)
	}
	pl.Cut(1, plan.ProbeFiles, 0)
	script := `cat >/dev/null; for i in 1 2 3; do echo ">f+++++++++|1|2024/01/01-00:00:00|1|f$i"; done; sleep 1`
	p := &Pool{
		Rsync: "/bin/sh", Args: []string{"-c", script, "sh"}, Plan: pl,
		Dest: t.TempDir(), Jobs: 4, Grace: time.Second, Confirm: ConfirmNothing, Reports: func(Report) {},
	}
	chunks := make(chan *splitter.Chunk, 1)
	var in [][]byte
	for i := 1; i <= plan.ProbeFiles; i++ {
		in = append(in, fmt.Append(nil, "f", i))
	}
	chunks <- &splitter.Chunk{ID: 1, Src: "/", Inputs: in, Entries: in}
	close(chunks)
	done := make(chan error, 1)
	go func() { done <- p.Run(context.Background(), context.Background(), chunks) }()
	var pr plan.Probe
	for end := time.Now().Add(30 * time.Second); pr.Logged < 3; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the probe's three lines were never seen while it ran: %+v", pr)
		}
		select {
		case <-pl.Wake():
		default:
		}
		pr = pl.Probe(time.Now())
	}
	if pr.Logged != 3 || !(pr.First > 0) || pr.Elapsed < pr.First || pr.Ended {
		t.Errorf("the probe as the planner saw it: %+v; want 3 lines, the first after its start, running", pr)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if pr := pl.Probe(time.Now()); !pr.Ended || pr.Failed {
		t.Errorf("after the run: %+v, want it ended", pr)
	}
}

// TestRunAbortAfterInput: a chunk whose rsync stops the whole run (exit 1, a setup every
// chunk shares) once the input has ended: Run drops the chunks that wait as not attempted
// and returns. It waited on the closed input for ever (TestOneBadFullDest hung).
func TestRunAbortAfterInput(t *testing.T) {
	var mu sync.Mutex
	var dropped []int
	p := &Pool{Rsync: "/bin/sh", Args: []string{"-c", "cat >/dev/null; echo 'rsync error: syntax or usage error' >&2; exit 1", "sh"},
		Dest: t.TempDir(), Jobs: 4, Grace: time.Second, Confirm: ConfirmNothing,
		Reports: func(r Report) {
			if d, ok := r.(ChunkDropped); ok {
				mu.Lock()
				dropped = append(dropped, d.Chunk.ID)
				mu.Unlock()
			}
		}}
	p.SetLimit(1, "test", "", 0) // one runs; Run holds the others and sees the input's end
	in := make(chan *splitter.Chunk, 3)
	for i := 1; i <= 3; i++ {
		in <- chunkOf(i, 1)
	}
	close(in)
	done := make(chan error, 1)
	go func() { done <- p.Run(context.Background(), context.Background(), in) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return once the run was stopped")
	}
	if p.Aborted() == nil {
		t.Fatal("the run was not stopped")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(dropped) != 2 {
		t.Errorf("chunks %v dropped, want the 2 that waited", dropped)
	}
}
