package bw

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Schedule is a bandwidth limit that may change with the time of day and
// the day of the week: rclone's --bwlimit timetable, read by ParseSchedule.
//
// The zero Schedule is no limit at all times.
type Schedule struct {
	entries []Entry // as written, sorted by (Day, Minute); daily entries first
	// points is the timetable over one week: every entry, a daily one once
	// for each day, sorted by minute of the week from Sunday 00:00. Where a
	// day's entry and a daily one share a time, the day's entry wins.
	points []point
	fixed  bool // a bare rate: String prints just the rate
}

// Entry is one timetable entry: from Minute (after midnight) on, the limit
// is Rate. Daily entries apply every day; the others only on Day.
type Entry struct {
	Daily  bool
	Day    time.Weekday // valid if !Daily
	Minute int          // minutes after midnight, 0 to 1439
	Rate   float64      // bytes per second; Unlimited for "off"
}

type point struct {
	min  int // minute of the week, Sunday 00:00 = 0
	rate float64
}

const (
	minutesPerDay  = 24 * 60
	minutesPerWeek = 7 * minutesPerDay
)

var dayNames = map[string]time.Weekday{
	"sun": time.Sunday, "mon": time.Monday, "tue": time.Tuesday, "wed": time.Wednesday,
	"thu": time.Thursday, "fri": time.Friday, "sat": time.Saturday,
	"sunday": time.Sunday, "monday": time.Monday, "tuesday": time.Tuesday, "wednesday": time.Wednesday,
	"thursday": time.Thursday, "friday": time.Friday, "saturday": time.Saturday,
}

// ParseSchedule reads a limit in rclone's --bwlimit form: either one rate
// (see ParseRate), which holds at all times, or a timetable of
// space-separated entries "HH:MM,RATE", each of which sets the limit from
// that time of day on, every day:
//
//	08:00,20M 19:00,200M 23:00,off
//
// An entry may name a day, as "Mon-08:00,512K" (Mon to Sun, or the full
// name, in any case); it applies only on that day, and on that day at that
// time it overrides a daily entry for the same time. With day entries the
// timetable is weekly: before the first entry of a day, the last entry
// before it in the week holds.
//
// Entries may come in any order. Two entries for the same time (and day)
// are an error, as are hours above 23 and minutes above 59. Minutes take
// two digits; hours one or two. An empty s is an error.
func ParseSchedule(s string) (Schedule, error) {
	fields := strings.Fields(s)
	if len(fields) == 0 {
		return Schedule{}, &SyntaxError{Text: s, Msg: `want a rate ("20M"), "off", or a timetable ("08:00,20M 23:00,off")`}
	}
	if len(fields) == 1 && !strings.Contains(fields[0], ",") {
		r, err := ParseRate(fields[0])
		if err != nil {
			return Schedule{}, err
		}
		sch := NewSchedule([]Entry{{Daily: true, Rate: r}})
		sch.fixed = true
		return sch, nil
	}
	var entries []Entry
	for _, f := range fields {
		e, err := parseEntry(f)
		if err != nil {
			return Schedule{}, err
		}
		for _, o := range entries {
			if o.Daily == e.Daily && o.Minute == e.Minute && (e.Daily || o.Day == e.Day) {
				return Schedule{}, &SyntaxError{Text: f, Msg: fmt.Sprintf("a second entry for %s", e.when())}
			}
		}
		entries = append(entries, e)
	}
	return NewSchedule(entries), nil
}

// NewSchedule returns the timetable of entries, in any order. Where two
// entries share a time (and day), the later one in entries wins; a day's
// entry wins over a daily one. With no entries it is no limit.
func NewSchedule(entries []Entry) Schedule {
	var s Schedule
	byMin := map[int]point{}
	day := map[int]bool{} // minutes set by a day's entry
	for _, e := range entries {
		if e.Daily {
			for d := range 7 {
				m := d*minutesPerDay + e.Minute
				if !day[m] {
					byMin[m] = point{m, e.Rate}
				}
			}
			continue
		}
		m := int(e.Day)*minutesPerDay + e.Minute
		byMin[m], day[m] = point{m, e.Rate}, true
	}
	for _, p := range byMin {
		s.points = append(s.points, p)
	}
	slices.SortFunc(s.points, func(a, b point) int { return a.min - b.min })
	s.entries = slices.Clone(entries)
	slices.SortStableFunc(s.entries, func(a, b Entry) int {
		if a.Daily != b.Daily {
			if a.Daily {
				return -1
			}
			return 1
		}
		return cmp.Or(cmp.Compare(a.Day, b.Day), cmp.Compare(a.Minute, b.Minute))
	})
	return s
}

// parseEntry reads one "[DAY-]HH:MM,RATE".
func parseEntry(f string) (Entry, error) {
	bad := func(msg string) (Entry, error) { return Entry{}, &SyntaxError{Text: f, Msg: msg} }
	when, rate, ok := strings.Cut(f, ",")
	if !ok {
		return bad(`want HH:MM,RATE or DAY-HH:MM,RATE, as "08:00,20M" or "Mon-08:00,20M"`)
	}
	e := Entry{Daily: true}
	if d, hm, ok := strings.Cut(when, "-"); ok {
		wd, known := dayNames[strings.ToLower(d)]
		if !known {
			return bad(fmt.Sprintf("unknown day %q (want Mon, Tue, Wed, Thu, Fri, Sat or Sun)", d))
		}
		e.Daily, e.Day, when = false, wd, hm
	}
	h, m, ok := strings.Cut(when, ":")
	if !ok || len(h) < 1 || len(h) > 2 || len(m) != 2 || !digits(h) || !digits(m) {
		return bad(fmt.Sprintf("bad time %q (want HH:MM, as 08:00)", when))
	}
	hh, _ := strconv.Atoi(h)
	mm, _ := strconv.Atoi(m)
	if hh > 23 || mm > 59 {
		return bad(fmt.Sprintf("bad time %q (hours go from 00 to 23, minutes from 00 to 59)", when))
	}
	e.Minute = hh*60 + mm
	r, err := ParseRate(rate)
	if se := (*SyntaxError)(nil); errors.As(err, &se) {
		return bad(se.Msg)
	}
	e.Rate = r
	return e, nil
}

func digits(s string) bool {
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// when names the time of e, as "Mon-08:00" or "08:00".
func (e Entry) when() string {
	hm := fmt.Sprintf("%02d:%02d", e.Minute/60, e.Minute%60)
	if e.Daily {
		return hm
	}
	return e.Day.String()[:3] + "-" + hm
}

// String returns e as ParseSchedule reads it: "Mon-08:00,512K".
func (e Entry) String() string { return e.when() + "," + FormatRate(e.Rate) }

// Entries returns the entries of s: daily ones first, by time, then those of
// each day from Sunday on, by time. A bare rate is one daily entry at 00:00.
func (s Schedule) Entries() []Entry { return slices.Clone(s.entries) }

// IsZero reports whether s is the zero Schedule: no limit, ever.
func (s Schedule) IsZero() bool { return len(s.points) == 0 }

// String returns s in the form ParseSchedule reads: the rate alone for a
// bare rate ("20M"), "off" for the zero Schedule, else the entries in the
// order of Entries ("08:00,20M 19:00,200M 23:00,off").
func (s Schedule) String() string {
	if s.IsZero() {
		return "off"
	}
	if s.fixed {
		return FormatRate(s.entries[0].Rate)
	}
	parts := make([]string, len(s.entries))
	for i, e := range s.entries {
		parts[i] = e.String()
	}
	return strings.Join(parts, " ")
}

// At returns the limit in force at t, by the clock and calendar of t's
// location: that of the last entry at or before t's time of day (and day of
// the week), wrapping around, so that before the first entry of a day the
// last one of the day before holds. The rate is in bytes per second;
// unlimited is true, and rate is Unlimited, where the entry says "off".
func (s Schedule) At(t time.Time) (rate float64, unlimited bool) {
	if s.IsZero() {
		return Unlimited, true
	}
	p := s.points[s.index(t)]
	return p.rate, p.rate == Unlimited
}

// index returns the index in s.points of the point in force at t.
func (s Schedule) index(t time.Time) int {
	sec := secondOfWeek(t)
	// The first point after t, less one; -1 wraps to the last point.
	i, _ := slices.BinarySearchFunc(s.points, sec, func(p point, sec int) int {
		if p.min*60 <= sec {
			return -1
		}
		return 1
	})
	return (i - 1 + len(s.points)) % len(s.points)
}

func secondOfWeek(t time.Time) int {
	return int(t.Weekday())*minutesPerDay*60 + t.Hour()*3600 + t.Minute()*60 + t.Second()
}

// Next returns the first time after t at which the limit changes, by the
// clock and calendar of t's location: when the clock reaches a later entry
// whose rate differs from the one in force, or jumps past one (a change of
// clocks). It returns the zero time if the limit never changes.
func (s Schedule) Next(t time.Time) time.Time {
	if s.IsZero() {
		return time.Time{}
	}
	// The limit can change only where the clock reaches an entry's time,
	// at its first or (when clocks go back) second passing, or where the
	// clock jumps; look at each such time in the next eight days, in order.
	var times []time.Time
	horizon := t.AddDate(0, 0, 8)
	for u := t; ; {
		_, end := u.ZoneBounds()
		if end.IsZero() || end.After(horizon) {
			break
		}
		times = append(times, end)
		u = end
	}
	y, m, d := t.Date()
	for day := range 9 {
		wd := time.Date(y, m, d+day, 12, 0, 0, 0, t.Location()).Weekday()
		for _, p := range s.points {
			if p.min/minutesPerDay != int(wd) {
				continue
			}
			at := time.Date(y, m, d+day, p.min%minutesPerDay/60, p.min%60, 0, 0, t.Location())
			times = append(times, at, at.Add(time.Hour))
		}
	}
	slices.SortFunc(times, time.Time.Compare)
	cur, _ := s.At(t)
	for _, at := range times {
		if rate, _ := s.At(at); at.After(t) && rate != cur {
			return at
		}
	}
	return time.Time{}
}
