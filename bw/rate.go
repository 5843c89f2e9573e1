// Package bw holds the total bandwidth of all of a run's rsyncs to one limit, which may follow a timetable.
package bw

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Unlimited is the rate that means no limit. ParseRate returns it for "off"
// and "0", and Schedule.At returns it, with unlimited true, where the
// timetable says "off".
const Unlimited float64 = 0

// MinRate is the smallest limit other than Unlimited, in bytes per second:
// rsync refuses a --bwlimit below 512 bytes.
const MinRate = 512

// SyntaxError reports a rate or a timetable that does not parse.
type SyntaxError struct {
	Text string // the rate or the timetable entry at fault
	Msg  string // what is wrong with it
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("bad bandwidth limit %q: %s", e.Text, e.Msg)
}

// ParseRate returns the rate s names, in bytes per second, by rsync's rules
// for --bwlimit, so that a limit means the same to prsync as to rsync:
//
//   - a number, maybe with a fraction ("20", "1.5"), and an optional unit;
//   - no unit means KiB/s, as rsync reads a bare number: "100" is 102400 B/s;
//   - "b" or "B" means bytes: "512b" is 512 B/s;
//   - K, M, G, T, or with "iB" KiB, MiB, GiB, TiB, are powers of 1024:
//     "20M" and "20MiB" are 20971520 B/s;
//   - KB, MB, GB, TB are powers of 1000, as in rsync: "20MB" is 20000000 B/s;
//   - letters may be upper or lower case, and a trailing "/s" is allowed
//     ("20M/s"), which rsync itself refuses;
//   - "0" (in any unit) and "off" mean no limit and return Unlimited;
//   - any other rate below MinRate (512 B/s) is an error, as in rsync.
//
// Signs, exponents and spaces inside the rate are errors.
func ParseRate(s string) (float64, error) {
	bad := func(msg string) (float64, error) { return 0, &SyntaxError{Text: s, Msg: msg} }
	t := strings.ToLower(strings.TrimSpace(s))
	if t == "off" {
		return Unlimited, nil
	}
	t = strings.TrimSuffix(t, "/s")
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], t[i:]
	if num == "" || strings.Count(num, ".") > 1 || num == "." {
		return bad(`want a number with an optional unit (K, M, G, T), or "off"`)
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return bad("too large") // the syntax is checked above
	}
	mult, ok := unitSize(unit)
	if !ok {
		return bad(fmt.Sprintf("unknown unit %q (want B, K, M, G, T, KiB…, or KB… for powers of 1000)", unit))
	}
	r := v * mult
	switch {
	case r == 0:
		return Unlimited, nil
	case math.IsInf(r, 0):
		return bad("too large")
	case r < MinRate:
		return bad("too small (the minimum is 512 bytes per second, or 0 or off for no limit)")
	}
	return r, nil
}

// unitSize returns the bytes in one unit, lower case, as rsync reads it.
func unitSize(u string) (float64, bool) {
	if u == "" {
		return 1024, true // rsync's default unit for --bwlimit
	}
	if u == "b" {
		return 1, true
	}
	reps := strings.IndexByte("kmgt", u[0]) + 1
	if reps == 0 {
		return 0, false
	}
	base := 0.0
	switch u[1:] {
	case "", "ib":
		base = 1024
	case "b":
		base = 1000
	default:
		return 0, false
	}
	return math.Pow(base, float64(reps)), true
}

// FormatRate returns rate in the form ParseRate reads back to the same
// value: "off" for Unlimited, else a number with the largest binary unit
// that keeps it at least 1 ("20M", "1.5G", "512K"), or a decimal unit when
// that is shorter ("1MB" rather than "976.5625K"). Rates below 1 KiB/s are
// given in bytes ("600B").
func FormatRate(rate float64) string {
	if rate <= 0 {
		return "off"
	}
	best := strconv.FormatFloat(rate, 'f', -1, 64) + "B"
	for _, u := range []struct {
		name string
		size float64
	}{{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40}} {
		if rate >= u.size {
			best = strconv.FormatFloat(rate/u.size, 'f', -1, 64) + u.name
		}
	}
	for _, u := range []struct {
		name string
		size float64
	}{{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}} {
		if v := rate / u.size; v >= 1 && v == math.Trunc(v) {
			if s := strconv.FormatFloat(v, 'f', -1, 64) + u.name; len(s) < len(best) {
				best = s
			}
		}
	}
	return best
}

// RsyncArg returns the value to give one rsync as --bwlimit for a total
// limit of rate: the whole limit, in whole KiB/s (rsync's bare unit) rounded
// up, so that one rsync alone can use all of it; prsync keeps the total of
// several rsyncs at the limit by pausing some of them (see State). It
// returns "" for Unlimited: give rsync no --bwlimit at all.
func RsyncArg(rate float64) string {
	if rate <= 0 {
		return ""
	}
	return strconv.FormatFloat(math.Max(1, math.Ceil(rate/1024)), 'f', 0, 64)
}
