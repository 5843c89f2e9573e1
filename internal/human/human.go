// Package human formats counts, byte counts and durations for the lines people read.
package human

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Bytes formats n in decimal units: 999 B, 1.00 kB, 2.50 MB.
func Bytes(n int64) string {
	const unit = 1000
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.2f %cB", float64(n)/float64(div), "kMGTPE"[exp])
}

// Clock formats seconds as M:SS, or H:MM:SS from an hour on.
func Clock(sec float64) string {
	d := time.Duration(sec * float64(time.Second)).Round(time.Second)
	h, m, s := int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60
	if h > 0 {
		return fmt.Sprintf("%d:%02d:%02d", h, m, s)
	}
	return fmt.Sprintf("%d:%02d", m, s)
}

// Count formats n with thousands separators: 1,234,567.
func Count[T ~int | ~int64](n T) string { return Thousands(strconv.FormatInt(int64(n), 10)) }

// Thousands puts thousands separators into the whole part of a number as strconv writes
// it in decimal: "-1234567.25" becomes "-1,234,567.25".
func Thousands(s string) string {
	whole, frac, dot := strings.Cut(s, ".")
	sign := ""
	if strings.HasPrefix(whole, "-") {
		sign, whole = "-", whole[1:]
	}
	var b strings.Builder
	b.WriteString(sign)
	for i, c := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if dot {
		b.WriteString("." + frac)
	}
	return b.String()
}
