package splitter

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prsync/prsync/plan"
)

// streamed is a Splitter run over a list written through a pipe in parts, with a planner
// whose probe the test answers (answerProbe) when it says so.
type streamed struct {
	t      *testing.T
	paths  []string
	next   int // the paths written so far
	writes chan string
	out    chan *Chunk
	done   chan error
	cancel context.CancelFunc
	plan   *plan.Planner

	held atomic.Int64 // the paths held when the planner was last asked

	accepted atomic.Int64
	unsent   [][]byte
}

func startStreamed(t *testing.T, n, slots, chunkFiles int) *streamed {
	return startStreamedBytes(t, n, slots, chunkFiles, 128<<20, nil, 0)
}

// startStreamedBytes is startStreamed with --chunk-bytes, the sizes of some paths (10
// bytes where it has none), and how long the first chunk waits for the input's end (0: the
// planner's default).
func startStreamedBytes(t *testing.T, n, slots, chunkFiles int, chunkBytes int64, size map[int]int, endWait time.Duration) *streamed {
	t.Helper()
	dir := t.TempDir()
	r := &streamed{t: t, writes: make(chan string, 16), out: make(chan *Chunk, 1000), done: make(chan error, 1),
		plan: plan.New(plan.Config{Target: 2 * time.Second, Files: chunkFiles, Bytes: chunkBytes, Wait: 10 * time.Second,
			EndWait: endWait, Jobs: slots, CPUs: probeCPUs})}
	for i := range n {
		p := filepath.Join(dir, fmt.Sprintf("f%04d", i))
		if err := os.WriteFile(p, make([]byte, cmp.Or(size[i], 10)), 0o644); err != nil {
			t.Fatal(err)
		}
		r.paths = append(r.paths, p)
	}
	pr, pw := io.Pipe()
	writes := r.writes // close sets the field to nil
	go func() {
		for b := range writes {
			if _, err := pw.Write([]byte(b)); err != nil {
				return
			}
		}
		pw.Close()
	}()
	cfg := Config{Sep: '\n', Cwd: "/", ChunkWait: 10 * time.Second, Plan: r.plan}
	s := New(cfg, Hooks{
		Accepted: func(int64) { r.accepted.Add(1) },
		Unsent:   func(ins [][]byte) { r.unsent = append(r.unsent, ins...) },
	})
	s.asked = func(in plan.Input) {
		if in.Held > 0 {
			r.held.Store(int64(in.Held))
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	t.Cleanup(func() {
		cancel()
		r.close()
		pr.Close()
		<-r.done
	})
	go func() { r.done <- s.Run(ctx, pr, r.out) }()
	return r
}

// answer has the probe's rsync end with figures that cut the paths held into n parts
// (answerProbe; -1: the probe failed).
func (r *streamed) answer(n int) { answerProbe(r.plan, 1, max(n, 0)) }

// write writes the next n paths of the list.
func (r *streamed) write(n int) {
	r.writes <- strings.Join(r.paths[r.next:r.next+n], "\n") + "\n"
	r.next += n
}

func (r *streamed) close() {
	if r.writes != nil {
		close(r.writes)
		r.writes = nil
	}
}

// chunks receives n chunks.
func (r *streamed) chunks(n int) []*Chunk {
	r.t.Helper()
	var cs []*Chunk
	for range n {
		select {
		case c := <-r.out:
			cs = append(cs, c)
		case <-time.After(10 * time.Second):
			r.t.Fatalf("%d chunks came, want %d", len(cs), n)
		}
	}
	return cs
}

// none checks that no chunk comes for d.
func (r *streamed) none(d time.Duration) {
	r.t.Helper()
	select {
	case c := <-r.out:
		r.t.Fatalf("chunk %d of %d paths came while the paths after the probe wait for it", c.ID, c.Len())
	case <-time.After(d):
	}
}

// waitRest waits until the planner has been asked about want paths held.
func (r *streamed) waitRest(want int) {
	r.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); r.held.Load() != int64(want); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			r.t.Fatalf("the planner was asked about %d paths held, want %d: the input is not read while they wait", r.held.Load(), want)
		}
	}
}

// waitAccepted waits until n paths have been put into chunks.
func (r *streamed) waitAccepted(n int) {
	r.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); r.accepted.Load() != int64(n); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			r.t.Fatalf("%d paths put into chunks, want %d", r.accepted.Load(), n)
		}
	}
}

// end closes the input and collects the chunks to Run's end.
func (r *streamed) end() []*Chunk {
	r.t.Helper()
	r.close()
	var err error
	select {
	case err = <-r.done:
	case <-time.After(10 * time.Second):
		r.t.Fatal("Run did not end")
	}
	r.done <- err // for the cleanup
	if err != nil {
		r.t.Fatal(err)
	}
	var cs []*Chunk
	for len(r.out) > 0 {
		cs = append(cs, <-r.out)
	}
	return cs
}

// inOrder checks that the chunks hold the first n paths, each once, in order.
func (r *streamed) inOrder(cs []*Chunk, n int) {
	r.t.Helper()
	var got []string
	for _, c := range cs {
		for _, in := range c.Inputs {
			got = append(got, string(in))
		}
	}
	if strings.Join(got, "\n") != strings.Join(r.paths[:n], "\n") {
		r.t.Errorf("the chunks hold %d paths, not the %d written, each once, in order", len(got), n)
	}
}

func counts(cs []*Chunk) string {
	var b []string
	for _, c := range cs {
		b = append(b, fmt.Sprint(c.Len()))
	}
	return strings.Join(b, " ")
}

func repeat(s string, n int) string { return strings.TrimSpace(strings.Repeat(s+" ", n)) }

// TestStreamingOpening: a list still streaming when the first chunk has waited endWait for
// its end gets a probe of ProbeFiles paths; the paths read after it are held (and the input
// still read) until Opening answers, and are then cut into the parts it says, the first wave;
// the paths after them are cut by the Sizer's budget, which has learnt from the probe.
func TestStreamingOpening(t *testing.T) {
	tests := []struct {
		name     string
		slots    int
		files    int  // --chunk-files; 0: 2000
		observe  bool // the probe ended and the cost model learnt from it before the parts were known
		endFirst bool // the input ends before the parts are known
		parts    int  // what the probe's figures say; -1: it failed
		after    int  // paths written after the first wave
		want     string
	}{
		// the probe's 16 paths took 0.1 s: the budget fills the 2 s target at 320 paths
		{"a first wave of 2 parts, then chunks of the budget", 8, 0, true, false, 2, 1000, "16 142 142 320 320 320 40"},
		// a failed probe says nothing: the wave goes to every slot, then chunks of a part's
		// paths, not of 32, while nothing is known
		{"a failed probe: every slot", 4, 0, false, false, -1, 1000, "16 71 71 71 71 " + repeat("71", 14) + " 6"},
		// the input ended while the wave waited: it is all that is left, cut as a short list
		{"the input ends during the wait", 8, 0, true, true, 3, 0, "16 95 95 94"},
		{"the input ends during the wait, every slot", 4, 0, false, true, 4, 0, "16 71 71 71 71"},
		// parts of at most --chunk-files, and about equal: 3 of 95, not 100, 100 and 84
		{"--chunk-files bounds the parts", 8, 100, true, false, 1, 0, "16 95 95 94"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := startStreamed(t, 300+tc.after, tc.slots, cmp.Or(tc.files, 2000))
			r.write(100) // then nothing for longer than the first chunk waits for the end
			cs := r.chunks(1)
			if cs[0].ID != 1 || cs[0].Len() != plan.ProbeFiles {
				t.Fatalf("first chunk %d of %d paths, want the probe: chunk 1 of %d", cs[0].ID, cs[0].Len(), plan.ProbeFiles)
			}
			r.waitRest(84)
			r.write(200)
			r.waitRest(284) // read and held while the parts are not known
			r.none(50 * time.Millisecond)
			if tc.observe {
				r.plan.Ended(time.Now(), plan.End{ID: 99, Attempt: 1, Files: plan.ProbeFiles, Bytes: 10 * plan.ProbeFiles, Seconds: 0.1, OK: true, Settled: true})
			}
			if tc.endFirst {
				r.close()
				time.Sleep(50 * time.Millisecond)
			}
			r.answer(tc.parts)
			if tc.after > 0 {
				var parts []*Chunk
				for n := 0; n < 284; {
					c := r.chunks(1)[0]
					parts = append(parts, c)
					n += c.Len()
				}
				cs = append(cs, parts...)
				r.write(tc.after)
				r.waitAccepted(300 + tc.after) // every path cut before the end is read
			}
			cs = append(cs, r.end()...)
			if got := counts(cs); got != tc.want {
				t.Errorf("chunks of %s paths, want %s", got, tc.want)
			}
			r.inOrder(cs, 300+tc.after)
		})
	}
}

// TestStreamingOpeningHeld: the paths held after the probe are bounded (as many as a short
// list holds, Slots × ChunkFiles, plus one unit): beyond them the input waits, as before.
func TestStreamingOpeningHeld(t *testing.T) {
	r := startStreamed(t, 580, 1, 100)
	r.write(80)
	r.chunks(1)
	r.waitRest(64)
	r.write(500)
	time.Sleep(300 * time.Millisecond)
	if held := r.held.Load(); held < 100 || held > 100+unitRecords {
		t.Errorf("%d paths held after the probe, want from 100 to %d", held, 100+unitRecords)
	}
	r.answer(1)
	cs := append([]*Chunk{{ID: 1, Inputs: make([][]byte, plan.ProbeFiles)}}, r.end()...)
	for _, c := range cs {
		if c.Len() > 100 {
			t.Errorf("chunk %d holds %d paths, over --chunk-files 100", c.ID, c.Len())
		}
	}
	var n int
	for _, c := range cs {
		n += c.Len()
	}
	if n != 580 {
		t.Errorf("%d paths in the chunks, want 580", n)
	}
}

// TestStreamingOpeningCancel: when the run ends while the paths after the probe wait for it
// (the input open, or ended), every one of them goes to Hooks.Unsent, counted once.
func TestStreamingOpeningCancel(t *testing.T) {
	for _, ended := range []bool{false, true} {
		t.Run(fmt.Sprintf("input ended %v", ended), func(t *testing.T) {
			r := startStreamed(t, 300, 8, 2000)
			r.write(100)
			probe := r.chunks(1)[0]
			r.write(200)
			r.waitRest(284)
			if ended {
				r.close()
				time.Sleep(50 * time.Millisecond)
			}
			r.cancel()
			var err error
			select {
			case err = <-r.done:
			case <-time.After(10 * time.Second):
				t.Fatal("Run did not end")
			}
			r.done <- err
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("Run: %v, want context.Canceled", err)
			}
			if len(r.out) > 0 {
				t.Errorf("%d chunks sent after the probe", len(r.out))
			}
			if got := r.accepted.Load(); got != 300 {
				t.Errorf("%d paths accepted, want 300", got)
			}
			r.inOrder([]*Chunk{probe, {Inputs: r.unsent}}, 300)
		})
	}
}

// TestStreamingOpeningProbeBytes: a probe closed early by --chunk-bytes (its tenth path would
// not fit) is still the probe: the path that did not fit is the first of the wave.
func TestStreamingOpeningProbeBytes(t *testing.T) {
	r := startStreamedBytes(t, 300, 8, 2000, 1000, map[int]int{9: 950}, 0)
	r.write(100)
	cs := r.chunks(1)
	if cs[0].ID != 1 || cs[0].Len() != 9 {
		t.Fatalf("first chunk %d of %d paths, want chunk 1 of the 9 that fit in 1000 bytes", cs[0].ID, cs[0].Len())
	}
	r.write(200)
	r.waitRest(291)
	r.none(50 * time.Millisecond)
	r.answer(3)
	cs = append(cs, r.end()...)
	// parts of 97 paths; the 950-byte path and 5 of 10 bytes fill the first one's 1000 bytes
	if got := counts(cs); got != "9 6 97 97 91" {
		t.Errorf("chunks of %s paths, want 9 6 97 97 91", got)
	}
	r.inOrder(cs, 300)
}

// TestStreamingProbeEarly: once a list still streaming has more paths than 4 probes hold,
// the probe starts at once (25 ms later), not when the first chunk's wait for the end runs
// out: with that wait an hour and ChunkWait 10 s, the probe comes long before either. A list
// of fewer paths waits for its end, and is shared by the slots.
func TestStreamingProbeEarly(t *testing.T) {
	const probeList = 4 * plan.ProbeFiles
	r := startStreamedBytes(t, 300, 8, 2000, 128<<20, nil, time.Hour)
	t0 := time.Now()
	r.write(probeList + 1)
	select {
	case c := <-r.out:
		if c.ID != 1 || c.Len() != plan.ProbeFiles {
			t.Errorf("first chunk %d of %d paths, want the probe: chunk 1 of %d", c.ID, c.Len(), plan.ProbeFiles)
		}
		t.Logf("the probe came after %v", time.Since(t0))
	case <-time.After(5 * time.Second):
		t.Fatalf("no probe within 5 s of %d paths read: it waits for the input's end or ChunkWait", probeList+1)
	}

	short := startStreamedBytes(t, 300, 8, 2000, 128<<20, nil, time.Hour)
	short.write(probeList)
	short.none(500 * time.Millisecond) // too few for a probe: waits for the end
	short.close()
	if cs := short.chunks(8); len(cs) != 8 {
		t.Errorf("%d chunks for a short list over 8 slots", len(cs))
	}
}

// TestOpeningReadAhead: while the first chunk waits for the input's end, no more records are
// placed, and the reader reads only its few blocks ahead: a list piped a little at a time
// (as find writes), longer than a short list, is still probed as a list streaming, as
// before the planner. Placing them all while it waited read the whole list, which then
// looked long (more than slots × --chunk-files) and went into chunks of 32 paths.
func TestOpeningReadAhead(t *testing.T) {
	r := startStreamedBytes(t, 3000, 1, 2000, 128<<20, nil, 0)
	for range 60 {
		r.write(50)
	}
	c := r.chunks(1)[0]
	if c.ID != 1 || c.Len() != plan.ProbeFiles {
		t.Errorf("first chunk %d of %d paths, want the probe: chunk 1 of %d", c.ID, c.Len(), plan.ProbeFiles)
	}
}
