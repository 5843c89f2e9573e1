package bw

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// at returns a time on Monday 2026-03-02 (or day days later) at hh:mm:ss UTC.
func at(days, hh, mm, ss int) time.Time {
	return time.Date(2026, 3, 2+days, hh, mm, ss, 0, time.UTC)
}

const (
	m20  = 20 << 20
	m200 = 200 << 20
	k512 = 512 << 10
)

func TestParseScheduleErrors(t *testing.T) {
	for _, tc := range []struct{ in, text, msg string }{
		{"", "", "want a rate"},
		{"   ", "   ", "want a rate"},
		{"08:00,20M 08:00,1M", "08:00,1M", "a second entry for 08:00"},
		{"8:00,20M 08:00,1M", "08:00,1M", "a second entry for 08:00"},
		{"Mon-08:00,20M mon-08:00,1M", "mon-08:00,1M", "a second entry for Mon-08:00"},
		{"25:00,1M", "25:00,1M", "hours go from 00 to 23"},
		{"24:00,1M", "24:00,1M", "hours go from 00 to 23"},
		{"08:60,1M", "08:60,1M", "minutes from 00 to 59"},
		{"08:0,1M", "08:0,1M", `bad time "08:0"`},
		{"008:00,1M", "008:00,1M", `bad time "008:00"`},
		{"08h00,1M", "08h00,1M", `bad time "08h00"`},
		{"-08:00,1M", "-08:00,1M", `unknown day ""`},
		{"Mo-08:00,1M", "Mo-08:00,1M", `unknown day "Mo"`},
		{"08:00", "08:00", "unknown unit"},
		{"08:00,20M 19:00", "19:00", "want HH:MM,RATE"},
		{"08:00,20X", "08:00,20X", `unknown unit "x"`},
		{"08:00,0.1", "08:00,0.1", "too small"},
		{"20M 1M", "20M", "want HH:MM,RATE"},
		{"20X", "20X", "unknown unit"},
	} {
		_, err := ParseSchedule(tc.in)
		var se *SyntaxError
		if !errors.As(err, &se) || se.Text != tc.text || !strings.Contains(se.Msg, tc.msg) {
			t.Errorf("ParseSchedule(%q): %v; want a *SyntaxError for %q with %q", tc.in, err, tc.text, tc.msg)
		}
	}
}

func TestScheduleAt(t *testing.T) {
	daily := "19:00,200M 08:00,20M 23:00,off" // unsorted: sorted on parse
	for _, tc := range []struct {
		sched     string
		t         time.Time
		rate      float64
		unlimited bool
	}{
		{daily, at(0, 8, 0, 0), m20, false},
		{daily, at(0, 7, 59, 59), Unlimited, true}, // before the first entry: the last of the day before
		{daily, at(0, 0, 0, 0), Unlimited, true},
		{daily, at(0, 18, 59, 59), m20, false},
		{daily, at(0, 19, 0, 0), m200, false},
		{daily, at(0, 22, 59, 59), m200, false},
		{daily, at(0, 23, 0, 0), Unlimited, true},
		{daily, at(0, 23, 59, 59), Unlimited, true},
		{"08:00,20M 19:00,200M", at(0, 3, 0, 0), m200, false}, // wraps around midnight
		{"20M", at(0, 3, 0, 0), m20, false},
		{"off", at(0, 3, 0, 0), Unlimited, true},
		{"0", at(0, 3, 0, 0), Unlimited, true},
		{"12:00,1M", at(0, 3, 0, 0), 1 << 20, false}, // one entry holds all day
		// Weekly: Mon-08:00 to Fri-18:00 limited, the weekend free.
		{"Mon-08:00,512K Fri-18:00,off", at(0, 7, 59, 0), Unlimited, true},
		{"Mon-08:00,512K Fri-18:00,off", at(0, 8, 0, 0), k512, false},
		{"Mon-08:00,512K Fri-18:00,off", at(3, 12, 0, 0), k512, false},     // Thursday
		{"Mon-08:00,512K Fri-18:00,off", at(4, 18, 0, 0), Unlimited, true}, // Friday
		{"Mon-08:00,512K Fri-18:00,off", at(6, 12, 0, 0), Unlimited, true}, // Sunday
		// A day's entry overrides the daily one at its time, only on its day.
		{"08:00,20M 20:00,200M Sat-08:00,off", at(5, 9, 0, 0), Unlimited, true},
		{"08:00,20M 20:00,200M Sat-08:00,off", at(5, 21, 0, 0), m200, false},
		{"08:00,20M 20:00,200M Sat-08:00,off", at(6, 9, 0, 0), m20, false},
		{"08:00,20M 20:00,200M Sat-08:00,off", at(4, 9, 0, 0), m20, false},
		{"sunday-10:00,1M 08:00,20M", at(6, 10, 30, 0), 1 << 20, false},
		{"sunday-10:00,1M 08:00,20M", at(0, 7, 0, 0), 1 << 20, false}, // Monday, before 08:00
	} {
		s, err := ParseSchedule(tc.sched)
		if err != nil {
			t.Fatal(err)
		}
		rate, unl := s.At(tc.t)
		if rate != tc.rate || unl != tc.unlimited {
			t.Errorf("%q.At(%v) = %v, %v; want %v, %v", tc.sched, tc.t.Format("Mon 15:04:05"), rate, unl, tc.rate, tc.unlimited)
		}
	}
	var zero Schedule
	if rate, unl := zero.At(at(0, 1, 0, 0)); rate != Unlimited || !unl {
		t.Errorf("zero Schedule At = %v, %v; want no limit", rate, unl)
	}
}

func TestScheduleAtLocation(t *testing.T) {
	s, _ := ParseSchedule("08:00,20M 20:00,off")
	tokyo := time.FixedZone("JST", 9*3600)
	// 23:30 UTC on Sunday is 08:30 on Monday in Tokyo: the local clock counts.
	u := time.Date(2026, 3, 1, 23, 30, 0, 0, time.UTC)
	if rate, _ := s.At(u); rate != Unlimited {
		t.Errorf("At(%v) = %v, want off", u, rate)
	}
	if rate, _ := s.At(u.In(tokyo)); rate != m20 {
		t.Errorf("At(%v) = %v, want 20M", u.In(tokyo), rate)
	}
}

func TestScheduleNext(t *testing.T) {
	for _, tc := range []struct {
		sched string
		t     time.Time
		want  time.Time // zero: never
	}{
		{"08:00,20M 19:00,200M 23:00,off", at(0, 7, 0, 0), at(0, 8, 0, 0)},
		{"08:00,20M 19:00,200M 23:00,off", at(0, 8, 0, 0), at(0, 19, 0, 0)},
		{"08:00,20M 19:00,200M 23:00,off", at(0, 23, 30, 0), at(1, 8, 0, 0)},
		{"08:00,20M 19:00,200M", at(0, 19, 0, 1), at(1, 8, 0, 0)},
		{"08:00,20M 12:00,20M 19:00,200M", at(0, 9, 0, 0), at(0, 19, 0, 0)}, // 12:00 changes nothing
		{"20M", at(0, 9, 0, 0), time.Time{}},
		{"08:00,20M 19:00,20M", at(0, 9, 0, 0), time.Time{}},
		{"Mon-08:00,512K Fri-18:00,off", at(0, 9, 0, 0), at(4, 18, 0, 0)},
		{"Mon-08:00,512K Fri-18:00,off", at(4, 18, 0, 0), at(7, 8, 0, 0)},
		{"Mon-08:00,512K Fri-18:00,off", at(6, 23, 0, 0), at(7, 8, 0, 0)},
		{"08:00,20M 20:00,200M Sat-08:00,off", at(4, 21, 0, 0), at(5, 8, 0, 0)},
		{"08:00,20M 20:00,200M Sat-08:00,off", at(5, 8, 0, 0), at(5, 20, 0, 0)},
	} {
		s, err := ParseSchedule(tc.sched)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Next(tc.t); !got.Equal(tc.want) {
			t.Errorf("%q.Next(%v) = %v, want %v", tc.sched, tc.t.Format("Mon 15:04:05"), got, tc.want)
		}
	}
	var zero Schedule
	if got := zero.Next(at(0, 1, 0, 0)); !got.IsZero() {
		t.Errorf("zero Schedule Next = %v, want zero", got)
	}
}

// TestScheduleNextAgreesWithAt walks a week minute by minute, in UTC and
// across both changes of clocks in New York: the limit changes exactly at
// the times Next gives.
func TestScheduleNextAgreesWithAt(t *testing.T) {
	s, _ := ParseSchedule("08:00,20M 19:00,200M 23:00,off Sat-08:00,1M Sun-12:30,off Tue-19:00,200M 01:30,5M 02:30,6M")
	walkNext(t, s, at(0, 0, 0, 30))
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Skip(err)
	}
	walkNext(t, s, time.Date(2026, 3, 5, 0, 0, 30, 0, ny))
	walkNext(t, s, time.Date(2026, 10, 29, 0, 0, 30, 0, ny))
}

func walkNext(t *testing.T, s Schedule, tm time.Time) {
	t.Helper()
	next := s.Next(tm)
	prev, _ := s.At(tm)
	for range 7 * 24 * 60 {
		tm = tm.Add(time.Minute)
		rate, _ := s.At(tm)
		changed := rate != prev
		if crossed := !tm.Before(next); changed != crossed {
			t.Fatalf("at %v: limit %v → %v, but Next said %v", tm.Format("Mon 15:04"), prev, rate, next.Format("Mon 15:04"))
		}
		if changed {
			next = s.Next(tm)
		}
		prev = rate
	}
}

func TestScheduleNextDST(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Skip(err)
	}
	s, _ := ParseSchedule("02:30,1M 04:00,20M")
	// On 2026-03-08 clocks in New York go from 02:00 to 03:00: 02:30 does
	// not exist, and the limit changes when the clock jumps past it.
	from := time.Date(2026, 3, 8, 1, 0, 0, 0, ny)
	if got, want := s.Next(from), time.Date(2026, 3, 8, 3, 0, 0, 0, ny); !got.Equal(want) {
		t.Errorf("Next(%v) = %v, want %v", from, got, want)
	}
	// On 2026-11-01 01:00-02:00 happens twice; from the second 01:10,
	// an entry at 01:30 is the second 01:30.
	s, _ = ParseSchedule("01:30,1M 04:00,20M")
	second := time.Date(2026, 11, 1, 1, 10, 0, 0, ny).Add(time.Hour)
	if second.Hour() != 1 {
		t.Fatalf("no repeated hour: %v", second)
	}
	got := s.Next(second)
	if !got.After(second) || got.Sub(second) != 20*time.Minute {
		t.Errorf("Next(%v) = %v, want 20 minutes later", second, got)
	}
}

func TestScheduleString(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"20M", "20M"},
		{"20m", "20M"},
		{"0", "off"},
		{"off", "off"},
		{"100", "100K"},
		{"19:00,200M 8:00,20m 23:00,off", "08:00,20M 19:00,200M 23:00,off"},
		{"Mon-08:00,512k Fri-18:00,off", "Mon-08:00,512K Fri-18:00,off"},
		{"Sat-08:00,off 08:00,20M", "08:00,20M Sat-08:00,off"},
		{"sunday-10:00,1MB", "Sun-10:00,1MB"},
	} {
		s, err := ParseSchedule(tc.in)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.String(); got != tc.want {
			t.Errorf("ParseSchedule(%q).String() = %q, want %q", tc.in, got, tc.want)
		}
		back, err := ParseSchedule(s.String())
		if err != nil || back.String() != s.String() {
			t.Errorf("%q does not read back: %v, %v", s.String(), back, err)
		}
	}
	if got := (Schedule{}).String(); got != "off" {
		t.Errorf("zero Schedule String = %q, want off", got)
	}
}

func TestNewSchedule(t *testing.T) {
	s := NewSchedule([]Entry{
		{Daily: true, Minute: 8 * 60, Rate: m20},
		{Daily: true, Minute: 8 * 60, Rate: m200}, // the later one wins
		{Day: time.Monday, Minute: 8 * 60, Rate: 1 << 20},
	})
	if rate, _ := s.At(at(0, 9, 0, 0)); rate != 1<<20 {
		t.Errorf("Monday: %v, want 1M (the day's entry)", rate)
	}
	if rate, _ := s.At(at(1, 9, 0, 0)); rate != m200 {
		t.Errorf("Tuesday: %v, want 200M", rate)
	}
	if got := len(s.Entries()); got != 3 {
		t.Errorf("%d entries, want 3", got)
	}
	if !NewSchedule(nil).IsZero() {
		t.Error("NewSchedule(nil) is not the zero schedule")
	}
}

func FuzzParseSchedule(f *testing.F) {
	for _, s := range []string{"20M", "08:00,20M 19:00,200M 23:00,off", "Mon-08:00,512k", "off"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s, err := ParseSchedule(in)
		if err != nil {
			return
		}
		back, err := ParseSchedule(s.String())
		if err != nil || back.String() != s.String() {
			t.Fatalf("%q: String %q does not read back: %v", in, s.String(), err)
		}
		tm := at(0, 7, 13, 0)
		r1, u1 := s.At(tm)
		r2, u2 := back.At(tm)
		if r1 != r2 || u1 != u2 {
			t.Fatalf("%q: At differs after a round trip", in)
		}
		if n := s.Next(tm); !n.IsZero() && !n.After(tm) {
			t.Fatalf("%q: Next(%v) = %v, not after", in, tm, n)
		}
	})
}
