package exec

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prsync/prsync/refusal"
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

// TestPeakAccepted: a session counts as accepted once its rsync has logged a line, or
// has run longer than a refusal takes; the peak holds for a minute.
func TestPeakAccepted(t *testing.T) {
	now := time.Now()
	spoke := func(b bool) *atomic.Int64 {
		var a atomic.Int64
		if b {
			a.Store(1)
		}
		return &a
	}
	tests := []struct {
		name  string
		procs []*proc
		want  int
	}{
		{"none", nil, 0},
		{"just started, silent", []*proc{{started: now}, {started: now.Add(-500 * time.Millisecond)}}, 0},
		{"just started, logged", []*proc{{started: now, lines: spoke(true)}, {started: now, lines: spoke(false)}}, 1},
		{"ran past the handshake", []*proc{{started: now.Add(-2 * time.Second)}, {started: now, lines: spoke(true)}, {started: now}}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &Pool{}
			p.init()
			for i, pr := range tt.procs {
				p.procs[i] = pr
			}
			if got := p.peakAccepted(now); got != tt.want {
				t.Errorf("peakAccepted = %d, want %d", got, tt.want)
			}
		})
	}
	p := &Pool{}
	p.init()
	p.procs = map[int]*proc{1: {started: now, lines: spoke(true)}, 2: {started: now, lines: spoke(true)}}
	p.peakAccepted(now)
	p.procs = map[int]*proc{}
	if got := p.peakAccepted(now.Add(30 * time.Second)); got != 2 {
		t.Errorf("peak after 30 s = %d, want the 2 seen", got)
	}
	if got := p.peakAccepted(now.Add(61 * time.Second)); got != 0 {
		t.Errorf("peak after 61 s = %d, want 0", got)
	}
}

// TestRefusalHoldsBack: a refusal brings the limit down to what the far side accepts, with
// a jobs event, and keeps new sessions back for a while, longer with each refusal in a
// row; an accepted session ends the doubling. The rule itself is refusal's (tested there).
func TestRefusalHoldsBack(t *testing.T) {
	now := time.Now()
	running := func(n int) map[int]*proc {
		m := map[int]*proc{}
		for i := range n {
			var a atomic.Int64
			a.Store(1)
			m[i] = &proc{started: now, lines: &a}
		}
		return m
	}
	const stated = "@ERROR: max connections (3) reached"
	const unstated = "kex_exchange_identification: read: Connection reset by peer"
	tests := []struct {
		name       string
		detail     string
		limit      int
		running    int
		refusals   int
		wantLimit  int
		wantEvents int
		wantHold   time.Duration
	}{
		{"over the far side's limit", stated, 4, 3, 1, 3, 1, 100 * time.Millisecond},
		{"at a limit it ran", stated, 3, 3, 1, 3, 0, 100 * time.Millisecond},
		// prsync's own sessions fill what the far side states: the limit keeps more from
		// starting, and the hold does not double
		{"its own, refused in a row", stated, 3, 3, 3, 3, 0, 100 * time.Millisecond},
		{"refused in a row", unstated, 3, 3, 3, 3, 0, 400 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var events []LimitChanged
			p := &Pool{MaxJobs: 8, Reports: func(r Report) {
				if lc, ok := r.(LimitChanged); ok {
					events = append(events, lc)
				}
			}}
			p.init()
			p.Plan.SetLimit(tt.limit)
			p.slots.active, p.procs = tt.running+1, running(tt.running)
			var d refusal.Decision
			for range tt.refusals {
				d = p.lowerForRefusal(tt.detail, 50*time.Millisecond, time.Time{})
			}
			if p.Limit() != tt.wantLimit {
				t.Errorf("limit %d, want %d", p.Limit(), tt.wantLimit)
			}
			if len(events) != tt.wantEvents {
				t.Fatalf("jobs events %+v, want %d", events, tt.wantEvents)
			}
			for _, e := range events {
				if e.Old != tt.limit || e.New != tt.wantLimit || e.Reason != "refused" || e.Detail != tt.detail {
					t.Errorf("jobs event %+v, want %d to %d, refused, %q", e, tt.limit, tt.wantLimit, tt.detail)
				}
			}
			want := tt.wantHold
			if d.Hold != want {
				t.Errorf("held back %v, want %v", d.Hold, want)
			}
			// settle, if set, is at most 1 s
			if p.Plan.MayStart(time.Now(), 0) || !p.Plan.MayStart(time.Now().Add(want+time.Second), 0) {
				t.Error("held back for the wrong time")
			}
			p.sessionAccepted()
			if d := p.lowerForRefusal(tt.detail, 50*time.Millisecond, time.Time{}); d.Hold != 100*time.Millisecond {
				t.Errorf("held back %v after an accepted session, want 100ms", d.Hold)
			}
		})
	}
}

// TestBackoff: the delay doubles per attempt with jitter, is capped, and --retry-delay 0
// means no wait (not the cap).
func TestBackoff(t *testing.T) {
	tests := []struct {
		base     time.Duration
		attempt  int
		min, max time.Duration
	}{
		{0, 1, 0, 0},
		{0, 5, 0, 0},
		{time.Second, 1, 500 * time.Millisecond, 1500 * time.Millisecond},
		{time.Second, 3, 2 * time.Second, 6 * time.Second},
		{time.Second, 40, 30 * time.Second, 90 * time.Second},
	}
	for _, tt := range tests {
		for range 20 {
			if d := backoff(tt.base, tt.attempt); d < tt.min || d > tt.max {
				t.Errorf("backoff(%v, %d) = %v, want %v..%v", tt.base, tt.attempt, d, tt.min, tt.max)
			}
		}
	}
}

// TestQueuedAtClosedGate: while the throttle's gate is closed, Run waits before it takes
// the next chunk, and Queued counts that chunk, so that the throttle can see a stall;
// a full pool with the gate open does not count it.
func TestQueuedAtClosedGate(t *testing.T) {
	p := &Pool{Rsync: "/bin/true", Dest: t.TempDir(), Jobs: 1, Confirm: ConfirmNothing, Reports: func(Report) {}}
	p.SetGate(false)
	p.slots.mu.Lock()
	p.slots.active = p.Limit() // every slot taken too
	p.slots.mu.Unlock()
	chunks := make(chan *splitter.Chunk)
	done := make(chan error, 1)
	go func() { done <- p.Run(context.Background(), context.Background(), chunks) }()
	deadline := time.Now().Add(5 * time.Second)
	for p.Queued() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("gate closed, nothing taken: Queued() = %d, want 1", p.Queued())
		}
		time.Sleep(time.Millisecond)
	}
	p.SetGate(true) // Run still waits, for a slot: that is no stall
	time.Sleep(20 * time.Millisecond)
	if n := p.Queued(); n != 0 {
		t.Errorf("a full pool with the gate open: Queued() = %d, want 0", n)
	}
	p.slots.mu.Lock()
	waiting := p.slots.waiting
	p.slots.active = 0
	p.slots.broadcast()
	p.slots.mu.Unlock()
	if !waiting {
		t.Error("Run did not wait for a slot")
	}
	close(chunks)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestQueuedDeletePass: the deletion pass's rsync waiting at the throttle's closed gate
// counts in Queued, as a chunk of the copy does, so that the throttle sees the stall and
// lets it through after MaxSuspend.
func TestQueuedDeletePass(t *testing.T) {
	p := &Pool{Rsync: "/bin/true", Dest: t.TempDir(), Jobs: 1, Confirm: ConfirmNothing, Reports: func(Report) {}}
	p.SetGate(false)
	done := make(chan DeleteStats, 1)
	go func() {
		done <- p.Delete(context.Background(), context.Background(), []splitter.DirList{{Root: t.TempDir(), Entries: [][]byte{[]byte("d")}}}, DeleteOptions{FirstID: 1})
	}()
	deadline := time.Now().Add(5 * time.Second)
	for p.Queued() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the pass waits at the closed gate: Queued() = %d, want 1", p.Queued())
		}
		time.Sleep(time.Millisecond)
	}
	p.SetGate(true)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the pass did not run once the gate opened")
	}
	if n := p.Queued(); n != 0 {
		t.Errorf("after the pass: Queued() = %d, want 0", n)
	}
}

// TestFreeCountsRefused: a chunk the far side refused gives its slot up while it waits to
// queue again, and that slot does not count as free for the tail split: it is the refused
// chunk's. The "rsync" refuses the first 4 sessions as a daemon at max connections does
// (the waits double from 100 ms: one of them is seen even on a busy machine).
func TestFreeCountsRefused(t *testing.T) {
	count := t.TempDir() + "/refusals"
	script := `cat >/dev/null; n=$(cat "$0" 2>/dev/null || echo 0); [ "$n" -ge 4 ] && exit 0; echo $((n + 1)) >"$0"; echo "@ERROR: max connections (1) reached -- try again later" >&2; exit 5`
	retrying := make(chan struct{}, 8)
	p := &Pool{
		Rsync: "/bin/sh", Args: []string{"-c", script, count},
		Dest: t.TempDir(), Jobs: 2, MaxJobs: 8, Retries: 8, RetryDelay: 100 * time.Millisecond, Grace: time.Second, Confirm: ConfirmNothing,
	}
	p.Reports = func(r Report) {
		if e, ok := r.(ChunkEnded); ok && e.Status == ChunkRetrying {
			retrying <- struct{}{}
		}
	}
	chunks := make(chan *splitter.Chunk, 1)
	chunks <- &splitter.Chunk{ID: 1, Src: "/", Inputs: [][]byte{[]byte("a")}, Entries: [][]byte{[]byte("a")}}
	close(chunks)
	done := make(chan error, 1)
	go func() { done <- p.Run(context.Background(), context.Background(), chunks) }()
	seen, free, limit := false, 0, 0
	for !seen {
		select {
		case <-retrying:
		case err := <-done:
			t.Fatalf("the run ended (%v) and the refused chunk was never seen waiting without its slot", err)
		case <-time.After(30 * time.Second):
			t.Fatal("the refused chunk was not retried")
		}
		for end := time.Now().Add(50 * time.Millisecond); time.Now().Before(end); time.Sleep(time.Millisecond) {
			waits := func() bool {
				p.slots.mu.Lock()
				defer p.slots.mu.Unlock()
				limit = p.Limit()
				return p.slots.backoff == 1 && p.slots.active == 0 && p.slots.queued == 0
			}
			if waits() {
				free = p.slots.free()
				if seen = waits(); seen { // the same state before and after Free
					break
				}
			}
		}
	}
	if free != limit-1 {
		t.Errorf("free = %d while the refused chunk waits, want the limit %d less it: %d", free, limit, limit-1)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := p.slots.free(); got != p.Limit() {
		t.Errorf("free = %d after the run, want the limit %d", got, p.Limit())
	}
}

// TestRefusedGoesFirst: a refused chunk queueing again takes the next free slot before a
// new chunk that waits too; the new one goes once it has.
func TestRefusedGoesFirst(t *testing.T) {
	p := &Pool{Rsync: "/bin/true", Dest: t.TempDir(), Jobs: 2, Confirm: ConfirmNothing, Reports: func(Report) {}}
	p.init()
	p.slots.mu.Lock()
	p.slots.active = p.Limit()
	p.slots.mu.Unlock()
	var mu sync.Mutex
	var order []string
	got := func(who string, refused bool) chan struct{} {
		done := make(chan struct{})
		go func() {
			defer close(done)
			if p.slots.acquire(context.Background(), refused) {
				mu.Lock()
				order = append(order, who)
				mu.Unlock()
			}
		}()
		return done
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for end := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
			p.slots.mu.Lock()
			ok := cond()
			p.slots.mu.Unlock()
			if ok {
				return
			}
			if time.Now().After(end) {
				t.Fatalf("waited for %s", what)
			}
		}
	}
	// the refused one queues first: the goroutine woken last tends to run first, so the
	// new one would win without the rule
	refusedDone := got("refused", true)
	waitFor("the refused chunk to queue", func() bool { return p.slots.requeued == 1 && p.slots.queued == 1 })
	newDone := got("new", false)
	waitFor("the new chunk to queue", func() bool { return p.slots.queued == 2 })
	p.release()
	select {
	case <-refusedDone:
	case <-newDone:
		t.Fatal("the new chunk took the slot the refused one waited for")
	case <-time.After(5 * time.Second):
		t.Fatal("no chunk took the free slot")
	}
	time.Sleep(20 * time.Millisecond)
	mu.Lock()
	if len(order) != 1 || order[0] != "refused" {
		t.Errorf("after one slot freed: %v, want [refused]", order)
	}
	mu.Unlock()
	p.release()
	<-newDone
	mu.Lock()
	defer mu.Unlock()
	if len(order) != 2 || order[1] != "new" {
		t.Errorf("after two slots freed: %v, want [refused new]", order)
	}
}

// TestHeldBackWakes: a waiter that finds the far side holding new sessions back, with no
// wake-up arranged for the hold's end (a refusal doubled the settle after a session's end,
// past the wake-up arranged then), still takes its slot once the hold ends.
func TestHeldBackWakes(t *testing.T) {
	p := &Pool{Rsync: "/bin/true", Dest: t.TempDir(), Jobs: 1, Confirm: ConfirmNothing, Reports: func(Report) {}}
	p.init()
	now := time.Now()
	// held back 100 ms, and a settle after each end
	p.Plan.Refused(now, refusal.Session{Started: now, Active: 1, Accepted: 1}, 0)
	p.Plan.SessionEnded(time.Now(), true, 0) // a session ended: no wake-up arranged here
	held := !p.Plan.MayStart(time.Now(), 0)
	if !held {
		t.Fatal("the far side does not hold new sessions back")
	}
	done := make(chan bool, 1)
	go func() { done <- p.acquire(context.Background()) }()
	select {
	case ok := <-done:
		if !ok {
			t.Fatal("acquire failed")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter slept on after the hold ended")
	}
}

// TestDrain: once Run's ctx has ended (here with a cause, as --max-duration ends it), the
// chunk waiting for a slot is dropped as not done with the cause as its reason, and the
// rsync running goes on until Drain ends too; then it is cancelled, and its paths are not
// done with Drain's cause as their reason. The "rsync" is a shell that reads its list and
// sleeps for a minute.
func TestDrain(t *testing.T) {
	ctx, end := context.WithCancelCause(context.Background())
	drain, endDrain := context.WithCancelCause(context.Background())
	defer end(nil)
	defer endDrain(nil)
	var mu sync.Mutex
	var dropped, ended []Report
	started := make(chan struct{}, 1)
	p := &Pool{
		Rsync: "/bin/sh", Args: []string{"-c", "cat >/dev/null; sleep 60", "sh"},
		Dest: "host:/dest", Jobs: 1, Grace: time.Second, Confirm: ConfirmDryRun, Drain: drain,
		Reports: func(r Report) {
			mu.Lock()
			defer mu.Unlock()
			switch r.(type) {
			case ChunkStarted:
				started <- struct{}{}
			case ChunkDropped:
				dropped = append(dropped, r)
			case ChunkEnded:
				ended = append(ended, r)
			}
		},
	}
	chunks := make(chan *splitter.Chunk, 2)
	for i := 1; i <= 2; i++ {
		chunks <- &splitter.Chunk{ID: i, Src: "/", Inputs: [][]byte{[]byte(fmt.Sprint(i))}, Entries: [][]byte{[]byte(fmt.Sprint(i))}}
	}
	close(chunks)
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx, context.Background(), chunks) }()
	<-started
	end(errors.New("the window ended"))
	select {
	case err := <-done:
		t.Fatalf("Run ended (%v) when ctx did, not when Drain did", err)
	case <-time.After(300 * time.Millisecond):
	}
	if running, _ := p.Counts(); running != 1 {
		t.Errorf("%d rsyncs running after ctx ended, want the one that had started", running)
	}
	endDrain(errors.New("the grace ended"))
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not end once Drain had")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(dropped) != 1 || dropped[0].(ChunkDropped).Reason != "the window ended before rsync started" {
		t.Errorf("dropped %+v, want chunk 2 with the reason \"the window ended before rsync started\"", dropped)
	}
	if len(ended) != 1 {
		t.Fatalf("chunk ends %+v, want one", ended)
	}
	e := ended[0].(ChunkEnded)
	if e.Status != ChunkCancelled || len(e.Outcomes) != 1 || e.Outcomes[0].Status != rsync.NotDone || e.Outcomes[0].Reason != "the grace ended" {
		t.Errorf("chunk %d ended %s with %+v, want cancelled and not done for \"the grace ended\"", e.Chunk.ID, e.Status, e.Outcomes)
	}
}

// TestStopped: the reason of the paths a context's end leaves not done.
func TestStopped(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	caused, end := context.WithCancelCause(context.Background())
	end(errors.New("the time window ended (--max-duration 1h)"))
	child, stop := context.WithCancel(caused)
	defer stop()
	expired, stop2 := context.WithTimeout(context.Background(), 0)
	defer stop2()
	for _, tt := range []struct {
		ctx  context.Context
		want string
	}{
		{cancelled, "interrupted"},
		{caused, "the time window ended (--max-duration 1h)"},
		{child, "the time window ended (--max-duration 1h)"},
		{expired, "interrupted"},
	} {
		if got := Stopped(tt.ctx); got != tt.want {
			t.Errorf("Stopped = %q, want %q", got, tt.want)
		}
	}
}

// TestRefusedWaiterClimbs: a refused chunk waiting in acquire is work the lowered limit
// holds back, and the limit climbs back for it as for one in Run's queue. Here the input
// has ended and Run's queue is empty (as at the end of a copy whose neighbour ended first),
// one rsync runs at the limit the refusal left, 1, and a refused chunk waits: the limit
// climbs towards -j on its own wake-up and the chunk takes the new slot. Before, nothing
// climbed until the running rsync ended, and each chunk ran alone after the other.
func TestRefusedWaiterClimbs(t *testing.T) {
	var mu sync.Mutex
	var climbs []LimitChanged
	p := &Pool{Rsync: "/bin/true", Dest: t.TempDir(), Jobs: 3, Confirm: ConfirmNothing, Reports: func(r Report) {
		if lc, ok := r.(LimitChanged); ok && lc.Reason == "climb" {
			mu.Lock()
			climbs = append(climbs, lc)
			mu.Unlock()
		}
	}}
	p.init()
	p.slots.mu.Lock()
	p.slots.active = 2 // the one running and the refused one's, which it gives up to wait
	p.slots.mu.Unlock()
	// a daemon stating max connections (3) refuses the second session: 1 of prsync's ran,
	// and it is the first refusal, so the limit comes down to 1, below a fair share of 3
	// (2), and may climb a step half a second later
	d := p.lowerForRefusal("@ERROR: max connections (3) reached -- try again later", 10*time.Millisecond, time.Time{})
	if p.Limit() != 1 || d.Shared {
		t.Fatalf("limit %d after the refusal (%+v), want 1", p.Limit(), d)
	}
	p.release()
	start := time.Now()
	done := make(chan bool, 1)
	go func() { done <- p.slots.acquire(context.Background(), true) }()
	select {
	case ok := <-done:
		if !ok {
			t.Fatal("acquire failed")
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("the refused chunk waited 20 s at limit %d with nothing climbing", p.Limit())
	}
	if waited := time.Since(start); waited < 400*time.Millisecond {
		t.Errorf("the chunk took a slot after %v, before the climb was due", waited)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(climbs) != 1 || climbs[0].Old != 1 || climbs[0].New != 2 {
		t.Errorf("climbs reported %+v, want one from 1 to 2", climbs)
	}
}

// TestWaitingCountsRunQueue: the chunks Run has taken in but not started count in
// Waiting, which -j auto's sampler reads as work still to come, though the throttle's
// Queued (its gate open) does not count them. Before Waiting, a list read to its end
// within a second looked drained from then on, and the tuner never measured a window.
func TestWaitingCountsRunQueue(t *testing.T) {
	p := &Pool{Rsync: "/bin/true", Dest: t.TempDir(), Jobs: 3, Confirm: ConfirmNothing, Reports: func(Report) {}}
	limit := p.Limit()
	p.slots.mu.Lock()
	p.slots.active = limit // every slot taken
	p.slots.mu.Unlock()
	chunks := make(chan *splitter.Chunk, 3)
	for i := 1; i <= 3; i++ {
		chunks <- &splitter.Chunk{ID: i, Src: "/", Inputs: [][]byte{[]byte(fmt.Sprint(i))}, Entries: [][]byte{[]byte(fmt.Sprint(i))}}
	}
	close(chunks)
	done := make(chan error, 1)
	go func() { done <- p.Run(context.Background(), context.Background(), chunks) }()
	deadline := time.Now().Add(5 * time.Second)
	for p.Waiting() != 3 {
		if time.Now().After(deadline) {
			t.Fatalf("3 chunks in, no slot free: Waiting() = %d, want 3", p.Waiting())
		}
		time.Sleep(time.Millisecond)
	}
	if n := p.Queued(); n != 0 {
		t.Errorf("gate open: Queued() = %d, want 0", n)
	}
	p.slots.mu.Lock()
	p.slots.active = 0
	p.slots.broadcast()
	p.slots.mu.Unlock()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := p.Waiting(); n != 0 {
		t.Errorf("after Run: Waiting() = %d, want 0", n)
	}
}

// TestSettledInSlot: a chunk that holds a slot waits, before its rsync starts, for the
// settle of a session that ended since it took the slot (a list upload that ran in it),
// when the slots taken leave the far side no other free one; beside free slots, or with
// no settle learnt, it does not wait; and it stops waiting when its context ends.
func TestSettledInSlot(t *testing.T) {
	tests := []struct {
		name   string
		settle bool // a refusal of a slot not freed yet taught the far side's settle
		active int  // slots taken, the chunk's own among them, of 3
		cancel bool
		held   bool // the end holds a new session back
	}{
		{"no room beside the others", true, 3, false, true},
		{"a slot free beside it", true, 2, false, false},
		{"no settle learnt", false, 3, false, false},
		{"its context ended", true, 3, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &Pool{MaxJobs: 3, Reports: func(Report) {}}
			p.init()
			if tt.settle {
				// a session refused just after one of prsync's ended, a second ago: its
				// hold is over, and a slot settles after each end from then on
				past := time.Now().Add(-time.Second)
				p.Plan.SessionEnded(past.Add(-time.Millisecond), true, 0)
				p.Plan.Refused(past, refusal.Session{Started: past, Active: 1, Accepted: 0, Stated: 3}, 0)
			}
			p.Plan.SetLimit(3)
			p.slots.active = tt.active
			ended := time.Now()
			p.Plan.SessionEnded(ended, true, tt.active-1) // the upload in the chunk's slot
			until := p.Plan.HeldUntil(tt.active - 1)
			if tt.held != until.After(ended) {
				t.Fatalf("held until %v after the end, want held %v", until.Sub(ended), tt.held)
			}
			ctx, cancel := context.WithCancel(context.Background())
			if tt.cancel {
				cancel()
			}
			defer cancel()
			p.slots.settled(ctx)
			if back := time.Now(); tt.held && !tt.cancel && back.Before(until) {
				t.Errorf("started %v before the slot settled", until.Sub(back))
			}
		})
	}
}
