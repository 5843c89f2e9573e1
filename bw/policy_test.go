package bw

import (
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC)

// step is one Decide call of a scripted run: the time since t0, the limit,
// the groups, and what Decide must return.
type step struct {
	at     time.Duration
	limit  float64
	groups []Group
	pause  []int
	resume []int
	pulse  []int // ids that must be pulsed
}

func runSteps(t *testing.T, p Policy, steps []step) {
	t.Helper()
	s := NewState(p)
	for i, st := range steps {
		d := s.Decide(t0.Add(st.at), st.limit, st.groups)
		var pulsed []int
		for _, u := range d.Pulse {
			pulsed = append(pulsed, u.ID)
			if u.For <= 0 || u.For >= DefaultTick {
				t.Errorf("step %d: pulse of %d for %v, want under a tick", i, u.ID, u.For)
			}
		}
		if !slices.Equal(d.Pause, st.pause) || !slices.Equal(d.Resume, st.resume) || !slices.Equal(pulsed, st.pulse) {
			t.Errorf("step %d (%v): pause %v resume %v pulse %v; want pause %v resume %v pulse %v (level %.2f, extra %d)",
				i, st.at, d.Pause, d.Resume, pulsed, st.pause, st.resume, st.pulse, d.Level, d.Extra)
		}
	}
}

// run, paused and held build the Group of a running group, one paused by
// the policy, and one held by someone else, having moved rate bytes per
// second over a 100 ms tick.
func run(id int, rate float64) Group {
	return Group{ID: id, Bytes: int64(rate / 10), Cap: m20}
}
func paused(id int) Group { return Group{ID: id, Paused: true, Cap: m20} }
func held(id int, ours bool) Group {
	return Group{ID: id, Paused: ours, PausedByOthers: true, Cap: m20}
}

func tick(n int) time.Duration { return time.Duration(n) * DefaultTick }

func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"the first groups: the oldest runs, as its cap fills the limit", []step{
			{at: 0, limit: m20, groups: []Group{run(1, 0), run(2, 0), run(3, 0)}, pause: []int{2, 3}},
		}},
		{"one group at the limit runs unpaused", []step{
			{at: 0, limit: m20, groups: []Group{run(1, 0)}},
			{at: tick(1), limit: m20, groups: []Group{run(1, m20)}},
			{at: tick(2), limit: m20, groups: []Group{run(1, m20)}},
			{at: tick(30), limit: m20, groups: []Group{run(1, m20)}},
		}},
		{"groups slower than the limit: the counter adds one at a time", []step{
			{at: 0, limit: m20, groups: []Group{run(1, 0), run(2, 0), run(3, 0)}, pause: []int{2, 3}},
			{at: tick(1), limit: m20, groups: []Group{run(1, m20/4), paused(2), paused(3)}},
			// The bucket rises above ¾: one more group.
			{at: tick(2), limit: m20, groups: []Group{run(1, m20/4), paused(2), paused(3)}, resume: []int{2}},
			// Still rising, but the last step was under MinRun ago.
			{at: tick(3), limit: m20, groups: []Group{run(1, m20/4), run(2, m20/4), paused(3)}},
			{at: tick(4), limit: m20, groups: []Group{run(1, m20/4), run(2, m20/4), paused(3)}, resume: []int{3}},
			{at: tick(5), limit: m20, groups: []Group{run(1, m20/4), run(2, m20/4), run(3, m20/4)}},
		}},
		{"bytes of a paused group count; an overdrawn bucket pauses everything until half full", []step{
			{at: 0, limit: m20, groups: []Group{run(1, 0), run(2, 0)}, pause: []int{2}},
			// Group 2 still moved 16 MiB (in flight when it stopped).
			{at: tick(1), limit: m20, groups: []Group{run(1, m20), {ID: 2, Paused: true, Bytes: 16 << 20, Cap: m20}}, pause: []int{1}},
			{at: tick(8), limit: m20, groups: []Group{paused(1), paused(2)}},
			{at: tick(9), limit: m20, groups: []Group{paused(1), paused(2)}, resume: []int{1}},
		}},
		{"a group held by others is never resumed, and the next one runs in its place", []step{
			{at: 0, limit: m20, groups: []Group{run(1, 0), run(2, 0)}, pause: []int{2}},
			{at: tick(1), limit: m20, groups: []Group{held(1, false), paused(2)}, resume: []int{2}},
			{at: tick(2), limit: m20, groups: []Group{held(1, false), run(2, m20)}},
			// Released by the others, the older group runs again, and 2,
			// past MinRun, is paused.
			{at: tick(3), limit: m20, groups: []Group{run(1, 0), run(2, m20)}, pause: []int{2}},
		}},
		{"no limit continues what the policy paused, except a group held by others", []step{
			{at: 0, limit: m20, groups: []Group{run(1, 0), run(2, 0), run(3, 0)}, pause: []int{2, 3}},
			{at: tick(1), limit: Unlimited, groups: []Group{run(1, m20), paused(2), held(3, true)}, resume: []int{2}},
			{at: tick(2), limit: Unlimited, groups: []Group{run(1, m20), run(2, m20), held(3, true)}},
			// The others let go of 3: it is continued at the next tick.
			{at: tick(3), limit: Unlimited, groups: []Group{run(1, m20), run(2, m20), paused(3)}, resume: []int{3}},
			// A limit again: the bucket starts half full; 3, continued a
			// tick ago, runs on for MinRun.
			{at: tick(4), limit: m20, groups: []Group{run(1, m20), run(2, m20), run(3, m20)}, pause: []int{2}},
			{at: tick(5), limit: m20, groups: []Group{run(1, m20), paused(2), run(3, m20)}, pause: []int{3}},
		}},
		{"a group just continued runs for MinRun", []step{
			{at: 0, limit: m20, groups: []Group{run(1, 0), run(2, 0), run(3, 0)}, pause: []int{2, 3}},
			{at: tick(1), limit: m20, groups: []Group{run(1, m20/2), paused(2), paused(3)}},
			{at: tick(2), limit: m20, groups: []Group{run(1, m20/2), paused(2), paused(3)}},
			{at: tick(3), limit: m20, groups: []Group{run(1, m20/2), paused(2), paused(3)}, resume: []int{2}},
			// Bytes in flight from 3 drop the bucket below ¼, and the
			// counter with it, but 2 runs on until MinRun has passed.
			{at: tick(4), limit: m20, groups: []Group{run(1, m20/2), run(2, m20/2), {ID: 3, Paused: true, Bytes: 7 << 20, Cap: m20}}},
			{at: tick(5), limit: m20, groups: []Group{run(1, m20/2), run(2, m20/2), paused(3)}, pause: []int{2}},
		}},
		{"a group far over the limit runs in pulses, and only when nothing else can", []step{
			{at: 0, limit: m200, groups: []Group{{ID: 1, Cap: m200}}},
			{at: tick(1), limit: m200, groups: []Group{{ID: 1, Bytes: m200 / 10, Cap: m200}}},
			{at: tick(2), limit: m200, groups: []Group{{ID: 1, Bytes: m200 / 10, Cap: m200}}},
			// Night to day: 200M to 20M. The old rsync is capped at 200M.
			{at: tick(3), limit: m20, groups: []Group{{ID: 1, Bytes: m200 / 10, Cap: m200}}, pulse: []int{1}},
			{at: tick(4), limit: m20, groups: []Group{{ID: 1, Paused: true, Bytes: m200 / 40, Cap: m200}, run(2, 0)}},
			{at: tick(5), limit: m20, groups: []Group{{ID: 1, Paused: true, Cap: m200}, run(2, m20)}},
		}},
		{"a group without a cap is taken for a fast one until measured", []step{
			{at: 0, limit: m20, groups: []Group{{ID: 1}}, pulse: []int{1}},
			{at: tick(1), limit: m20, groups: []Group{{ID: 1, Paused: true, Bytes: m20 / 100}}, resume: []int{1}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { runSteps(t, Policy{}, tc.steps) })
	}
}

func TestDecideForgetsGroupsGone(t *testing.T) {
	s := NewState(Policy{})
	s.Decide(t0, m20, []Group{run(1, 0), run(2, 0)})
	s.Decide(t0.Add(tick(1)), m20, []Group{run(1, m20)})
	if _, ok := s.groups[2]; ok || len(s.groups) != 1 {
		t.Errorf("groups %v, want only 1", s.groups)
	}
}

func TestDecideLevelAcrossLimitChange(t *testing.T) {
	s := NewState(Policy{})
	s.Decide(t0, m20, []Group{run(1, 0)})
	d := s.Decide(t0.Add(tick(1)), m20, []Group{run(1, m20/2)})
	before := d.Level
	d = s.Decide(t0.Add(tick(2)), m200, []Group{run(1, m20/2)})
	// One more tick at 20M refilled the bucket by m20/10 less what moved;
	// then the level carries over to 200M unchanged.
	want := before + (float64(m20)/10-float64(m20)/20)/(float64(m20)*DefaultBurst.Seconds())
	if d.Level < want-1e-9 || d.Level > want+1e-9 {
		t.Errorf("level %v at 200M, want %v", d.Level, want)
	}
}
