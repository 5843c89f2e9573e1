// Package rsync is rsync's language: its options, endpoints and list entries, its output formats, messages, exit codes and temp names, and a daemon's words; it starts no processes.
package rsync

import (
	"bytes"
	"strconv"
)

// OutFormat is the --out-format prsync passes to every rsync: itemized changes, file
// size, mtime as the sender listed it, wire bytes and name. With %b in it, rsync prints
// a line when a file is done.
const OutFormat = "%i|%l|%M|%b|%n"

// Item is one parsed --out-format line.
type Item struct {
	Change string // rsync's %i, such as ">f+++++++++"
	Size   int64  // %l
	MTime  string // %M, in rsync's "2006/01/02-15:04:05" (local time, whole seconds), or ""
	Name   []byte // %n, decoded, without a trailing "/"
	Dir    bool   // %n ended in "/": rsync names a directory so
}

// IsDeletion reports whether the item is an entry rsync deleted (--delete), or would
// delete in a dry run.
func (it Item) IsDeletion() bool { return it.Change == "*deleting  " }

// Unchanged reports whether the item is one rsync names only because it ran with -ii:
// it considered the entry and found nothing to change (".f         ", or "hf         "
// for a hard link already in place).
func (it Item) Unchanged() bool {
	if len(it.Change) < 3 || (it.Change[0] != '.' && it.Change[0] != 'h') {
		return false
	}
	for i := 2; i < len(it.Change); i++ {
		if it.Change[i] != ' ' {
			return false
		}
	}
	return true
}

// Type returns the type of entry an itemized change names, by its second letter: "file",
// "dir", "link" or "special" (a device or a special file), or "" for a deletion and a
// change too short to name one.
func (it Item) Type() string {
	if len(it.Change) < 2 || it.IsDeletion() {
		return ""
	}
	switch it.Change[1] {
	case 'f':
		return "file"
	case 'd':
		return "dir"
	case 'L':
		return "link"
	case 'D', 'S':
		return "special"
	}
	return ""
}

// IsFile reports whether the item is a regular file sent or received.
func (it Item) IsFile() bool {
	return len(it.Change) >= 2 && (it.Change[0] == '<' || it.Change[0] == '>') && it.Change[1] == 'f'
}

// ParseItem parses a line written with OutFormat. ok is false for other lines
// (such as "created directory X", or -v and --stats output). A line of the earlier
// format, "%i|%l|%b|%n" (without %M, as the recorded corpus holds), parses too, with no
// MTime: the field after %l is then a number, which %M never is.
func ParseItem(line []byte) (it Item, ok bool) {
	// %i is 11 bytes; then "|%l|%M|%b|" and the name, which may itself hold '|'
	if len(line) < 16 || line[11] != '|' || !isChangeKind(line[0]) || bytes.IndexByte(line[:11], '|') >= 0 {
		return Item{}, false
	}
	size, rest, ok := parseField(line[12:])
	if !ok {
		return Item{}, false
	}
	mtime := ""
	if _, after, isNum := parseField(rest); isNum {
		rest = after // the earlier format: that was %b
	} else {
		i := bytes.IndexByte(rest, '|')
		if i <= 0 {
			return Item{}, false
		}
		mtime, rest = string(rest[:i]), rest[i+1:]
		if _, rest, ok = parseField(rest); !ok {
			return Item{}, false
		}
	}
	name := Unescape(rest)
	dir := false
	if len(name) > 1 && name[len(name)-1] == '/' {
		name, dir = name[:len(name)-1], true
	}
	return Item{Change: change(line[:11]), Size: size, MTime: mtime, Name: name, Dir: dir}, true
}

func isChangeKind(c byte) bool {
	return c == '<' || c == '>' || c == 'c' || c == 'h' || c == '.' || c == '*'
}

// parseField parses a decimal number (an optional sign, as strconv.ParseInt takes it)
// up to the next '|', and returns what follows that '|'.
func parseField(b []byte) (int64, []byte, bool) {
	i := bytes.IndexByte(b, '|')
	if i <= 0 {
		return 0, nil, false
	}
	d, neg := b[:i], false
	if d[0] == '-' || d[0] == '+' {
		neg, d = d[0] == '-', d[1:]
	}
	if len(d) == 0 || len(d) > 18 {
		n, err := strconv.ParseInt(string(b[:i]), 10, 64) // empty, or near the int64 bound
		return n, b[i+1:], err == nil
	}
	var n int64
	for _, c := range d {
		if c < '0' || c > '9' {
			return 0, nil, false
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n, b[i+1:], true
}

// change returns %i as a string, without allocating for the commonest values.
func change(b []byte) string {
	switch string(b) { // compiled to a comparison, no allocation
	case ">f+++++++++":
		return ">f+++++++++"
	case "cd+++++++++":
		return "cd+++++++++"
	case ">f.st......":
		return ">f.st......"
	case ".d..t......":
		return ".d..t......"
	case ".f         ":
		return ".f         "
	case "*deleting  ":
		return "*deleting  "
	}
	return string(b)
}

// Unescape decodes rsync's escaping of names in its output: "\#ooo" (three octal
// digits) is the byte ooo. Every other byte, including other backslashes, is kept.
func Unescape(s []byte) []byte {
	i := bytes.Index(s, []byte(`\#`))
	if i < 0 {
		return s
	}
	out := make([]byte, 0, len(s))
	for {
		i = bytes.Index(s, []byte(`\#`))
		if i < 0 || len(s) < i+5 {
			return append(out, s...)
		}
		d := s[i+2 : i+5]
		if !isOctal(d[0]) || !isOctal(d[1]) || !isOctal(d[2]) || d[0] > '3' {
			out = append(out, s[:i+2]...)
			s = s[i+2:]
			continue
		}
		out = append(out, s[:i]...)
		out = append(out, (d[0]-'0')<<6|(d[1]-'0')<<3|(d[2]-'0'))
		s = s[i+5:]
	}
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

// IsSummaryLine reports whether an rsync stderr line is its closing "rsync error:" or
// "rsync warning:" line, which repeats what the lines before it said.
func IsSummaryLine(line []byte) bool {
	return bytes.HasPrefix(line, []byte("rsync error: ")) || bytes.HasPrefix(line, []byte("rsync warning: "))
}
