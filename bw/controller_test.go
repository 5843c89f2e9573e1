package bw

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

// The Controller tests run in a synctest bubble: the ticker, the pulse
// timer and time.Now are the bubble's fake clock, so a run of minutes takes
// no real time and is the same every time.

// fakeGroup is one rsync group of a fakeTarget: it moves rate bytes per
// second of the fake clock while nothing holds it.
type fakeGroup struct {
	io     GroupIO
	rate   float64
	bytes  float64
	bw     bool // held by the bandwidth limit
	others bool // held by someone else
	last   time.Time
}

// fakeTarget is a pool of fake groups. Every call is logged as
// "seconds:call id", with the fake time since the start.
type fakeTarget struct {
	mu     sync.Mutex
	start  time.Time
	groups []*fakeGroup
	errs   map[string]error // what "pause 3" or "resume 3" returns
	calls  []string
}

func newFakeTarget() *fakeTarget {
	return &fakeTarget{start: time.Now(), errs: map[string]error{}}
}

// add starts a group of chunk id that moves rate bytes per second, with
// rsync's --bwlimit at limit.
func (f *fakeTarget) add(id int, rate, limit float64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.advance()
	now := time.Now()
	f.groups = append(f.groups, &fakeGroup{io: GroupIO{ID: id, Started: now, Cap: limit}, rate: rate, last: now})
}

// remove ends the group of chunk id.
func (f *fakeTarget) remove(id int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.advance()
	f.groups = slices.DeleteFunc(f.groups, func(g *fakeGroup) bool { return g.io.ID == id })
}

// hold makes someone else hold (or let go of) the group of chunk id.
func (f *fakeTarget) hold(id int, held bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.advance()
	f.find(id).others = held
}

func (f *fakeTarget) find(id int) *fakeGroup {
	for _, g := range f.groups {
		if g.io.ID == id {
			return g
		}
	}
	return nil
}

// advance moves the bytes of every running group up to now; f.mu is held.
func (f *fakeTarget) advance() {
	now := time.Now()
	for _, g := range f.groups {
		if !g.bw && !g.others {
			g.bytes += g.rate * now.Sub(g.last).Seconds()
		}
		g.last = now
	}
}

// moved returns the bytes all groups, present or gone, have moved (of the
// groups present; call it before removing any).
func (f *fakeTarget) moved() float64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.advance()
	total := 0.0
	for _, g := range f.groups {
		total += g.bytes
	}
	return total
}

// state returns whether the group of chunk id is held by the bandwidth
// limit and by others.
func (f *fakeTarget) state(id int) (bw, others bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	g := f.find(id)
	return g.bw, g.others
}

func (f *fakeTarget) recorded() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

func (f *fakeTarget) Groups() []GroupIO {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.advance()
	out := make([]GroupIO, len(f.groups))
	for i, g := range f.groups {
		out[i] = g.io
		out[i].Bytes = int64(g.bytes)
		out[i].PausedByOthers = g.others
	}
	return out
}

func (f *fakeTarget) PauseBW(id int) error  { return f.signal("pause", id, true) }
func (f *fakeTarget) ResumeBW(id int) error { return f.signal("resume", id, false) }

func (f *fakeTarget) signal(verb string, id int, hold bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.advance()
	call := fmt.Sprintf("%s %d", verb, id)
	f.calls = append(f.calls, fmt.Sprintf("%.1f:%s", time.Since(f.start).Seconds(), call))
	if err := f.errs[call]; err != nil {
		return err
	}
	g := f.find(id)
	if g == nil {
		return fmt.Errorf("chunk %d: %w", id, syscall.ESRCH)
	}
	g.bw = hold
	return nil
}

// running starts c.Run in the bubble, and returns a function that cancels
// it and returns what Run returned.
func running(t *testing.T, c *Controller) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	return func() error {
		cancel()
		return <-done
	}
}

func mustSchedule(t *testing.T, s string) Schedule {
	t.Helper()
	sch, err := ParseSchedule(s)
	if err != nil {
		t.Fatal(err)
	}
	return sch
}

func within(got, want, frac float64) bool { return math.Abs(got-want) <= frac*want }

func TestControllerHoldsTheTotal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeTarget()
		for id := 1; id <= 4; id++ {
			f.add(id, m20, m20) // four rsyncs, each capped at the whole limit
		}
		c := &Controller{Schedule: mustSchedule(t, "20M"), Target: f}
		stop := running(t, c)
		time.Sleep(5 * time.Second)
		before := f.moved()
		time.Sleep(20 * time.Second)
		got := f.moved() - before
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if !within(got, 20*m20, 0.1) {
			t.Errorf("moved %.3g in 20 s, want %.3g (the limit, not 4×) within 10%%", got, float64(20*m20))
		}
		for id := 1; id <= 4; id++ {
			if bw, _ := f.state(id); bw {
				t.Errorf("group %d still paused after Run", id)
			}
		}
		st := c.Stats()
		if !within(float64(st.Bytes), f.moved(), 0.02) {
			t.Errorf("Stats.Bytes %d, want about %.3g", st.Bytes, f.moved())
		}
		// Three of four groups were paused nearly all the time.
		if st.PausedSeconds < 3*20 || st.PausedSeconds > 3*25 {
			t.Errorf("Stats.PausedSeconds %.1f, want about 3 × 25", st.PausedSeconds)
		}
		if st.Pauses < 3 || st.Errors != 0 {
			t.Errorf("Stats %+v", st)
		}
	})
}

func TestControllerTailRunsUnpaused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeTarget()
		f.add(1, m20, m20)
		f.add(2, m20, m20)
		c := &Controller{Schedule: mustSchedule(t, "20M"), Target: f}
		stop := running(t, c)
		time.Sleep(5 * time.Second)
		f.remove(1) // one chunk left
		time.Sleep(time.Second)
		before := f.moved()
		calls := len(f.recorded())
		time.Sleep(10 * time.Second)
		got := f.moved() - before
		if more := f.recorded()[calls:]; len(more) > 0 {
			t.Errorf("the last group was signalled: %v", more)
		}
		stop()
		if !within(got, 10*m20, 0.01) {
			t.Errorf("the last group moved %.3g in 10 s, want %.3g", got, float64(10*m20))
		}
	})
}

func TestControllerTimetable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		base := time.Date(2026, 3, 2, 7, 59, 50, 0, time.UTC)
		now := func() time.Time { return base.Add(time.Since(start)) }
		f := newFakeTarget()
		f.add(1, m200, Unlimited)
		f.add(2, m200, Unlimited)
		var changes []Change
		c := &Controller{
			Schedule: mustSchedule(t, "08:00,20M 20:00,off"),
			Target:   f,
			Now:      now,
			OnChange: func(ch Change) { changes = append(changes, ch) },
		}
		if rate, unl := c.Limit(); rate != Unlimited || !unl {
			t.Errorf("Limit before Run = %v, %v; want off", rate, unl)
		}
		stop := running(t, c)
		time.Sleep(9 * time.Second)
		synctest.Wait()
		if len(changes) != 0 || len(f.recorded()) != 0 {
			t.Fatalf("before 08:00: changes %v, calls %v", changes, f.recorded())
		}
		if rate, unl := c.Limit(); rate != Unlimited || !unl {
			t.Errorf("Limit at 07:59:59 = %v, %v; want off", rate, unl)
		}
		time.Sleep(1100 * time.Millisecond) // past 08:00 by a tick
		synctest.Wait()
		want := Change{At: time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC), Old: Unlimited, New: m20,
			Next: time.Date(2026, 3, 2, 20, 0, 0, 0, time.UTC)}
		if len(changes) != 1 || changes[0] != want {
			t.Fatalf("changes %+v, want [%+v]", changes, want)
		}
		if rate, unl := c.Limit(); rate != m20 || unl {
			t.Errorf("Limit at 08:00:00.1 = %v, %v; want 20M", rate, unl)
		}
		// The two rsyncs have no cap: the controller holds them to 20M
		// in pulses.
		before := f.moved()
		time.Sleep(10 * time.Second)
		got := f.moved() - before
		stop()
		if !within(got, 10*m20, 0.1) {
			t.Errorf("moved %.3g in 10 s at 20M, want %.3g within 10%%", got, float64(10*m20))
		}
		if st := c.Stats(); st.Pulses == 0 {
			t.Errorf("no pulses: %+v", st)
		}
	})
}

func TestControllerSetSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeTarget()
		f.add(1, m20, m20)
		f.add(2, m20, m20)
		changed := make(chan Change, 10)
		c := &Controller{Schedule: mustSchedule(t, "20M"), Target: f, OnChange: func(ch Change) { changed <- ch }}
		stop := running(t, c)

		// Others read the limit and the stats while the schedule changes.
		var wg sync.WaitGroup
		quit := make(chan struct{})
		wg.Go(func() {
			for {
				select {
				case <-quit:
					return
				case <-time.After(30 * time.Millisecond):
					c.Limit()
					c.Stats()
				}
			}
		})
		wg.Go(func() {
			time.Sleep(time.Second)
			c.SetSchedule(mustSchedule(t, "5M"))
			time.Sleep(time.Second)
			c.SetSchedule(mustSchedule(t, "off"))
		})
		time.Sleep(1150 * time.Millisecond) // the tick at 1.1 s reads the schedule set at 1 s
		synctest.Wait()
		if rate, _ := c.Limit(); rate != 5<<20 {
			t.Errorf("Limit after SetSchedule(5M) = %v", rate)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if rate, unl := c.Limit(); rate != Unlimited || !unl {
			t.Errorf("Limit after SetSchedule(off) = %v, %v", rate, unl)
		}
		// No limit: both groups run.
		for id := 1; id <= 2; id++ {
			if bw, _ := f.state(id); bw {
				t.Errorf("group %d is paused with no limit", id)
			}
		}
		close(quit)
		wg.Wait()
		stop()
		close(changed)
		var got []float64
		for ch := range changed {
			got = append(got, ch.New)
			if ch.Unlimited != (ch.New == Unlimited) {
				t.Errorf("change %+v", ch)
			}
		}
		if !slices.Equal(got, []float64{5 << 20, Unlimited}) {
			t.Errorf("changes to %v, want 5M then off", got)
		}
	})
}

func TestControllerUnlimitedResumesWithinATick(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		base := time.Date(2026, 3, 2, 22, 59, 0, 0, time.UTC)
		f := newFakeTarget()
		for id := 1; id <= 3; id++ {
			f.add(id, m20, m20)
		}
		c := &Controller{Schedule: mustSchedule(t, "08:00,20M 23:00,off"), Target: f,
			Now: func() time.Time { return base.Add(time.Since(start)) }}
		stop := running(t, c)
		defer stop()
		time.Sleep(59*time.Second + 950*time.Millisecond)
		synctest.Wait()
		if bw2, _ := f.state(2); !bw2 {
			t.Fatal("group 2 is not paused before 23:00")
		}
		time.Sleep(100 * time.Millisecond) // the first tick at or after 23:00
		synctest.Wait()
		for id := 1; id <= 3; id++ {
			if bw, _ := f.state(id); bw {
				t.Errorf("group %d still paused a tick after the limit went off", id)
			}
		}
	})
}

func TestControllerNeverResumesAGroupHeldByOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeTarget()
		f.add(1, m20, m20)
		f.add(2, m20, m20)
		f.add(3, m20, m20)
		c := &Controller{Schedule: mustSchedule(t, "20M"), Target: f}
		stop := running(t, c)
		time.Sleep(time.Second)
		f.hold(1, true) // the CPU throttle stops the running group
		f.hold(3, true)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if bw, _ := f.state(2); bw {
			t.Error("group 2 is paused while the older one is held by others")
		}
		f.hold(1, false)
		time.Sleep(5 * time.Second)
		calls := f.recorded()
		stop()
		for _, call := range calls {
			var sec float64
			var id int
			if _, err := fmt.Sscanf(call, "%g:resume %d", &sec, &id); err == nil && id == 3 {
				t.Errorf("%s: resumed group 3 while others held it", call)
			}
		}
		if _, others := f.state(3); !others {
			t.Error("group 3 is no longer held by others")
		}
	})
}

func TestControllerGroupEndsWhilePaused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeTarget()
		f.add(1, m20, m20)
		f.add(2, m20, m20)
		c := &Controller{Schedule: mustSchedule(t, "20M"), Target: f}
		stop := running(t, c)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if bw, _ := f.state(2); !bw {
			t.Fatal("group 2 is not paused")
		}
		f.remove(2) // cancelled, or its rsync died, while paused
		time.Sleep(3 * time.Second)
		synctest.Wait()
		paused := c.Stats().PausedSeconds
		time.Sleep(2 * time.Second)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		for _, call := range f.recorded() {
			if call[len(call)-len("resume 2"):] == "resume 2" {
				t.Errorf("%s: resumed a group that had gone", call)
			}
		}
		// Its pause ended when it went: about 2 s, and no more later.
		if paused < 1.5 || paused > 2.5 || c.Stats().PausedSeconds != paused {
			t.Errorf("PausedSeconds %.2f then %.2f, want about 2 and no more", paused, c.Stats().PausedSeconds)
		}
	})
}

func TestControllerResumesAllOnExit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeTarget()
		for id := 1; id <= 4; id++ {
			f.add(id, m20, m20)
		}
		f.errs["resume 4"] = errors.New("operation not permitted")
		c := &Controller{Schedule: mustSchedule(t, "20M"), Target: f}
		stop := running(t, c)
		time.Sleep(3 * time.Second)
		synctest.Wait()
		err := stop()
		for id := 1; id <= 3; id++ {
			if bw, _ := f.state(id); bw {
				t.Errorf("group %d still paused after Run", id)
			}
		}
		if err == nil || err.Error() != "bw: resume chunk 4: operation not permitted" {
			t.Errorf("Run returned %v, want the failed resume of 4", err)
		}
	})
}

func TestControllerResumesAllOnPanic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		base := time.Date(2026, 3, 2, 7, 59, 59, 0, time.UTC)
		f := newFakeTarget()
		for id := 1; id <= 3; id++ {
			f.add(id, m20, m20)
		}
		c := &Controller{Schedule: mustSchedule(t, "08:00,20M 20:00,10M"), Target: f,
			Now:      func() time.Time { return base.Add(time.Since(start)) },
			OnChange: func(Change) { panic("boom") }}
		done := make(chan any)
		go func() {
			defer func() { done <- recover() }()
			c.Run(t.Context())
		}()
		if r := <-done; r != "boom" {
			t.Fatalf("recovered %v", r)
		}
		for id := 1; id <= 3; id++ {
			if bw, _ := f.state(id); bw {
				t.Errorf("group %d still paused after a panic", id)
			}
		}
	})
}

func TestControllerSignalErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeTarget()
		f.add(1, m20, m20)
		f.add(2, m20, m20)
		f.add(3, m20, m20)
		f.errs["pause 2"] = errors.New("operation not permitted")
		f.errs["pause 3"] = fmt.Errorf("chunk 3: %w", syscall.ESRCH)
		c := &Controller{Schedule: mustSchedule(t, "20M"), Target: f}
		stop := running(t, c)
		time.Sleep(150 * time.Millisecond)
		synctest.Wait()
		stop()
		st := c.Stats()
		if st.Errors == 0 {
			t.Errorf("Stats.Errors is 0 after failed pauses")
		}
		if st.Pauses != 0 {
			t.Errorf("Stats.Pauses %d, want 0: no pause succeeded", st.Pauses)
		}
	})
}

func TestControllerMisconfigured(t *testing.T) {
	if err := (&Controller{}).Run(t.Context()); err == nil {
		t.Error("no error without a target")
	}
	if err := (&Controller{Target: newFakeTarget(), Tick: -time.Second}).Run(t.Context()); err == nil {
		t.Error("no error with a negative tick")
	}
}
