package docgen

import (
	"fmt"
	"regexp"
	"strings"
)

// escape makes text safe for roff: backslashes print as themselves, and every non-ASCII
// character is written as its \[uXXXX] escape, so the page is plain ASCII whatever the
// locale that renders it.
func escape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\e`)
		case r > 0x7e:
			fmt.Fprintf(&b, `\[u%04X]`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// literal is text to be typed as it is (a command, an option): its hyphens are roff's
// minus, which every device renders as the ASCII one.
func literal(s string) string { return strings.ReplaceAll(escape(s), "-", `\-`) }

var (
	optionRE   = regexp.MustCompile(`(^|[\s(\[,/|'"])(--?)([A-Za-z0-9])`)
	dashDashRE = regexp.MustCompile(`(^|\s)--($|[\s.,;:)])`)
)

// helpText is a flag's help in roff: the options it names, and --, get roff's minus.
func helpText(s string) string {
	minus := func(m string) string { return strings.ReplaceAll(m, "-", `\-`) }
	s = optionRE.ReplaceAllStringFunc(escape(s), minus)
	return dashDashRE.ReplaceAllStringFunc(s, minus)
}

// page accumulates roff source.
type page struct{ b strings.Builder }

// macro writes a request line such as .SH NAME.
func (p *page) macro(name string, args ...string) {
	p.b.WriteString("." + name)
	for _, a := range args {
		if strings.ContainsAny(a, " \t") || a == "" {
			a = `"` + strings.ReplaceAll(a, `"`, `\(dq`) + `"`
		}
		p.b.WriteString(" " + a)
	}
	p.b.WriteString("\n")
}

// comment writes a comment line.
func (p *page) comment(s string) { p.b.WriteString(`.\" ` + s + "\n") }

// line writes one line of text; a line starting with . or ' would be a request.
func (p *page) line(s string) {
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	p.b.WriteString(s + "\n")
}

// code writes lines as they are, in no-fill mode, indented.
func (p *page) code(lines []string) {
	p.macro("RS", "4")
	p.macro("nf")
	for _, l := range lines {
		p.line(literal(l))
	}
	p.macro("fi")
	p.macro("RE")
}

func (p *page) String() string { return p.b.String() }
