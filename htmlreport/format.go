package htmlreport

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/prsync/prsync/internal/human"
)

// printable makes b safe to show and unambiguous to read: a byte that is not UTF-8 becomes
// \xNN, a control or invisible formatting character (a newline, a bidi override) its
// escape; with text, newlines and tabs stay, for rsync's messages.
func printable(b []byte, text bool) string {
	var sb strings.Builder
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&sb, `\x%02x`, b[0])
		case text && (r == '\n' || r == '\t'):
			sb.WriteRune(r)
		case r == '\n':
			sb.WriteString(`\n`)
		case r == '\t':
			sb.WriteString(`\t`)
		case r == '\r':
			sb.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&sb, `\x%02x`, r)
		case unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp, unicode.Co, unicode.Cs) || r == 0xFFFE || r == 0xFFFF:
			fmt.Fprintf(&sb, `\u%04x`, r)
		default:
			sb.Write(b[:n])
		}
		b = b[n:]
	}
	return sb.String()
}

// show is printable for a string from the events, such as a reason or rsync's words.
func show(s string) string { return printable([]byte(s), true) }

// showLine is show on one line: newlines escaped.
func showLine(s string) string { return printable([]byte(s), false) }

// counted is n, as human.Count writes it, and the words that follow it: one for 1, else
// many ("1 reason", "2 reasons").
func counted[T int | int64](n T, one, many string) string {
	if n == 1 {
		return human.Count(n) + " " + one
	}
	return human.Count(n) + " " + many
}

// short formats v in three significant digits with a decimal prefix: 950, 1.5k, 20M.
func short(v float64) string {
	a := math.Abs(v)
	for _, u := range []struct {
		div  float64
		name string
	}{{1e15, "P"}, {1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}} {
		if a >= u.div {
			return strconv.FormatFloat(round3(v/u.div), 'f', -1, 64) + u.name
		}
	}
	return strconv.FormatFloat(round3(v), 'f', -1, 64)
}

// round3 rounds v to three significant digits.
func round3(v float64) float64 {
	if v == 0 {
		return 0
	}
	e := math.Pow(10, 2-math.Floor(math.Log10(math.Abs(v))))
	return math.Round(v*e) / e
}

// bytesShort formats a byte count in decimal units, as human.Bytes does: 20 MB, 1.5 GB.
func bytesShort(v float64) string {
	s := short(v)
	if last := s[len(s)-1]; last >= '0' && last <= '9' {
		return s + " B"
	}
	return s[:len(s)-1] + " " + s[len(s)-1:] + "B"
}

// duration formats seconds for a table: 0.25 s, 42 s, 3 min 05 s, 2 h 04 min.
func duration(sec float64) string {
	switch {
	case sec < 0 || math.IsNaN(sec):
		return "–"
	case sec < 10:
		return strconv.FormatFloat(math.Round(sec*100)/100, 'f', -1, 64) + " s"
	case sec < 60:
		return fmt.Sprintf("%.0f s", sec)
	case sec < 3600:
		s := int(math.Round(sec))
		return fmt.Sprintf("%d min %02d s", s/60, s%60)
	}
	m := int(math.Round(sec / 60))
	return fmt.Sprintf("%d h %02d min", m/60, m%60)
}

// rate formats a rate in bits per second (as events carry it) as bytes per second.
func rate(bps float64) string { return bytesShort(bps/8) + "/s" }
