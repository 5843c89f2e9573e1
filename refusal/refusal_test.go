package refusal

import (
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// TestAdmitted: a session counts as accepted once its rsync has logged a line, or has run
// longer than a refusal takes: a second, or twice the slowest refusal seen.
func TestAdmitted(t *testing.T) {
	tests := []struct {
		name    string
		slowest time.Duration // refusals seen before, by how long their sessions ran
		ran     time.Duration
		spoke   bool
		want    bool
	}{
		{"just started, silent", 0, 0, false, false},
		{"half a second, silent", 0, ms(500), false, false},
		{"just started, logged", 0, 0, true, true},
		{"ran past the handshake", 0, time.Second, false, true},
		{"refusals came fast", ms(200), time.Second, false, true},
		{"refusals came after 2 s: 3 s is not enough", 2 * time.Second, 3 * time.Second, false, false},
		{"refusals came after 2 s: 4 s is", 2 * time.Second, 4 * time.Second, false, true},
		{"refusals came after 2 s, logged", 2 * time.Second, 0, true, true},
	}
	for _, tt := range tests {
		var f FarSide
		if tt.slowest > 0 {
			f.RefusedAfter(tt.slowest)
		}
		if got := f.Admitted(t0, tt.spoke, t0.Add(tt.ran)); got != tt.want {
			t.Errorf("%s: Admitted = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestRefusedLate: on a machine so busy that the far side's refusals come 2 s after the
// sessions started, the silent sessions that ran past a second were counted as accepted,
// all 8 of them. The late refusal forgets that peak, and the limit comes down to what the
// far side really took (here 3 sessions that went on running), not to 7.
func TestRefusedLate(t *testing.T) {
	var f FarSide
	now := t0.Add(2100 * time.Millisecond)
	if got := f.Peak(8, now.Add(-100*time.Millisecond)); got != 8 {
		t.Fatalf("peak %d, want 8", got)
	}
	f.RefusedAfter(2100 * time.Millisecond)
	// the three it took logged a line: accepted whatever the wait; the five refused did not
	d := f.Refused(now, 8, 4, 3)
	if d.Limit != 3 {
		t.Errorf("limit %d after a late refusal, want 3 (the peak of 8 was the refused sessions)", d.Limit)
	}
	// a refusal that came in time keeps the peak
	var g FarSide
	g.Peak(3, t0)
	g.RefusedAfter(100 * time.Millisecond)
	if d := g.Refused(t0.Add(time.Second), 8, 2, 1); d.Limit != 3 {
		t.Errorf("limit %d after a prompt refusal, want the peak, 3", d.Limit)
	}
}

// TestPeak: the most sessions accepted together holds for a minute, then gives way to
// the sample of the moment.
func TestPeak(t *testing.T) {
	var f FarSide
	steps := []struct {
		at       time.Duration
		accepted int
		want     int
	}{
		{0, 0, 0},
		{0, 2, 2},
		{30 * time.Second, 0, 2},
		{60 * time.Second, 1, 2},
		{61 * time.Second, 0, 0},
		{62 * time.Second, 3, 3},
		{90 * time.Second, 3, 3}, // as many again: the minute starts anew
		{140 * time.Second, 1, 3},
		{151 * time.Second, 1, 1},
	}
	for _, s := range steps {
		if got := f.Peak(s.accepted, t0.Add(s.at)); got != s.want {
			t.Errorf("at %v with %d accepted: peak %d, want %d", s.at, s.accepted, got, s.want)
		}
	}
}

// TestRefusedLimit: the limit comes down to max(1, active-1, the peak of the last
// minute), never above the limit in force; a refusal is prsync's own doing (free) when the
// limit came down or the far side ran that many lately.
func TestRefusedLimit(t *testing.T) {
	tests := []struct {
		name     string
		peak     int           // accepted together earlier, ago before the refusal
		ago      time.Duration //
		limit    int
		active   int // slots held, the refused session's among them
		accepted int // of the rsyncs running, those accepted
		want     int
		free     bool
	}{
		{"over the far side's limit", 0, 0, 4, 4, 3, 3, true},
		{"at a limit it ran", 0, 0, 3, 4, 3, 3, true},
		{"many started at once", 0, 0, 8, 8, 0, 7, true},
		{"alone", 0, 0, 1, 1, 0, 1, false},
		{"never below 1", 0, 0, 4, 1, 0, 1, true},
		{"a far side that was full", 0, 0, 3, 3, 0, 2, true},
		{"refused at a limit it took before", 3, 10 * time.Second, 3, 2, 1, 3, true},
		{"the peak a minute ago", 3, 60 * time.Second, 3, 2, 1, 3, true},
		{"the peak expired", 3, 61 * time.Second, 3, 2, 1, 1, true},
		{"a limit below the peak", 5, time.Second, 3, 2, 1, 3, true},
		{"active above the limit, nothing accepted", 0, 0, 2, 3, 0, 2, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var f FarSide
			now := t0.Add(2 * time.Minute)
			f.Peak(tt.peak, now.Add(-tt.ago))
			d := f.Refused(now, tt.limit, tt.active, tt.accepted)
			if d.Limit != tt.want || d.Free != tt.free {
				t.Errorf("Refused = %+v, want limit %d, free %v", d, tt.want, tt.free)
			}
			if n, acc := f.Refusals(); n != 1 || acc != max(1, tt.active-1, f.peak) {
				t.Errorf("Refusals = %d, %d; want 1, %d", n, acc, max(1, tt.active-1, f.peak))
			}
		})
	}
}

// TestHold: a refusal keeps new sessions back 100 ms, doubling with each refusal in a
// row, up to 2 s; an accepted session ends the doubling.
func TestHold(t *testing.T) {
	var f FarSide
	now := t0
	for i, want := range []int{100, 200, 400, 800, 1600, 2000, 2000, 2000} {
		d := f.Refused(now, 4, 4, 0)
		if d.Hold != ms(want) {
			t.Errorf("refusal %d in a row: hold %v, want %v", i+1, d.Hold, ms(want))
		}
		if !f.HeldBack(now, 0, 4) || !f.HeldBack(now.Add(d.Hold-time.Nanosecond), 0, 4) || f.HeldBack(now.Add(d.Hold), 0, 4) {
			t.Errorf("refusal %d in a row: held back for the wrong time", i+1)
		}
		now = now.Add(d.Hold)
	}
	f.Accepted()
	if d := f.Refused(now, 4, 4, 0); d.Hold != ms(100) {
		t.Errorf("after an accepted session: hold %v, want 100ms", d.Hold)
	}
	var zero FarSide
	if zero.HeldBack(t0, 3, 4) || zero.Ended(t0, true) != 0 || zero.HeldBack(t0.Add(time.Nanosecond), 3, 4) {
		t.Error("a far side that never refused holds back")
	}
}

// TestHoldBurst: refusals of sessions started before the refusal that last doubled the
// hold are of the same burst (a first wave of more sessions than the far side takes):
// they lower the limit but do not double the hold; a session started after it does.
func TestHoldBurst(t *testing.T) {
	type refusal struct {
		at, started int // ms after t0
		active      int
		wantHold    int // ms
		wantLimit   int
	}
	tests := []struct {
		name     string
		refusals []refusal
	}{
		{"a first wave of 8 at max connections 3", []refusal{
			{530, 0, 8, 100, 7}, {560, 10, 7, 100, 6}, {640, 20, 6, 100, 5},
			{850, 20, 5, 100, 4}, {980, 60, 4, 100, 3},
		}},
		{"a retry started after the burst doubles", []refusal{
			{500, 0, 8, 100, 7}, {600, 10, 7, 100, 6}, {900, 700, 6, 200, 5},
			{950, 20, 5, 200, 4}, {1300, 1000, 4, 400, 3},
		}},
		{"every session started after the last refusal", []refusal{
			{100, 50, 4, 100, 3}, {300, 200, 4, 200, 3}, {700, 500, 4, 400, 3},
		}},
		{"started at the refusal's instant counts", []refusal{
			{100, 0, 4, 100, 3}, {200, 100, 4, 200, 3},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var f FarSide
			for i, r := range tt.refusals {
				d := f.RefusedSession(t0.Add(ms(r.at)), Session{Started: t0.Add(ms(r.started)), Limit: 8, Active: r.active})
				if d.Hold != ms(r.wantHold) || d.Limit != r.wantLimit {
					t.Errorf("refusal %d: hold %v, limit %d; want %v, %d", i+1, d.Hold, d.Limit, ms(r.wantHold), r.wantLimit)
				}
			}
			if n, _ := f.Refusals(); n != int64(len(tt.refusals)) {
				t.Errorf("%d refusals counted, want %d", n, len(tt.refusals))
			}
		})
	}
}

// TestSettle: a refusal at a limit the far side accepted before makes every slot wait a
// moment after a session ends (settle): 50 ms, doubling with each such refusal up to 1 s;
// each accepted session shortens it by an eighth, down to 50 ms. A refusal above what it
// accepted sets none.
func TestSettle(t *testing.T) {
	var f FarSide
	now := t0
	f.Refused(now, 4, 4, 3) // above its limit
	if s := f.Ended(now, true); s != 0 {
		t.Fatalf("settle %v after a refusal above the far side's limit, want none", s)
	}
	for i, want := range []int{50, 100, 200, 400, 800, 1000, 1000} {
		f.Refused(now, 3, 4, 3)
		if s := f.Ended(now, true); s != ms(want) {
			t.Errorf("refusal %d at a limit it ran: settle %v, want %v", i+1, s, ms(want))
		}
	}
	now = now.Add(time.Minute) // the hold is long over
	f.Ended(now, true)
	// 3 of a limit of 4 taken: the slot of the session that just ended is the only one left
	if !f.HeldBack(now, 3, 4) || !f.HeldBack(now.Add(ms(999)), 3, 4) || f.HeldBack(now.Add(time.Second), 3, 4) {
		t.Error("a slot should wait settle after a session ends, and no longer")
	}
	f.Accepted()
	if s := f.Ended(now, true); s != ms(875) {
		t.Errorf("settle %v after an accepted session, want 875ms", s)
	}
	for range 100 {
		f.Accepted()
	}
	if s := f.Ended(now, true); s != minSettle {
		t.Errorf("settle %v after many accepted sessions, want %v", s, minSettle)
	}
	f.Refused(now, 3, 4, 3)
	if s := f.Ended(now, true); s != ms(100) {
		t.Errorf("settle %v after a refusal from the floor, want 100ms", s)
	}
}

// TestSettleSlots: a slot settles after its session ends, and a new session waits only
// while the slots taken and those settling fill the limit: beside fewer, it takes a slot
// that was free all along. A session the far side never accepted held no slot.
func TestSettleSlots(t *testing.T) {
	var f FarSide
	f.Refused(t0, 3, 3, 3) // a limit it ran: settle 50 ms
	f.Accepted()           // its floor
	at := func(n int) time.Time { return t0.Add(time.Minute + ms(n)) }
	for _, e := range []int{0, 10, 20} { // three sessions end, 10 ms apart
		f.Ended(at(e), true)
	}
	tests := []struct {
		active, limit int
		until         int // ms; -1: not held back
	}{
		{2, 3, 70}, // no room: the last end's slot
		{1, 3, 60}, // room for one settling slot: the second latest end's
		{0, 3, 50}, // room for two: the first end's
		{0, 4, -1}, // room for three: none waits
		{3, 3, 70}, // no slot at all: the last end's, as before
		{1, 8, -1}, // a limit of 8: room for all three
	}
	for _, tt := range tests {
		u := f.HeldUntil(tt.active, tt.limit)
		held := f.HeldBack(at(21), tt.active, tt.limit)
		switch {
		case tt.until < 0 && held:
			t.Errorf("%d taken of %d: held back until %v, want not", tt.active, tt.limit, u.Sub(at(0)))
		case tt.until >= 0 && !u.Equal(at(tt.until)):
			t.Errorf("%d taken of %d: held back until %v, want %v", tt.active, tt.limit, u.Sub(at(0)), ms(tt.until))
		}
	}
	// a refused session's end holds no slot
	var g FarSide
	g.Refused(t0, 3, 3, 3)
	g.Ended(at(0), false)
	if g.HeldBack(at(1), 1, 3) {
		t.Error("held back by the end of a session the far side never accepted")
	}
}

// TestRetry: a chunk's refusals that prsync brought on itself are retried without using
// up a retry, each after 100 ms (at most --retry-delay), up to 10 of them; then they
// count as retries.
func TestRetry(t *testing.T) {
	tests := []struct {
		name  string
		d     Decision
		free  int
		delay time.Duration
		want  time.Duration
		ok    bool
	}{
		{"first", Decision{Free: true}, 0, time.Second, ms(100), true},
		{"third: no longer", Decision{Free: true}, 2, time.Second, ms(100), true},
		{"capped by --retry-delay", Decision{Free: true}, 5, ms(50), ms(50), true},
		{"--retry-delay 0", Decision{Free: true}, 0, 0, 0, true},
		{"the tenth", Decision{Free: true}, 9, time.Minute, ms(100), true},
		{"the eleventh", Decision{Free: true}, 10, time.Minute, 0, false},
		{"not prsync's doing", Decision{}, 0, time.Second, 0, false},
	}
	for _, tt := range tests {
		if d, ok := tt.d.Retry(tt.free, tt.delay); d != tt.want || ok != tt.ok {
			t.Errorf("%s: Retry = %v, %v; want %v, %v", tt.name, d, ok, tt.want, tt.ok)
		}
	}
}

// TestLimit: what the far side accepted, within the bounds.
func TestLimit(t *testing.T) {
	tests := []struct{ accepted, lo, hi, want int }{
		{3, 1, 8, 3},
		{0, 1, 8, 1},
		{12, 1, 8, 8},
		{2, 4, 64, 4},
	}
	for _, tt := range tests {
		if got := Limit(tt.accepted, tt.lo, tt.hi); got != tt.want {
			t.Errorf("Limit(%d, %d, %d) = %d, want %d", tt.accepted, tt.lo, tt.hi, got, tt.want)
		}
	}
}

// TestClimb: a fixed -j that refusals lowered climbs back a quarter (at least one) every
// wait without a refusal, up to what was asked; a refusal of a climbed limit doubles the
// wait, a step that held halves it again (not below 3 s).
func TestClimb(t *testing.T) {
	type step struct {
		at      time.Duration
		refused bool // a refusal at this moment, with active-1 accepted
		active  int
		limit   int // the limit in force before the step
		want    int // the limit after it
	}
	s := func(ms int) time.Duration { return time.Duration(ms) * time.Millisecond }
	tests := []struct {
		name  string
		asked int
		steps []step
	}{
		{"never refused: nothing to climb", 8, []step{{0, false, 0, 8, 8}, {s(60000), false, 0, 8, 8}}},
		{"daemon raised its limit: back to -j", 8, []step{
			{0, true, 3, 8, 2},
			{s(2900), false, 0, 2, 2},
			{s(3000), false, 0, 2, 3},
			{s(5900), false, 0, 3, 3},
			{s(6000), false, 0, 3, 4},
			{s(9000), false, 0, 4, 5},
			{s(12000), false, 0, 5, 6},
			{s(15000), false, 0, 6, 7},
			{s(18000), false, 0, 7, 8},
			{s(21000), false, 0, 8, 8},
		}},
		{"still full: each refused step doubles the wait", 8, []step{
			{0, true, 3, 8, 2},
			{s(3000), false, 0, 2, 3},
			{s(3100), true, 3, 3, 2}, // refused at the climbed limit: wait 6 s
			{s(9000), false, 0, 2, 2},
			{s(9100), false, 0, 2, 3},
			{s(9200), true, 3, 3, 2}, // again: 12 s
			{s(21100), false, 0, 2, 2},
			{s(21200), false, 0, 2, 3},
			{s(33100), false, 0, 3, 3},
			{s(33200), false, 0, 3, 4}, // 3 held: the wait halves to 6 s
			{s(39100), false, 0, 4, 4},
			{s(39200), false, 0, 4, 5},
		}},
		{"a big -j climbs by quarters", 32, []step{
			{0, true, 5, 32, 4},
			{s(3000), false, 0, 4, 5},
			{s(6000), false, 0, 5, 6},
			{s(9000), false, 0, 6, 7},
			{s(12000), false, 0, 7, 8},
			{s(15000), false, 0, 8, 10},
			{s(18000), false, 0, 10, 12},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var f FarSide
			for _, st := range tc.steps {
				now := t0.Add(st.at)
				got := st.limit
				if st.refused {
					got = f.Refused(now, st.limit, st.active, 0).Limit
				} else if n, ok := f.Climb(now, st.limit, tc.asked); ok {
					got = n
				}
				if got != st.want {
					t.Fatalf("at %v (limit %d, refused %v): limit %d, want %d", st.at, st.limit, st.refused, got, st.want)
				}
			}
		})
	}
}

// TestClimbKeptByRefusal: a refusal that keeps a climbed limit (the far side ran as many
// lately: a slot of prsync's not freed yet) is no refused step: the wait does not double,
// and the step, standing, halves it back at the next. A refusal that lowers it doubles it.
func TestClimbKeptByRefusal(t *testing.T) {
	for _, tc := range []struct {
		name     string
		peak     int // ran together just before the refusal at the climbed limit
		want     int // the limit after it
		nextStep time.Duration
	}{
		{"kept: the step stands", 3, 3, firstClimb},
		{"lowered: a refused step", 0, 2, 2 * firstClimb},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var f FarSide
			f.Refused(t0, 4, 4, 0) // -j 4 against a far side that took 2
			at := t0.Add(firstClimb)
			if n, ok := f.Climb(at, 2, 4); !ok || n != 3 {
				t.Fatalf("Climb = %d, %v; want 3", n, ok)
			}
			at = at.Add(time.Second)
			if tc.peak > 0 {
				f.Peak(tc.peak, at.Add(-ms(100)))
			}
			if d := f.Refused(at, 3, 3, 2); d.Limit != tc.want {
				t.Fatalf("Refused at the climbed limit = %+v, want limit %d", d, tc.want)
			}
			if next := f.NextClimb().Sub(at); next != tc.nextStep {
				t.Errorf("next step %v after the refusal, want %v", next, tc.nextStep)
			}
		})
	}
}

// TestRefusedStated: the limit a far side states ("max connections (3)") bounds what it
// accepts from above, and tells a slot of prsync's that is not freed yet (a session of its
// own ended within releaseLag before the refused one started, or while it started) from
// another client's: then the limit stays, and slots settle after each end.
func TestRefusedStated(t *testing.T) {
	type end struct {
		at   int // ms after t0
		held bool
	}
	tests := []struct {
		name         string
		ends         []end
		peak         int // accepted together a second before the refusal
		started, at  int // ms after t0
		limit        int
		active       int
		accepted     int
		stated       int
		want         int
		free, settle bool
		settling     bool // slots already settle after each end
	}{
		{"a first wave of 8 at max connections 3", nil, 0, 0, 30, 8, 8, 0, 3, 3, true, false, false},
		{"the rest of the first wave", nil, 0, 0, 40, 3, 6, 0, 3, 3, true, false, false},
		{"-j 3: started just after a session of ours ended", []end{{997, true}}, 0, 1000, 1030, 3, 3, 2, 3, 3, true, true, false},
		{"-j 3: one of ours ended while it started, one just before", []end{{997, true}, {1010, true}}, 0, 1000, 1030, 3, 2, 1, 3, 3, true, true, false},
		{"-j 3: ours ended 249 ms before", []end{{751, true}}, 0, 1000, 1030, 3, 3, 2, 3, 3, true, true, false},
		{"-j 3: ours ended 400 ms before, another client's slot", []end{{600, true}}, 0, 1000, 1030, 3, 3, 2, 3, 2, true, false, false},
		{"-j 3: the session that ended was refused itself", []end{{997, false}}, 0, 1000, 1030, 3, 3, 2, 3, 2, true, false, false},
		{"-j 3: nothing of ours ended", nil, 0, 1000, 1030, 3, 3, 2, 3, 2, true, false, false},
		{"the far side takes more, other clients hold the rest", []end{{997, true}}, 0, 1000, 1030, 3, 3, 2, 5, 3, true, true, false},
		{"one of ours not freed, another client's slot", []end{{997, true}}, 0, 1000, 1030, 3, 2, 1, 3, 2, true, true, false},
		{"-j 8 lowered to 3, two of ours ended", []end{{990, true}, {995, true}}, 0, 1000, 1030, 3, 2, 1, 3, 3, true, true, false},
		{"lagged, but never above the limit in force", []end{{990, true}, {997, true}}, 0, 1000, 1030, 2, 2, 1, 3, 2, true, true, false},
		{"the stated limit came down below the peak", nil, 5, 1000, 1030, 5, 5, 4, 2, 2, true, false, false},
		{"slots settle already: another client's slot", []end{{997, true}}, 0, 1000, 1030, 3, 3, 2, 3, 2, true, true, true},
		{"slots settle: two of ours ended while it asked, another client's slot", []end{{1010, true}, {1020, true}}, 0, 1000, 1030, 3, 1, 0, 3, 2, true, true, true},
		{"slots settle: ours, running or ended while it asked, filled the far side", []end{{1020, true}}, 0, 1000, 1030, 3, 3, 2, 3, 3, true, true, true},
		{"slots settle: a refused session that ended while it asked held no slot", []end{{1010, false}, {1020, false}}, 0, 1000, 1030, 3, 1, 0, 3, 1, true, true, true},
		{"no stated limit (sshd): as before", []end{{997, true}}, 0, 1000, 1030, 3, 3, 2, 0, 2, true, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var f FarSide
			now := t0.Add(ms(tt.at))
			if tt.peak > 0 {
				f.Peak(tt.peak, now.Add(-time.Second))
			}
			if tt.settling {
				f.settle = minSettle
			}
			for _, e := range tt.ends {
				f.Ended(t0.Add(ms(e.at)), e.held)
			}
			d := f.RefusedSession(now, Session{Started: t0.Add(ms(tt.started)), Limit: tt.limit, Active: tt.active,
				Accepted: tt.accepted, Stated: tt.stated})
			if d.Limit != tt.want || d.Free != tt.free {
				t.Errorf("RefusedSession = %+v, want limit %d, free %v", d, tt.want, tt.free)
			}
			if got := f.settle > 0; got != tt.settle {
				t.Errorf("settle %v, want one: %v", f.settle, tt.settle)
			}
			if _, acc := f.Refusals(); acc != tt.want && tt.want < tt.limit {
				t.Errorf("Refusals: accepted %d, want %d", acc, tt.want)
			}
		})
	}
}

// TestEnds: the ends remembered are those of accepted sessions, at most 64, none older
// than 10 s.
func TestEnds(t *testing.T) {
	var f FarSide
	for i := range 100 {
		f.Ended(t0.Add(ms(i)), true)
		f.Ended(t0.Add(ms(i)), false)
	}
	if len(f.ends) != maxEnds || !f.ends[0].Equal(t0.Add(ms(100-maxEnds))) {
		t.Errorf("%d ends kept from %v, want %d from %v", len(f.ends), f.ends[0].Sub(t0), maxEnds, ms(100-maxEnds))
	}
	f.Ended(t0.Add(keepEnds+ms(50)), true)
	if got := f.endedSince(t0); got != 51 {
		t.Errorf("%d ends kept after 10 s, want 51 (the 50 within 10 s and the last)", got)
	}
}

// TestRefusedStatedTogether: two sessions started together just as two of prsync's ended
// are both refused; both started before slots settled, so neither lowers the limit, and
// settle is not doubled for the second. A session started since, on a settled slot, and
// refused is another client's slot: the limit comes down.
func TestRefusedStatedTogether(t *testing.T) {
	var f FarSide
	f.Ended(t0.Add(ms(997)), true)
	f.Ended(t0.Add(ms(998)), true)
	steps := []struct {
		started, at, active int
		want                int
		settle              time.Duration
	}{
		{1000, 1008, 3, 3, minSettle},
		{1000, 1009, 2, 3, minSettle},
		{1100, 1110, 3, 2, minSettle},
	}
	for i, st := range steps {
		d := f.RefusedSession(t0.Add(ms(st.at)), Session{Started: t0.Add(ms(st.started)), Limit: 3,
			Active: st.active, Accepted: st.active - 1, Stated: 3})
		if d.Limit != st.want || !d.Free || f.settle != st.settle {
			t.Errorf("refusal %d: %+v, settle %v; want limit %d, free, settle %v", i+1, d, f.settle, st.want, st.settle)
		}
	}
}

// TestRefusedStatedWave: a first wave of 8 at max connections = 1, one session accepted:
// the limit comes down to 1 at the first refusal, and the others, refused while prsync's
// own sessions filled the far side, set no settle. They set it to 1 s before (each was a
// refusal at a limit the far side had run), and every slot then waited 1 s after each end.
// TestRefusedOwnWave: sessions refused because prsync's own filled the far side (a first
// wave of 8 against max connections = 3, each rsync started after the refusal before, as
// on a busy machine) lower the limit to what it states and hold new sessions 100 ms, not
// doubling: the lowered limit keeps the surplus from starting. A refusal of a session
// started within the limit after them counts as the first of a run. Before, the five
// refusals held every new session back 1.6 s while the accepted ones ended.
func TestRefusedOwnWave(t *testing.T) {
	var f FarSide
	limit := 8
	for i, active := range []int{8, 7, 6, 5, 4} {
		at := t0.Add(ms(30 * (i + 1)))
		d := f.RefusedSession(at, Session{Started: at.Add(-ms(10)), Limit: limit, Active: active, Accepted: 0, Stated: 3})
		limit = d.Limit
		if d.Limit != 3 || d.Hold != firstHold || !d.Free {
			t.Errorf("refusal %d with %d active: %+v, want limit 3, held 100 ms, free", i+1, active, d)
		}
	}
	if f.HeldBack(t0.Add(ms(150)+firstHold), 2, 3) {
		t.Error("held back after the last own refusal's 100 ms")
	}
	at := t0.Add(time.Second)
	if d := f.RefusedSession(at, Session{Started: at.Add(-ms(10)), Limit: 3, Active: 2, Accepted: 1}); d.Hold != firstHold {
		t.Errorf("a refusal within the limit after the wave: held %v, want 100 ms", d.Hold)
	}
}

func TestRefusedStatedWave(t *testing.T) {
	var f FarSide
	limit := 8
	for i, active := range []int{8, 7, 6, 5, 4, 3, 2} {
		d := f.RefusedSession(t0.Add(ms(20+i)), Session{Started: t0, Limit: limit, Active: active, Accepted: 1, Stated: 1})
		limit = d.Limit
		if d.Limit != 1 || !d.Free {
			t.Errorf("refusal %d: %+v, want limit 1, free", i+1, d)
		}
	}
	if f.settle != 0 {
		t.Errorf("settle %v after the first wave, want none", f.settle)
	}
}

// TestRefusedShared: a far side that states its limit and refuses a session while prsync's
// own sessions, running or just ended, are fewer is full with another client's: prsync
// keeps what it holds, at most a fair share (half, rounded up), holds new sessions back only
// 100 ms however many such refusals came, retries the chunk without using up --retries, and
// below a fair share asks for a slot again every 500 ms; above it, it climbs only once the
// neighbour has refused none of its sessions for NeighbourFor. Before, the neighbour that
// came second fell to 1 and stayed there, each refused step back doubling the wait to a
// minute, and its chunks failed once refused 12 times.
func TestRefusedShared(t *testing.T) {
	t.Run("above a fair share: down to it", func(t *testing.T) {
		var f FarSide
		f.RefusedSession(t0, Session{Started: t0, Limit: 8, Active: 8, Accepted: 0, Stated: 6}) // our own wave
		at := t0.Add(5 * time.Second)
		d := f.RefusedSession(at, Session{Started: at.Add(-ms(10)), Limit: 5, Active: 5, Accepted: 4, Stated: 6})
		if d.Limit != 3 || !d.Shared || !d.Free || d.Hold != firstHold {
			t.Errorf("%+v, want limit 3 (a fair share of 6), shared, free, held 100 ms", d)
		}
		if stated, shared := f.Last(); stated != 6 || !shared || !f.Neighbour(at) || f.Neighbour(at.Add(NeighbourFor)) {
			t.Errorf("Last = %d, %v; a neighbour until %v", stated, shared, NeighbourFor)
		}
	})
	t.Run("below a fair share: it keeps what it holds, and asks again soon", func(t *testing.T) {
		var f FarSide
		f.RefusedSession(t0, Session{Started: t0, Limit: 8, Active: 8, Stated: 6})
		limit := 8
		var d Decision
		for i := range 20 { // every 100 ms, as its retries come
			at := t0.Add(time.Second + ms(100*i))
			d = f.RefusedSession(at, Session{Started: at.Add(-ms(5)), Limit: limit, Active: 2, Accepted: 1, Stated: 6})
			limit = d.Limit
			if d.Limit != 1 || !d.Shared || d.Hold != firstHold {
				t.Fatalf("refusal %d: %+v, want limit 1, shared, held 100 ms", i+1, d)
			}
			if wait, ok := d.Retry(MaxFree+i, time.Second); !ok || wait != firstHold {
				t.Fatalf("refusal %d: retried %v, %v; want 100 ms, without using up a retry", i+1, wait, ok)
			}
		}
		at := t0.Add(3 * time.Second)
		if n, ok := f.Climb(at.Add(-ms(1)), 1, 8); ok {
			t.Errorf("climbed to %d before 500 ms", n)
		}
		n, ok := f.Climb(at.Add(ms(400)), 1, 8)
		if !ok || n != 2 {
			t.Fatalf("Climb 500 ms after = %d, %v; want a step to 2", n, ok)
		}
		if n, ok = f.Climb(at.Add(ms(900)), 2, 8); !ok || n != 3 {
			t.Fatalf("Climb 500 ms later = %d, %v; want 3, still below a fair share", n, ok)
		}
		if n, ok = f.Climb(at.Add(ms(1400)), 3, 8); ok {
			t.Errorf("Climb at a fair share with a neighbour seen %v before = %d, want none", ms(1400), n)
		}
		// a refusal of prsync's own making (a slot not freed yet) after all those shared
		// ones and its own first wave: the hold starts from 100 ms, not doubled 21 times
		f.Ended(at.Add(ms(1500)), true)
		d = f.RefusedSession(at.Add(ms(1510)), Session{Started: at.Add(ms(1505)), Limit: 3, Active: 3, Accepted: 2, Stated: 6})
		if d.Shared || d.Hold != firstHold {
			t.Errorf("%+v, want not shared, held 100 ms (the first refusal of the run)", d)
		}
	})
	t.Run("a refused step back does not double the wait", func(t *testing.T) {
		var f FarSide
		f.RefusedSession(t0, Session{Started: t0, Limit: 8, Active: 8, Stated: 4})
		f.RefusedSession(t0.Add(ms(10)), Session{Started: t0, Limit: 4, Active: 3, Accepted: 2, Stated: 4}) // shared: 2
		at := t0.Add(max(NeighbourFor, firstClimb) + time.Second)
		if n, ok := f.Climb(at, 2, 8); !ok || n != 3 {
			t.Fatalf("Climb = %d, %v; want 3", n, ok)
		}
		f.RefusedSession(at.Add(ms(50)), Session{Started: at.Add(ms(45)), Limit: 3, Active: 3, Accepted: 2, Stated: 4})
		if next := f.NextClimb().Sub(at.Add(ms(50))); next != firstClimb {
			t.Errorf("next step %v after a step the neighbour refused, want %v (not doubled)", next, firstClimb)
		}
	})
}

// TestClimbToStated: below the limit the far side states, a lowered limit steps back every
// half second once no neighbour has refused a session for NeighbourFor (a refused step
// costs one refused session, and no doubled wait); above it, at the usual wait. Before, a
// copy whose neighbour had ended stepped from 2 to 3 of 3 only 3 s after its last step.
func TestClimbToStated(t *testing.T) {
	var f FarSide
	f.RefusedSession(t0, Session{Started: t0, Limit: 8, Active: 8, Stated: 4})                                     // its own wave
	f.RefusedSession(t0.Add(ms(10)), Session{Started: t0.Add(ms(5)), Limit: 4, Active: 3, Accepted: 2, Stated: 4}) // a neighbour: 2
	at := t0.Add(ms(10))
	if n, ok := f.Climb(at.Add(NeighbourFor-ms(1)), 2, 8); ok {
		t.Fatalf("climbed to %d with a neighbour seen %v before", n, NeighbourFor-ms(1))
	}
	at = at.Add(max(NeighbourFor, f.NextClimb().Sub(at)))
	n, ok := f.Climb(at, 2, 8)
	if !ok || n != 3 {
		t.Fatalf("Climb once the neighbour has gone = %d, %v; want 3", n, ok)
	}
	if next := f.NextClimb().Sub(at); next != fairClimb {
		t.Errorf("next step %v after, want %v: still below the stated 4", next, fairClimb)
	}
	at = f.NextClimb()
	if n, ok = f.Climb(at, 3, 8); !ok || n != 4 {
		t.Fatalf("Climb = %d, %v; want 4", n, ok)
	}
	if next := f.NextClimb().Sub(at); next < firstClimb {
		t.Errorf("next step above the stated 4 after %v, want at least %v", next, firstClimb)
	}
}

// TestYield: while prsync's sessions fill every slot the far side states, a slot one of
// them frees is left free yieldFor for another client, at most once every yieldEvery and
// not within firstYield of the far side's first word on what it takes; not when prsync
// holds fewer, nor for a far side that never said or takes one session only.
func TestYield(t *testing.T) {
	var f FarSide
	if d := f.Yield(t0, 2); d != 0 {
		t.Errorf("a far side that never refused: yield %v, want none", d)
	}
	f.RefusedSession(t0, Session{Started: t0, Limit: 8, Active: 8, Stated: 3}) // its own first wave
	at := t0.Add(firstYield - ms(1))
	if d := f.Yield(at, 2); d != 0 || f.HeldBack(at, 2, 3) {
		t.Errorf("within firstYield of the first refusal: yield %v", d)
	}
	at = t0.Add(firstYield)
	if d := f.Yield(at, 1); d != 0 {
		t.Errorf("holding 2 of 3: yield %v, want none", d)
	}
	if d := f.Yield(at, 2); d != yieldFor {
		t.Fatalf("holding all 3: yield %v, want %v", d, yieldFor)
	}
	if !f.HeldBack(at.Add(yieldFor-ms(1)), 2, 3) || f.HeldBack(at.Add(yieldFor), 2, 3) || !f.HeldUntil(2, 3).Equal(at.Add(yieldFor)) {
		t.Errorf("held back for the wrong time: until %v", f.HeldUntil(2, 3).Sub(at))
	}
	if d := f.Yield(at.Add(yieldEvery-ms(1)), 2); d != 0 {
		t.Errorf("again within yieldEvery: yield %v", d)
	}
	if d := f.Yield(at.Add(yieldEvery), 5); d != yieldFor {
		t.Errorf("again after yieldEvery, holding more than stated: yield %v, want %v", d, yieldFor)
	}
	var unstated FarSide
	unstated.Refused(t0, 4, 4, 0)
	if d := unstated.Yield(t0.Add(time.Minute), 3); d != 0 {
		t.Errorf("a far side that never said what it takes: yield %v, want none", d)
	}
	var single FarSide
	single.RefusedSession(t0, Session{Started: t0, Limit: 8, Active: 8, Stated: 1})
	if d := single.Yield(t0.Add(time.Minute), 0); d != 0 {
		t.Errorf("max connections 1: yield %v, want none", d)
	}
}
