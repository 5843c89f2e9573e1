// Package rsync is rsync's language: its output formats, messages, exit codes, temp names and options; it starts no processes.
package rsync

import (
	"bytes"
	"strconv"
)

// OutFormat is the --out-format prsync passes to every rsync: itemized changes, file
// size, wire bytes and name. With %b in it, rsync prints a line when a file is done.
const OutFormat = "%i|%l|%b|%n"

// Item is one parsed --out-format line.
type Item struct {
	Change string // rsync's %i, such as ">f+++++++++"
	Size   int64  // %l
	Name   []byte // %n, decoded, without a trailing "/"
	Dir    bool   // %n ended in "/": rsync names a directory so
}

// IsDeletion reports whether the item is an entry rsync deleted (--delete), or would
// delete in a dry run.
func (it Item) IsDeletion() bool { return it.Change == "*deleting  " }

// IsFile reports whether the item is a regular file sent or received.
func (it Item) IsFile() bool {
	return len(it.Change) >= 2 && (it.Change[0] == '<' || it.Change[0] == '>') && it.Change[1] == 'f'
}

// ParseItem parses a line written with OutFormat. ok is false for other lines
// (such as "created directory X", or -v and --stats output).
func ParseItem(line []byte) (it Item, ok bool) {
	f := bytes.SplitN(line, []byte{'|'}, 4)
	if len(f) != 4 || len(f[0]) != 11 || bytes.IndexByte([]byte("<>ch.*"), f[0][0]) < 0 {
		return Item{}, false
	}
	size, err := strconv.ParseInt(string(f[1]), 10, 64)
	if err != nil {
		return Item{}, false
	}
	if _, err := strconv.ParseInt(string(f[2]), 10, 64); err != nil {
		return Item{}, false
	}
	name := Unescape(f[3])
	dir := false
	if len(name) > 1 && name[len(name)-1] == '/' {
		name, dir = name[:len(name)-1], true
	}
	return Item{Change: string(f[0]), Size: size, Name: name, Dir: dir}, true
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
