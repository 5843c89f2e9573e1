package rsync

import (
	"bytes"
	"fmt"
	"strings"
)

// A listing is what `rsync --list-only` prints, one line per entry of its file list
// (generator.c list_file_entry):
//
//	PERMS SIZE YYYY/MM/DD HH:MM:SS[ ATIME][ CRTIME] NAME[ -> TARGET]
//
// PERMS is ten characters (permstring: a type, then rwx with s, S, t, T), SIZE is right
// aligned in at least 11 (14 with human-readable numbers, rsync's default) columns, each
// time is 19 characters ("(time out of range)" is 19 too), and the access and creation
// times (-U, -N) are each one space and 19 characters, or 20 spaces where a directory
// has none. NAME is escaped as every name rsync prints (Unescape), so a line never holds
// a raw newline; a symlink's line adds " -> TARGET".

// ListLine is one entry of a listing.
type ListLine struct {
	Type byte   // the first character of its mode: '-' a file, 'd', 'l', 'p', 's', 'c', 'b'
	Name []byte // unescaped; for a symlink, the name, " -> " and its target
	// Size is its size when the listing printed it in plain digits (--no-h), else -1
	Size int64
	// MTime is its modification time as %M gives it (YYYY/MM/DD-HH:MM:SS, local time)
	MTime string
}

// ListTimeColumns returns how many times beyond the modification time a listing made
// with args prints per entry: one for -U (--atimes), one for -N (--crtimes).
func ListTimeColumns(args []string) int {
	var atimes, crtimes bool
	for _, a := range args {
		switch {
		case a == "--atimes":
			atimes = true
		case a == "--no-atimes":
			atimes = false
		case a == "--crtimes":
			crtimes = true
		case a == "--no-crtimes":
			crtimes = false
		case len(a) > 1 && a[0] == '-' && a[1] != '-':
			atimes = atimes || shortHas(a[1:], 'U')
			crtimes = crtimes || shortHas(a[1:], 'N')
		}
	}
	n := 0
	if atimes {
		n++
	}
	if crtimes {
		n++
	}
	return n
}

// ParseListLine parses one line of a listing with timeCols extra time columns
// (ListTimeColumns). ok is false for any other line (rsync's "receiving file list",
// its totals, a progress line).
func ParseListLine(line []byte, timeCols int) (ListLine, bool) {
	if len(line) < 10 || !isPermString(line[:10]) {
		return ListLine{}, false
	}
	s := line[10:]
	n := len(s)
	s = bytes.TrimLeft(s, " ")
	if len(s) == n { // at least one space before the size
		return ListLine{}, false
	}
	sp := bytes.IndexByte(s, ' ')
	if sp <= 0 || !isSize(s[:sp]) {
		return ListLine{}, false
	}
	size := plainSize(s[:sp])
	s = s[sp+1:]
	if len(s) < 19 || !isTime(s[:19]) {
		return ListLine{}, false
	}
	mtime := string(s[:10]) + "-" + string(s[11:19])
	s = s[19:]
	for range timeCols {
		if len(s) < 20 || s[0] != ' ' || !(isTime(s[1:20]) || isBlank(s[1:20])) {
			return ListLine{}, false
		}
		s = s[20:]
	}
	if len(s) < 2 || s[0] != ' ' {
		return ListLine{}, false
	}
	return ListLine{Type: line[0], Name: Unescape(s[1:]), Size: size, MTime: mtime}, true
}

// plainSize is a size printed in digits alone, or -1.
func plainSize(s []byte) int64 {
	n, _, ok := parseField(append(s[:len(s):len(s)], '|'))
	if !ok || len(s) == 0 || s[0] < '0' || s[0] > '9' {
		return -1
	}
	return n
}

// isPermString reports whether p is rsync's permstring of a mode.
func isPermString(p []byte) bool {
	if !strings.ContainsRune("-dlpscb", rune(p[0])) {
		return false
	}
	for i, c := range p[1:] {
		want := "rwx"[i%3]
		switch {
		case c == '-' || c == want:
		case i%3 == 2 && strings.ContainsRune("sStT", rune(c)):
		default:
			return false
		}
	}
	return true
}

// isSize reports whether s is a size as rsync prints it: digits, perhaps with separators
// (4,096) or a human-readable suffix (4.10K).
func isSize(s []byte) bool {
	if len(s) == 0 || s[0] < '0' || s[0] > '9' {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && !strings.ContainsRune(",.'KMGTPE", rune(c)) {
			return false
		}
	}
	return true
}

// isTime reports whether s (19 bytes) is a time as rsync prints it: YYYY/MM/DD HH:MM:SS,
// or "(time out of range)".
func isTime(s []byte) bool {
	if string(s) == "(time out of range)" {
		return true
	}
	const form = "dddd/dd/dd dd:dd:dd"
	for i, c := range s {
		if form[i] == 'd' && (c < '0' || c > '9') || form[i] != 'd' && c != form[i] {
			return false
		}
	}
	return true
}

func isBlank(s []byte) bool { return len(bytes.TrimLeft(s, " ")) == 0 }

// Listing is the set of names a listing showed, with the stamps of its regular files.
type Listing struct {
	timeCols int
	names    map[string]struct{}
	files    map[string]Stamp
	lines    int
}

// NewListing returns an empty Listing of a listing with timeCols extra time columns.
func NewListing(timeCols int) *Listing {
	return &Listing{timeCols: timeCols, names: map[string]struct{}{}, files: map[string]Stamp{}}
}

// File returns the stamp of the regular file the listing showed at name, if it showed
// one with its size in plain digits (a listing made with --no-h).
func (l *Listing) File(name string) (Stamp, bool) {
	st, ok := l.files[name]
	return st, ok
}

// Line reads one line of rsync's standard output and reports whether it was an entry.
// A symlink's line ("NAME -> TARGET") adds the name before every " -> " in it, since
// the name and the target may both hold one: the listing may then show a name that is
// not there, never hide one that is.
func (l *Listing) Line(line []byte) bool {
	e, ok := ParseListLine(line, l.timeCols)
	if !ok {
		return false
	}
	l.lines++
	if e.Type != 'l' {
		l.names[string(e.Name)] = struct{}{}
		if e.Type == '-' && e.Size >= 0 {
			l.files[string(e.Name)] = Stamp{Size: e.Size, MTime: e.MTime}
		}
		return true
	}
	for i := 0; ; {
		j := bytes.Index(e.Name[i:], []byte(" -> "))
		if j < 0 {
			break
		}
		l.names[string(e.Name[:i+j])] = struct{}{}
		i += j + 4
	}
	return true
}

// Has reports whether the listing showed name (as it lands, see LandsAt).
func (l *Listing) Has(name string) bool {
	_, ok := l.names[name]
	return ok
}

// Gone is what a check found for a path that rsync said vanished: it is gone, or it is
// a failed path with Reason and Advice.
type Gone struct {
	Gone   bool
	Reason string
	Advice Advice
}

// IgnoresMissing reports whether args hold --ignore-missing-args, with which rsync leaves
// a --files-from entry that does not exist out without a word.
func IgnoresMissing(args []string) bool {
	for _, a := range args {
		if a == "--ignore-missing-args" {
			return true
		}
	}
	return false
}

// ProveGone reads a listing of the far side, made with the same options over the
// entries rsync said vanished (`rsync --list-only --files-from`, whose sender lstats
// each entry in flist.c send_file_list), into a Gone for each: l is its standard output
// read by a Listing, r its standard error read by an Attributor over the same entries,
// code its exit, cancelled whether prsync stopped it, and ignoreMissing says that the
// options hold --ignore-missing-args (IgnoresMissing).
//
// An entry is gone only when the listing shows it gone: its sender's lstat failed with
// ENOENT or ENOTDIR (`link_stat "…" failed: No such file or directory (2)`), or, under
// --ignore-missing-args, which leaves out such an entry and only such an entry without a
// word, the listing left it out while no error went unattributed and the session
// completed. An entry the listing shows is failed: the far side has it, so rsync's
// "vanished" was wrong (FarSideHasIt). Anything else is failed with what went wrong.
func ProveGone(l *Listing, r *Result, code int, cancelled bool, entries [][]byte, ignoreMissing bool) []Gone {
	out := make([]Gone, len(entries))
	for i, e := range entries {
		ps := r.Paths[i]
		switch {
		case l.Has(LandsAt(e)):
			out[i] = Gone{Reason: "rsync called it vanished, but the far side lists it", Advice: FarSideHasIt}
		case ps.Kind == KindVanished:
			out[i] = Gone{Gone: true}
		case ps.Kind == KindFailed:
			out[i] = Gone{Reason: "rsync called it vanished, and the far side could not list it: " + ps.Reason, Advice: ps.Advice}
		case cancelled:
			out[i] = Gone{Reason: "rsync called it vanished; listing the far side to prove it was interrupted"}
		case ignoreMissing && (code == 0 || code == 23 || code == 24) && r.Session == NoSession && len(r.Unattributed) == 0:
			out[i] = Gone{Gone: true}
		case code != 0:
			out[i] = Gone{Reason: "rsync called it vanished, and listing the far side to prove it failed: " + r.failReason(code), Advice: AdviceOf(r.failLine())}
		default:
			out[i] = Gone{Reason: fmt.Sprintf("rsync called it vanished, but the far side's listing (%d entries) neither shows it nor says it is gone", l.lines)}
		}
	}
	return out
}
