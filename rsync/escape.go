package rsync

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Escape writes a name as rsync's output writes it, for a terminal: each byte of a
// control character, of a character that prints nothing (a bidi override), and of a
// sequence that is not UTF-8 becomes "\#ooo" (three octal digits), and a backslash before
// "#" becomes "\#134"; every other character is kept. Unescape reverses it.
func Escape(name []byte) string {
	var b strings.Builder
	for i := 0; i < len(name); {
		r, n := utf8.DecodeRune(name[i:])
		switch {
		case r == utf8.RuneError && n <= 1, r != ' ' && !unicode.IsPrint(r):
			for _, c := range name[i : i+n] {
				fmt.Fprintf(&b, `\#%03o`, c)
			}
		case r == '\\' && i+1 < len(name) && name[i+1] == '#':
			b.WriteString(`\#134`)
		default:
			b.Write(name[i : i+n])
		}
		i += n
	}
	return b.String()
}
